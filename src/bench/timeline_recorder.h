#pragma once
// An ExecDevice that forwards every call to another device (every public virtual: one left to
// the base class's default silently changes what a traced run does, as unstaged inputs did;
// profiles go to the inner device, which judges them) and records, for the launches issued
// within a window of device time, each kernel's device start and end: the timeline trace.json
// shows. Spans come from the device's own launch_span (the recorder marks window launches timed),
// so a real GPU is traced exactly as the simulator is. Outside the window it only forwards, and
// times the host side of every call the scheduler makes on its launch path (call_stats).
#include <array>
#include <chrono>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "bench/results.h"
#include "sched/exec_device.h"

namespace atl::bench {

class TimelineRecorder final : public sched::ExecDevice {
 public:
  // Records launches issued at device times in [from, to).
  TimelineRecorder(sched::ExecDevice& inner, sched::DeviceTime from, sched::DeviceTime to);

  // Names the client an instance serves; its kernels show as "<client> <kernel>".
  void label(sched::InstanceId instance, std::string client, bool realtime);

  // The recorded kernels, one track per stream, times in ms from `origin`. A BE kernel that
  // ended while the preemption flag was up counts as preempted (it exited on the flag, or was
  // about to finish anyway within the flag's landing time).
  std::vector<KernelSpan> spans(sched::DeviceTime origin) const;

  // Host time per kind of device call the scheduler made (wait_until, whose job is waiting,
  // and now apart), the kinds never called left out.
  std::vector<DeviceCallStats> call_stats() const;

  // Host time of single-kernel launches by the kernel's op (Conv, Concat, ...), most total time
  // first: which kernels make a launch expensive.
  std::vector<DeviceCallStats> launch_stats_by_op() const;

  std::string name() const override { return inner_.name(); }
  std::string description() const override { return inner_.description(); }
  void bind_thread() override { inner_.bind_thread(); }
  std::string pci_bus_id() const override { return inner_.pci_bus_id(); }
  CompileTarget target() const override { return inner_.target(); }
  bool computes() const override { return inner_.computes(); }
  sched::InstanceId load(const Program& program, const WeightStore& weights) override {
    return inner_.load(program, weights);
  }
  const Program& program(sched::InstanceId instance) const override { return inner_.program(instance); }
  using ExecDevice::write_inputs;
  bool write_inputs(sched::InstanceId instance, sched::StreamId stream, std::span<const Tensor> inputs,
                    const std::function<bool()>& should_yield) override {
    const CallTimer timer(*this, Call::kWriteInputs);
    return inner_.write_inputs(instance, stream, inputs, should_yield);
  }
  std::vector<Tensor> read_outputs(sched::InstanceId instance, sched::StreamId stream) override {
    const CallTimer timer(*this, Call::kReadOutputs);
    return inner_.read_outputs(instance, stream);
  }
  sched::StreamId create_stream(sched::StreamPriority priority) override;
  uint64_t launch(sched::StreamId stream, sched::InstanceId instance, int kernel,
                  const sched::LaunchOptions& options) override;
  uint64_t launch_range(sched::StreamId stream, sched::InstanceId instance, int first,
                        const sched::LaunchOptions& options) override;
  int64_t slice_units(sched::InstanceId instance, int kernel) const override {
    return inner_.slice_units(instance, kernel);
  }
  bool grid_stride(sched::InstanceId instance, int kernel) const override {
    return inner_.grid_stride(instance, kernel);
  }
  // Timed and recorded as a launch of its kernel.
  uint64_t launch_slice(sched::StreamId stream, sched::InstanceId instance, int kernel, const sched::KernelSlice& slice,
                        const sched::LaunchOptions& options) override;
  uint64_t completed(sched::StreamId stream) override;
  std::optional<sched::LaunchSpan> launch_span(sched::StreamId stream, uint64_t seq) override {
    const CallTimer timer(*this, Call::kLaunchSpan);
    return inner_.launch_span(stream, seq);
  }
  std::exception_ptr take_error(sched::StreamId stream) override {
    const CallTimer timer(*this, Call::kTakeError);
    return inner_.take_error(stream);
  }
  void raise_flag(sched::StreamId via) override;
  void lower_flag() override;
  bool can_hold() const override { return inner_.can_hold(); }
  bool holds_isolate(std::span<const sched::StreamId> held) override { return inner_.holds_isolate(held); }
  void hold(sched::StreamId stream) override;
  void release(sched::StreamId stream) override;
  void enqueue_inputs(sched::InstanceId instance, sched::StreamId stream) override {
    const CallTimer timer(*this, Call::kEnqueueInputs);
    inner_.enqueue_inputs(instance, stream);
  }
  void stage_inputs(sched::InstanceId instance, std::span<const Tensor> inputs) override {
    const CallTimer timer(*this, Call::kStageInputs);
    inner_.stage_inputs(instance, inputs);
  }
  std::vector<Tensor> request_buffers(sched::InstanceId instance) override { return inner_.request_buffers(instance); }
  bool inputs_in_staging(sched::InstanceId instance, std::span<const Tensor> inputs) override {
    return inner_.inputs_in_staging(instance, inputs);
  }
  // Untimed: the arrival sentinel calls these from its own thread. A flag raised through an
  // opener shows on the timeline at the scheduler's release that follows it.
  std::optional<sched::GateOpener> gate_opener(sched::StreamId stream, int holds) override {
    return inner_.gate_opener(stream, holds);
  }
  uint32_t completion_word(sched::StreamId stream) override { return inner_.completion_word(stream); }
  uint64_t completed_at(sched::StreamId stream, uint32_t word) override { return inner_.completed_at(stream, word); }
  void set_sm_copies(sched::InstanceId instance, bool on) override { inner_.set_sm_copies(instance, on); }
  bool can_copy_on_sms() const override { return inner_.can_copy_on_sms(); }
  void set_uploads_with_first_kernel(sched::InstanceId instance, bool on) override {
    inner_.set_uploads_with_first_kernel(instance, on);
  }
  void set_profile(sched::InstanceId instance, ModelProfile profile) override {
    inner_.set_profile(instance, std::move(profile));
  }
  const ModelProfile* profile(sched::InstanceId instance) const override { return inner_.profile(instance); }
  ModelProfile measure_profile(sched::InstanceId instance, const std::function<void(int, int)>& on_kernel) override {
    return inner_.measure_profile(instance, on_kernel);
  }
  int64_t set_l2_residency(sched::InstanceId instance, const l2::ResidencyConfig* config,
                           const l2::L2Device& d) override {
    return inner_.set_l2_residency(instance, config, d);
  }
  sched::DeviceTime now() override { return inner_.now(); }
  bool simulated_clock() const override { return inner_.simulated_clock(); }
  void wait_until(sched::DeviceTime deadline) override { inner_.wait_until(deadline); }
  void synchronize(sched::StreamId stream) override {
    const CallTimer timer(*this, Call::kSynchronize);
    inner_.synchronize(stream);
  }

