#pragma once
// A gate on a stream: work enqueued behind hold() waits on the device until open(), which is one
// host store to mapped memory, no API call. The scheduler enqueues an RT task (flag write,
// input upload, kernels, downloads) before its request arrives and opens the gates on arrival:
// measured on the H200 (docs/PERFORMANCE.md), the only arrival path whose p99 stayed under 20 us
// with a GPU full of BE work. A pending hold blocks anything that synchronizes the context, a
// kernel's first (lazy) load included: load kernels before holding, and open every hold before
// synchronizing the device or freeing memory.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"

namespace atl::cuda {

class StreamGate {
 public:
  StreamGate();

  // Enqueues on `stream` a wait for the next open(); holds open in the order they were made.
  void hold(cudaStream_t stream);
  // Enqueues on `stream` a wait for the opening of the newest hold, which another stream made:
  // work behind it is released by the same store, no new hold is counted. Throws
  // kInvalidArgument when no hold is pending.
  void follow(cudaStream_t stream);
  // Releases the oldest hold not yet opened. Throws kInvalidArgument when none is pending.
  void open();
  void open_all();
  uint32_t pending() const { return held_ - opened_; }
  // What opening the next `n` pending holds writes, for another thread to write it first
  // (raise_gate_word): the later open() calls then find the word already there.
  uint32_t* host_word() const { return static_cast<uint32_t*>(word_.get()); }
  uint32_t token_after(uint32_t n) const { return opened_ + n; }
  // The token whose write opens the newest hold, and the word's device alias (launch_doorbell).
  uint32_t newest_hold_token() const { return held_; }
  const uint32_t* device_word() const { return static_cast<const uint32_t*>(word_device_); }

 private:
  PinnedBuffer word_{sizeof(uint32_t), /*mapped=*/true};
  void* word_device_ = nullptr;  // looked up once: open() is on the timed path
  uint32_t held_ = 0, opened_ = 0;
};

}  // namespace atl::cuda
