#pragma once
// Where an armed RT task's start goes between the host's store that opens its hold and the GPU
// acting on it, on the host's clock alone (no device-to-host clock alignment): a thread polls a
// lane's gate word (host-mapped; the host's store shows at once) and two words the device writes
// over PCIe, each the hold's token: one right behind the hold (its front-end let the stream
// past) and one right behind the flag write that follows it (the flag has landed). The samples
// are the delays from the store to each. A device word overwritten before a pass reads it gives
// no sample, so the thread spins on a core of its own. A diagnostic: the device writes cost the
// lane a stream memory operation each (ATOLL_CUDA_GATE_STAMPS=1, sched/cuda_exec_device.cpp).
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace atl::sched {

struct GateStamps {
  std::vector<double> passed_us;  // gate store -> the stream past its hold
  std::vector<double> flag_us;    // gate store -> the flag written behind that hold
};

class GateStampWatcher {
 public:
  GateStampWatcher();
  ~GateStampWatcher();
  GateStampWatcher(const GateStampWatcher&) = delete;
  GateStampWatcher& operator=(const GateStampWatcher&) = delete;

  // Watches one lane from now on (one thread calls it; lanes past kMaxLanes are not watched). The
  // words stay readable until the watcher is destroyed; tokens already in them are not counted.
  void watch(const uint32_t* gate, const uint32_t* passed, const uint32_t* flag_landed);
  // The samples since the last call.
  GateStamps take();
  // Samples dropped because `kMaxSamples` were waiting to be taken (memory stays bounded).
  int64_t dropped() const;
  // Passes over the lanes so far: a store is seen by the pass after the one in progress, so two
  // more passes than before a store mean it was seen (a watcher's thread may wait for a core).
  uint64_t passes() const { return passes_.load(std::memory_order_acquire); }

  static constexpr size_t kMaxSamples = 1 << 20;
  static constexpr size_t kMaxLanes = 256;

 private:
  struct Opening {
    uint32_t token;
    int64_t at_ns;
  };
  struct Lane {
    const uint32_t* gate = nullptr;
    const uint32_t* passed = nullptr;
    const uint32_t* flag_landed = nullptr;
    uint32_t last_gate = 0, last_passed = 0, last_flag = 0;
    std::vector<Opening> openings;  // recent, oldest first
  };

  void poll();
  void record(Lane& lane, uint32_t token, int64_t now_ns, bool flag);

  // Lanes are published lock-free (filled, then counted) and from then on touched by the polling
  // thread alone, so a lane's registration never waits behind the spin.
  std::array<Lane, kMaxLanes> lanes_;
  std::atomic<size_t> lanes_used_{0};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> passes_{0};
  mutable std::mutex samples_mutex_;  // taken by the polling thread only to add a sample
  GateStamps samples_;
  int64_t dropped_ = 0;
  std::thread thread_;
};

}  // namespace atl::sched
