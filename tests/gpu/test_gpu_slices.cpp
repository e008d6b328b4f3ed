// Padding slices on the GPU (KernelLaunch::launch_slice): for every op case whose kernel runs as
// a tiled GEMM, under every tile choice that slices, pieces of its output tiles on different
// grid caps leave exactly what one launch leaves; a piece writes only its own tiles; and a
// piece launched under a raised flag writes nothing. Grid-stride kernels, one unit each, are
// test_gpu_capped.cpp's.
#include <gtest/gtest.h>

#include "../backends/op_cases.h"
#include "gpu_test_util.h"
#include "op_case_walk.h"

namespace atl {
namespace {

// Units [begin, end) in three pieces, on one block, on seven, and on as many as are resident.
void launch_in_pieces(CudaInstance& gpu, int kernel, int64_t begin, int64_t end, const int* flag) {
  const int64_t third = std::max<int64_t>(1, (end - begin) / 3);
  const int64_t cuts[] = {begin, std::min(end, begin + third), std::min(end, begin + 2 * third), end};
  const int caps[] = {1, 7, 0};
  for (int i = 0; i < 3; ++i) {
    if (cuts[i] < cuts[i + 1]) gpu.launch_slice(kernel, gpu.stream(), flag, cuts[i], cuts[i + 1], caps[i]);
  }
}

void expect_slices_equal_whole(CudaInstance& gpu, const Kernel& kernel, int k, const std::string& what) {
  const int64_t units = gpu.slice_units(k);
  if (units == 0) return;
  const std::vector<std::byte> want = gpu.read_binding(kernel.outputs[0]);
  gpu.poison_binding(kernel.outputs[0], 0xFF);
  gputest::set_flag(gpu.preempt_flag(), 1);
  launch_in_pieces(gpu, k, 0, units, gpu.preempt_flag());
  EXPECT_TRUE(gputest::all_bytes_are(gpu.read_binding(kernel.outputs[0]), 0xFF)) << what << ": wrote under the flag";
  gputest::set_flag(gpu.preempt_flag(), 0);
  if (units >= 2) {
    launch_in_pieces(gpu, k, 0, units / 2, nullptr);
    EXPECT_NE(gpu.read_binding(kernel.outputs[0]), want) << what << ": half the tiles wrote every output";
    launch_in_pieces(gpu, k, units / 2, units, gpu.preempt_flag());
  } else {
    launch_in_pieces(gpu, k, 0, units, gpu.preempt_flag());
  }
  EXPECT_EQ(gpu.read_binding(kernel.outputs[0]), want) << what << ": slices of " << units << " units";
}

TEST(GpuSlices, PiecesOfEveryTiledKernelEqualOneLaunch) {
  ATL_REQUIRE_GPU();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  CudaBackendOptions options;
  options.pingpong = true;  // every tile the device offers
  options.cluster_tile = true;
  auto backend = make_cuda_backend(options);
  int sliced = 0;
  gputest::for_each_launched_kernel(*backend, seed, [&](CudaInstance& gpu, int k, const Kernel& kernel, const std::string& what) {
    if (gpu.slice_units(k) == 0 || gpu.grid_stride(k)) return;  // capped: test_gpu_capped
    expect_slices_equal_whole(gpu, kernel, k, what);
    ++sliced;
  });
  EXPECT_GT(sliced, 20) << "tiled kernels under their slicing tile choices";
  RecordProperty("sliced_kernels", sliced);
}

// A slice outside the kernel's units, or of a kernel that runs only whole, is refused.
TEST(GpuSlices, RangesOutsideTheUnitsAreRefused) {
  ATL_REQUIRE_GPU();
  const opcases::OpCaseData data = opcases::find_op_case("gemm_3d_bias_residual_gelu").build(DType::kF16, 1);
  auto inst = make_cuda_backend({})->load(data.program, data.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  int tiled = -1;
  for (int k = 0; k < static_cast<int>(data.program.kernels.size()); ++k) {
    if (gpu.slice_units(k) > 0 && !gpu.grid_stride(k)) tiled = k;
  }
  if (tiled < 0) GTEST_SKIP() << "the planner chose split-K or GEMV for every GEMM here";
  const int64_t units = gpu.slice_units(tiled);
  EXPECT_EQ(gputest::code_of([&] { gpu.launch_slice(tiled, gpu.stream(), nullptr, 0, units + 1, 0); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.launch_slice(tiled, gpu.stream(), nullptr, 3, 3, 0); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(gputest::code_of([&] { gpu.launch_slice(tiled, gpu.stream(), nullptr, 0, 1, -1); }),
            ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace atl
