#pragma once
// A device whose clock is the host's steady clock: every kernel takes a fixed wall time, streams
// run one kernel at a time each (independently of each other), and preemptible kernels that
// have not started when the flag goes up exit at once. It lets the DISB runner's real-time path
// (scheduler thread + sleeping submitter) run without a GPU.
#include <chrono>
#include <memory>
#include <vector>

#include "sched/exec_device.h"

namespace atl::bench::testing {

class WallClockDevice final : public sched::ExecDevice {
 public:
  explicit WallClockDevice(sched::DeviceTime kernel_ns);

  std::string name() const override { return "wall-clock"; }
  std::string description() const override { return "test device: fixed-time kernels on the host clock"; }
  CompileTarget target() const override { return {}; }
  sched::InstanceId load(const Program& program, const WeightStore& weights) override;
  const Program& program(sched::InstanceId instance) const override;
  using ExecDevice::write_inputs;
  bool write_inputs(sched::InstanceId, sched::StreamId, std::span<const Tensor>,
                    const std::function<bool()>&) override {
    return true;
  }
  std::vector<Tensor> read_outputs(sched::InstanceId, sched::StreamId) override { return {}; }
  sched::StreamId create_stream(sched::StreamPriority priority) override;
  uint64_t launch(sched::StreamId stream, sched::InstanceId instance, int kernel,
                  const sched::LaunchOptions& options) override;
  uint64_t completed(sched::StreamId stream) override;
  std::optional<sched::LaunchSpan> launch_span(sched::StreamId stream, uint64_t seq) override;
  std::exception_ptr take_error(sched::StreamId) override { return nullptr; }
  void raise_flag(sched::StreamId via) override;
  void lower_flag() override { flag_ = false; }
  sched::DeviceTime now() override;
  void wait_until(sched::DeviceTime deadline) override;
  void synchronize(sched::StreamId stream) override;

 private:
  struct Launch {
    sched::LaunchSpan span;
    bool preemptible = false;
  };
  struct Stream {
    std::vector<Launch> launches;  // index = seq - 1
    uint64_t completed = 0;
  };
  void advance_completions(Stream& s);
  // The earliest end of a launch not yet seen complete, or kNever.
  sched::DeviceTime next_end() const;

  sched::DeviceTime kernel_ns_;
  std::chrono::steady_clock::time_point origin_;
  std::vector<std::unique_ptr<Program>> programs_;
  std::vector<Stream> streams_;
  bool flag_ = false;
  uint64_t completions_ = 0, completions_seen_ = 0;
};

}  // namespace atl::bench::testing
