#include "serve/protocol.h"

#include <new>

namespace atl::serve {

ErrorInfo error_info(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const Error& e) {
    return {e.code(), e.message()};
  } catch (const std::bad_alloc&) {
    return {ErrorCode::kResourceExhausted, "out of memory"};
  } catch (const std::exception& e) {
    return {ErrorCode::kInternal, e.what()};
  } catch (...) {
    return {ErrorCode::kInternal, "unknown error"};
  }
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kInvalidGraph:
    case ErrorCode::kParse: return 400;
    case ErrorCode::kNotFound: return 404;
    case ErrorCode::kResourceExhausted: return 429;
    case ErrorCode::kUnsupported: return 501;
    case ErrorCode::kUnavailable: return 503;
    case ErrorCode::kDeadlineExceeded: return 504;
    case ErrorCode::kIo:
    case ErrorCode::kCuda:
    case ErrorCode::kInternal: return 500;
  }
  return 500;
}

}  // namespace atl::serve
