// Kernels and host side of ExitProbe (see exit_probe.h).
#include <algorithm>
#include <vector>

#include "backends/cuda/device_common.cuh"
#include "backends/cuda/exit_probe.h"
#include "core/error.h"

namespace atl::bench {

namespace {

enum Slot { kStart = 0, kRaise = 1, kEnd = 2 };
// A raiser whose victim never started gives up after this long rather than hang the device.
constexpr uint64_t kRaiserGiveUpNs = 2'000'000'000;

__global__ void stamp_kernel(uint64_t* slot) {
  if (threadIdx.x == 0) {
    *reinterpret_cast<volatile uint64_t*>(slot) = cuda::global_ns();
    __threadfence();
  }
}

// Waits for the start stamp, then for `delay_ns` more, raises the flag and stamps the moment
// the store is visible device-wide (after the fence).
__global__ void raiser_kernel(uint64_t* slots, uint64_t delay_ns, int* flag) {
  if (threadIdx.x != 0) return;
  const volatile uint64_t* start = slots + kStart;
  const uint64_t give_up = cuda::global_ns() + kRaiserGiveUpNs;
  uint64_t t0 = 0;
  while ((t0 = *start) == 0) {
    if (cuda::global_ns() > give_up) return;
  }
  while (cuda::global_ns() < t0 + delay_ns) {
  }
  *reinterpret_cast<volatile int*>(flag) = 1;
  __threadfence();
  *reinterpret_cast<volatile uint64_t*>(slots + kRaise) = cuda::global_ns();
}

// One block per SM reads the flag through L1, as a flag-checking kernel's first item does
// (cuda::ItemFlag), and counts itself in: the flag's line, low, is then in every SM's L1.
__global__ void l1_primer_kernel(const int* flag, unsigned* primed, int* sink) {
  if (threadIdx.x != 0) return;
  const int seen = __ldca(flag);
  atomicAdd(primed, 1u);
  if (seen == 0x7fffffff) *sink = seen;  // keeps the read
}

// Raises the flag once `blocks` primer blocks have read it low, and stamps the raise.
__global__ void primed_raiser_kernel(unsigned* primed, unsigned blocks, int* flag, uint64_t* raise_slot) {
  if (threadIdx.x != 0) return;
  const uint64_t give_up = cuda::global_ns() + kRaiserGiveUpNs;
  while (atomicAdd(primed, 0u) < blocks) {
    if (cuda::global_ns() > give_up) return;
  }
  *reinterpret_cast<volatile int*>(flag) = 1;
  __threadfence();
  *reinterpret_cast<volatile uint64_t*>(raise_slot) = cuda::global_ns();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

ExitProbe::ExitProbe()
    : victim_(cuda::make_priority_stream(false)),
      raiser_(cuda::make_priority_stream(true)),
      primer_(cuda::make_priority_stream(false)),
      slots_(3 * sizeof(uint64_t)),
      primed_(2 * sizeof(unsigned)),
      raised_(cuda::make_event()) {}

void ExitProbe::run_once(const Victim& victim, int* flag, double raise_after_us, uint64_t (&t)[3], int flag_value) {
  auto* slots = static_cast<uint64_t*>(slots_.get());
  ATL_CUDA_CHECK(cudaMemsetAsync(slots, 0, slots_.size(), victim_.get()));
  if (flag != nullptr) ATL_CUDA_CHECK(cudaMemsetAsync(flag, flag_value, sizeof(int), victim_.get()));
  // The raiser must find the start slot zeroed and the flag low.
  ATL_CUDA_CHECK(cudaStreamSynchronize(victim_.get()));
  if (raise_after_us >= 0) {
    raiser_kernel<<<1, 32, 0, raiser_.get()>>>(slots, static_cast<uint64_t>(raise_after_us * 1e3), flag);
    ATL_CUDA_CHECK_LAUNCH("exit_probe_raiser");
  }
  stamped_run(victim, flag, t);
}

void ExitProbe::stamped_run(const Victim& victim, int* flag, uint64_t (&t)[3]) {
  auto* slots = static_cast<uint64_t*>(slots_.get());
  // The stamps time the device, not the host's launch calls.
  gate_.hold(victim_.get());
  stamp_kernel<<<1, 32, 0, victim_.get()>>>(slots + kStart);
  ATL_CUDA_CHECK_LAUNCH("exit_probe_start");
  if (victim) victim(victim_.get(), flag);
  stamp_kernel<<<1, 32, 0, victim_.get()>>>(slots + kEnd);
  ATL_CUDA_CHECK_LAUNCH("exit_probe_end");
  gate_.release();
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
  ATL_CUDA_CHECK(cudaMemcpy(t, slots, sizeof(t), cudaMemcpyDeviceToHost));
}

double ExitProbe::span_us(const uint64_t (&t)[3]) const {
  return static_cast<double>(t[kEnd] - t[kStart]) / 1e3 - gap_us_;
}

double ExitProbe::calibrate_gap_us(int reps) {
  std::vector<double> gaps;
  for (int i = 0; i < reps; ++i) {
    uint64_t t[3];
    run_once(nullptr, nullptr, -1, t);
    gaps.push_back(static_cast<double>(t[kEnd] - t[kStart]) / 1e3);
  }
  gap_us_ = median(gaps);
  return gap_us_;
}

double ExitProbe::median_span_us(const Victim& victim, int* flag, int reps, int flag_value) {
  std::vector<double> d;
  for (int i = 0; i < reps; ++i) {
    uint64_t t[3];
    run_once(victim, flag, -1, t, flag_value);
    d.push_back(span_us(t));
  }
  return std::max(0.0, median(d));
}

double ExitProbe::duration_us(const Victim& victim, int* flag, int reps) {
  return median_span_us(victim, flag, reps, 0);
}

double ExitProbe::entry_us(const Victim& victim, int* flag, int reps) {
  return median_span_us(victim, flag, reps, 1);
}

double ExitProbe::stale_entry_us(const Victim& victim, int* flag, int reps) {
  auto* slots = static_cast<uint64_t*>(slots_.get());
  auto* primed = static_cast<unsigned*>(primed_.get());
  const auto blocks = static_cast<unsigned>(cuda::device_sm_count());
  std::vector<double> d;
  for (int i = 0; i < reps; ++i) {
    ATL_CUDA_CHECK(cudaMemsetAsync(slots, 0, slots_.size(), victim_.get()));
    ATL_CUDA_CHECK(cudaMemsetAsync(primed, 0, primed_.size(), victim_.get()));
    ATL_CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), victim_.get()));
    ATL_CUDA_CHECK(cudaStreamSynchronize(victim_.get()));
    l1_primer_kernel<<<blocks, 32, 0, primer_.get()>>>(flag, primed, reinterpret_cast<int*>(primed + 1));
    ATL_CUDA_CHECK_LAUNCH("exit_probe_l1_primer");
    primed_raiser_kernel<<<1, 32, 0, raiser_.get()>>>(primed, blocks, flag, slots + kRaise);
    ATL_CUDA_CHECK_LAUNCH("exit_probe_primed_raiser");
    // The victim's stream depends on the raiser's, not on the primer's.
    ATL_CUDA_CHECK(cudaEventRecord(raised_.get(), raiser_.get()));
    ATL_CUDA_CHECK(cudaStreamWaitEvent(victim_.get(), raised_.get(), 0));
    uint64_t t[3];
    stamped_run(victim, flag, t);
    ATOLL_CHECK(t[kRaise] != 0, kInternal, "exit probe: the primed raiser gave up waiting for {} primer blocks", blocks);
    d.push_back(span_us(t));
  }
  return std::max(0.0, median(d));
}

ExitTrial ExitProbe::trial(const Victim& victim, int* flag, double raise_after_us) {
  uint64_t t[3];
  run_once(victim, flag, raise_after_us, t);
  ExitTrial r;
  r.raise_us = t[kRaise] > t[kStart] ? static_cast<double>(t[kRaise] - t[kStart]) / 1e3 : 0.0;
  r.ran_to_end = t[kRaise] == 0 || t[kEnd] <= t[kRaise];
  r.exit_us = r.ran_to_end ? 0.0 : std::max(0.0, static_cast<double>(t[kEnd] - t[kRaise]) / 1e3 - gap_us_);
  return r;
}

}  // namespace atl::bench
