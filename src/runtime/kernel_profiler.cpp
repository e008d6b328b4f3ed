// CUDA builds only: the header includes the CUDA backend's.
#ifdef ATOLL_HAVE_CUDA
#include "runtime/kernel_profiler.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/timing.h"
#include "backends/cuda/exit_probe.h"
#include "core/error.h"
#include "core/stats.h"
#include "ir/op.h"

namespace atl {

namespace {

struct Geometry {
  int64_t grid_blocks = 0;
  int threads_per_block = 0;
  int resident_blocks_per_sm = 0;
  int launches = 0;
};

// The kernel's device launches as a stream capture records them (nothing runs); the largest
// grid stands for the kernel. Capture is thread-local: other threads' CUDA calls go on.
Geometry capture_geometry(CudaInstance& gpu, int kernel, cudaStream_t stream) {
  ATL_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  try {
    gpu.launch(kernel, stream, gpu.preempt_flag());
  } catch (...) {
    cudaGraph_t abandoned = nullptr;
    cudaStreamEndCapture(stream, &abandoned);  // already failing: the capture's own error adds nothing
    if (abandoned != nullptr) cudaGraphDestroy(abandoned);
    throw;
  }
  cudaGraph_t graph = nullptr;
  ATL_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  struct GraphOwner {
    cudaGraph_t g;
    ~GraphOwner() { cudaGraphDestroy(g); }
  } owner{graph};
  size_t count = 0;
  ATL_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  ATL_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  Geometry g;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    ATL_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type != cudaGraphNodeTypeKernel) continue;
    cudaKernelNodeParams p{};
    ATL_CUDA_CHECK(cudaGraphKernelNodeGetParams(node, &p));
    ++g.launches;
    const int64_t blocks = int64_t{p.gridDim.x} * p.gridDim.y * p.gridDim.z;
    if (blocks <= g.grid_blocks) continue;
    g.grid_blocks = blocks;
    g.threads_per_block = static_cast<int>(p.blockDim.x * p.blockDim.y * p.blockDim.z);
    ATL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&g.resident_blocks_per_sm, p.func, g.threads_per_block,
                                                                 p.sharedMemBytes));
  }
  ATOLL_CHECK(g.launches > 0 && g.resident_blocks_per_sm > 0, kCuda,
              "kernel {} ('{}') launched no kernel the occupancy calculator accepts", kernel,
              gpu.program().kernels[static_cast<size_t>(kernel)].name);
  return g;
}

// Median of single launches, each between two events, all enqueued behind a host gate.
double time_alone_us(CudaInstance& gpu, int kernel, cudaStream_t stream, cuda::HostGate& gate,
                     const CudaProfileOptions& o) {
  for (int i = 0; i < o.warmup; ++i) gpu.launch(kernel, stream, gpu.preempt_flag());
  std::vector<cuda::Event> starts, ends;
  for (int r = 0; r < o.repeats; ++r) {
    starts.push_back(cuda::make_event(true));
    ends.push_back(cuda::make_event(true));
  }
  gate.hold(stream);
  for (int r = 0; r < o.repeats; ++r) {
    ATL_CUDA_CHECK(cudaEventRecord(starts[static_cast<size_t>(r)].get(), stream));
    gpu.launch(kernel, stream, gpu.preempt_flag());
    ATL_CUDA_CHECK(cudaEventRecord(ends[static_cast<size_t>(r)].get(), stream));
  }
  gate.release();
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int r = 0; r < o.repeats; ++r) {
    float ms = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, starts[static_cast<size_t>(r)].get(), ends[static_cast<size_t>(r)].get()));
    us.push_back(static_cast<double>(ms) * 1e3);
  }
  return median(us);
}

// Median exit latency with the flag raised half way through the kernel's run; a trial the
// kernel finished first does not count. The last run leaves the flag low and the output whole.
std::optional<double> exit_latency_us(CudaInstance& gpu, int kernel, bench::ExitProbe& probe, double time_us,
                                      int trials) {
  const bench::ExitProbe::Victim victim = [&](cudaStream_t s, const int* f) { gpu.launch(kernel, s, f); };
  std::vector<double> exits;
  for (int t = 0; t < trials; ++t) {
    const bench::ExitTrial e = probe.trial(victim, gpu.preempt_flag(), time_us / 2);
    if (!e.ran_to_end) exits.push_back(e.exit_us);
  }
  probe.duration_us(victim, gpu.preempt_flag(), 1);
  if (exits.empty()) return std::nullopt;
  return median(exits);
}

