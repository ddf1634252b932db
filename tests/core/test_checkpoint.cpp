// The checkpoint file (core/checkpoint): round trips, and files that are
// truncated, damaged, foreign or hostile, each refused with DDP_E_IO before
// anything large is allocated; a save killed midway leaves a loadable file.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <mutex>
#include <thread>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_file.h"
#include "file_bytes.h"
#include "full_disk_save.h"
#include "common/error.h"
#include "common/regular_file.h"

using ddp::core::Checkpoint;
using ddp::core::load_checkpoint_file;
using ddp::core::save_checkpoint_file;

namespace {

std::string temp_path(const std::string& name) { return testing::TempDir() + "/ckpt_" + std::to_string(getpid()) + "_" + name; }

uint32_t crc32(const char* p, size_t n) {
  uint32_t c = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    c ^= static_cast<uint8_t>(p[i]);
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
  }
  return ~c;
}

// Re-seals content whose bytes a test changed, so that only the structure
// (not the checksum) can reject it.
void reseal(std::vector<char>& bytes) {
  uint32_t c = crc32(bytes.data(), bytes.size() - 4);
  std::memcpy(bytes.data() + bytes.size() - 4, &c, 4);
}

ddp::core::Status status_of_load(const std::string& path, std::string* message = nullptr) {
  try {
    load_checkpoint_file(path);
    return ddp::core::Status::Ok;
  } catch (const ddp::core::Error& e) {
    if (message) *message = e.what();
    return e.status();
  }
}

Checkpoint sample() {
  Checkpoint c;
  c.step = 1234;
  c.epoch = 7;
  c.tensors.push_back({"fc1.weight", at::arange(12, at::kFloat).reshape({3, 4}) / 3});
  c.tensors.push_back({"fc1.bias", at::tensor({1.5, -2.25}, at::kDouble)});
  c.tensors.push_back({"counter", at::scalar_tensor(99, at::kLong)});
  c.tensors.push_back({"mask", at::tensor({1, 0, 1}, at::kByte).to(at::kBool)});
  c.tensors.push_back({"half", at::ones({2, 2}, at::kBFloat16)});
  c.tensors.push_back({"empty", at::zeros({0, 5}, at::kFloat)});
  c.user = {'m', 'e', 't', 'a', 0, 1, 2};
  return c;
}

TEST(Checkpoint, RoundTripKeepsNamesShapesDtypesValuesAndTheRest) {
  std::string path = temp_path("roundtrip");
  Checkpoint c = sample();
  save_checkpoint_file(path, c);
  Checkpoint back = load_checkpoint_file(path);
  EXPECT_EQ(back.step, 1234);
  EXPECT_EQ(back.epoch, 7);
  EXPECT_EQ(back.user, c.user);
  ASSERT_EQ(back.tensors.size(), c.tensors.size());
  for (size_t i = 0; i < c.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].name, c.tensors[i].name);
    EXPECT_EQ(back.tensors[i].tensor.scalar_type(), c.tensors[i].tensor.scalar_type()) << c.tensors[i].name;
    EXPECT_EQ(back.tensors[i].tensor.sizes(), c.tensors[i].tensor.sizes()) << c.tensors[i].name;
    EXPECT_TRUE(at::equal(back.tensors[i].tensor, c.tensors[i].tensor)) << c.tensors[i].name;
  }
  std::remove(path.c_str());
}

TEST(Checkpoint, EveryTruncationIsRefused) {
  std::string path = temp_path("full"), cut = temp_path("cut");
  save_checkpoint_file(path, sample());
  auto bytes = read_all(path);
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_all(cut, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
    std::string why;
    ASSERT_EQ(status_of_load(cut, &why), ddp::core::Status::IO) << "cut at " << n;
    EXPECT_NE(why.find(cut), std::string::npos) << why;
  }
  std::remove(path.c_str());
  std::remove(cut.c_str());
}

