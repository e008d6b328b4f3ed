#pragma once
// Shared by the GPU scheduler tests: the skip guard, byte comparison of outputs, an instance run
// to its end on one stream, the seed (ATOLL_TEST_SEED repeats a run), and a BE and an RT model
// loaded on one CUDA device.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "core/tensor.h"
#include "runtime/model_source.h"
#include "sched/cuda_exec_device.h"
#include "sched/exec_device.h"

#define REQUIRE_GPU()                                                                                            \
  do {                                                                                                           \
    if (!::atl::cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << ::atl::cuda_unavailable_reason(); \
  } while (0)

namespace atl::sched {

inline bool same_bytes(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  }
  return true;
}

inline std::vector<Tensor> run_to_end(ExecDevice& d, StreamId s, InstanceId inst, int from) {
  const int n = static_cast<int>(d.program(inst).kernels.size());
  for (int k = from; k < n; ++k) d.launch(s, inst, k, LaunchOptions{true, false});
  d.synchronize(s);
  if (auto e = d.take_error(s)) std::rethrow_exception(e);
  return d.read_outputs(inst, s);
}

inline uint64_t test_seed() {
  if (const char* s = std::getenv("ATOLL_TEST_SEED")) return std::stoull(s);
  return static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
}

// A BE and an RT model compiled and loaded on one CUDA device, and the reference outputs of an
// instance for given inputs (its whole program on a stream of its own, unpreempted).
struct LoadedPair {
  std::unique_ptr<ExecDevice> device;
  CompiledModel be_model, rt_model;
  InstanceId be_inst = -1, rt_inst = -1;
  StreamId ref_stream = -1;
  std::vector<Tensor> reference(InstanceId inst, const std::vector<Tensor>& inputs) {
    device->write_inputs(inst, ref_stream, inputs);
    return run_to_end(*device, ref_stream, inst, 0);
  }
};

inline LoadedPair load_pair(const std::string& be, const std::string& rt) {
  LoadedPair p;
  p.device = make_cuda_exec_device();
  p.be_model = compile_zoo_model({.name = be, .seed = 1}, p.device->target(), true);
  p.rt_model = compile_zoo_model({.name = rt, .seed = 2}, p.device->target(), true);
  p.be_inst = p.device->load(p.be_model.program, p.be_model.weights);
  p.rt_inst = p.device->load(p.rt_model.program, p.rt_model.weights);
  p.ref_stream = p.device->create_stream(StreamPriority::kLow);
  return p;
}

}  // namespace atl::sched
