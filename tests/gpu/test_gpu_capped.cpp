// Padding's capped grids on the GPU (KernelLaunch::grid_stride): every kernel of every op case
// that claims to be grid-stride, under every GEMM choice (the GEMV claims it), launched whole on
// 1, 7 and 132 blocks writes the bits one launch writes, and launched under a raised flag writes
// nothing.
#include <gtest/gtest.h>

#include "../backends/op_cases.h"
#include "gpu_test_util.h"
#include "op_case_walk.h"

namespace atl {
namespace {

void expect_capped_equals_whole(CudaInstance& gpu, const Kernel& kernel, int k, const std::string& what) {
  ASSERT_EQ(gpu.slice_units(k), 1) << what << ": a grid-stride kernel is one unit";
  const std::vector<std::byte> want = gpu.read_binding(kernel.outputs[0]);
  gpu.poison_binding(kernel.outputs[0], 0xFF);
  gputest::set_flag(gpu.preempt_flag(), 1);
  gpu.launch_slice(k, gpu.stream(), gpu.preempt_flag(), 0, 1, 7);
  EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(kernel.outputs[0]), 0xFF)) << what << ": wrote under the flag";
  gputest::set_flag(gpu.preempt_flag(), 0);
  for (const int cap : {1, 7, 132}) {
    gpu.poison_binding(kernel.outputs[0], 0xFF);
    gpu.launch_slice(k, gpu.stream(), gpu.preempt_flag(), 0, 1, cap);
    EXPECT_EQ(gpu.read_binding(kernel.outputs[0]), want) << what << ": on at most " << cap << " blocks";
  }
}

TEST(GpuCapped, EveryGridStrideKernelOnACappedGridEqualsOneLaunch) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  auto backend = make_cuda_backend({});
  int capped = 0;
  gputest::for_each_launched_kernel(*backend, seed, [&](CudaInstance& gpu, int k, const Kernel& kernel, const std::string& what) {
    if (!gpu.grid_stride(k)) return;
    expect_capped_equals_whole(gpu, kernel, k, what);
    ++capped;
  });
  EXPECT_GT(capped, 40) << "grid-stride kernels: elementwise, pools, data movement, reductions, norms";
  RecordProperty("capped_kernels", capped);
}

// The kernel of `op` in an op case's program.
int kernel_of(const Program& p, OpKind op) {
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    if (p.kernels[k].op == op) return static_cast<int>(k);
  }
  ADD_FAILURE() << "no " << op_name(op) << " kernel in " << p.model;
  return 0;
}

// A capped launch is one unit, on a cap of 0 or more blocks; kernels whose grid the data fixes
// have no capped launch.
TEST(GpuCapped, BadRangesAndFixedGridsAreRefused) {
  ATL_REQUIRE_GPU();
  const opcases::OpCaseData relu = opcases::find_op_case("relu").build(DType::kF16, 1);
  auto inst = make_cuda_backend({})->load(relu.program, relu.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  const int r = kernel_of(relu.program, OpKind::kRelu);
  ASSERT_TRUE(gpu.grid_stride(r));
  EXPECT_EQ(gputest::code_of([&] { gpu.launch_slice(r, gpu.stream(), nullptr, 0, 2, 7); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.launch_slice(r, gpu.stream(), nullptr, 0, 1, -1); }),
            ErrorCode::kInvalidArgument);
  const opcases::OpCaseData attention = opcases::find_op_case("attention_heads").build(DType::kF16, 1);
  auto fixed = make_cuda_backend({})->load(attention.program, attention.weights);
  CudaInstance& agpu = gputest::as_cuda(*fixed);
  const int a = kernel_of(attention.program, OpKind::kAttention);
  EXPECT_FALSE(agpu.grid_stride(a));
  EXPECT_EQ(agpu.slice_units(a), 0);
  EXPECT_EQ(gputest::code_of([&] { agpu.launch_slice(a, agpu.stream(), nullptr, 0, 1, 7); }),
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace atl