TEST(Checkpoint, EveryFlippedByteIsRefused) {
  std::string path = temp_path("flip");
  save_checkpoint_file(path, sample());
  auto bytes = read_all(path);
  for (size_t i = 0; i < bytes.size(); ++i) {
    auto damaged = bytes;
    damaged[i] = static_cast<char>(damaged[i] ^ 0x5a);
    write_all(path, damaged);
    ASSERT_EQ(status_of_load(path), ddp::core::Status::IO) << "byte " << i;
  }
  std::remove(path.c_str());
}

TEST(Checkpoint, ForeignFilesAndNonFilesAreRefused) {
  std::string path = temp_path("foreign"), why;
  write_all(path, std::vector<char>(1000, 'x'));
  EXPECT_EQ(status_of_load(path, &why), ddp::core::Status::IO);
  EXPECT_NE(why.find("magic"), std::string::npos) << why;
  EXPECT_EQ(status_of_load(temp_path("missing"), &why), ddp::core::Status::IO);
  EXPECT_EQ(status_of_load(testing::TempDir(), &why), ddp::core::Status::IO);  // a directory
  EXPECT_EQ(status_of_load("/dev/zero", &why), ddp::core::Status::IO);
  EXPECT_NE(why.find("regular file"), std::string::npos) << why;
  std::remove(path.c_str());
}

// Lengths that promise more than the file holds are refused from the file's
// size, before anything is allocated (a resealed checksum lets them reach
// the parser).
TEST(Checkpoint, HostileLengthsAreRefusedBeforeAllocating) {
  std::string path = temp_path("hostile");
  Checkpoint c;
  c.tensors.push_back({"w", at::ones({4}, at::kFloat)});
  save_checkpoint_file(path, c);
  auto good = read_all(path);
  // Layout: magic 8 | format 4 | step 8 | epoch 8 | count 4 | name_len 4 | "w" | dtype 4 | ndim 4 | dim 8 | nbytes 8 | data 16 | user_len 8 | crc 4
  const size_t count_at = 28, name_len_at = 32, ndim_at = 41, dim_at = 45, nbytes_at = 53, user_len_at = 77;
  auto patch = [&](size_t at, auto value) {
    auto bytes = good;
    std::memcpy(bytes.data() + at, &value, sizeof(value));
    reseal(bytes);
    write_all(path, bytes);
    std::string why;
    EXPECT_EQ(status_of_load(path, &why), ddp::core::Status::IO) << "patched at " << at;
    return why;
  };
  EXPECT_NE(patch(count_at, uint32_t{0xffffffff}).find("larger than the file"), std::string::npos);
  EXPECT_NE(patch(name_len_at, uint32_t{0x7fffffff}).find("name length"), std::string::npos);
  EXPECT_NE(patch(ndim_at, uint32_t{1000000}).find("dimensions"), std::string::npos);
  EXPECT_NE(patch(dim_at, int64_t{1} << 40).find("shape does not match"), std::string::npos);
  EXPECT_NE(patch(dim_at, int64_t{-4}).find("negative"), std::string::npos);
  EXPECT_NE(patch(nbytes_at, uint64_t{1} << 62).find("larger than the file"), std::string::npos);
  EXPECT_NE(patch(user_len_at, uint64_t{1} << 60).find("larger than the file"), std::string::npos);
  std::remove(path.c_str());
}

// SIGKILL at random points of saving over an existing checkpoint: the file
// at the path is always a whole checkpoint, the old one or the new one.
TEST(Checkpoint, ASaveKilledMidwayLeavesTheOldOrTheNewCheckpoint) {
  at::set_num_threads(1);  // the forked child must not need the parent's thread pool
  std::string path = temp_path("killed");
  Checkpoint old_one;
  old_one.step = 1;
  old_one.tensors.push_back({"w", at::zeros({1 << 20}, at::kFloat)});
  save_checkpoint_file(path, old_one);
  for (int round = 0; round < 6; ++round) {
    pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      Checkpoint next;
      next.step = 2;
      next.tensors.push_back({"w", at::ones({1 << 22}, at::kFloat)});  // 16 MiB
      for (;;) save_checkpoint_file(path, next);
    }
    usleep(20000 + 37000 * round);
    kill(child, SIGKILL);
    int st = 0;
    waitpid(child, &st, 0);
    Checkpoint now = load_checkpoint_file(path);
    EXPECT_TRUE(now.step == 1 || now.step == 2) << now.step;
    for (const auto& tmp : temporaries_left(path, child)) std::remove(tmp.c_str());
  }
  std::remove(path.c_str());
}