// Dense fp16 tensor-core flops per SM and cycle: 4096 on Hopper (989 TFLOP/s on an H100 SXM's
// 132 SMs at 1.83 GHz), 2048 on Ampere's A100, 1024 on Ada; 0 (unknown) otherwise.
int tensor_flops_per_sm_cycle(int major, int minor) {
  if (major == 9) return 4096;
  if (major == 8 && minor == 0) return 2048;
  if (major == 8 && minor == 9) return 1024;
  return 0;
}

// The device's peaks as its driver reports them: SM clock and memory clock at their maxima, two
// transfers per memory clock over the bus width.
void set_device_peaks(ModelProfile& p, int device) {
  int major = 0, minor = 0, clock_khz = 0, mem_khz = 0, bus_bits = 0;
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, device));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, device));
  p.peak_flops = static_cast<double>(tensor_flops_per_sm_cycle(major, minor)) * p.sm_count * clock_khz * 1e3;
  p.peak_bytes_per_s = 2.0 * mem_khz * 1e3 * bus_bits / 8.0;
}

}  // namespace

ModelProfile profile_cuda_instance(CudaInstance& gpu, const std::string& device, const CudaProfileOptions& o) {
  ATOLL_CHECK(o.repeats >= 1 && o.warmup >= 0 && o.exit_trials >= 0, kInvalidArgument,
              "profiling needs at least one timed launch (repeats {}, warm-up {}, exit trials {})", o.repeats, o.warmup,
              o.exit_trials);
  const Program& program = gpu.program();
  int device_index = 0, sm_count = 0;
  ATL_CUDA_CHECK(cudaGetDevice(&device_index));
  ATL_CUDA_CHECK(cudaDeviceGetAttribute(&sm_count, cudaDevAttrMultiProcessorCount, device_index));
  ModelProfile p;
  p.model = program.model;
  p.batch = program.batch;
  p.fingerprint = program.fingerprint;
  p.device = device;
  p.sm_count = sm_count;
  p.repeats = o.repeats;
  set_device_peaks(p, device_index);
  cuda::Stream stream = cuda::make_stream();
  cuda::HostGate gate;
  std::optional<bench::ExitProbe> probe;
  if (o.exit_trials > 0) {
    probe.emplace();
    probe->calibrate_gap_us(20);
  }
  const int total = static_cast<int>(program.kernels.size());
  for (int k = 0; k < total; ++k) {
    const Geometry g = capture_geometry(gpu, k, stream.get());
    KernelProfile kp;
    kp.name = program.kernels[static_cast<size_t>(k)].name;
    kp.time_us = std::max(1e-3, time_alone_us(gpu, k, stream.get(), gate, o));
    kp.grid_blocks = g.grid_blocks;
    kp.threads_per_block = g.threads_per_block;
    kp.resident_blocks_per_sm = g.resident_blocks_per_sm;
    kp.launches = g.launches;
    kp.sm_share = sm_share_of(g.grid_blocks, g.resident_blocks_per_sm, sm_count);
    kp.slice_units = k == 0 ? 0 : gpu.slice_units(k);  // kernel 0 may carry uploads: never sliced
    kp.grid_stride = k != 0 && gpu.grid_stride(k);
    const Kernel& kernel = program.kernels[static_cast<size_t>(k)];
    kp.op = std::string(op_name(kernel.op));
    kp.flops = kernel.flops;
    kp.bytes = kernel.bytes_moved;
    kp.choice = gpu.gemm_choice(k);
    if (probe) kp.exit_us = exit_latency_us(gpu, k, *probe, kp.time_us, o.exit_trials);
    p.kernels.push_back(std::move(kp));
    if (o.on_kernel) o.on_kernel(k + 1, total);
  }
  return p;
}

}  // namespace atl

#endif  // ATOLL_HAVE_CUDA
