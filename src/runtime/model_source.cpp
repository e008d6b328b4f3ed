#include "runtime/model_source.h"

#include <algorithm>

#include "core/rng.h"

namespace atl {

CompiledModel compile_zoo_model(const ZooModel& model, const CompileTarget& target, bool computes, int inflight_cap) {
  ModelOptions mo;
  mo.batch = model.batch;
  mo.seq_len = model.seq_len;
  mo.seed = model.seed;
  mo.init_weights = false;
  Graph g = build_model(model.name, mo);
  if (computes) {
    g.init_weights(model.seed);
  } else {
    for (const Value& v : g.values()) {
      if (v.kind == ValueKind::kWeight) g.weights()[v.name] = Tensor(v.dtype, v.shape);
    }
  }
  CompileOptions options;
  options.inflight_window = std::max(4, inflight_cap);
  options.compute_weights = computes;
  CompiledModel compiled = compile_graph(g, target, options);
  // A timing-only device never reads weight values: VGG-19 alone would hold 0.5 GB of zeros for
  // the whole run (a DISB run on the simulator must stay small however long it runs).
  if (!computes) compiled.weights.clear();
  return compiled;
}

std::vector<Tensor> seeded_inputs(const Program& p, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const TensorSpec& s : p.inputs) {
    if (!is_float(s.dtype)) {
      inputs.emplace_back(DType::kI64, s.shape);
      continue;
    }
    Tensor t(DType::kF32, s.shape);
    Rng rng(seed, s.name);
    for (float& x : t.as<float>()) x = rng.uniform(-1.0f, 1.0f);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace atl
