#include "checkpoint/zip_directory.h"

#include <caffe2/serialize/read_adapter_interface.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "checkpoint/checkpoint_error.h"
#include "common/error.h"

namespace ddp::core {
namespace {

[[noreturn]] void bad(const std::string& name, const std::string& what) {
  bad_checkpoint(name, what + " (truncated, damaged, or not a zip file)");
}

uint64_t le(const uint8_t* p, size_t width) {
  uint64_t v = 0;
  for (size_t b = 0; b < width; ++b) v |= static_cast<uint64_t>(p[b]) << (8 * b);
  return v;
}

std::vector<uint8_t> read_at(const caffe2::serialize::ReadAdapterInterface& in, uint64_t pos, uint64_t n,
                             const std::string& name, const char* what) {
  if (pos > in.size() || n > in.size() - pos) bad(name, std::string(what) + " lies past the end of the file");
  std::vector<uint8_t> buf(n);
  if (n && in.read(pos, buf.data(), n, what) != n) bad(name, std::string(what) + " could not be read");
  return buf;
}

}  // namespace

uint32_t crc32_of(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (n > 0) {  // zlib takes a uInt length
    uInt chunk = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    c = ::crc32(c, p, chunk);
    p += chunk;
    n -= chunk;
  }
  return static_cast<uint32_t>(c);
}

std::map<std::string, uint32_t> zip_record_crcs(const caffe2::serialize::ReadAdapterInterface& in,
                                                const std::string& name) {
  const uint64_t size = in.size();
  // The end-of-central-directory record: 22 bytes and a comment of at most 64 KiB.
  const uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535);
  auto tail = read_at(in, size - tail_len, tail_len, name, "the end of the zip directory");
  int64_t eocd = -1;
  for (int64_t k = static_cast<int64_t>(tail_len) - 22; k >= 0; --k)
    if (le(&tail[k], 4) == 0x06054b50) {
      eocd = k;
      break;
    }
  if (eocd < 0) bad(name, "no zip directory at its end");
  uint64_t count = le(&tail[eocd + 10], 2);
  uint64_t cd_size = le(&tail[eocd + 12], 4);
  uint64_t cd_offset = le(&tail[eocd + 16], 4);
  if (count == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // Zip64: the locator just before the record gives the zip64 record.
    uint64_t locator = size - tail_len + static_cast<uint64_t>(eocd);
    if (locator < 20) bad(name, "a zip64 directory without its locator");
    auto loc = read_at(in, locator - 20, 20, name, "the zip64 locator");
    if (le(&loc[0], 4) != 0x07064b50) bad(name, "a zip64 directory without its locator");
    auto z = read_at(in, le(&loc[8], 8), 56, name, "the zip64 directory record");
    if (le(&z[0], 4) != 0x06064b50) bad(name, "a damaged zip64 directory record");
    count = le(&z[32], 8);
    cd_size = le(&z[40], 8);
    cd_offset = le(&z[48], 8);
  }
  auto cd = read_at(in, cd_offset, cd_size, name, "the zip directory");
  std::map<std::string, uint32_t> out;
  size_t at = 0;
  for (uint64_t e = 0; e < count; ++e) {
    if (cd.size() - at < 46 || le(&cd[at], 4) != 0x02014b50) bad(name, "a damaged zip directory entry");
    uint32_t crc = static_cast<uint32_t>(le(&cd[at + 16], 4));
    size_t name_len = le(&cd[at + 28], 2), extra_len = le(&cd[at + 30], 2), comment_len = le(&cd[at + 32], 2);
    if (cd.size() - at - 46 < name_len + extra_len + comment_len) bad(name, "a damaged zip directory entry");
    std::string record(reinterpret_cast<const char*>(&cd[at + 46]), name_len);
    auto slash = record.find('/');  // PyTorch's records sit under one top folder
    out[slash == std::string::npos ? record : record.substr(slash + 1)] = crc;
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

}  // namespace ddp::core
