#include "backends/cuda/cuda_backend.h"

#include <array>
#include <charconv>
#include <cstdlib>
#include <string_view>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_instance.h"
#include "backends/cuda/kernel_params.h"
#include "backends/cuda/tune_cache.h"
#include "backends/engine_target.h"
#include "core/env.h"
#include "core/error.h"

namespace atl {

namespace {

// The oldest compute capability this build carries code for (from ATOLL_CUDA_ARCHITECTURES).
constexpr int kMinArch = ATL_CUDA_MIN_ARCH;

constexpr int kMaxCheckTiles = 16;     // K tiles
constexpr int kMaxEpiCheckChunks = 8;  // a 128x256 tile's chunks

// The flag-check distances (CudaBackendOptions::gemm_check_tiles, gemm_epi_check_chunks) are
// powers of two, so the kernels test them with a mask.
bool power_of_two_up_to(int v, int max) {
  return v >= 1 && v <= max && (v & (v - 1)) == 0;
}

// "1, 2, 4 or 8" for 8.
std::string powers_of_two_up_to(int max) {
  std::string list = "1";
  for (int v = 2; v <= max; v *= 2) list += fmt::format("{} {}", v < max ? "," : " or", v);
  return list;
}

// A distance from the environment, refused by name unless it is written as one of those.
void read_distance(const char* name, int max, int& out) {
  const char* raw = std::getenv(name);
  if (raw == nullptr) return;
  const std::string_view v(raw);
  int n = 0;
  std::from_chars(v.data(), v.data() + v.size(), n);
  ATOLL_CHECK(power_of_two_up_to(n, max) && v == std::to_string(n), kInvalidArgument, "{} must be {}, not '{}'", name,
              powers_of_two_up_to(max), v);
  out = n;
}

std::string probe_device() {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return fmt::format("cudaGetDeviceCount: {}", cudaGetErrorString(err));
  }
  if (count == 0) return "no CUDA device present";
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) {
    cudaGetLastError();
    return "cudaGetDeviceProperties failed on device 0";
  }
  if (prop.major * 10 + prop.minor < kMinArch) {
    return fmt::format("{} is sm_{}{}; this build needs sm_{} or newer (set ATOLL_CUDA_ARCHITECTURES)", prop.name,
                       prop.major, prop.minor, kMinArch);
  }
  return "";
}

const std::string& unavailable_reason() {
  static const std::string reason = probe_device();
  return reason;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& options) : device_(options.device) {
    const int device = options.device;
    ATOLL_CHECK(cuda_device_available(), kUnsupported, "CUDA backend: {}", unavailable_reason());
    int count = 0;
    ATL_CUDA_CHECK(cudaGetDeviceCount(&count));
    ATOLL_CHECK(device >= 0 && device < count, kInvalidArgument, "CUDA device {} does not exist ({} present)", device,
                count);
    cudaDeviceProp prop{};
    ATL_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    info_.sm_count = prop.multiProcessorCount;
    info_.smem_optin = prop.sharedMemPerBlockOptin;
    info_.wgmma = options.wgmma && cuda::wgmma_gemm_built() && prop.major == 9 && prop.minor == 0;
    info_.tma_im2col = info_.wgmma && options.tma_im2col;
    info_.pingpong = info_.wgmma && options.pingpong;
    info_.dual_tile = info_.wgmma && options.dual_tile;
    info_.cluster_tile = info_.wgmma && options.cluster_tile && cuda::cluster_gemm_supported();
    info_.gemv = options.gemv;
    const int check = options.gemm_check_tiles;
    ATOLL_CHECK(power_of_two_up_to(check, kMaxCheckTiles), kInvalidArgument,
                "CUDA backend: GEMM check tiles must be {}, not {}", powers_of_two_up_to(kMaxCheckTiles), check);
    info_.gemm_check_tiles = check;
    const int epi = options.gemm_epi_check_chunks;
    ATOLL_CHECK(power_of_two_up_to(epi, kMaxEpiCheckChunks), kInvalidArgument,
                "CUDA backend: GEMM epilogue check chunks must be {}, not {}", powers_of_two_up_to(kMaxEpiCheckChunks),
                epi);
    info_.gemm_epi_check_chunks = epi;
    head_views_ = options.head_views;
    gemm_groups_ = options.gemm_groups;
    fused_attention_ = options.fused_attention;
    ATOLL_CHECK(options.program_graphs >= 1, kInvalidArgument, "CUDA backend: program graphs must be >= 1, not {}",
                options.program_graphs);
    program_graphs_ = options.program_graphs;
    upload_copy_ = options.upload_copy;
    tuning_.autotune = options.autotune;
    tuning_.cache_path = options.tune_cache;
    int driver = 0, runtime = 0;
    ATL_CUDA_CHECK(cudaDriverGetVersion(&driver));
    ATL_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
    // Everything that changes which choices exist or which is fastest (the versions count kernel
    // revisions: v4 and v3 add the 128x64 TMA tile and the epilogue's grouped loads, v5 and v4 the
    // staged epilogue's addends loaded a chunk ahead, v6 and v5 the 128x64 tile two blocks per SM).
    tuning_.device_key = fmt::format("{} | sm_{}{} x{} | driver {} runtime {} | gemm kernels {}{}{}{}{}", prop.name,
                                     prop.major, prop.minor, prop.multiProcessorCount, driver, runtime,
                                     !info_.wgmma      ? "mma.sync v2"
                                     : info_.tma_im2col ? "mma.sync+wgmma+tma+im2col v6"
                                                        : "mma.sync+wgmma+tma v5",
                                     info_.pingpong ? "+pingpong v1" : "", info_.dual_tile ? "+dual v1" : "",
                                     info_.cluster_tile ? "+cluster v1" : "", info_.gemv ? "+gemv v1" : "",
                                     fmt::format(" check {} epi {}", check, epi));
    description_ = fmt::format("{} (sm_{}{}, {} SMs, {} MiB, L2 {} MiB)", prop.name, prop.major, prop.minor,
                               prop.multiProcessorCount, prop.totalGlobalMem >> 20, prop.l2CacheSize >> 20);
  }

  std::string name() const override { return "cuda"; }
  std::string device_description() const override { return description_; }
  CompileTarget target() const override { return cuda_engine_target(head_views_, gemm_groups_, fused_attention_); }
  std::unique_ptr<Instance> load(const Program& program, const WeightStore& weights) override {
    auto instance = std::make_unique<cuda::CudaInstanceImpl>(program, weights, device_, info_, tuning_);
    instance->set_program_graphs(program_graphs_);
    instance->set_upload_copy(upload_copy_);
    return instance;
  }

 private:
  int device_;
  cuda::TuneSettings tuning_;
  cuda::DeviceInfo info_;
  bool head_views_ = false;   // CudaBackendOptions::head_views
  bool gemm_groups_ = false;  // CudaBackendOptions::gemm_groups
  bool fused_attention_ = false;  // CudaBackendOptions::fused_attention
  int program_graphs_ = 1;    // CudaBackendOptions::program_graphs
  UploadCopy upload_copy_;    // CudaBackendOptions::upload_copy
  std::string description_;
};

}  // namespace

