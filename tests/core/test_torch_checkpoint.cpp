// Checkpoints in PyTorch's format (core/checkpoint/torch_archive,
// lightning_checkpoint): round trips; truncated, flipped, hostile and
// foreign files, each refused with DDP_E_IO (a flipped byte may only be
// harmless, never load a different value); a pickled global that is not
// data refused by name; libddp's DDPCKPT files still read.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <caffe2/serialize/inline_container.h>

#include <pthread.h>

#include <cstdio>
#include <functional>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "file_bytes.h"
#include "file_size_limit.h"
#include "full_disk_save.h"
#include "checkpoint/checkpoint_io.h"
#include "checkpoint/lightning_checkpoint.h"
#include "precision/grad_scaler.h"
#include "checkpoint/torch_archive.h"
#include "common/error.h"

using namespace ddp::core;

namespace {

std::string temp_path(const std::string& name) {
  return testing::TempDir() + "/tckpt_" + std::to_string(getpid()) + "_" + name;
}

LightningCheckpoint sample() {
  LightningCheckpoint c;
  c.epoch = 3;
  c.global_step = 69;
  c.batches_in_epoch = 23;
  c.state_dict.push_back({"net.fc1.weight", at::arange(12, at::kFloat).reshape({3, 4}) / 3});
  c.state_dict.push_back({"net.fc1.bias", at::tensor({1.5, -2.25}, at::kDouble)});
  c.state_dict.push_back({"net.bn.num_batches_tracked", at::scalar_tensor(99, at::kLong)});
  c.state_dict.push_back({"net.half", at::ones({2, 2}, at::kBFloat16)});
  c10::impl::GenericDict opt(c10::StringType::get(), c10::AnyType::get());
  opt.insert("lr", 0.05);
  c.optimizer_states.push_back(opt);
  c.precision = {{"scale", at::scalar_tensor(1024.0, at::kFloat)}, {"growth_tracker", at::scalar_tensor(7, at::kInt)}};
  c.user = {'m', 'e', 't', 'a', 0, 1, 2};
  return c;
}

void save(const std::string& path, const LightningCheckpoint& c) {
  write_file_atomically(path, [&](const ByteSink& sink) { write_lightning_checkpoint(c, sink); });
}

LightningCheckpoint load(const std::string& path) { return read_lightning_checkpoint(file_checkpoint_io()->open(path), path); }

// Status::Ok with the checkpoint, or the error's status and message.
Status try_load(const std::string& path, LightningCheckpoint* out = nullptr, std::string* why = nullptr) {
  try {
    LightningCheckpoint c = load(path);
    if (out) *out = c;
    return Status::Ok;
  } catch (const Error& e) {
    if (why) *why = e.what();
    return e.status();
  }
}

bool same(const LightningCheckpoint& a, const LightningCheckpoint& b) {
  if (a.epoch != b.epoch || a.global_step != b.global_step || a.user != b.user ||
      a.state_dict.size() != b.state_dict.size() || a.precision.size() != b.precision.size())
    return false;
  for (size_t i = 0; i < a.state_dict.size(); ++i)
    if (a.state_dict[i].name != b.state_dict[i].name || a.state_dict[i].tensor.scalar_type() != b.state_dict[i].tensor.scalar_type() ||
        !at::equal(a.state_dict[i].tensor, b.state_dict[i].tensor))
      return false;
  for (size_t i = 0; i < a.precision.size(); ++i)
    if (!at::equal(a.precision[i].tensor, b.precision[i].tensor)) return false;
  return true;
}

// A torch.save-like file whose data.pkl is `pkl`, with the tensor records
// `storages` (name under data/, bytes).
void write_raw(const std::string& path, const std::string& pkl,
               const std::vector<std::pair<std::string, std::string>>& storages = {}) {
  std::vector<char> bytes;
  caffe2::serialize::PyTorchStreamWriter w([&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const char*>(p), static_cast<const char*>(p) + n);
    return n;
  });
  for (const auto& [key, data] : storages) w.writeRecord("data/" + key, data.data(), data.size());
  w.writeRecord("data.pkl", pkl.data(), pkl.size());
  w.writeEndOfFile();
  write_all(path, bytes);
}

}  // namespace

