#include "runtime/model_source.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/rng.h"
#include "onnx/onnx_import.h"

namespace atl {

Graph load_model_graph(const std::string& model, const ModelOptions& options) {
  if (!is_onnx_path(model)) return build_model(model, options);
  OnnxImportOptions onnx;
  onnx.batch = options.batch;
  onnx.dims = options.dims;
  return import_onnx_file(model, onnx);
}

void check_model_exists(const std::string& model) {
  if (is_onnx_path(model)) {
    std::error_code ec;
    ATOLL_CHECK(std::filesystem::is_regular_file(model, ec), kNotFound, "ONNX model '{}' does not exist", model);
    return;
  }
  std::string names;
  for (const ModelInfo& m : list_models()) {
    if (m.name == model) return;
    names += (names.empty() ? "" : ", ") + m.name;
  }
  ATOLL_THROW(kNotFound, "unknown model '{}' (models: {}, or a path to an .onnx file)", model, names);
}

CompiledModel compile_zoo_model(const ZooModel& model, const CompileTarget& target, bool computes, int inflight_cap) {
  ModelOptions mo;
  mo.batch = model.batch;
  mo.seq_len = model.seq_len;
  mo.seed = model.seed;
  mo.init_weights = false;
  Graph g = load_model_graph(model.name, mo);
  if (!is_onnx_path(model.name)) {  // an imported model carries its file's weights on every device
    if (computes) {
      g.init_weights(model.seed);
    } else {
      for (const Value& v : g.values()) {
        if (v.kind == ValueKind::kWeight) g.weights()[v.name] = Tensor(v.dtype, v.shape);
      }
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
    Rng rng(seed, s.name);
    if (!is_float(s.dtype)) {
      // Indices 0 and 1 are valid for every table a zoo or imported model gathers from (BERT's
      // token types have two rows) and as mask values; random, so two seeds give two requests.
      Tensor ids(DType::kI64, s.shape);
      for (int64_t& v : ids.as<int64_t>()) v = static_cast<int64_t>(rng.next_u64() % 2);
      inputs.push_back(std::move(ids));
      continue;
    }
    Tensor t(DType::kF32, s.shape);
    for (float& x : t.as<float>()) x = rng.uniform(-1.0f, 1.0f);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace atl
