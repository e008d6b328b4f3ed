#include "serve/grpc_codec.h"

#include <cstdint>
#include <optional>
#include <span>

#include "core/error.h"
#include "core/text.h"
#include "sched/task.h"

namespace atl::serve {

namespace {

std::optional<int64_t> integer_parameter(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                                         const std::string& key) {
  const auto it = params.find(key);
  if (it == params.end()) return std::nullopt;
  const inference::InferParameter& p = it->second;
  switch (p.parameter_choice_case()) {
    case inference::InferParameter::kInt64Param: return p.int64_param();
    case inference::InferParameter::kUint64Param:
      ATOLL_CHECK(p.uint64_param() <= static_cast<uint64_t>(INT64_MAX), kInvalidArgument,
                  "parameter '{}' is out of range", key);
      return static_cast<int64_t>(p.uint64_param());
    default: ATOLL_THROW(kInvalidArgument, "parameter '{}' must be an integer", key);
  }
}

template <typename T>
std::span<const std::byte> bytes_of(const google::protobuf::RepeatedField<T>& values) {
  return std::as_bytes(std::span<const T>(values.data(), static_cast<size_t>(values.size())));
}

// Typed contents as bytes: the field that matches the datatype (others read as empty, which
// the byte count check then reports).
std::span<const std::byte> typed_contents(const inference::ModelInferRequest::InferInputTensor& in) {
  const inference::InferTensorContents& c = in.contents();
  if (in.datatype() == "FP32") return bytes_of(c.fp32_contents());
  if (in.datatype() == "INT64") return bytes_of(c.int64_contents());
  if (in.datatype() == "INT32") return bytes_of(c.int_contents());
  if (in.datatype() == "FP64") return bytes_of(c.fp64_contents());
  return {};
}

std::string string_parameter(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                             const std::string& key) {
  const auto it = params.find(key);
  if (it == params.end()) return {};
  ATOLL_CHECK(it->second.parameter_choice_case() == inference::InferParameter::kStringParam, kInvalidArgument,
              "parameter '{}' must be a string", key);
  return it->second.string_param();
}

// The tensor a request's parameters put in shared memory, or none (no region named).
std::optional<SharedMemoryTensor> shm_tensor(const google::protobuf::Map<std::string, inference::InferParameter>& params,
                                             const SharedMemoryRegistry& registry, const std::string& tensor) {
  const std::string name = string_parameter(params, "shared_memory_region");
  if (name.empty()) return std::nullopt;
  const std::optional<int64_t> size = integer_parameter(params, "shared_memory_byte_size");
  ATOLL_CHECK(size.has_value(), kInvalidArgument, "tensor '{}' names shared-memory region '{}' without a "
              "shared_memory_byte_size", printable(tensor), printable(name));
  return registry.tensor(name, *size, integer_parameter(params, "shared_memory_offset").value_or(0), tensor);
}

}  // namespace

InferRequest grpc_infer_request(const inference::ModelInferRequest& message, const SharedMemoryRegistry& registry,
                                ShmOutputs& shm_outputs) {
  InferRequest r;
  r.model = message.model_name();
  r.version = message.model_version();
  r.id = message.id();
  r.priority = integer_parameter(message.parameters(), "priority");
  r.timeout_us = integer_parameter(message.parameters(), "timeout");
  std::vector<std::optional<SharedMemoryTensor>> shm_inputs;
  int in_message = 0;
  for (const auto& in : message.inputs()) {
    shm_inputs.push_back(shm_tensor(in.parameters(), registry, in.name()));
    if (!shm_inputs.back()) ++in_message;
  }
  const bool raw = message.raw_input_contents_size() > 0;
  ATOLL_CHECK(!raw || message.raw_input_contents_size() == in_message, kInvalidArgument,
              "raw_input_contents holds {} tensors for {} inputs outside shared memory",
              message.raw_input_contents_size(), in_message);
  int next_raw = 0;
  for (int i = 0; i < message.inputs_size(); ++i) {
    const auto& in = message.inputs(i);
    InputTensor t;
    t.name = in.name();
    t.datatype = in.datatype();
    t.shape.assign(in.shape().begin(), in.shape().end());
    if (const auto& shm = shm_inputs[static_cast<size_t>(i)]) {
      t.data = shm->bytes();
      t.owner = shm->region;
    } else {
      t.data = raw ? std::as_bytes(std::span(message.raw_input_contents(next_raw++))) : typed_contents(in);
    }
    r.inputs.push_back(std::move(t));
  }
  for (const auto& out : message.outputs()) {
    r.outputs.push_back(out.name());
    if (auto shm = shm_tensor(out.parameters(), registry, out.name())) shm_outputs[out.name()] = std::move(*shm);
  }
  return r;
}

void fill_grpc_response(InferResponse response, const ShmOutputs& shm_outputs, inference::ModelInferResponse& message) {
  message.set_model_name(response.model);
  message.set_model_version(response.version);
  message.set_id(response.id);
  (*message.mutable_parameters())["atoll_class"].set_string_param(sched::task_class_name(response.task_class));
  if (response.late) (*message.mutable_parameters())["atoll_late"].set_bool_param(true);
  for (OutputTensor& out : response.outputs) {
    auto* t = message.add_outputs();
    t->set_name(out.name);
    t->set_datatype(out.datatype);
    for (int64_t d : out.shape) t->add_shape(d);
    if (const auto shm = shm_outputs.find(out.name); shm != shm_outputs.end()) {
      shm->second.write(out.name, std::span(out.data.raw(), out.data.nbytes()));
      message.add_raw_output_contents();
      continue;
    }
    message.add_raw_output_contents()->assign(reinterpret_cast<const char*>(out.data.raw()), out.data.nbytes());
  }
}

}  // namespace atl::serve
