#pragma once
// Output files that a reader sees either whole or not at all.
//
// A regular-file target is written to `<path>.tmp.<pid>` in the same directory and renamed into
// place once every write and the close succeeded, so a full disk or a crash never leaves a
// truncated file (or a truncated copy over a good one). A target that exists and is not a regular
// file (/dev/full, /dev/stdout, a FIFO) cannot be renamed onto: it is written directly, still
// checking every write and the close. Failures throw kIo naming the path and the errno text.
#include <cstddef>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace atl {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // removes the temporary file unless commit() succeeded
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }
  // Flushes and closes, checking both, without touching the target yet.
  void finish();
  // Finishes (if not yet) and renames into place; after a throw the target is left as it was.
  void commit();

 private:
  void close_checked();
  std::string path_;
  std::string temp_;  // empty when writing the target directly
  int fd_ = -1;
};

// Throws kIo unless a file can be written at `path` (its folder exists and takes a new file), so
// a command refuses a bad output path before a long run rather than after it. An existing
// device, FIFO or other non-regular target is left to the write, which checks it.
void check_file_writable(const std::string& path);

// The whole of `contents` to `path` through an AtomicFile.
void write_file_atomic(const std::string& path, std::string_view contents);

// Several files (path -> contents) as one result set: every file is written and closed before any
// replaces its target, so a full disk on the last leaves all of them as they were.
void write_files_atomic(const std::vector<std::pair<std::string, std::string>>& files);

// A directory holding exactly `files` (name -> contents), replacing `dir` as a whole: the set is
// written into a hidden sibling folder and swapped in with one rename, so readers never see files
// of two runs side by side, and an interrupted write leaves the previous set untouched. An
// existing `dir` holding anything not named in `files` is refused rather than deleted.
void write_dir_atomic(const std::string& dir, const std::map<std::string, std::string>& files);

// Throws kIo unless write_dir_atomic may replace `dir` with files named `names`: lets a command
// refuse before a long run rather than after it.
void check_dir_replaceable(const std::string& dir, const std::vector<std::string>& names);

}  // namespace atl
