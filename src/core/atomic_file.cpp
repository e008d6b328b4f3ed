#include "core/atomic_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace atl {

namespace {

bool is_special_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);
}

// Moves `staged` to `dir`, swapping with an existing `dir` in one step where the file system can.
void swap_into_place(const std::filesystem::path& staged, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (!fs::exists(fs::symlink_status(dir))) {
    ATOLL_CHECK(std::rename(staged.c_str(), dir.c_str()) == 0, kIo, "cannot write '{}': {}", dir.string(),
                std::strerror(errno));
    return;
  }
  if (::renameat2(AT_FDCWD, staged.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) == 0) return;
  // File systems without the exchange: the old set goes aside first, so only a crash in between
  // leaves `dir` missing, and still never mixed.
  ATOLL_CHECK(errno == EINVAL || errno == ENOSYS, kIo, "cannot write '{}': {}", dir.string(), std::strerror(errno));
  const fs::path aside = staged.string() + ".old";
  fs::remove_all(aside);
  fs::rename(dir, aside);
  fs::rename(staged, dir);
  fs::rename(aside, staged);
}

// Staging folders `.NAME.tmp.PID` of `path` left by processes that no longer run (an interrupt
// or a crash while writing): removed, so interrupted runs do not pile up beside the results.
void remove_stale_staging(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const std::string prefix = fmt::format(".{}.tmp.", path.filename().string());
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(path.parent_path(), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    std::string_view pid_text(name);
    pid_text.remove_prefix(prefix.size());
    if (pid_text.ends_with(".old")) pid_text.remove_suffix(4);
    pid_t pid = 0;
    const auto [end, parse_ec] = std::from_chars(pid_text.data(), pid_text.data() + pid_text.size(), pid);
    if (parse_ec != std::errc() || end != pid_text.data() + pid_text.size() || pid <= 0) continue;
    if (::kill(pid, 0) != 0 && errno == ESRCH) fs::remove_all(entry.path(), ec);
  }
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  ATOLL_CHECK(!path_.empty(), kInvalidArgument, "empty output path");
  if (is_special_file(path_)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
    ATOLL_CHECK(fd_ >= 0, kIo, "cannot write '{}': {}", path_, std::strerror(errno));
    return;
  }
  temp_ = path_ + ".tmp." + std::to_string(::getpid());
  // A leftover from a crashed run with a recycled pid is removed; O_EXCL then never writes through
  // a file (or symlink) that appears there in between.
  ::unlink(temp_.c_str());
  fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  ATOLL_CHECK(fd_ >= 0, kIo, "cannot write '{}': {}", path_, std::strerror(errno));
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!temp_.empty()) ::unlink(temp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  ATOLL_CHECK(fd_ >= 0, kInternal, "'{}': write after finish", path_);
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0 && errno == EINTR) continue;
    ATOLL_CHECK(n > 0, kIo, "cannot write '{}': {}", path_, n < 0 ? std::strerror(errno) : "no progress");
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::close_checked() {
  const int fd = fd_;
  fd_ = -1;
  // Delayed allocation (and NFS) report a full disk only at fsync or close.
  const bool synced = temp_.empty() || ::fsync(fd) == 0;
  const int sync_errno = errno;
  const bool closed = ::close(fd) == 0;
  ATOLL_CHECK(synced, kIo, "cannot write '{}': {}", path_, std::strerror(sync_errno));
  ATOLL_CHECK(closed, kIo, "cannot write '{}': {}", path_, std::strerror(errno));
}

void AtomicFile::finish() {
  if (fd_ >= 0) close_checked();
}

void AtomicFile::commit() {
  finish();
  if (temp_.empty()) return;
  ATOLL_CHECK(std::rename(temp_.c_str(), path_.c_str()) == 0, kIo, "cannot write '{}': {}", path_,
              std::strerror(errno));
  temp_.clear();
}

void check_file_writable(const std::string& path) {
  if (is_special_file(path)) return;  // opening a FIFO here would block until a reader came
  const AtomicFile probe(path);      // its temporary file, removed again uncommitted
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files) {
  std::vector<std::unique_ptr<AtomicFile>> staged;
  for (const auto& [path, contents] : files) {
    staged.push_back(std::make_unique<AtomicFile>(path));
    staged.back()->write(contents);
  }
  for (const auto& f : staged) f->finish();
  for (const auto& f : staged) f->commit();
}

void check_dir_replaceable(const std::string& dir, const std::vector<std::string>& names) {
  const std::filesystem::file_status status = std::filesystem::symlink_status(dir);
  if (!std::filesystem::exists(status)) return;
  ATOLL_CHECK(std::filesystem::is_directory(status), kIo, "cannot write '{}': it exists and is not a directory", dir);
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    ATOLL_CHECK(std::find(names.begin(), names.end(), name) != names.end(), kIo,
                "refusing to replace '{}': it holds '{}', which is not one of the files written there; "
                "choose a new or empty directory",
                dir, name);
  }
}

void write_dir_atomic(const std::string& dir, const std::map<std::string, std::string>& files) {
  namespace fs = std::filesystem;
  ATOLL_CHECK(!dir.empty(), kInvalidArgument, "empty output directory");
  const fs::path target = fs::absolute(fs::path(dir).lexically_normal());
  const fs::path path = target.has_filename() ? target : target.parent_path();
  std::vector<std::string> names;
  for (const auto& entry : files) names.push_back(entry.first);
  check_dir_replaceable(path.string(), names);
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  ATOLL_CHECK(!ec, kIo, "cannot create '{}': {}", path.parent_path().string(), ec.message());
  remove_stale_staging(path);
  const fs::path staged = path.parent_path() / fmt::format(".{}.tmp.{}", path.filename().string(), ::getpid());
  fs::remove_all(staged);
  ATOLL_CHECK(fs::create_directory(staged, ec) && !ec, kIo, "cannot write '{}': {}", dir,
              ec ? ec.message() : "staging folder exists");
  try {
    for (const auto& [name, contents] : files) write_file_atomic((staged / name).string(), contents);
    swap_into_place(staged, path);
  } catch (const Error& e) {
    fs::remove_all(staged, ec);
    // The failing path is the hidden staging folder's: name the folder the user asked for first.
    throw Error(e.code(), fmt::format("writing '{}' (left as it was): {}", dir, e.message()), __FILE__, __LINE__);
  } catch (...) {
    fs::remove_all(staged, ec);
    throw;
  }
  // After a swap the staging name holds the previous set.
  fs::remove_all(staged, ec);
}

}  // namespace atl