TEST(TorchCheckpoint, RoundTripKeepsLightningsKeysAndTheTensors) {
  std::string path = temp_path("roundtrip");
  save(path, sample());
  LightningCheckpoint back = load(path);
  EXPECT_TRUE(same(back, sample()));
  EXPECT_EQ(back.batches_in_epoch, 23);
  ASSERT_EQ(back.optimizer_states.size(), 1u);
  EXPECT_EQ(back.optimizer_states[0].toGenericDict().at("lr").toDouble(), 0.05);
  EXPECT_TRUE(back.lr_schedulers.empty());
  std::remove(path.c_str());
}

TEST(TorchCheckpoint, EveryTruncationIsRefused) {
  std::string path = temp_path("full"), cut = temp_path("cut");
  save(path, sample());
  auto bytes = read_all(path);
  for (size_t n = 0; n < bytes.size(); n += (n < 200 || n + 400 > bytes.size()) ? 1 : 7) {
    write_all(cut, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
    std::string why;
    ASSERT_EQ(try_load(cut, nullptr, &why), Status::IO) << "cut at " << n;
    EXPECT_NE(why.find(cut), std::string::npos) << why;
  }
  std::remove(path.c_str());
  std::remove(cut.c_str());
}

TEST(TorchCheckpoint, AFlippedByteIsRefusedOrHarmlessNeverADifferentValue) {
  std::string path = temp_path("flip");
  LightningCheckpoint original = sample();
  save(path, original);
  auto bytes = read_all(path);
  size_t refused = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x21);
    write_all(path, damaged);
    LightningCheckpoint got;
    Status s = try_load(path, &got);
    if (s == Status::IO) {
      ++refused;
      continue;
    }
    // Padding and header fields nobody reads may change; what loads is the original.
    ASSERT_EQ(s, Status::Ok) << "byte " << i;
    ASSERT_TRUE(same(got, original)) << "byte " << i << " loaded a different checkpoint";
  }
  EXPECT_GT(refused, bytes.size() / 4);
  std::remove(path.c_str());
}

TEST(TorchCheckpoint, APickledGlobalThatIsNotDataIsRefusedByName) {
  std::string path = temp_path("evil");
  // {"a": posix.system("true")} in protocol 2.
  write_raw(path, std::string("\x80\x02}q\x00X\x01\x00\x00\x00" "acposix\nsystem\nq\x01X\x04\x00\x00\x00truq\x02\x85R\x73.", 42));
  std::string why;
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("posix.system"), std::string::npos) << why;
  // Protocol 4 (not what torch.save writes) is named.
  write_raw(path, std::string("\x80\x04}.", 4));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("protocol 4"), std::string::npos) << why;
  // A pickle of something other than a dict.
  write_raw(path, std::string("\x80\x02K\x05.", 5));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  std::remove(path.c_str());
}

// {"a": `depth` lists, each holding the next}: nesting depth + 1.
std::string nested_lists(size_t depth) {
  std::string pkl("\x80\x02}X\x01\x00\x00\x00" "a", 9);
  return pkl + std::string(depth, ']') + std::string(depth - 1, 'a') + "s.";
}

// Runs `f` on a thread with a 512 KiB stack (a JVM's threads get 1 MiB).
void on_small_stack(const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 512 << 10);
  pthread_t t;
  auto run = [](void* arg) -> void* {
    (*static_cast<const std::function<void()>*>(arg))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&t, &attr, run, const_cast<std::function<void()>*>(&f)), 0);
  pthread_join(t, nullptr);
  pthread_attr_destroy(&attr);
}

