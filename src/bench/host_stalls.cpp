#include "bench/host_stalls.h"

#include <algorithm>

namespace atl::bench {

void StallTally::add(std::chrono::nanoseconds lateness) {
  ++wakes_;
  if (lateness > threshold_) ++over_;
  longest_ = std::max(longest_, lateness);
}

HostStalls StallTally::summary() const {
  HostStalls s;
  s.wakes = wakes_;
  s.over_threshold = over_;
  s.longest_us = std::chrono::duration<double, std::micro>(longest_).count();
  s.threshold_us = std::chrono::duration<double, std::micro>(threshold_).count();
  return s;
}

HostStallWatch::HostStallWatch(bool enabled) {
  if (enabled) thread_ = std::thread([this] { watch(); });
}

HostStallWatch::~HostStallWatch() {
  stop();
}

// Sleeping rather than spinning: the watch must not take a core from the threads it watches. A
// wake's lateness is then the timer's slack plus the stall, and the threshold lies well above
// the slack.
void HostStallWatch::watch() {
  using Clock = std::chrono::steady_clock;
  while (!stop_.load(std::memory_order_relaxed)) {
    const Clock::time_point due = Clock::now() + kStep;
    std::this_thread::sleep_until(due);
    tally_.add(std::max(Clock::now() - due, Clock::duration::zero()));
  }
}

std::optional<HostStalls> HostStallWatch::stop() {
  if (!thread_.joinable()) return std::nullopt;
  stop_ = true;
  thread_.join();
  return tally_.summary();
}

}  // namespace atl::bench
