#pragma once
// Shared by the GPU scheduler tests: the skip guard, byte comparison of outputs, an instance run
// to its end on one stream, and the seed (ATOLL_TEST_SEED repeats a run).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "core/tensor.h"
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

}  // namespace atl::sched
