#pragma once
// Host stalls over a measured run: a thread that sleeps in short steps and records how late it
// wakes. On the H200 machines every thread of a process, the scheduler's and the arrival
// sentinel's included, stalled now and then for 0.2-2 ms at once (session 22: a thread spinning
// on the clock saw 117 gaps over 200 us in 170 s, the longest 2.07 ms, while the rest of the host
// was idle), which shows in DISB as millisecond RT reactions that no scheduling change removes.
// DISB reports the stalls per mode, so such a tail is not taken for the scheduler's.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <thread>

namespace atl::bench {

struct HostStalls {
  int64_t wakes = 0;           // steps the watch slept
  int64_t over_threshold = 0;  // wakes later than the threshold
  double longest_us = 0;       // the latest wake
  double threshold_us = 0;
};

// The lateness of each wake, tallied: separate from the thread so it can be tested.
class StallTally {
 public:
  explicit StallTally(std::chrono::nanoseconds threshold) : threshold_(threshold) {}
  void add(std::chrono::nanoseconds lateness);
  HostStalls summary() const;

 private:
  std::chrono::nanoseconds threshold_;
  std::chrono::nanoseconds longest_{0};
  int64_t wakes_ = 0, over_ = 0;
};

// The longest stall above which a DISB run on a real device warns.
inline constexpr double kStallWarningUs = 1000;

class HostStallWatch {
 public:
  static constexpr std::chrono::microseconds kStep{100};
  static constexpr std::chrono::microseconds kThreshold{500};

  // Watches until stop() where `enabled` (real-time runs); else does nothing.
  explicit HostStallWatch(bool enabled);
  ~HostStallWatch();
  HostStallWatch(const HostStallWatch&) = delete;
  HostStallWatch& operator=(const HostStallWatch&) = delete;

  // Stops watching; nullopt when it was not enabled.
  std::optional<HostStalls> stop();

 private:
  void watch();

  std::atomic<bool> stop_{false};
  StallTally tally_{kThreshold};  // the thread's until joined
  std::thread thread_;
};

}  // namespace atl::bench
