// Kernels of atoll_bench_preempt (see preempt_sweep.cpp): a BE kernel of fixed duration that
// checks the preemption flag the way atoll's kernels do, and the RT request's probe kernel; and
// atoll_bench_gate's watcher (gate_probe.cpp).
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"
#include "bench/preempt_kernels.h"

namespace atl::bench {

namespace {

// A BE kernel of fixed duration: every block spins `duration_ns`, polling the flag like atoll's
// GEMM main loop does. Block 0 reports the kernel's start through a mapped word.
__global__ void be_spin_kernel(const int* flag, uint64_t duration_ns, int index, volatile int* started) {
  if (cuda::ItemFlag(flag).next()) return;
  if (started != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
    *started = index;
    __threadfence_system();
  }
  const uint64_t t0 = cuda::global_ns();
  while (cuda::global_ns() - t0 < duration_ns) {
    if (cuda::load_flag(flag) != 0) return;
  }
}

// The RT request's first kernel: one block that tells the host when it started and that it ran.
__global__ void rt_probe_kernel(volatile int* ran, int token, volatile uint64_t* started_ns) {
  if (threadIdx.x == 0) {
    if (started_ns != nullptr) {
      *started_ns = cuda::global_ns();
      __threadfence_system();
    }
    *ran = token;
    __threadfence_system();
  }
}

__global__ void clock_echo_kernel(const volatile int* ask, volatile int* echo, volatile uint64_t* device_ns,
                                  int rounds) {
  for (int r = 1; r <= rounds; ++r) {
    while (*ask < r) {
    }
    *device_ns = cuda::global_ns();
    __threadfence_system();
    *echo = r;
    __threadfence_system();
  }
}

__global__ void watch_kernel(const volatile unsigned* word, unsigned target, volatile uint64_t* seen_ns,
                             volatile int* started, uint64_t timeout_ns) {
  const uint64_t t0 = cuda::global_ns();
  *started = 1;
  __threadfence_system();
  while (*word < target) {
    if (cuda::global_ns() - t0 > timeout_ns) {
      *seen_ns = 0;
      __threadfence_system();
      return;
    }
  }
  *seen_ns = cuda::global_ns();
  __threadfence_system();
}

}  // namespace

void launch_watch(const volatile unsigned* word, unsigned target, volatile uint64_t* seen_ns, volatile int* started,
                  uint64_t timeout_ns, cudaStream_t stream) {
  watch_kernel<<<1, 1, 0, stream>>>(word, target, seen_ns, started, timeout_ns);
  ATL_CUDA_CHECK_LAUNCH("watch");
}

int be_spin_blocks_per_sm(int threads) {
  int per_sm = 0;
  ATL_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, be_spin_kernel, threads, 0));
  return per_sm;
}

void launch_be_spin(const BeSpin& k, cudaStream_t stream) {
  be_spin_kernel<<<k.blocks, k.threads, 0, stream>>>(k.flag, k.duration_ns, k.index, k.started);
  ATL_CUDA_CHECK_LAUNCH("be_spin");
}

void launch_rt_probe(volatile int* ran, int token, volatile uint64_t* started_ns, cudaStream_t stream) {
  rt_probe_kernel<<<1, 32, 0, stream>>>(ran, token, started_ns);
  ATL_CUDA_CHECK_LAUNCH("rt_probe");
}

void launch_clock_echo(const volatile int* ask, volatile int* echo, volatile uint64_t* device_ns, int rounds,
                       cudaStream_t stream) {
  clock_echo_kernel<<<1, 1, 0, stream>>>(ask, echo, device_ns, rounds);
  ATL_CUDA_CHECK_LAUNCH("clock_echo");
}

}  // namespace atl::bench
