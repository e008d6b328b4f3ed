// KServe v2 gRPC inference requests, as a server receives them: any bytes that parse as a
// ModelInferRequest, then the conversion to the engine's request (raw or typed contents,
// parameters, shared-memory references), the checks against the model's inputs and the packing
// into batch tensors. Any message gives tensors or an atl::Error.
#include <google/protobuf/stubs/logging.h>

#include "core/error.h"
#include "grpc_service.pb.h"
#include "serve/grpc_codec.h"
#include "serve/inference.h"

namespace {

atl::Program two_input_program(int64_t batch) {
  atl::Program p;
  p.model = "m";
  p.batch = batch;
  p.inputs = {{"image", atl::DType::kF32, atl::Shape({batch, 2, 3})},
              {"ids", atl::DType::kI64, atl::Shape({batch, 4})}};
  p.outputs = {{"scores", atl::DType::kF32, atl::Shape({batch, 5})}};
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Strings that are not UTF-8 fail the parse with a log line each: thousands a second.
  static const bool quiet = [] {
    google::protobuf::SetLogHandler(nullptr);
    return true;
  }();
  (void)quiet;
  inference::ModelInferRequest message;
  if (!message.ParseFromArray(data, static_cast<int>(size))) return 0;
  atl::serve::ModelSpec spec;
  spec.name = "m";
  spec.max_batch_size = 4;
  try {
    const atl::serve::SharedMemoryRegistry registry;
    atl::serve::ShmOutputs shm_outputs;
    const atl::serve::InferRequest r = atl::serve::grpc_infer_request(message, registry, shm_outputs);
    (void)atl::serve::check_inputs(spec, two_input_program(1), r);
    (void)atl::serve::pack_inputs(two_input_program(spec.max_batch_size), r);
  } catch (const atl::Error&) {
  }
  return 0;
}
