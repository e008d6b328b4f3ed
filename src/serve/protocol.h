#pragma once
// What both protocols share: the server they answer for (engine plus model catalog), and how an
// atl::Error maps onto each protocol's error codes.
#include <exception>
#include <string>
#include <vector>

#include "core/error.h"
#include "serve/engine.h"
#include "serve/shared_memory.h"

namespace atl::serve {

// The operations a protocol front end calls beyond the engine: repository loads re-read the
// model's config.
class ModelControl {
 public:
  virtual ~ModelControl() = default;
  virtual Engine& engine() = 0;
  virtual void load_model(const std::string& name) = 0;
  virtual void unload_model(const std::string& name) = 0;
  // The system shared-memory regions both front ends resolve requests against.
  virtual SharedMemoryRegistry& shared_memory() = 0;
};

// The error an exception carries: code and message; std::bad_alloc is resource exhaustion and
// anything that is not an atl::Error is internal.
struct ErrorInfo {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};
ErrorInfo error_info(std::exception_ptr error);

// HTTP status for an error code (400, 404, 429, 503, ...), as Triton answers.
int http_status(ErrorCode code);

// A repository load request's parameters (Triton's "config" override, "file:" contents): atoll
// applies none, so a load that carries any is refused (kUnsupported) rather than loading the
// repository's config as if the override had been taken.
void check_load_parameters(const std::string& model, const std::vector<std::string>& names);

inline constexpr const char* kServerName = "atoll";
inline constexpr const char* kServerVersion = "0.1.0";
// The protocol extensions both front ends implement, as ServerMetadata lists them.
inline constexpr const char* kExtensions[] = {"model_repository", "statistics", "binary_tensor_data",
                                              "system_shared_memory"};
// "the KServe v2 protocol with the model_repository, ... extensions": what the errors for what is
// not served (an HTTP path, a gRPC method) name instead.
std::string served_protocol();

}  // namespace atl::serve
