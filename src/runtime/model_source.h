#pragma once
// One model source for every runner of zoo models beside a Session (colocate, DISB, the GPU
// scheduler tests): a zoo model at a batch size compiled for a device's target, and the inputs
// its requests send. It takes the target, not a device, so that the scheduler depends on the
// runtime and never the reverse.
#include <cstdint>
#include <string>
#include <vector>

#include "compile/compiler.h"
#include "models/zoo.h"

namespace atl {

struct ZooModel {
  std::string name;
  int64_t batch = 1;
  uint64_t seed = 0;                         // weights
  int64_t seq_len = ModelOptions{}.seq_len;  // BERT models only
};

// Builds a zoo model and compiles it for `target`. A device that computes gets the zoo's seeded
// weights; for a timing-only one the model compiles on zeros and the result holds no weights. `inflight_cap` is
// the scheduler's: the plan keeps buffers apart for that many kernels in flight.
CompiledModel compile_zoo_model(const ZooModel& model, const CompileTarget& target, bool computes,
                                int inflight_cap = 4);

// Inputs for every request of a model: floats uniform in [-1, 1); indices 0, valid for every table.
std::vector<Tensor> seeded_inputs(const Program& program, uint64_t seed);

}  // namespace atl