// A pickle is walked before LibTorch's unpickler sees it: containers nested
// past 1000 levels (a million ended the process on a stack overflow while
// the value was freed), a list that holds itself, a container changed after
// it was recalled, a memo key out of order and a recall of what was never
// stored are refused by name; a thousand levels load, on a small stack too.
TEST(TorchCheckpoint, DeepCyclicAndDanglingPicklesAreRefusedBeforeUnpickling) {
  std::string path = temp_path("deep");
  std::string why;
  write_raw(path, nested_lists(1000000));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("nests containers deeper than 1000 levels"), std::string::npos) << why;
  write_raw(path, nested_lists(1000));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("nests containers deeper than 1000 levels"), std::string::npos) << why;
  write_raw(path, nested_lists(999));  // 1000 levels with the dict
  on_small_stack([&] { EXPECT_EQ(try_load(path, nullptr, &why), Status::IO); });
  EXPECT_EQ(why.find("nests"), std::string::npos) << why;
  EXPECT_NE(why.find("epoch"), std::string::npos) << "refused as a checkpoint without an epoch: " << why;
  // A list memoised, recalled, and appended to itself.
  write_raw(path, std::string("\x80\x02]q\x00h\x00" "a.", 8));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("changes a container after a reference to it was made"), std::string::npos) << why;
  // A memo key far past the entries stored (LibTorch's unpickler sized its
  // memo table by it: 2.7 GB for a 300-byte file).
  write_raw(path, std::string("\x80\x02]r\x00\x00\x00\x10.", 9));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("memoises under key 268435456 where the next is 0"), std::string::npos) << why;
  write_raw(path, std::string("\x80\x02h\x05.", 5));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("recalls memo entry 5, which it never stored"), std::string::npos) << why;
  // A list recalled twice in one container (tied weights are written so) loads as data.
  write_raw(path, std::string("\x80\x02}q\x00(X\x05\x00\x00\x00" "epochK\x03X\x0b\x00\x00\x00" "global_stepK\x07"
                              "X\x01\x00\x00\x00" "a]q\x01K\x01" "aX\x01\x00\x00\x00" "bh\x01u.", 58));
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("state_dict"), std::string::npos) << "refused for its missing state_dict only: " << why;
  std::remove(path.c_str());
}

// Protocol 2 pieces, as Python's pickler writes them.
std::string str(const std::string& v) {
  const uint32_t n = static_cast<uint32_t>(v.size());
  return "X" + std::string(reinterpret_cast<const char*>(&n), 4) + v;
}
std::string int1(int v) { return std::string("K") + static_cast<char>(v); }
// torch._utils._rebuild_tensor_v2 of float storage `key` (of `numel`
// elements, as torch.save names it: once per tensor), offset, a 2-d size
// and stride.
std::string float_tensor(const std::string& key, int numel, int offset, int rows, int cols, int row_stride) {
  return "ctorch._utils\n_rebuild_tensor_v2\n((" + str("storage") + "ctorch\nFloatStorage\n" + str(key) + str("cpu") +
         int1(numel) + "tQ" + int1(offset) + int1(rows) + int1(cols) + "\x86" + int1(row_stride) + int1(1) + "\x86" +
         "\x89" + "ccollections\nOrderedDict\n)RtR";
}
// A checkpoint's first keys and a state_dict of `entries` (key, value pickles).
std::string checkpoint_pickle(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string p = "\x80\x02}(" + str("epoch") + int1(1) + str("global_step") + int1(5) + str("state_dict") + "}(";
  for (const auto& [k, v] : entries) p += str(k) + v;
  return p + "u" + str("optimizer_states") + "]" + str("lr_schedulers") + "]u.";
}
std::string floats(std::initializer_list<float> v) { return std::string(reinterpret_cast<const char*>(v.begin()), v.size() * 4); }