bool cuda_device_available() { return unavailable_reason().empty(); }

std::string cuda_unavailable_reason() { return unavailable_reason(); }

std::string cuda_pci_bus_id(int device) {
  std::array<char, 32> bus{};
  ATL_CUDA_CHECK(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), device));
  return bus.data();
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

std::unique_ptr<Backend> make_cuda_backend(int device) {
  CudaBackendOptions options;
  options.device = device;
  options.autotune = env_switch("ATOLL_CUDA_AUTOTUNE", true);
  options.wgmma = env_switch("ATOLL_CUDA_WGMMA", true);
  options.tma_im2col = env_switch("ATOLL_CUDA_TMA_IM2COL", true);
  options.pingpong = env_switch("ATOLL_CUDA_PINGPONG", false);
  options.dual_tile = env_switch("ATOLL_CUDA_DUAL_TILE", true);
  options.cluster_tile = env_switch("ATOLL_CUDA_CLUSTER_TILE", false);
  options.gemv = env_switch("ATOLL_CUDA_GEMV", true);
  options.head_views = env_switch("ATOLL_CUDA_HEAD_VIEWS", true);
  options.gemm_groups = env_switch("ATOLL_CUDA_GEMM_GROUPS", true);
  options.fused_attention = env_switch("ATOLL_CUDA_FUSED_ATTENTION", true);
  if (const char* graphs = std::getenv("ATOLL_CUDA_PROGRAM_GRAPHS")) {
    const std::string_view v(graphs);
    ATOLL_CHECK(v == "1" || v == "2", kInvalidArgument, "ATOLL_CUDA_PROGRAM_GRAPHS must be 1 or 2, not '{}'", v);
    options.program_graphs = v == "1" ? 1 : 2;
  }
  if (const char* blocks = std::getenv("ATOLL_CUDA_UPLOAD_BLOCKS")) {
    const std::string_view v(blocks);
    int n = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    ATOLL_CHECK(ec == std::errc() && end == v.data() + v.size() && n >= 1 && n <= 1024, kInvalidArgument,
                "ATOLL_CUDA_UPLOAD_BLOCKS must be a whole number from 1 to 1024, not '{}'", v);
    options.upload_copy.blocks = n;
  }
  read_distance("ATOLL_CUDA_GEMM_CHECK_TILES", kMaxCheckTiles, options.gemm_check_tiles);
  read_distance("ATOLL_CUDA_GEMM_EPI_CHECK_CHUNKS", kMaxEpiCheckChunks, options.gemm_epi_check_chunks);
  if (const char* flag = std::getenv("ATOLL_CUDA_UPLOAD_FLAG")) {
    const std::string_view v(flag);
    ATOLL_CHECK(v == "ahead" || v == "fresh", kInvalidArgument, "ATOLL_CUDA_UPLOAD_FLAG must be ahead or fresh, not '{}'",
                v);
    options.upload_copy.fresh_flag = v == "fresh";
  }
  options.tune_cache = cuda::default_tune_cache_path();
  return make_cuda_backend(options);
}

}  // namespace atl
