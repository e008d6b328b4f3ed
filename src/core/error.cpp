#include "core/error.h"

namespace atl {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid argument";
    case ErrorCode::kNotFound: return "not found";
    case ErrorCode::kInvalidGraph: return "invalid graph";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kParse: return "parse error";
    case ErrorCode::kIo: return "i/o error";
    case ErrorCode::kCuda: return "cuda error";
    case ErrorCode::kResourceExhausted: return "resource exhausted";
    case ErrorCode::kUnavailable: return "unavailable";
    case ErrorCode::kDeadlineExceeded: return "deadline exceeded";
    case ErrorCode::kInternal: return "internal error";
  }
  return "error";
}

Error::Error(ErrorCode code, std::string message, const char* file, int line)
    : std::runtime_error(message), code_(code), message_(std::move(message)), file_(file), line_(line) {}

}  // namespace atl
