// Launch shapes for the simulated GPU: how many blocks a kernel has and how long each runs.
#include <algorithm>
#include <cmath>

#include "backends/sim/sim_gpu.h"
#include "core/error.h"
#include "ir/op_attrs.h"

namespace atl::sim {

namespace {

int64_t out_elems_of(const Kernel& k) {
  int64_t n = 0;
  for (const Binding& b : k.outputs) n += b.shape.numel();
  return std::max<int64_t>(1, n);
}

// One block per elems_per_block output elements; a grid whose blocks would run longer than
// split_block_ns gets more blocks, up to one per slot, as split-K GEMMs and reductions do.
int64_t grid_blocks(const Kernel& k, double work_slot_ns, const SimGpuConfig& config) {
  const int64_t blocks = (out_elems_of(k) + config.elems_per_block - 1) / config.elems_per_block;
  const auto split = static_cast<int64_t>(std::ceil(work_slot_ns / static_cast<double>(config.split_block_ns)));
  return std::max(blocks, std::min(config.slot_count(), split));
}

// The share of a block's work between two flag reads that can stop it.
double check_fraction(const Kernel& k, const SimKernelShape& s, const SimGpuConfig& c) {
  const double gemm_k = k.flops / (2.0 * static_cast<double>(out_elems_of(k)));
  // The TMA GEMM takes K in whole tiles of kTmaChannels (per filter tap for a convolution).
  const auto gemm = [&](bool tma) {
    return 2.0 * static_cast<double>(tma ? c.tma_gemm_check_k : c.gemm_check_k) / std::max(1.0, gemm_k);
  };
  constexpr int64_t kTmaChannels = 64;
  if (k.op == OpKind::kGemm || k.op == OpKind::kMatMul) {
    return gemm(std::llround(gemm_k) % kTmaChannels == 0);
  }
  if (runs_as_gemm(k)) return gemm(k.inputs[1].shape[1] % kTmaChannels == 0);
  const double elems_per_block = static_cast<double>(out_elems_of(k)) / static_cast<double>(s.blocks);
  // Each item tests the read made during the item before it: two items between a raise and the stop.
  return 2.0 * static_cast<double>(c.item_elems) / std::max(1.0, elems_per_block);
}

}  // namespace

bool runs_as_gemm(const Kernel& k) {
  if (k.op == OpKind::kGemm || k.op == OpKind::kMatMul) return true;
  if (k.op != OpKind::kConv2d || k.inputs.size() < 2 || k.inputs[1].shape.rank() != 4) return false;
  const Shape& w = k.inputs[1].shape;  // [O, C/group, kh, kw]
  // Every other convolution, image stems included, is an implicit GEMM on the CUDA backend.
  return !(conv2d_params(k.attrs).group > 1 && w[1] == 1);
}

bool runs_grid_stride(const Kernel& k) {
  if (is_unary_elementwise(k.op) || is_binary_elementwise(k.op)) return true;
  switch (k.op) {
    case OpKind::kMaxPool:
    case OpKind::kAvgPool:
    case OpKind::kGlobalAvgPool:
    case OpKind::kReduceMean:
    case OpKind::kCast:
    case OpKind::kScaleShift:
    case OpKind::kTranspose:
    case OpKind::kLayoutToNHWC:
    case OpKind::kLayoutToNCHW:
    case OpKind::kSlice:
    case OpKind::kConcat:
    case OpKind::kGather:
    case OpKind::kSoftmax:
    case OpKind::kLayerNorm: return true;
    case OpKind::kConv2d: return !runs_as_gemm(k);  // depthwise: the direct kernel
    default: return false;
  }
}

bool sim_grid_stride(const Kernel& k, int index) {
  return index > 0 && runs_grid_stride(k);
}

int64_t sim_slice_units(const Kernel& k, int index, const SimKernelShape& s) {
  if (sim_grid_stride(k, index)) return 1;
  return index > 0 && s.blocks >= 2 && runs_as_gemm(k) ? s.blocks : 0;
}

SimTime check_ns_of(const Kernel& k, const SimKernelShape& s, const SimGpuConfig& config) {
  const double f = std::min(1.0, check_fraction(k, s, config));
  return std::max<SimTime>(1, static_cast<SimTime>(std::llround(f * static_cast<double>(s.block_ns))));
}

std::vector<SimKernelShape> roofline_shapes(const Program& program, const SimGpuConfig& config) {
  const auto slots = static_cast<double>(config.slot_count());
  std::vector<SimKernelShape> shapes;
  shapes.reserve(program.kernels.size());
  for (const Kernel& k : program.kernels) {
    // Full-GPU roofline time, spread over the slots: the slot-time the whole grid needs.
    const double gpu_s = std::max(k.flops / config.peak_flops, k.bytes_moved / config.peak_bytes_per_s);
    const double work_slot_ns = gpu_s * 1e9 * slots;
    const int64_t blocks = grid_blocks(k, work_slot_ns, config);
    const auto block_ns = static_cast<SimTime>(std::llround(work_slot_ns / static_cast<double>(blocks)));
    SimKernelShape shape{blocks, std::max(config.block_floor_ns, block_ns)};
    shape.check_ns = check_ns_of(k, shape, config);
    shapes.push_back(shape);
  }
  return shapes;
}

}  // namespace atl::sim
