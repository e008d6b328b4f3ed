#include "sched/padding_guard.h"

#include <algorithm>

#include "core/error.h"

namespace atl::sched {

namespace {

// Each sample moves an average by this much: about the last 30 tasks count, which smooths
// a batch-1 RT task's few percent of jitter well below a 1% budget.
constexpr double kAverageWeight = 1.0 / 16;

void add_sample(double& average, double sample) {
  average = average == 0 ? sample : average + kAverageWeight * (sample - average);
}

}  // namespace

PaddingGuard::ClientState& PaddingGuard::state(int client) {
  ATOLL_CHECK(client >= 0, kInvalidArgument, "padding guard: no client {}", client);
  if (static_cast<size_t>(client) >= clients_.size()) clients_.resize(static_cast<size_t>(client) + 1);
  return clients_[static_cast<size_t>(client)];
}

double PaddingGuard::slowdown(int client) const {
  if (client < 0 || static_cast<size_t>(client) >= clients_.size()) return 0;
  const ClientState& s = clients_[static_cast<size_t>(client)];
  if (s.alone_ns <= 0 || s.padded_ns <= 0) return 0;
  return std::max(0.0, s.padded_ns / s.alone_ns - 1);
}

bool PaddingGuard::pad_beside_next(int client) {
  if (!enabled()) return true;
  ClientState& s = state(client);
  // A baseline first, then one task alone in every calibration period.
  if (s.alone_ns == 0 || s.since_alone + 1 >= kCalibrationPeriod) {
    s.since_alone = 0;
    return false;
  }
  ++s.since_alone;
  if (s.padded_ns == 0) return true;  // no measure of the cost yet
  const double cost = slowdown(client);
  s.credit += cost <= budget_ ? 1.0 : budget_ / cost;
  if (s.credit < 1) return false;
  s.credit -= 1;
  return true;
}

void PaddingGuard::record(int client, DeviceTime run_ns, bool padded) {
  if (!enabled() || run_ns <= 0) return;
  ClientState& s = state(client);
  add_sample(padded ? s.padded_ns : s.alone_ns, static_cast<double>(run_ns));
}

}  // namespace atl::sched
