#pragma once
// One model source for every runner beside a Session (colocate, DISB, the GPU scheduler tests):
// a zoo model or an ONNX file at a batch size compiled for a device's target, and the inputs its
// requests send. It takes the target, not a device, so that the scheduler depends on the
// runtime and never the reverse.
#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "models/zoo.h"

namespace atl {

// The one way every layer turns a model name into a graph with weights: a zoo name (seeded weights
// unless options.init_weights is false) or a path ending in .onnx (imported; the initializers are
// the weights, the batch fills a symbolic first dimension, options.dims the other symbolic ones).
Graph load_model_graph(const std::string& model, const ModelOptions& options);

// Throws kNotFound, listing the zoo's names, unless `model` is a zoo name or an existing .onnx file.
void check_model_exists(const std::string& model);

struct ZooModel {
  std::string name;
  int64_t batch = 1;
  uint64_t seed = 0;                         // weights
  int64_t seq_len = ModelOptions{}.seq_len;  // BERT models only
};

// Builds a zoo model (or imports an ONNX file) and compiles it for `target`. A device that
// computes gets the zoo's seeded weights; for a timing-only one a zoo model compiles on zeros and
// the result holds no weights. An ONNX model carries its file's weights on every device. `inflight_cap` is
// the scheduler's: the plan keeps buffers apart for that many kernels in flight.
CompiledModel compile_zoo_model(const ZooModel& model, const CompileTarget& target, bool computes,
                                int inflight_cap = 4);

// Inputs for every request of a model: floats uniform in [-1, 1); indices 0, valid for every table.
std::vector<Tensor> seeded_inputs(const Program& program, uint64_t seed);

}  // namespace atl
