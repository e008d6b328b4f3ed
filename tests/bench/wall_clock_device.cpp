#include "wall_clock_device.h"

#include <algorithm>
#include <thread>

#include "core/error.h"

namespace atl::bench::testing {

WallClockDevice::WallClockDevice(sched::DeviceTime kernel_ns)
    : kernel_ns_(kernel_ns), origin_(std::chrono::steady_clock::now()) {}

sched::InstanceId WallClockDevice::load(const Program& program, const WeightStore&) {
  programs_.push_back(std::make_unique<Program>(program));
  return static_cast<sched::InstanceId>(programs_.size()) - 1;
}

const Program& WallClockDevice::program(sched::InstanceId instance) const {
  return *programs_.at(static_cast<size_t>(instance));
}

sched::StreamId WallClockDevice::create_stream(sched::StreamPriority) {
  streams_.emplace_back();
  return static_cast<sched::StreamId>(streams_.size()) - 1;
}

uint64_t WallClockDevice::launch(sched::StreamId stream, sched::InstanceId, int, const sched::LaunchOptions& options) {
  Stream& s = streams_.at(static_cast<size_t>(stream));
  const sched::DeviceTime t = now();
  const sched::DeviceTime start = s.launches.empty() ? t : std::max(t, s.launches.back().span.end);
  const bool exits = options.preemptible && flag_;
  s.launches.push_back({{start, start + (exits ? 0 : kernel_ns_)}, options.preemptible});
  return s.launches.size();
}

// Preemptible launches that have not started exit at entry; the rest of the stream moves up.
void WallClockDevice::raise_flag(sched::StreamId) {
  flag_ = true;
  const sched::DeviceTime t = now();
  for (Stream& s : streams_) {
    sched::DeviceTime prev_end = t;
    for (size_t i = s.completed; i < s.launches.size(); ++i) {
      Launch& l = s.launches[i];
      if (l.span.start <= t) {
        prev_end = l.span.end;
        continue;
      }
      const sched::DeviceTime length = l.preemptible ? 0 : l.span.end - l.span.start;
      l.span.start = std::max(t, prev_end);
      l.span.end = l.span.start + length;
      prev_end = l.span.end;
    }
  }
}

void WallClockDevice::advance_completions(Stream& s) {
  const sched::DeviceTime t = now();
  while (s.completed < s.launches.size() && s.launches[s.completed].span.end <= t) {
    ++s.completed;
    ++completions_;
  }
}

uint64_t WallClockDevice::completed(sched::StreamId stream) {
  Stream& s = streams_.at(static_cast<size_t>(stream));
  advance_completions(s);
  return s.completed;
}

std::optional<sched::LaunchSpan> WallClockDevice::launch_span(sched::StreamId stream, uint64_t seq) {
  Stream& s = streams_.at(static_cast<size_t>(stream));
  if (seq == 0 || seq > s.completed) return std::nullopt;
  return s.launches[seq - 1].span;
}

sched::DeviceTime WallClockDevice::now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - origin_).count();
}

sched::DeviceTime WallClockDevice::next_end() const {
  sched::DeviceTime next = sched::kNever;
  for (const Stream& s : streams_) {
    if (s.completed < s.launches.size()) next = std::min(next, s.launches[s.completed].span.end);
  }
  return next;
}

void WallClockDevice::wait_until(sched::DeviceTime deadline) {
  for (Stream& s : streams_) advance_completions(s);
  if (completions_ != completions_seen_) {
    completions_seen_ = completions_;
    return;
  }
  const sched::DeviceTime until = std::min(deadline, next_end());
  if (until == sched::kNever) return;
  std::this_thread::sleep_until(origin_ + std::chrono::nanoseconds(until));
  for (Stream& s : streams_) advance_completions(s);
  completions_seen_ = completions_;
}

void WallClockDevice::synchronize(sched::StreamId stream) {
  Stream& s = streams_.at(static_cast<size_t>(stream));
  if (!s.launches.empty()) {
    std::this_thread::sleep_until(origin_ + std::chrono::nanoseconds(s.launches.back().span.end));
  }
  advance_completions(s);
}

}  // namespace atl::bench::testing
