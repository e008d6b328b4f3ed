// KServe v2 HTTP inference bodies (JSON tensors and the binary tensor extension), as a server
// receives them: decoding, then the checks against the model's inputs and the packing into
// batch tensors. Any body gives tensors or an atl::Error. The first input byte chooses whether an
// Inference-Header-Content-Length comes with the body and the next two bytes give it.
#include <cstring>

#include "core/error.h"
#include "serve/http_codec.h"
#include "serve/inference.h"

namespace {

atl::Program two_input_program(int64_t batch) {
  atl::Program p;
  p.model = "m";
  p.batch = batch;
  p.inputs = {{"image", atl::DType::kF32, atl::Shape({batch, 2, 3})}, {"ids", atl::DType::kI64, atl::Shape({batch, 4})}};
  p.outputs = {{"scores", atl::DType::kF32, atl::Shape({batch, 5})}};
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  std::optional<size_t> header_length;
  if (data[0] & 1) header_length = static_cast<size_t>(data[1]) | static_cast<size_t>(data[2]) << 8;
  const std::string body(reinterpret_cast<const char*>(data) + 3, size - 3);
  atl::serve::ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  try {
    const atl::serve::HttpInferRequest r = atl::serve::decode_infer_request(body, header_length, "m", "", atl::serve::SharedMemoryRegistry{});
    (void)atl::serve::check_inputs(spec, two_input_program(1), r.request);
    (void)atl::serve::pack_inputs(two_input_program(spec.max_batch_size), r.request);
  } catch (const atl::Error&) {
  }
  return 0;
}
