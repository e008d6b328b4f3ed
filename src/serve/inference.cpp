#include "serve/inference.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "core/error.h"
#include "core/text.h"

namespace atl::serve {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? "," : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string input_names(const Program& program) {
  std::string out;
  for (const TensorSpec& t : program.inputs) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

// Elements of a checked shape: its dims already equal the model's, so the product cannot overflow.
int64_t elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

const InputTensor* find_input(const InferRequest& request, const std::string& name) {
  const InputTensor* found = nullptr;
  for (const InputTensor& in : request.inputs) {
    if (in.name != name) continue;
    ATOLL_CHECK(found == nullptr, kInvalidArgument, "input '{}' is given more than once", printable(name));
    found = &in;
  }
  return found;
}

// The request's batch for one input after checking its datatype and shape.
int64_t check_one_input(const ModelSpec& spec, const TensorSpec& expected, const InputTensor& in) {
  const std::string datatype = kserve_datatype(expected.dtype);
  ATOLL_CHECK(in.datatype == datatype, kInvalidArgument, "input '{}' of model '{}' has datatype {}, expected {}",
              in.name, spec.name, printable(in.datatype), datatype);
  const std::vector<int64_t> wanted = client_shape(spec, expected);
  bool fits = in.shape.size() == wanted.size();
  for (size_t i = 0; fits && i < wanted.size(); ++i) {
    fits = wanted[i] == -1 ? in.shape[i] >= 1 && in.shape[i] <= spec.max_batch_size : in.shape[i] == wanted[i];
  }
  ATOLL_CHECK(fits, kInvalidArgument, "input '{}' of model '{}' has shape {}, expected {}{}", in.name, spec.name,
              shape_text(in.shape), shape_text(wanted),
              spec.max_batch_size > 0 ? fmt::format(" with a batch of 1..{}", spec.max_batch_size) : "");
  const int64_t bytes = elements(in.shape) * static_cast<int64_t>(datatype_size(datatype));
  ATOLL_CHECK(static_cast<int64_t>(in.data.size()) == bytes, kInvalidArgument,
              "input '{}' of model '{}' carries {} bytes; shape {} of {} needs {}", in.name, spec.name,
              in.data.size(), shape_text(in.shape), datatype, bytes);
  return spec.max_batch_size > 0 ? in.shape[0] : 1;
}

}  // namespace

std::vector<int64_t> client_shape(const ModelSpec& spec, const TensorSpec& tensor) {
  std::vector<int64_t> shape = tensor.shape.dims();
  if (spec.max_batch_size > 0 && !shape.empty()) shape[0] = -1;
  return shape;
}

int64_t check_inputs(const ModelSpec& spec, const Program& batch1, const InferRequest& request) {
  for (const InputTensor& in : request.inputs) {
    const bool known = std::any_of(batch1.inputs.begin(), batch1.inputs.end(),
                                   [&](const TensorSpec& t) { return t.name == in.name; });
    ATOLL_CHECK(known, kInvalidArgument, "model '{}' has no input '{}' (inputs: {})", spec.name, printable(in.name),
                input_names(batch1));
  }
  int64_t batch = -1;
  for (const TensorSpec& expected : batch1.inputs) {
    const InputTensor* in = find_input(request, expected.name);
    ATOLL_CHECK(in != nullptr, kInvalidArgument, "model '{}' needs input '{}' (inputs: {})", spec.name, expected.name,
                input_names(batch1));
    const int64_t b = check_one_input(spec, expected, *in);
    ATOLL_CHECK(batch == -1 || b == batch, kInvalidArgument,
                "inputs of model '{}' disagree on the batch size: {} and {}", spec.name, batch, b);
    batch = b;
  }
  return batch;
}

std::vector<Tensor> pack_inputs(const Program& program, const InferRequest& request) {
  std::vector<Tensor> tensors;
  for (const TensorSpec& spec : program.inputs) {
    const InputTensor* in = find_input(request, spec.name);
    ATOLL_CHECK(in != nullptr, kInternal, "input '{}' vanished after its check", spec.name);
    const DType dtype = is_float(spec.dtype) ? DType::kF32 : DType::kI64;
    const size_t bytes = static_cast<size_t>(spec.shape.numel()) * dtype_size(dtype);
    ATOLL_CHECK(in->data.size() <= bytes, kInternal, "input '{}' outgrew its checked size", spec.name);
    const bool aligned = reinterpret_cast<uintptr_t>(in->data.data()) % 64 == 0;
    if (in->owner && aligned && in->data.size() == bytes) {
      // Read in place (the scheduler only reads request tensors); the owner keeps the bytes.
      std::shared_ptr<std::byte[]> view(in->owner, const_cast<std::byte*>(in->data.data()));
      tensors.push_back(Tensor::over(dtype, spec.shape, std::move(view)));
      continue;
    }
    Tensor t(dtype, spec.shape);  // zero-filled: a smaller request leaves the batch's tail empty
    std::memcpy(t.raw(), in->data.data(), in->data.size());
    tensors.push_back(std::move(t));
  }
  return tensors;
}

void check_requested_outputs(const Program& program, const std::vector<std::string>& requested) {
  for (const std::string& name : requested) {
    const bool known = std::any_of(program.outputs.begin(), program.outputs.end(),
                                   [&](const TensorSpec& t) { return t.name == name; });
    ATOLL_CHECK(known, kInvalidArgument, "model '{}' has no output '{}'", program.model, printable(name));
  }
}

std::vector<OutputTensor> unpack_outputs(const ModelSpec& spec, const Program& program, std::vector<Tensor> outputs,
                                         int64_t batch, const std::vector<std::string>& requested) {
  ATOLL_CHECK(outputs.size() == program.outputs.size(), kInternal, "model '{}' answered {} outputs, expected {}",
              spec.name, outputs.size(), program.outputs.size());
  std::vector<std::string> names = requested;
  if (names.empty()) {
    for (const TensorSpec& t : program.outputs) names.push_back(t.name);
  }
  std::vector<OutputTensor> result;
  for (const std::string& name : names) {
    const auto it = std::find_if(program.outputs.begin(), program.outputs.end(),
                                 [&](const TensorSpec& t) { return t.name == name; });
    ATOLL_CHECK(it != program.outputs.end(), kInvalidArgument, "model '{}' has no output '{}'", spec.name,
                printable(name));
    Tensor& full = outputs[static_cast<size_t>(it - program.outputs.begin())];
    if (full.dtype() == DType::kF16) full = full.to(DType::kF32);
    if (full.dtype() == DType::kI32) full = full.to(DType::kI64);
    OutputTensor out;
    out.name = name;
    out.datatype = kserve_datatype(full.dtype());
    out.shape = full.shape().dims();
    if (spec.max_batch_size > 0) out.shape[0] = batch;
    out.data = Tensor(full.dtype(), Shape(out.shape));
    std::memcpy(out.data.raw(), full.raw(), out.data.nbytes());
    result.push_back(std::move(out));
  }
  return result;
}

}  // namespace atl::serve
