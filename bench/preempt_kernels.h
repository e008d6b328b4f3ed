#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace atl::bench {

struct BeSpin {
  int blocks = 1;
  int threads = 256;
  const int* flag = nullptr;  // the preemption flag, checked at block entry and while spinning
  uint64_t duration_ns = 0;   // every block spins this long unless the flag rises
  int index = 0;              // written to *started by block 0 when the kernel starts
  volatile int* started = nullptr;
};

int be_spin_blocks_per_sm(int threads);
void launch_be_spin(const BeSpin& k, cudaStream_t stream);
// One block whose first thread stores the device clock (%globaltimer, ns) to `started_ns` when
// not null, then `token` to `ran` (both mapped host memory).
void launch_rt_probe(volatile int* ran, int token, volatile uint64_t* started_ns, cudaStream_t stream);
// One thread that answers the host `rounds` times: it waits until *ask >= r, stores the device
// clock to *device_ns, then r to *echo. The host reads the clocks' offset from the fastest round
// trip. The host must ask every round, or the kernel never ends.
void launch_clock_echo(const volatile int* ask, volatile int* echo, volatile uint64_t* device_ns, int rounds,
                       cudaStream_t stream);

// One thread that waits until *word >= target (a device word, or mapped host memory read over
// PCIe), then stores the device clock to *seen_ns (0: it gave up after timeout_ns). It stores 1
// to *started first. atoll_bench_gate's watchers.
void launch_watch(const volatile unsigned* word, unsigned target, volatile uint64_t* seen_ns, volatile int* started,
                  uint64_t timeout_ns, cudaStream_t stream);

}  // namespace atl::bench
