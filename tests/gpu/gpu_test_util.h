#pragma once
// Shared by the GPU tests: the skip guard, fresh seeds, and comparisons.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "../error_code_of.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/launch.h"
#include "core/error.h"
#include "core/tensor.h"

// Every GPU test starts with this: without a device the test is skipped, saying why.
#define ATL_REQUIRE_GPU()                                                                      \
  do {                                                                                         \
    if (!::atl::cuda_device_available()) {                                                     \
      GTEST_SKIP() << "no CUDA device: " << ::atl::cuda_unavailable_reason();                  \
    }                                                                                          \
  } while (0)

namespace atl::gputest {

// A LoadContext for cuda::prepare_launch without a device: preparing a launch validates the
// kernel and fills its parameters but never touches device memory, so any aligned address will
// do. Checks on any machine that the CUDA registry accepts a Program's kernels.
class PrepareOnlyContext final : public cuda::LoadContext {
 public:
  explicit PrepareOnlyContext(const Program& p) : formats_(cuda::plan_weight_formats(p)) {}
  void* address(const Binding&) const override { return reinterpret_cast<void*>(uintptr_t{1} << 20); }
  cuda::WeightFormat weight_format(int weight_index) const override {
    return formats_.at(static_cast<size_t>(weight_index));
  }
  const cuda::DeviceInfo& device() const override { return info_; }
  int* index_error_flag() const override { return nullptr; }
  const float* input_f32(const Binding&) const override { return nullptr; }  // the f16 paths

 private:
  std::vector<cuda::WeightFormat> formats_;
  cuda::DeviceInfo info_;
};

// The zoo's model names (one definition for the test files that sweep the zoo).
std::vector<std::string> zoo_names();

// Ops that imported ONNX models bring beyond the zoo's.
bool is_imported_op(OpKind op);

// A fresh seed per call (ATOLL_TEST_SEED pins it to reproduce a failure); tests print it.
uint64_t fresh_seed();

// The CUDA side of an instance; fails the test if the instance is not a CUDA one.
CudaInstance& as_cuda(Instance& inst);

// ||got - want||_2 / ||want||_2 over f32 tensors; infinite on a shape mismatch or a non-finite value.
double rel_l2(const Tensor& got, const Tensor& want);

bool same_bytes(const Tensor& a, const Tensor& b);
bool all_bytes_are(const std::vector<std::byte>& bytes, uint8_t value);

// Sets the flag word through the legacy path and waits, so the next launch sees it.
void set_flag(int* device_flag, int value);

using test::code_of;

}  // namespace atl::gputest
