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
// One block whose first thread writes `token` to `ran` (mapped host memory).
void launch_rt_probe(volatile int* ran, int token, cudaStream_t stream);

}  // namespace atl::bench
