#include "runtime/session.h"

#include <algorithm>

#include "core/error.h"
#include "core/rng.h"
#include "core/stats.h"
#include "models/weights_file.h"
#include "runtime/devices.h"
#include "runtime/model_source.h"

namespace atl {

Session::Session(const SessionOptions& options) {
  device_ = resolve_device(options.device, &device_note_);
  backend_ = make_backend(device_);
  graph_ = load_model_graph(options.model, options.model_options);
  if (!options.weights_file.empty()) {  // overrides the seeded weights by name
    weights_report_ = load_weights_file(graph_, options.weights_file, options.weights_options);
    ATOLL_CHECK(weights_report_.loaded > 0, kInvalidArgument, "'{}' holds no weight of model '{}'",
                options.weights_file, options.model);
  }
  compiled_ = compile_graph(graph_, backend_->target(), options.compile_options);
  instance_ = backend_->load(compiled_.program, compiled_.weights);
}

std::vector<Tensor> Session::random_inputs(uint64_t seed) const {
  std::vector<Tensor> out;
  for (ValueId id : graph_.inputs()) {
    const Value& v = graph_.value(id);
    Rng rng(seed, v.name);
    if (is_float(v.dtype)) {
      Tensor t(DType::kF32, v.shape);
      for (float& x : t.as<float>()) x = rng.uniform(-1.0f, 1.0f);
      out.push_back(std::move(t));
      continue;
    }
    // Indices must stay inside every table they index.
    int64_t rows = std::numeric_limits<int64_t>::max();
    for (const Node& n : graph_.nodes()) {
      if (n.op == OpKind::kGather && n.inputs[1] == id) rows = std::min(rows, graph_.value(n.inputs[0]).shape[0]);
    }
    if (rows == std::numeric_limits<int64_t>::max()) rows = 1;
    Tensor t(DType::kI64, v.shape);
    for (int64_t& x : t.as<int64_t>()) x = static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(rows));
    out.push_back(t.to(v.dtype));
  }
  return out;
}

int Session::input_index(const std::string& name) const {
  const auto& specs = compiled_.program.inputs;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (specs[i].name == name) return static_cast<int>(i);
  }
  std::string names;
  for (const auto& s : specs) names += (names.empty() ? "" : ", ") + s.name;
  ATOLL_THROW(kInvalidArgument, "model '{}' has no input '{}' (inputs: {})", graph_.name(), name, names);
}

void Session::set_input(const std::string& name, const Tensor& t) {
  const int i = input_index(name);
  const Value& v = graph_.value(graph_.inputs()[static_cast<size_t>(i)]);
  ATOLL_CHECK(t.shape() == v.shape, kInvalidArgument, "input '{}': expected shape {}, given {}", name, v.shape.str(),
              t.shape().str());
  const bool float_ok = is_float(v.dtype) && is_float(t.dtype());
  const bool int_ok = !is_float(v.dtype) && !is_float(t.dtype());
  ATOLL_CHECK(float_ok || int_ok, kInvalidArgument, "input '{}': expected dtype {}, given {}", name,
              dtype_name(v.dtype), dtype_name(t.dtype()));
  instance_->set_input(i, t.to(is_float(v.dtype) ? DType::kF32 : DType::kI64));
}

void Session::set_inputs(const std::vector<Tensor>& inputs) {
  ATOLL_CHECK(inputs.size() == compiled_.program.inputs.size(), kInvalidArgument, "model '{}' takes {} inputs, given {}",
              graph_.name(), compiled_.program.inputs.size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) set_input(compiled_.program.inputs[i].name, inputs[i]);
}

std::vector<Tensor> Session::outputs() {
  std::vector<Tensor> out;
  for (size_t i = 0; i < compiled_.program.outputs.size(); ++i) out.push_back(instance_->get_output(static_cast<int>(i)));
  return out;
}

LatencyStats latency_stats(std::vector<double> samples_ms) {
  LatencyStats s;
  if (samples_ms.empty()) return s;
  const Distribution d = distribution(samples_ms);
  s.samples = d.count;
  s.min_ms = *std::min_element(samples_ms.begin(), samples_ms.end());
  s.max_ms = d.max;
  s.median_ms = median(std::move(samples_ms));
  s.p99_ms = d.p99;
  s.mean_ms = d.mean;
  return s;
}

}  // namespace atl
