#pragma once
// The CUDA kernel registry. At load, prepare_launch() validates one Program kernel (can_implement:
// dtypes, layouts, shapes) and precomputes everything its launch needs (grid, pointers, tile
// choice), so the run path is a loop of KernelLaunch::launch calls and nothing else.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/kernel_params.h"
#include "program/program.h"

namespace atl::cuda {

struct DeviceInfo {
  int sm_count = 0;
  bool wgmma = false;  // sm_90 device and an sm_90a build: the Hopper GEMM tiles are offered
  bool tma_im2col = false;  // and the TMA tiles to im2col convolutions (CudaBackendOptions)
  bool pingpong = false;    // and the ping-pong TMA tile (CudaBackendOptions)
  bool dual_tile = false;   // and the two-blocks-per-SM TMA tile (CudaBackendOptions)
  bool cluster_tile = false;  // and the two-block cluster TMA tile (CudaBackendOptions)
  bool gemv = false;        // the GEMV path is offered (CudaBackendOptions::gemv, any device)
  int gemm_check_tiles = 4;  // K tiles between the TMA GEMM's flag checks (CudaBackendOptions)
  int gemm_epi_check_chunks = 2;  // chunks between the wgmma epilogue's flag checks (CudaBackendOptions)
  size_t smem_optin = 0;    // shared memory one block may take (cudaDeviceProp::sharedMemPerBlockOptin)
};

// How a weight is stored on the device. Parameters read in f32 by epilogues and normalizations
// stay f32; matrix operands and tables become f16; depthwise filters are also reordered to
// [kh][kw][C][O], output channels fastest (kTapsMajor); an image stem's filter [O, kh, kw, C] is
// stored [O, kh, kw, 8], zeros past C (kChannelsPadded8).
enum class WeightFormat : uint8_t { kParamF32, kHalf, kTapsMajor, kChannelsPadded8, kInt64 };

// Device buffers the backend carves (weights, inputs and outputs, workspace parts) start at
// multiples of this, which every vector load and TMA descriptor accepts.
constexpr size_t kDeviceAlignment = 256;
constexpr size_t align_up(size_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

// Depthwise convolutions run a direct kernel instead of the implicit GEMM.
bool is_depthwise_conv(const Kernel& k);
// Image stems (group 1, at most 4 input channels): the implicit GEMM over channels padded to 8.
bool is_small_channel_conv(const Kernel& k);

// Resolves bindings to device memory for the kernels being prepared.
class LoadContext {
 public:
  virtual ~LoadContext() = default;
  virtual void* address(const Binding& b) const = 0;
  virtual WeightFormat weight_format(int weight_index) const = 0;
  virtual const DeviceInfo& device() const = 0;
  virtual int* index_error_flag() const = 0;  // set by Gather on an out-of-range index
  // A graph input the host sends as f32 and the device stores as f16 keeps its f32 upload on the
  // device (logical order, the conversion's source, written by the upload only): b's elements
  // there, or nullptr when b is no such input or is stored NHWC.
  virtual const float* input_f32(const Binding& b) const = 0;
};

// A GEMM-backed kernel's tile choice; exposed so tools can list and time the alternatives.
struct GemmChoice {
  GemmTile tile = GemmTile::k64x64;
  int splits = 1;
  friend bool operator==(const GemmChoice& a, const GemmChoice& b) { return a.tile == b.tile && a.splits == b.splits; }
};

class KernelLaunch {
 public:
  explicit KernelLaunch(std::string name) : name_(std::move(name)) {}
  virtual ~KernelLaunch() = default;
  // Enqueues the kernel (one or more CUDA launches) on `stream`. Never allocates or synchronizes.
  virtual void launch(cudaStream_t stream, const int* preempt_flag) const = 0;
  // Scratch this kernel needs; the instance allocates one buffer for the largest and binds it.
  virtual size_t workspace_bytes() const { return 0; }
  virtual void bind_workspace(void* /*workspace*/) {}
  // GEMM-backed kernels only: the tile choices they support and the one in use.
  virtual std::vector<GemmChoice> gemm_choices() const { return {}; }
  virtual GemmChoice gemm_choice() const { return {}; }
  virtual void set_gemm_choice(const GemmChoice& /*choice*/) {}
  // Workspace a choice would need (so a tuner can size the buffer before trying it).
  virtual size_t workspace_bytes_for(const GemmChoice& /*choice*/) const { return 0; }
  // Kernels with equal keys run the same code on the same geometry, so one tuning serves all.
  virtual std::string tune_key() const { return {}; }
  // Padding's capped grids: whether every CUDA launch of the kernel is a grid-stride loop over a
  // grid that blocks_for or resident_row_blocks sizes (device_common.cuh), so that it writes the
  // same outputs on any grid and can run whole on a few SMs beside an RT task. Such a kernel has
  // one slice unit, itself, which launch_slice runs under a GridCapScope of max_blocks.
  virtual bool grid_stride() const { return false; }
  // Padding slices: the independent units (output tiles, and their splits under split-K) the
  // kernel can run in pieces of, each writing only its own outputs; 1 for a grid-stride kernel
  // (the whole of it, on a capped grid); 0 where it runs only whole (attention).
  virtual int64_t slice_units() const { return grid_stride() ? 1 : 0; }
  // Enqueues units [begin, end) of one launch on at most `max_blocks` blocks (0: as many as are
  // resident). Pieces that cover every unit once, in order on one stream, leave what one
  // launch() leaves (a split-K GEMM sums its partials behind the piece that ends at the last unit).
  // By default: a grid-stride kernel whole on its capped grid; kUnsupported for any other.
  virtual void launch_slice(cudaStream_t stream, const int* preempt_flag, int64_t begin, int64_t end,
                            int max_blocks) const;
  const std::string& name() const { return name_; }

 protected:
  // Throws kInvalidArgument unless [begin, end) is a non-empty range of slice_units().
  void check_slice(int64_t begin, int64_t end, int max_blocks) const;

 private:
  std::string name_;
};

// How a launcher sizes its grids: by the data (kFixed) or as a grid-stride loop whose every
// launch takes its grid from blocks_for or resident_row_blocks (kStride: KernelLaunch::grid_stride).
enum class Grid : uint8_t { kFixed, kStride };

// A kernel whose launch is one launcher call over parameters fixed at load.
template <typename Params>
class ParamLaunch final : public KernelLaunch {
 public:
  using Launcher = void (*)(const Params&, cudaStream_t, const int*, const char*);
  ParamLaunch(std::string name, const Params& params, Launcher launcher, Grid grid)
      : KernelLaunch(std::move(name)), params_(params), launcher_(launcher), grid_(grid) {}
  void launch(cudaStream_t stream, const int* preempt_flag) const override {
    launcher_(params_, stream, preempt_flag, name().c_str());
  }
  bool grid_stride() const override { return grid_ == Grid::kStride; }

 private:
  Params params_;
  Launcher launcher_;
  Grid grid_;
};

template <typename Params>
std::unique_ptr<KernelLaunch> make_param_launch(const Kernel& k, const Params& params,
                                                typename ParamLaunch<Params>::Launcher launcher, Grid grid) {
  return std::make_unique<ParamLaunch<Params>>(k.name, params, launcher, grid);
}

// The one dispatch point: op -> entry. Throws kUnsupported naming the kernel when it cannot run.
std::unique_ptr<KernelLaunch> prepare_launch(const Kernel& k, const LoadContext& ctx);

// How each weight of `p` must be stored; throws kUnsupported for a weight used in two roles.
std::vector<WeightFormat> plan_weight_formats(const Program& p);

// Entry points, one per op family (ops_*.cpp).
std::unique_ptr<KernelLaunch> prepare_conv2d(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_gemm(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_matmul(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_attention(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_pool(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_global_avg_pool(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_unary(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_binary(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_scale_shift(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_transpose(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_layout_cast(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_slice(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_concat(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_gather(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_reduce_mean(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_cast(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_softmax(const Kernel& k, const LoadContext& ctx);
std::unique_ptr<KernelLaunch> prepare_layer_norm(const Kernel& k, const LoadContext& ctx);

// Shared validation helpers for the entry points (throw kUnsupported).
void expect_arity(const Kernel& k, size_t inputs, size_t outputs);
void expect_half(const Binding& b, const char* role);
void expect_layout(const Binding& b, Layout layout, const char* role);
const __half* half_in(const Kernel& k, const LoadContext& ctx, size_t i, const char* role);
__half* half_out(const Kernel& k, const LoadContext& ctx, size_t i);
// An f32 parameter weight (bias, scale, shift, gamma, beta).
const float* param_in(const Kernel& k, const LoadContext& ctx, size_t i, const char* role);
// Shape as stored: [N, H, W, C] for NHWC tensors, the logical shape otherwise.
Shape physical_shape(const Binding& b);
// Logical axis -> axis of the stored shape (NHWC moves the channel axis last).
int physical_axis(const Binding& b, int logical);
int normalize_axis(int64_t axis, int rank);
int act_code(const Kernel& k);

}  // namespace atl::cuda
