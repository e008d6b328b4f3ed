#pragma once
// Padding's RT guard. BE work padded beside an RT task slows it (shared SMs, L2 and memory
// bandwidth: +1-6% on the H100's pairs, session 36), by an amount no profile predicts. The guard
// measures it per RT client, as the device time of RT tasks run with padding beside them against
// that of tasks run alone, and pads beside only the share of tasks that keeps the mean slowdown
// within a budget: share = min(1, budget / slowdown). One task in kCalibrationPeriod runs alone
// so that the baseline follows the device (clocks, other load).
#include <cstdint>
#include <vector>

#include "sched/exec_device.h"

namespace atl::sched {

class PaddingGuard {
 public:
  static constexpr int kCalibrationPeriod = 16;
  // budget: the RT slowdown padding may cost, as a fraction of the RT task's device time
  // (0.01: 1%); 0 turns the guard off (every task pads).
  explicit PaddingGuard(double budget = 0) : budget_(budget) {}
  bool enabled() const { return budget_ > 0; }
  // Whether BE work may pad beside the next RT task of `client`; asked once per task.
  bool pad_beside_next(int client);
  // An RT task of `client` ran `run_ns` on the device, with padding beside it or alone.
  void record(int client, DeviceTime run_ns, bool padded);
  // The slowdown measured for `client` (padded over alone, minus 1); 0 before both are known.
  double slowdown(int client) const;

 private:
  struct ClientState {
    double alone_ns = 0;   // moving averages; 0: no sample yet
    double padded_ns = 0;
    double credit = 0;     // share of tasks allowed to pad, accumulated
    int since_alone = 0;   // tasks decided since the last one run alone
  };
  ClientState& state(int client);
  double budget_;
  std::vector<ClientState> clients_;
};

}  // namespace atl::sched