// torch.save names a storage once per tensor that uses it (views of one
// tensor, tied weights): each tensor loads over the same memory, as
// torch.load shares one storage (such files were refused as naming a
// storage "the file lacks"). A tensor that reaches past its storage, or a
// storage larger than its record, is refused: LibTorch's unpickler checks
// neither, and the tensor would read memory the file never held.
TEST(TorchCheckpoint, TensorsShareTheirStorageAndNeverReachPastIt) {
  std::string path = temp_path("storages");
  const std::string six = floats({0, 1, 2, 3, 4, 5});
  write_raw(path, checkpoint_pickle({{"all", float_tensor("0", 6, 0, 2, 3, 3)}, {"last_row", float_tensor("0", 6, 3, 1, 3, 3)}}),
            {{"0", six}});
  std::string why;
  {
    // Gone before the file is written again: its tensors map the file under
    // a read lease, which holds a writer back up to lease-break-time (45 s).
    LightningCheckpoint c;
    ASSERT_EQ(try_load(path, &c, &why), Status::Ok) << why;
    ASSERT_EQ(c.state_dict.size(), 2u);
    EXPECT_TRUE(at::equal(c.state_dict[0].tensor, at::arange(6, at::kFloat).reshape({2, 3})));
    EXPECT_TRUE(at::equal(c.state_dict[1].tensor, at::arange(3, 6, at::kFloat).reshape({1, 3})));
    EXPECT_EQ(c.state_dict[1].tensor.data_ptr<float>(), c.state_dict[0].tensor.data_ptr<float>() + 3) << "one memory";
  }

  write_raw(path, checkpoint_pickle({{"w", float_tensor("0", 6, 0, 2, 42, 3)}}), {{"0", six}});
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("size [2, 42], stride [3, 1] and offset 0 that reaches past its storage of 24 bytes"),
            std::string::npos) << why;
  write_raw(path, checkpoint_pickle({{"w", float_tensor("0", 6, 4, 1, 3, 3)}}), {{"0", six}});
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("offset 4 that reaches past"), std::string::npos) << why;
  write_raw(path, checkpoint_pickle({{"w", float_tensor("0", 100, 0, 2, 3, 3)}}), {{"0", six}});
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  EXPECT_NE(why.find("sizes a tensor storage at 400 bytes, more than its record holds"), std::string::npos) << why;
  // An empty view anywhere in its storage is no reach; an empty record holds an empty tensor.
  write_raw(path, checkpoint_pickle({{"w", float_tensor("0", 6, 6, 0, 3, 3)}, {"e", float_tensor("1", 0, 0, 0, 3, 3)}}),
            {{"0", six}, {"1", ""}});
  EXPECT_EQ(try_load(path, nullptr, &why), Status::Ok) << why;
  std::remove(path.c_str());
}

TEST(TorchCheckpoint, ARecordSizeLargerThanTheFileIsRefusedBeforeAllocating) {
  std::string path = temp_path("huge");
  save(path, sample());
  auto bytes = read_all(path);
  // The central directory entry of the first record: its sizes set to ~4 GiB.
  const char sig[] = {'P', 'K', 1, 2};
  auto it = std::search(bytes.begin(), bytes.end(), sig, sig + 4);
  ASSERT_NE(it, bytes.end());
  size_t at = static_cast<size_t>(it - bytes.begin());
  for (size_t k : {20u, 24u}) std::memset(&bytes[at + k], 0xF0, 4);
  write_all(path, bytes);
  std::string why;
  EXPECT_EQ(try_load(path, nullptr, &why), Status::IO);
  std::remove(path.c_str());
}

// A disk that fills up midway through a torch.save file (a file-size
// limit of 1 MiB stands in for it): the save is Status::IO naming the path,
// the old checkpoint is untouched, no temporary file is left, and the
// process goes on. Each save form is tried: a Lightning checkpoint, a
// plain state dict.
TEST(TorchCheckpoint, ASaveThatRunsOutOfRoomMidwayFailsCleanly) {
  at::set_num_threads(1);  // the forked child must not need the parent's thread pool
  for (const bool lightning : {true, false}) {
    const std::string path = temp_path(lightning ? "full_lightning" : "full_state_dict");
    save(path, sample());
    LightningCheckpoint big = sample();
    big.state_dict.push_back({"big", at::ones({1 << 22}, at::kFloat)});  // 16 MiB
    expect_full_disk_keeps_the_old_file(path, [&] {
      if (lightning) save(path, big);
      else save_state_dict_file(path, big.state_dict);
    });
    EXPECT_TRUE(same(load(path), sample()));
    std::remove(path.c_str());
  }
}

