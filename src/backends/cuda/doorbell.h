#pragma once
// A doorbell: one GPU thread that waits for a StreamGate's word and raises the preemption flag
// itself the moment it sees the gate open. A flag written by the held stream (a stream memory
// op behind the hold) landed 4.6 us (idle) and 6.7 us (GPU full of BE blocks) after the GPU saw
// the gate at the median, 9.7 / 11.3 us at p99; the doorbell's 0.3 / 2.3 and 0.5 / 3.3 us
// (atoll_bench_gate, H200, session 24). The doorbell runs until its gate opens, so like the hold
// it blocks anything that synchronizes the context: open the gate first.
#include <cuda_runtime_api.h>

#include <cstdint>

namespace atl::cuda {

// Loads the doorbell's code now. Doorbells are launched behind pending holds, where a kernel's
// first (lazy) load would wait for the held work that only the gate's opening frees: load it
// before the first hold.
void load_doorbell_kernel();

// Launches on `stream` one thread that spins until (int32_t)(*word - token) >= 0 (the
// comparison of stream_wait_value32_geq; `word` a mapped host word's device alias), then stores
// 1 to *flag and, where `rung` is given (a mapped host word's device alias), `token` to *rung
// after it. The ring is reported in memory rather than by an event recorded behind the kernel:
// such an event would block every stream sharing the doorbell stream's hardware queue until
// the gate opens. Throws atl::Error(kCuda).
void launch_doorbell(const uint32_t* word, uint32_t token, int* flag, uint32_t* rung, cudaStream_t stream);

}  // namespace atl::cuda