// Two threads saving to one path at once: each save succeeds and the file
// is always one of them whole. Both once wrote the same temporary file
// ("<path>.tmp.<pid>"): the one renamed first was a mix of both, and the
// other's rename found no file.
TEST(Checkpoint, TwoThreadsSavingToOnePathEachLeaveAWholeFile) {
  const std::string path = temp_path("two_threads");
  Checkpoint a, b;
  a.step = 1;
  a.tensors.push_back({"w", at::zeros({1 << 20}, at::kFloat)});
  b.step = 2;
  b.tensors.push_back({"w", at::ones({1 << 19}, at::kFloat)});
  for (int round = 0; round < 10; ++round) {
    std::string failures;
    std::mutex m;
    auto saver = [&](const Checkpoint& c) {
      try {
        save_checkpoint_file(path, c);
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(m);
        failures += std::string(e.what()) + "\n";
      }
    };
    std::thread first(saver, std::cref(a)), second(saver, std::cref(b));
    first.join();
    second.join();
    EXPECT_TRUE(failures.empty()) << "round " << round << ": " << failures;
    Checkpoint now;
    EXPECT_NO_THROW(now = load_checkpoint_file(path)) << "round " << round;
    EXPECT_TRUE(now.step == 1 || now.step == 2) << now.step;
  }
  EXPECT_TRUE(temporaries_left(path, getpid()).empty());
  std::remove(path.c_str());
}

// A name as long as the file system allows (255 bytes): the temporary
// file beside it, whose name adds ".tmp.<pid>.<call>", must not pass that
// limit, or a name torch.save takes could not be saved to at all.
TEST(Checkpoint, ANameAsLongAsTheFileSystemAllowsIsSavedAndSavedOver) {
  const std::string dir = temp_path("long_names");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  for (size_t length : {200, 243, 244, 254, 255}) {
    const std::string path = dir + "/" + std::string(length - 5, 'c') + ".ckpt";
    Checkpoint c = sample();
    for (int64_t step : {1, 2}) {  // a new file, then one saved over
      c.step = step;
      try {
        save_checkpoint_file(path, c);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "a name of " << length << " bytes, step " << step << ": " << e.what();
        continue;
      }
      EXPECT_EQ(load_checkpoint_file(path).step, step) << length;
    }
    std::remove(path.c_str());
  }
  // Nothing else is left: no temporary file under any name.
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(dir, ec)) << dir;
  std::filesystem::remove_all(dir, ec);
}