 private:
  enum class Call {
    kWriteInputs, kReadOutputs, kLaunch, kLaunchRange, kCompleted, kLaunchSpan, kTakeError, kRaiseFlag, kLowerFlag,
    kHold, kRelease, kEnqueueInputs, kStageInputs, kSynchronize, kCount
  };
  struct CallTimer {
    CallTimer(TimelineRecorder& r, Call c, DeviceCallStats* also = nullptr)
        : slot(r.calls_[static_cast<size_t>(c)]), also(also), began(std::chrono::steady_clock::now()) {}
    ~CallTimer();
    CallTimer(const CallTimer&) = delete;
    CallTimer& operator=(const CallTimer&) = delete;
    DeviceCallStats& slot;
    DeviceCallStats* also;  // a second tally of the same call (launches by op)
    std::chrono::steady_clock::time_point began;
  };
  struct Pending {
    uint64_t seq;
    sched::InstanceId instance;
    int kernel;
    bool preemptible;
    int kernels = 1;  // a launch_range: kernel is its first
  };
  struct Recorded {
    sched::StreamId stream;
    sched::InstanceId instance;
    int kernel;
    bool preemptible;
    sched::LaunchSpan span;
    int kernels = 1;
  };
  struct Label {
    std::string client;
    bool realtime = false;
  };

  bool in_window();  // launches issued now are traced
  static sched::LaunchOptions timed(sched::LaunchOptions options);
  bool flag_was_up(sched::DeviceTime t) const;
  void flag_went_up();

  sched::ExecDevice& inner_;
  sched::DeviceTime from_, to_;
  std::map<sched::InstanceId, Label> labels_;
  std::map<sched::StreamId, sched::StreamPriority> streams_;
  std::map<sched::StreamId, std::deque<Pending>> pending_;  // window launches not yet seen ended
  std::vector<Recorded> recorded_;
  // Flag raises and lowers, alternating from a raise; a trailing raise is still up.
  std::vector<sched::DeviceTime> flag_changes_;
  // Per stream, one entry per pending hold: whether a flag raise waits right behind it (it
  // goes up when that hold is released, not when it was enqueued).
  std::map<sched::StreamId, std::deque<bool>> holds_;
  std::array<DeviceCallStats, static_cast<size_t>(Call::kCount)> calls_{};
  std::map<OpKind, DeviceCallStats> launches_by_op_;
};

}  // namespace atl::bench
