#pragma once
// KServe v2 gRPC inference messages to and from the engine's requests: a ModelInferRequest's
// tensors (raw_input_contents, typed contents, or a registered shared-memory region), its
// parameters (priority, timeout), and the answer's outputs. Pure functions over messages, so
// malformed ones are tested, and fuzzed (fuzz/fuzz_kserve_grpc.cpp), without a server.
#include <map>
#include <string>

#include "grpc_service.pb.h"
#include "serve/inference.h"
#include "serve/shared_memory.h"

namespace atl::serve {

// Shared-memory outputs a request asked for, by output name.
using ShmOutputs = std::map<std::string, SharedMemoryTensor>;

// The request as the engine takes it; `message` must outlive it (raw and typed contents are
// viewed, not copied). Inputs in shared memory are read in place; each one's InputTensor::owner
// keeps its region mapped for as long as the request needs it. Outputs asked for in shared
// memory go to `shm_outputs`. Throws kInvalidArgument for parameters of the wrong type or range
// and contents that do not add up, kNotFound for an unregistered region.
InferRequest grpc_infer_request(const inference::ModelInferRequest& message, const SharedMemoryRegistry& registry,
                                ShmOutputs& shm_outputs);

// The answer as a message. Outputs asked for in shared memory are written there, and their
// raw_output_contents entry left empty so that the entries stay aligned with the outputs.
void fill_grpc_response(InferResponse response, const ShmOutputs& shm_outputs, inference::ModelInferResponse& message);

}  // namespace atl::serve
