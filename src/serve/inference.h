#pragma once
// Inference requests and responses as both protocols (gRPC and HTTP) hand them to the engine,
// and the checks that turn a request's tensors into the model's inputs. Input bytes are views
// into the protocol's buffers: they are copied before infer() returns.
#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "program/program.h"
#include "sched/task.h"
#include "serve/datatype.h"
#include "serve/model_repository.h"

namespace atl::serve {

struct InputTensor {
  std::string name;
  std::string datatype;  // KServe spelling
  std::vector<int64_t> shape;
  std::span<const std::byte> data;  // little-endian, row-major
  // Set where `data` lies in memory that this keeps alive and nobody writes until the answer (a
  // shared-memory region): the request's tensor may then be `data` itself instead of a copy.
  std::shared_ptr<const void> owner;
};

struct InferRequest {
  std::string model;
  std::string version;  // empty: the latest
  std::string id;
  // The reserved parameters: priority 1 = RT, anything else = the model's default class;
  // timeout in microseconds from arrival.
  std::optional<int64_t> priority;
  std::optional<int64_t> timeout_us;
  std::vector<InputTensor> inputs;
  std::vector<std::string> outputs;  // empty: every output
};

struct OutputTensor {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  Tensor data;  // f32 or i64, exactly `shape`
};

struct InferResponse {
  std::string model;
  std::string version;
  std::string id;
  sched::TaskClass task_class = sched::TaskClass::kBestEffort;
  bool late = false;  // finished after its timeout (timeout policy "report")
  std::vector<OutputTensor> outputs;
};

// Called exactly once per accepted request, on the engine's thread: with an atl::Error or a response.
using InferDone = std::function<void(std::exception_ptr error, InferResponse response)>;

// The request's batch size after checking its inputs against the model's (names, datatypes,
// shapes and byte counts; every input the model takes, once). Throws kInvalidArgument naming
// the input and what was expected.
int64_t check_inputs(const ModelSpec& spec, const Program& batch1, const InferRequest& request);

// The model's inputs at the program's batch: the request's items first, zeros after.
std::vector<Tensor> pack_inputs(const Program& program, const InferRequest& request);

// The first `batch` items of each requested output, in the request's order (every output when
// it names none). Throws kInvalidArgument for an output the model lacks.
std::vector<OutputTensor> unpack_outputs(const ModelSpec& spec, const Program& program, std::vector<Tensor> outputs,
                                         int64_t batch, const std::vector<std::string>& requested);

// Names of the requested outputs the model lacks, checked before the request runs.
void check_requested_outputs(const Program& program, const std::vector<std::string>& requested);

// Request shapes of a model's tensor as clients see them: -1 for the batch dimension when
// batching, the batch-1 shape otherwise.
std::vector<int64_t> client_shape(const ModelSpec& spec, const TensorSpec& tensor);

}  // namespace atl::serve
