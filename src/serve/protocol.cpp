#include "serve/protocol.h"

#include <fmt/ranges.h>

#include <new>

#include "core/text.h"

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

std::string served_protocol() {
  return fmt::format("the KServe v2 protocol with the {} extensions", fmt::join(kExtensions, ", "));
}

void check_load_parameters(const std::string& model, const std::vector<std::string>& names) {
  if (names.empty()) return;
  std::vector<std::string> quoted;
  for (const std::string& n : names) quoted.push_back(fmt::format("'{}'", printable(n)));
  ATOLL_THROW(kUnsupported,
              "loading model '{}': load parameters are not supported (got {}); atoll loads the model's config "
              "from the repository: change it there and load again",
              printable(model), fmt::join(quoted, ", "));
}

}  // namespace atl::serve
