// Output files are seen whole or not at all, and every failed write is an error.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../models/error_matchers.h"
#include "core/atomic_file.h"
#include "core/npy.h"

namespace atl {
namespace {

namespace fs = std::filesystem;

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / (name + "." + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Files past `bytes` fail with EFBIG, as on a full disk, for the lifetime of the object.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    std::signal(SIGXFSZ, SIG_IGN);
    getrlimit(RLIMIT_FSIZE, &saved_);
    rlimit l = saved_;
    l.rlim_cur = bytes;
    setrlimit(RLIMIT_FSIZE, &l);
  }
  ~FileSizeLimit() { setrlimit(RLIMIT_FSIZE, &saved_); }

 private:
  rlimit saved_{};
};

TEST(AtomicFile, WritesAndReplaces) {
  const fs::path d = fresh_dir("atoll_atomic_write");
  write_file_atomic((d / "a.txt").string(), "first");
  write_file_atomic((d / "a.txt").string(), "second");
  EXPECT_EQ(read_all(d / "a.txt"), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);  // no temp left
  fs::remove_all(d);
}

// The probe a command runs before a long run: a folder that is missing refuses, a good path and
// a device pass, and the probe leaves nothing behind (nor replaces an existing file).
TEST(AtomicFile, WritableCheckProbesWithoutWriting) {
  const fs::path d = fresh_dir("atoll_atomic_probe");
  const std::string msg = testing::error_message(
      [&] { check_file_writable((d / "missing" / "log.json").string()); }, ErrorCode::kIo);
  EXPECT_NE(msg.find("log.json"), std::string::npos) << msg;
  check_file_writable((d / "log.json").string());
  write_file_atomic((d / "kept.json").string(), "kept");
  check_file_writable((d / "kept.json").string());
  EXPECT_EQ(read_all(d / "kept.json"), "kept");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1) << "the probe left a file";
  check_file_writable("/dev/null");
  fs::remove_all(d);
}

TEST(AtomicFile, DevFullFailsNamingThePath) {
  const std::string msg = testing::error_message([] { write_file_atomic("/dev/full", "data"); }, ErrorCode::kIo);
  EXPECT_NE(msg.find("/dev/full"), std::string::npos) << msg;
  EXPECT_NE(msg.find("No space left"), std::string::npos) << msg;
}

TEST(AtomicFile, FullDiskKeepsThePreviousFileAndNoTemp) {
  const fs::path d = fresh_dir("atoll_atomic_full");
  const fs::path p = d / "logits.npy";
  write_file_atomic(p.string(), "previous");
  {
    FileSizeLimit limit(100);
    const std::string msg =
        testing::error_message([&] { write_file_atomic(p.string(), std::string(1000, 'x')); }, ErrorCode::kIo);
    EXPECT_NE(msg.find(p.string()), std::string::npos) << msg;
    Tensor t(DType::kF32, Shape{1000});
    testing::error_message([&] { write_npy(p.string(), t); }, ErrorCode::kIo);
  }
  EXPECT_EQ(read_all(p), "previous");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

// `run --output`'s set of outputs: a failure on the last file leaves the first as it was too,
// where one file after another would have replaced the first and then failed.
TEST(AtomicFiles, FailureOnTheLastKeepsEveryPreviousFile) {
  const fs::path d = fresh_dir("atoll_atomic_files");
  const std::string a = (d / "a.npy").string(), b = (d / "b.npy").string();
  write_files_atomic({{a, "old a"}, {b, "old b"}});
  EXPECT_EQ(read_all(a), "old a");
  {
    FileSizeLimit limit(100);
    testing::error_message([&] { write_files_atomic({{a, "new a"}, {b, std::string(1000, 'x')}}); },
                           ErrorCode::kIo);
  }
  EXPECT_EQ(read_all(a), "old a");
  EXPECT_EQ(read_all(b), "old b");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 2) << "a temporary file was left";
  write_files_atomic({{a, "new a"}, {b, "new b"}});
  EXPECT_EQ(read_all(a) + read_all(b), "new anew b");
  fs::remove_all(d);
}

TEST(AtomicDir, ReplacesTheWholeSet) {
  const fs::path d = fresh_dir("atoll_atomic_dir");
  const std::string out = (d / "disb").string();
  write_dir_atomic(out, {{"results.json", "1"}, {"trace.json", "1"}});
  write_dir_atomic(out, {{"results.json", "2"}, {"trace.json", "2"}});
  EXPECT_EQ(read_all(d / "disb" / "results.json"), "2");
  EXPECT_EQ(read_all(d / "disb" / "trace.json"), "2");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);  // no staging folder left
  fs::remove_all(d);
}

// An interrupted run's staging folder goes with the next write; a running process's stays.
TEST(AtomicDir, RemovesStagingLeftByProcessesThatEnded) {
  const fs::path d = fresh_dir("atoll_atomic_dir_stale");
  const pid_t ended = fork();
  if (ended == 0) _exit(0);
  ASSERT_GT(ended, 0);
  ASSERT_EQ(waitpid(ended, nullptr, 0), ended);
  const fs::path stale = d / fmt::format(".disb.tmp.{}", ended);
  const fs::path live = d / fmt::format(".disb.tmp.{}", getppid());
  fs::create_directories(stale);
  fs::create_directories(live);
  write_dir_atomic((d / "disb").string(), {{"results.json", "1"}});
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  fs::remove_all(d);
}

TEST(AtomicDir, FailedWriteKeepsThePreviousSet) {
  const fs::path d = fresh_dir("atoll_atomic_dir_full");
  const std::string out = (d / "disb").string();
  write_dir_atomic(out, {{"results.json", "old"}, {"trace.json", "old"}});
  {
    FileSizeLimit limit(100);
    testing::error_message(
        [&] {
          write_dir_atomic(out, {{"results.json", "new"}, {"trace.json", std::string(1000, 'x')}});
        },
        ErrorCode::kIo);
  }
  EXPECT_EQ(read_all(d / "disb" / "results.json"), "old");
  EXPECT_EQ(read_all(d / "disb" / "trace.json"), "old");
  EXPECT_EQ(std::distance(fs::directory_iterator(d), fs::directory_iterator()), 1);
  fs::remove_all(d);
}

TEST(AtomicDir, RefusesToDeleteForeignFiles) {
  const fs::path d = fresh_dir("atoll_atomic_dir_foreign");
  write_file_atomic((d / "notes.txt").string(), "mine");
  const std::string msg = testing::error_message(
      [&] {
        write_dir_atomic(d.string(), {{"results.json", "1"}});
      },
      ErrorCode::kIo);
  EXPECT_NE(msg.find("notes.txt"), std::string::npos) << msg;
  EXPECT_EQ(read_all(d / "notes.txt"), "mine");
  fs::remove_all(d);
}

}  // namespace
}  // namespace atl
