// The CRC-32 of each record of a zip container, read from its central
// directory (zip64 too), so that every record torch_archive.cpp loads is
// checked against it: PyTorch's reader does not check them, and a flipped
// bit in a weight would otherwise load silently.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace caffe2::serialize {
class ReadAdapterInterface;
}

namespace ddp::core {

// Record name (without the archive's top folder) -> its CRC-32. Throws
// Status::IO naming `name` when the directory is not there or not whole.
std::map<std::string, uint32_t> zip_record_crcs(const caffe2::serialize::ReadAdapterInterface& in,
                                                const std::string& name);

// zlib's CRC-32 of `n` bytes, continuing from `crc` (0 to start).
uint32_t crc32_of(uint32_t crc, const void* data, size_t n);

}  // namespace ddp::core