namespace {

// Whether this process gets read leases on the file (then a load maps it
// and holds off its writers; else it copies the file).
bool leases_granted(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const bool granted = fd >= 0 && fcntl(fd, F_SETLEASE, F_RDLCK) == 0;
  if (fd >= 0) close(fd);
  return granted;
}

enum class Rewrite { Truncate, OverwriteInPlace };

// In a forked child: loads the state dict at `path` (one tensor, equal to
// `expected`), has another process rewrite the file as `how` says while
// the loaded tensor lives, reads the tensor, lets it go and waits for the
// writer. `hold_for_writing`: this process has the file open for writing
// during the load. Returns what happened, or how the child ended.
std::string load_while_rewritten(const std::string& path, const at::Tensor& expected, Rewrite how, bool hold_for_writing) {
  LimitedRun run = run_in_child([&]() -> std::string {
    const int held = hold_for_writing ? open(path.c_str(), O_WRONLY | O_CLOEXEC) : -1;
    std::vector<NamedTensor> loaded = load_state_dict_file(path);
    const pid_t writer = fork();
    if (writer == 0) {
      if (how == Rewrite::Truncate) _exit(truncate(path.c_str(), 0) == 0 ? 0 : 1);
      const int fd = open(path.c_str(), O_WRONLY);
      const std::vector<char> junk(static_cast<size_t>(expected.nbytes()), 0x7f);
      _exit(fd >= 0 && pwrite(fd, junk.data(), junk.size(), 0) == static_cast<ssize_t>(junk.size()) ? 0 : 1);
    }
    usleep(300 * 1000);
    int st = 0;
    const bool waited = waitpid(writer, &st, WNOHANG) == 0;
    const bool kept = loaded.size() == 1 && at::equal(loaded[0].tensor, expected);
    loaded.clear();
    bool finished = !waited;
    for (int i = 0; i < 500 && !finished; ++i) {
      usleep(10 * 1000);
      finished = waitpid(writer, &st, WNOHANG) == writer;
    }
    if (!finished) kill(writer, SIGKILL);
    if (held >= 0) close(held);
    return std::string(kept ? "values kept" : "values changed") + (waited ? ", the writer waited" : ", the writer did not wait") +
           (finished ? (WIFEXITED(st) && WEXITSTATUS(st) == 0 ? ", then rewrote the file" : ", then failed")
                     : ", and was still waiting 5 s after");
  });
  return run.report;
}

}  // namespace

// A foreign process that truncates or overwrites a checkpoint in place
// while a load's tensors live (torch.save and Lightning write over the
// path; a Lightning run saving last.ckpt while libddp loads it): the file
// was mapped, so a truncation made the loader's next read of a lost page a
// SIGBUS that ended it, and an overwrite changed values already checked
// against their CRC. Now where the loader gets a read lease the writer
// waits until the tensors go, and where it does not (the file is open for
// writing somewhere) the loader copies: either way the values are the
// saved ones and the writer goes on after.
TEST(TorchCheckpoint, AFileRewrittenWhileItsTensorsLiveNeitherFaultsNorChangesThem) {
  at::set_num_threads(1);  // the forked child must not need the parent's thread pool
  const std::string path = temp_path("rewritten");
  const at::Tensor values = at::arange(1 << 20, at::kFloat);  // 4 MiB: pages past any truncation
  for (const Rewrite how : {Rewrite::Truncate, Rewrite::OverwriteInPlace})
    for (const bool hold_for_writing : {false, true}) {
      save_state_dict_file(path, {{"w", values}});
      const bool mapped = !hold_for_writing && leases_granted(path);
      const std::string expected = std::string("values kept, the writer ") + (mapped ? "waited" : "did not wait") +
                                   ", then rewrote the file";
      EXPECT_EQ(load_while_rewritten(path, values, how, hold_for_writing), expected)
          << (how == Rewrite::Truncate ? "truncated" : "overwritten in place")
          << (hold_for_writing ? ", the file open for writing during the load" : "");
    }
  std::remove(path.c_str());
}

TEST(TorchCheckpoint, LibddpsEarlierFilesStillLoad) {
  std::string path = temp_path("old");
  Checkpoint old;
  old.step = 230;
  old.epoch = 9;
  old.tensors.push_back({"module.fc1.weight", at::ones({2, 2})});
  old.tensors.push_back({"optimizer.0.momentum_buffer", at::full({2, 2}, 3.0)});
  old.tensors.push_back({"MixedPrecision.scale", at::scalar_tensor(8.0, at::kFloat)});
  old.user = {1, 2, 3};
  save_checkpoint_file(path, old);
  LightningCheckpoint c = load(path);
  EXPECT_EQ(c.global_step, 230);
  EXPECT_EQ(c.epoch, 9);
  EXPECT_EQ(c.user, old.user);
  ASSERT_EQ(c.state_dict.size(), 1u);
  EXPECT_EQ(c.state_dict[0].name, "fc1.weight");
  ASSERT_EQ(c.optimizer_states.size(), 1u);
  auto state = c.optimizer_states[0].toGenericDict().at("state").toGenericDict();
  EXPECT_TRUE(at::equal(state.at(0).toGenericDict().at("momentum_buffer").toTensor(), at::full({2, 2}, 3.0)));
  ASSERT_EQ(c.precision.size(), 1u);
  std::remove(path.c_str());
}

