#pragma once
// One error type across layers: a code, a message, and where it was raised.
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace atl {

enum class ErrorCode {
  kInvalidArgument,  // bad user input: flag, shape, file contents
  kNotFound,         // unknown model, missing file or weight
  kInvalidGraph,     // shape/dtype inference or graph structure failure
  kUnsupported,      // valid request this build cannot serve
  kParse,            // malformed JSON / npy / weights file
  kIo,               // file system failure
  kCuda,             // CUDA runtime/driver/library failure
  kResourceExhausted,  // a bounded queue or limit is full: retry later
  kUnavailable,        // not ready or shutting down
  kDeadlineExceeded,   // finished after the time the caller allowed
  kInternal,         // broken invariant: a bug in atoll
};

const char* error_code_name(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, const char* file, int line);
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const char* file() const { return file_; }
  int line() const { return line_; }

 private:
  ErrorCode code_;
  std::string message_;
  const char* file_;
  int line_;
};

}  // namespace atl

#define ATOLL_THROW(code, ...) \
  throw ::atl::Error(::atl::ErrorCode::code, ::fmt::format(__VA_ARGS__), __FILE__, __LINE__)

#define ATOLL_CHECK(cond, code, ...)   \
  do {                                 \
    if (!(cond)) ATOLL_THROW(code, __VA_ARGS__); \
  } while (0)
