#pragma once
// Exit latency of one kernel on the device clock: a one-block "raiser" kernel on a high-priority
// stream raises the preemption flag at a chosen moment of the victim's run and stamps
// %globaltimer once the store is visible; a one-block stamp kernel behind the victim on the
// victim's stream records when the stream moved on. A cuda::HostGate holds the stream until the
// whole trial is enqueued, so its kernels run back to back. Exit = end stamp - raise - the gap
// between two back-to-back kernels (calibrated). Shared by atoll_bench_kernel_exit and the GPU
// test of mid-kernel preemption.
#include <cuda_runtime_api.h>

#include <functional>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/timing.h"

namespace atl::bench {

struct ExitTrial {
  double raise_us = 0;      // raise time after the start stamp
  double exit_us = 0;       // from the flag landing to the victim having left, gap removed
  bool ran_to_end = false;  // the victim ended before the flag landed (no exit to measure)
};

class ExitProbe {
 public:
  // Enqueues the victim (one or more kernels) on the stream given, checking `flag`.
  using Victim = std::function<void(cudaStream_t stream, const int* flag)>;

  ExitProbe();
  cudaStream_t stream() const { return victim_.get(); }
  // Median of `reps` start-to-start gaps between two back-to-back one-block kernels (us).
  double calibrate_gap_us(int reps);
  double gap_us() const { return gap_us_; }
  // Median of `reps` uninterrupted runs, start stamp to end stamp minus the gap (us).
  double duration_us(const Victim& victim, int* flag, int reps);
  // One run with the flag lowered before the start stamp and raised `raise_after_us` later; the
  // flag is left raised (the caller's next run lowers it).
  ExitTrial trial(const Victim& victim, int* flag, double raise_after_us);
  // Median of `reps` runs launched with the flag already raised (us, gap removed): what a kernel
  // queued on the device when a preemption begins costs to pass through the SMs, its blocks
  // exiting at entry. The flag is left raised.
  double entry_us(const Victim& victim, int* flag, int reps);
  // The same, but the flag is raised only after one block per SM of another stream's kernel has
  // read it low through L1 (as a flag-checking kernel's entry does) and ended: what a BE kernel
  // started during a preemption costs when kernels of other BE streams have just read the flag.
  // PTX promises L1 invalidation only between dependent grids; against entry_us this shows
  // whether the entry read (cuda::ItemFlag) can see a stale line on the device at hand.
  double stale_entry_us(const Victim& victim, int* flag, int reps);

 private:
  // Start stamp, victim, end stamp, with the flag set to `flag_value` first; with
  // `raise_after_us` >= 0 also the raiser. Returns the three device times (start, raise, end) in
  // ns; raise is 0 without a raiser.
  void run_once(const Victim& victim, int* flag, double raise_after_us, uint64_t (&t)[3], int flag_value = 0);
  // Holds the victim's stream, enqueues start stamp, victim and end stamp, releases it, and reads
  // the three slots back once the device is idle.
  void stamped_run(const Victim& victim, int* flag, uint64_t (&t)[3]);
  // End stamp minus start stamp minus the gap (us).
  double span_us(const uint64_t (&t)[3]) const;
  // Median of `reps` runs without a raiser, the flag set to `flag_value`, start to end stamp
  // minus the gap (us).
  double median_span_us(const Victim& victim, int* flag, int reps, int flag_value);

  cuda::Stream victim_, raiser_, primer_;
  cuda::DeviceBuffer slots_;   // start, raise, end (uint64 ns)
  cuda::DeviceBuffer primed_;  // primer blocks counted in, and a sink word
  cuda::Event raised_;         // the primed raise, which the victim's stream waits for
  cuda::HostGate gate_;        // holds the victim's stream until a trial is enqueued
  double gap_us_ = 0;
};

}  // namespace atl::bench
