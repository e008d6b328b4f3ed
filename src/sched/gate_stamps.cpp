#include "sched/gate_stamps.h"

#include <chrono>

#include "core/gate_word.h"

namespace atl::sched {

namespace {

// The newest openings a lane remembers: a lane opens two holds per RT task, and the device's
// words trail the store by microseconds, so older ones are never asked for.
constexpr uint32_t kOpeningsKept = 64;

uint32_t read_word(const uint32_t* w) {
  return std::atomic_ref<const uint32_t>(*w).load(std::memory_order_acquire);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

GateStampWatcher::GateStampWatcher() : thread_([this] { poll(); }) {}

GateStampWatcher::~GateStampWatcher() {
  stop_.store(true, std::memory_order_relaxed);
  thread_.join();
}

void GateStampWatcher::watch(const uint32_t* gate, const uint32_t* passed, const uint32_t* flag_landed) {
  const size_t n = lanes_used_.load(std::memory_order_relaxed);
  if (n == kMaxLanes) return;
  Lane& lane = lanes_[n];
  lane.gate = gate;
  lane.passed = passed;
  lane.flag_landed = flag_landed;
  lane.last_gate = read_word(gate);
  lane.last_passed = read_word(passed);
  lane.last_flag = read_word(flag_landed);
  lanes_used_.store(n + 1, std::memory_order_release);
}

GateStamps GateStampWatcher::take() {
  std::lock_guard lock(samples_mutex_);
  GateStamps out;
  std::swap(out, samples_);
  return out;
}

int64_t GateStampWatcher::dropped() const {
  std::lock_guard lock(samples_mutex_);
  return dropped_;
}

void GateStampWatcher::record(Lane& lane, uint32_t token, int64_t now, bool flag) {
  for (const Opening& o : lane.openings) {
    if (o.token != token) continue;
    std::lock_guard lock(samples_mutex_);
    if (samples_.passed_us.size() + samples_.flag_us.size() >= kMaxSamples) {
      ++dropped_;
    } else {
      (flag ? samples_.flag_us : samples_.passed_us).push_back(static_cast<double>(now - o.at_ns) / 1e3);
    }
    return;
  }
}

// Each pass reads a lane's gate word first, so that a device word and the store it answers,
// seen in the same pass, give a delay of zero rather than none.
void GateStampWatcher::poll() {
  while (!stop_.load(std::memory_order_relaxed)) {
    const size_t used = lanes_used_.load(std::memory_order_acquire);
    const int64_t now = now_ns();
    for (size_t i = 0; i < used; ++i) {
      Lane& lane = lanes_[i];
      const uint32_t gate = read_word(lane.gate);
      // Tokens only grow (core/gate_word.h): one store may open several holds.
      const uint32_t opened = gate - lane.last_gate;
      for (uint32_t k = opened > kOpeningsKept ? opened - kOpeningsKept : 0; k < opened; ++k) {
        lane.openings.push_back({lane.last_gate + k + 1, now});
      }
      if (lane.openings.size() > kOpeningsKept) {
        lane.openings.erase(lane.openings.begin(), lane.openings.end() - kOpeningsKept);
      }
      lane.last_gate = gate;
      if (const uint32_t p = read_word(lane.passed); p != lane.last_passed) {
        record(lane, p, now, false);
        lane.last_passed = p;
      }
      if (const uint32_t f = read_word(lane.flag_landed); f != lane.last_flag) {
        record(lane, f, now, true);
        lane.last_flag = f;
      }
    }
    passes_.fetch_add(1, std::memory_order_release);
    cpu_relax();
  }
}

}  // namespace atl::sched
