#pragma once
// KServe v2 HTTP/REST inference bodies: JSON tensors and Triton's binary tensor extension (a
// JSON header of Inference-Header-Content-Length bytes, then each binary tensor's bytes in
// order). Pure functions over strings, so malformed bodies are tested without a socket.
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "serve/inference.h"
#include "serve/shared_memory.h"

namespace atl::serve {

// A decoded HTTP request: the request whose input views point into `buffers` or the body.
struct HttpInferRequest {
  InferRequest request;
  std::vector<std::vector<std::byte>> buffers;  // JSON tensors converted to bytes
  bool binary_output_default = false;           // parameter binary_data_output
  std::vector<std::optional<bool>> binary_output;  // per requested output: parameter binary_data
  // Requested outputs that go to shared memory, by position in request.outputs (inputs read in
  // place keep their regions through InputTensor::owner).
  std::vector<std::optional<SharedMemoryTensor>> shm_outputs;
};

// `body` must outlive the result. `header_length` is Inference-Header-Content-Length when given.
// Tensors naming a shared-memory region (the system shared-memory extension) resolve against
// `shm`. Throws kParse for malformed JSON, kInvalidArgument for a body that does not add up.
HttpInferRequest decode_infer_request(const std::string& body, std::optional<size_t> header_length,
                                      const std::string& model, const std::string& version,
                                      const SharedMemoryRegistry& shm);

struct HttpInferBody {
  std::string body;
  std::optional<size_t> header_length;  // set when binary tensors follow the JSON
};
// Outputs the request placed in shared memory are written there and answered without data.
HttpInferBody encode_infer_response(const InferResponse& response, const HttpInferRequest& request);

// {"error": message}
std::string error_body(const std::string& message);

}  // namespace atl::serve
