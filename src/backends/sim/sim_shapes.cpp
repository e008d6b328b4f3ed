// Launch shapes for the simulated GPU: how many blocks a kernel has and how long each runs.
#include <algorithm>
#include <cmath>

#include "backends/sim/sim_gpu.h"
#include "core/error.h"

namespace atl::sim {

namespace {

// Grid size model: one block per elems_per_block output elements; a long kernel with a small
// output (a GEMV, a reduction) is split over every slot, as split-K kernels do.
int64_t grid_blocks(const Kernel& k, SimTime kernel_ns, const SimGpuConfig& config, int64_t slots) {
  int64_t out_elems = 0;
  for (const Binding& b : k.outputs) out_elems += b.shape.numel();
  int64_t blocks = std::max<int64_t>(1, (out_elems + config.elems_per_block - 1) / config.elems_per_block);
  if (kernel_ns > config.split_threshold_ns) blocks = std::max(blocks, slots);
  return blocks;
}

// Block time so that the grid, run alone in ceil(blocks / slots) waves, takes `kernel_ns`.
SimKernelShape shape_for(int64_t blocks, SimTime kernel_ns, int64_t slots) {
  const int64_t waves = (blocks + slots - 1) / slots;
  return SimKernelShape{blocks, std::max<SimTime>(1, kernel_ns / waves)};
}

}  // namespace

std::vector<SimKernelShape> roofline_shapes(const Program& program, const SimGpuConfig& config) {
  const int64_t slots = static_cast<int64_t>(config.sm_count) * config.blocks_per_sm;
  std::vector<SimKernelShape> shapes;
  shapes.reserve(program.kernels.size());
  for (const Kernel& k : program.kernels) {
    const double seconds = std::max(k.flops / config.peak_flops, k.bytes_moved / config.peak_bytes_per_s);
    const SimTime kernel_ns = std::max(config.kernel_floor_ns, static_cast<SimTime>(std::llround(seconds * 1e9)));
    shapes.push_back(shape_for(grid_blocks(k, kernel_ns, config, slots), kernel_ns, slots));
  }
  return shapes;
}

std::vector<SimKernelShape> profiled_shapes(const Program& program, const std::vector<double>& kernel_ms,
                                            const SimGpuConfig& config) {
  ATOLL_CHECK(kernel_ms.size() == program.kernels.size(), kInvalidArgument,
              "profile has {} kernel times; program '{}' has {} kernels", kernel_ms.size(), program.model,
              program.kernels.size());
  const int64_t slots = static_cast<int64_t>(config.sm_count) * config.blocks_per_sm;
  std::vector<SimKernelShape> shapes;
  shapes.reserve(program.kernels.size());
  for (size_t i = 0; i < kernel_ms.size(); ++i) {
    ATOLL_CHECK(std::isfinite(kernel_ms[i]) && kernel_ms[i] > 0, kInvalidArgument,
                "profiled time of kernel {} ('{}') is {} ms; it must be positive", i, program.kernels[i].name,
                kernel_ms[i]);
    const SimTime kernel_ns = std::max<SimTime>(1, static_cast<SimTime>(std::llround(kernel_ms[i] * 1e6)));
    shapes.push_back(shape_for(grid_blocks(program.kernels[i], kernel_ns, config, slots), kernel_ns, slots));
  }
  return shapes;
}

}  // namespace atl::sim