// A saved scaler state whose numbers the scaler's float32 scale or int32
// growth tracker cannot hold (an earlier libddp file names them as tensors
// of any dtype) is refused by its check: the strategy loads the modules
// once every check on every rank passed, and the scaler's fill failed only
// then (c10's "value cannot be converted to type int without overflow"),
// after the modules had been loaded; a scale below float32's range became 0,
// which skips every step after it.
TEST(TorchCheckpoint, AScalerStateItsTensorsCannotHoldIsRefusedByItsCheck) {
  GradScaler scaler;
  auto state = [](at::Tensor scale, at::Tensor tracker) {
    return std::vector<NamedTensor>{{"scale", scale}, {"growth_tracker", tracker}};
  };
  const at::Tensor ok_scale = at::scalar_tensor(1024.0, at::kDouble), ok_tracker = at::scalar_tensor(7, at::kLong);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  struct Case {
    at::Tensor scale, tracker;
    const char* words;
  };
  const Case cases[] = {
      {at::scalar_tensor(1e300, at::kDouble), ok_tracker, "the scale 1000000"},
      {at::scalar_tensor(1e-300, at::kDouble), ok_tracker, "is not a positive float32 number"},
      {ok_scale, at::scalar_tensor(nan, at::kDouble), "the growth tracker nan is not an int32 count"},
      {ok_scale, at::scalar_tensor(int64_t{1} << 40, at::kLong), "the growth tracker 1099511627776"},
      {ok_scale, at::scalar_tensor(2.5, at::kDouble), "the growth tracker 2.5"},
  };
  for (const Case& c : cases) {
    try {
      scaler.check_state(state(c.scale, c.tracker));
      ADD_FAILURE() << "accepted: " << c.words;
    } catch (const Error& e) {
      EXPECT_EQ(e.status(), Status::IO);
      EXPECT_NE(std::string(e.what()).find(c.words), std::string::npos) << e.what();
    }
  }
  scaler.load_state(state(ok_scale, ok_tracker));
  EXPECT_EQ(scaler.growth_tracker(), 7);
}

TEST(TorchCheckpoint, ForeignFilesAreRefused) {
  std::string path = temp_path("foreign");
  for (std::string content : {std::string(""), std::string("hello world, not a checkpoint"), std::string("PK\x03\x04junk", 8)}) {
    write_all(path, std::vector<char>(content.begin(), content.end()));
    std::string why;
    EXPECT_EQ(try_load(path, nullptr, &why), Status::IO) << content;
    EXPECT_NE(why.find(path), std::string::npos) << why;
  }
  EXPECT_EQ(try_load(temp_path("does_not_exist")), Status::IO);
  std::remove(path.c_str());
}

// A path that names a FIFO, a directory or a device is refused at once: the
// open of a FIFO for reading waited for a writer that never came, and the
// load hung for good (the earlier format's whole-file read too). An alarm
// ends the test where it would hang.
TEST(TorchCheckpoint, APathThatIsNoRegularFileIsRefusedWithoutWaiting) {
  const std::string fifo = temp_path("fifo");
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  alarm(20);
  for (const std::string& path : {fifo, testing::TempDir(), std::string("/dev/null")}) {
    std::string why;
    EXPECT_EQ(try_load(path, nullptr, &why), Status::IO) << path;
    EXPECT_NE(why.find(path + ": not a regular file"), std::string::npos) << why;
    try {
      load_checkpoint_file(path);
      ADD_FAILURE() << "the earlier format's reader took " << path;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
  }
  alarm(0);
  std::remove(fifo.c_str());
}