// A save replaces its file whole, by a rename: where the path names
// something that is not a regular file (a device such as /dev/null, a
// FIFO, a directory), the rename would replace that node with a file (as
// root, /dev/null itself). Such a path is refused by name and left as it is.
TEST(Checkpoint, APathThatIsNotARegularFileIsRefusedAndLeftAsItIs) {
  const std::string dir = temp_path("not_regular");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  struct Node {
    std::string path;
    mode_t type;
  };
  std::vector<Node> nodes{{dir + "/fifo", S_IFIFO}, {dir + "/directory", S_IFDIR}};
  ASSERT_EQ(::mkfifo(nodes[0].path.c_str(), 0644), 0);
  ASSERT_EQ(::mkdir(nodes[1].path.c_str(), 0755), 0);
  // /dev/null's own numbers; only root (with CAP_MKNOD) may make it.
  if (::mknod((dir + "/null").c_str(), S_IFCHR | 0644, makedev(1, 3)) == 0) nodes.push_back({dir + "/null", S_IFCHR});
  else std::fprintf(stderr, "(no device node: mknod: %s)\n", std::strerror(errno));
  // A link to one (as /dev/stdout is): the rename would replace the link,
  // where a plain write goes to what it leads to.
  ASSERT_EQ(::symlink(nodes[0].path.c_str(), (dir + "/link_to_fifo").c_str()), 0);
  nodes.push_back({dir + "/link_to_fifo", S_IFLNK});
  for (const Node& n : nodes) {
    try {
      save_checkpoint_file(n.path, sample());
      ADD_FAILURE() << n.path << " was saved to";
    } catch (const ddp::core::Error& e) {
      EXPECT_EQ(e.status(), ddp::core::Status::IO) << e.what();
      EXPECT_NE(std::string(e.what()).find(n.path + ": "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos) << e.what();
    }
    struct stat st {};
    ASSERT_EQ(::lstat(n.path.c_str(), &st), 0) << n.path;
    EXPECT_EQ(st.st_mode & S_IFMT, n.type) << n.path << " was replaced";
    EXPECT_TRUE(temporaries_left(n.path, getpid()).empty()) << n.path;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Through a symbolic link to a file, a save writes that file, as torch.save
// does, and the link stays.
TEST(Checkpoint, ASaveThroughASymbolicLinkWritesTheFileItLeadsToAndKeepsTheLink) {
  const std::string dir = temp_path("through_link");
  ASSERT_EQ(::mkdir(dir.c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/runs").c_str(), 0755), 0);
  const std::string target = dir + "/runs/epoch=3.ckpt", link = dir + "/last.ckpt";
  Checkpoint c = sample();
  c.step = 3;
  save_checkpoint_file(target, c);
  ASSERT_EQ(::symlink("runs/epoch=3.ckpt", link.c_str()), 0);
  c.step = 4;
  save_checkpoint_file(link, c);
  struct stat st {};
  ASSERT_EQ(::lstat(link.c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode)) << "the link was replaced";
  EXPECT_EQ(load_checkpoint_file(target).step, 4);
  EXPECT_TRUE(temporaries_left(target, getpid()).empty());
  EXPECT_TRUE(temporaries_left(link, getpid()).empty());
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// A new file has 0666 less the umask, as torch.save makes it; a file saved
// over keeps its mode, as one torch.save rewrites in place does (a save
// once made every file 0644: a checkpoint made private became readable).
TEST(Checkpoint, ANewFileHasTheUmasksModeAndOneSavedOverKeepsItsOwn) {
  const std::string path = temp_path("modes");
  std::remove(path.c_str());
  const mode_t old_mask = ::umask(002);
  Checkpoint c = sample();
  save_checkpoint_file(path, c);
  ::umask(old_mask);
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0664u) << std::oct << (st.st_mode & 07777);
  for (mode_t mode : {0600u, 0640u, 0444u}) {
    if (mode == 0444u && ::geteuid() != 0) continue;  // only root may write it (as torch.save)
    ASSERT_EQ(::chmod(path.c_str(), mode), 0);
    save_checkpoint_file(path, c);
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, mode) << std::oct << (st.st_mode & 07777);
  }
  std::remove(path.c_str());
}

TEST(Checkpoint, ASaveThatCannotWriteLeavesTheOldFileAndNamesThePath) {
  std::string path = temp_path("nodir") + "/missing/dir/ckpt.bin";
  try {
    save_checkpoint_file(path, sample());
    FAIL() << "saved into a missing directory";
  } catch (const ddp::core::Error& e) {
    EXPECT_EQ(e.status(), ddp::core::Status::IO);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
}

// A disk that fills up midway (here a file-size limit of 1 MiB, the same
// failed write as a full disk without needing one): the save is
// Status::IO naming the path and why, the old checkpoint is untouched, and
// the half-written temporary file is gone.
TEST(Checkpoint, ASaveThatRunsOutOfRoomMidwayLeavesTheOldFileAndNoTemporary) {
  at::set_num_threads(1);  // the forked child must not need the parent's thread pool
  std::string path = temp_path("full");
  Checkpoint old_one = sample();
  save_checkpoint_file(path, old_one);
  Checkpoint big;
  big.tensors.push_back({"w", at::ones({1 << 22}, at::kFloat)});  // 16 MiB
  const std::string what = expect_full_disk_keeps_the_old_file(path, [&] { save_checkpoint_file(path, big); });
  EXPECT_NE(what.find("write failed"), std::string::npos) << what;
  EXPECT_EQ(load_checkpoint_file(path).step, old_one.step);
  std::remove(path.c_str());
}

// A checkpoint its saver may not write (made read-only to keep it) is
// refused, as torch.save's and Lightning's open for writing refuse it, and
// stays as it was: the save once replaced it, the rename needing only the
// directory. Root writes it, as torch.save does (the test above); here a
// child that is not root (it drops to nobody where it is) saves.
TEST(Checkpoint, AFileTheSaverMayNotWriteIsRefusedAndKept) {
  at::set_num_threads(1);  // the forked child must not need the parent's thread pool
  const std::string dir = temp_path("readonly_dir");
  ASSERT_EQ(::mkdir(dir.c_str(), 0777), 0);
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);  // whoever saves may make and rename files here
  const std::string path = dir + "/kept.ckpt";
  Checkpoint old_one = sample();
  save_checkpoint_file(path, old_one);
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::geteuid() == 0 && (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)) _exit(77);
    Checkpoint other = sample();
    other.step = old_one.step + 1;
    try {
      save_checkpoint_file(path, other);
      _exit(1);  // saved over a file it may not write
    } catch (const ddp::core::Error& e) {
      const std::string what = e.what();
      _exit(e.status() == ddp::core::Status::IO && what.find(path) != std::string::npos &&
                    what.find("Permission denied") != std::string::npos
                ? 0
                : 2);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  if (WEXITSTATUS(status) == 77) GTEST_SKIP() << "cannot become another user to save as one";
  EXPECT_EQ(WEXITSTATUS(status), 0) << "1: the read-only file was replaced; 2: another error";
  EXPECT_EQ(load_checkpoint_file(path).step, old_one.step);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++entries;
  EXPECT_EQ(entries, 1u) << "a temporary file was left beside the checkpoint";
  std::filesystem::remove_all(dir);
}

// The reading every loader shares (checkpoints, flight-recorder dumps,
// ddprun's reports): the whole file however its size compares with what
// fstat said when the reading began: a pipe says 0 and brings up to 300 KiB
// (the buffer grows several times), a file says its size (read in place).
TEST(Checkpoint, ReadingToTheEndGetsEveryByteWhateverTheSizeSaidFirst) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  // Filled before the reading: a pipe of 1 MiB where the system allows (else its 64 KiB).
  const int capacity = std::max(::fcntl(fds[1], F_SETPIPE_SZ, 1 << 20), 65536);
  std::string expected(std::min<size_t>(300 * 1024 + 7, static_cast<size_t>(capacity)), '\0');
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<char>(i * 131 + i / 997);
  ASSERT_EQ(::write(fds[1], expected.data(), expected.size()), static_cast<ssize_t>(expected.size()));
  ::close(fds[1]);
  std::vector<uint8_t> from_pipe;
  std::string why;
  const bool read = ddp::core::read_to_end(fds[0], &from_pipe, &why);
  ::close(fds[0]);
  ASSERT_TRUE(read) << why;
  ASSERT_EQ(from_pipe.size(), expected.size());
  EXPECT_EQ(std::memcmp(from_pipe.data(), expected.data(), expected.size()), 0);

  const std::string path = temp_path("read_to_end");
  std::ofstream(path, std::ios::binary).write(expected.data(), static_cast<std::streamsize>(expected.size()));
  std::string from_file;
  ASSERT_TRUE(ddp::core::read_regular_file(path, &from_file, &why)) << why;
  EXPECT_EQ(from_file, expected);
  std::ofstream(path, std::ios::binary | std::ios::trunc);
  ASSERT_TRUE(ddp::core::read_regular_file(path, &from_file, &why)) << why;
  EXPECT_TRUE(from_file.empty()) << from_file.size() << " bytes from an empty file";
  std::remove(path.c_str());
}

}  // namespace
