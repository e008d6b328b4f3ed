#pragma once
// A device on the host's steady clock that can hold work and be opened from another thread, so
// the scheduler's thread and the arrival sentinel race in real time as they do on a GPU (the
// simulated device has no gate words, so the sentinel never opens a lane there).
//
// Model: each stream runs its operations (holds, flag writes, kernels) in order, one kernel at
// a time, every kernel of an instance taking a fixed wall time; streams run independently. A
// hold opens when the stream's gate word reaches its number (release() raises the word too, as
// a gate opener does first from another thread). The flag write queued by raise_flag takes
// effect when its stream reaches it; a preemptible kernel that starts while the flag is up
// exits at once (one already running runs to its end). The timeline is worked out lazily, under
// one mutex, whenever a call looks at it; a gate raised by another thread counts as opened when
// the next call sees it (work the sentinel opens while the scheduler's thread is blocked starts
// when that thread calls in again: test admission times, not start times, against it).
//
// Thread safety: now(), completion_word() and inputs_in_staging() may be called from any thread
// (the sentinel, submitters), and GateOpener::open() writes the gate word from any thread; the
// rest comes from the scheduler's thread.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "sched/exec_device.h"

namespace atl::sched::testing {

class HoldGateDevice final : public ExecDevice {
 public:
  HoldGateDevice();

  // Every kernel of `instance` takes this long (default 1 ms). Before the scheduler runs.
  void set_kernel_ns(InstanceId instance, DeviceTime kernel_ns);
  // A slow launch call: the first preemptible launch() after the next lower_flag() runs
  // `on_block` on the calling thread, then blocks that thread for `block`.
  void block_first_be_launch_after_lower(std::chrono::nanoseconds block, std::function<void()> on_block);
  // When that launch call returned (-1 before): read on another thread.
  DeviceTime block_returned_at() const;

  std::string name() const override { return "hold-gate"; }
  std::string description() const override { return "test device: fixed-time kernels, holds and gate words"; }
  CompileTarget target() const override { return {}; }
  bool computes() const override { return false; }
  InstanceId load(const Program& program, const WeightStore& weights) override;
  const Program& program(InstanceId instance) const override;
  using ExecDevice::write_inputs;
  bool write_inputs(InstanceId, StreamId, std::span<const Tensor>, const std::function<bool()>&) override {
    return true;  // timing only: nothing to copy
  }
  std::vector<Tensor> read_outputs(InstanceId, StreamId) override { return {}; }

  StreamId create_stream(StreamPriority priority) override;
  uint64_t launch(StreamId stream, InstanceId instance, int kernel, const LaunchOptions& options) override;
  uint64_t completed(StreamId stream) override;
  std::optional<LaunchSpan> launch_span(StreamId stream, uint64_t seq) override;
  std::exception_ptr take_error(StreamId) override { return nullptr; }
  void raise_flag(StreamId via) override;
  void lower_flag() override;

  bool can_hold() const override { return true; }
  void hold(StreamId stream) override;
  void release(StreamId stream) override;
  void enqueue_inputs(InstanceId, StreamId) override {}  // the upload takes no time
  void stage_inputs(InstanceId, std::span<const Tensor>) override {}
  std::vector<Tensor> request_buffers(InstanceId instance) override;
  bool inputs_in_staging(InstanceId instance, std::span<const Tensor> inputs) override;
  std::optional<GateOpener> gate_opener(StreamId stream, int holds) override;
  uint32_t completion_word(StreamId stream) override;
  uint64_t completed_at(StreamId stream, uint32_t word) override;

  DeviceTime now() override;
  void wait_until(DeviceTime deadline) override;
  void synchronize(StreamId stream) override;

 private:
  struct Op {
    enum class Kind : uint8_t { kHold, kFlag, kKernel } kind = Kind::kKernel;
    DeviceTime enqueued = 0;
    uint32_t hold = 0;         // kHold: its number on the stream, from 1
    DeviceTime length = 0;     // kKernel
    bool preemptible = false;  // kKernel
    LaunchSpan span{kNever, kNever};
  };
  struct Stream {
    std::vector<Op> ops;
    size_t next_op = 0;           // the first not started
    DeviceTime free_at = 0;       // when the last started one ended
    std::vector<size_t> kernels;  // ops index of launch seq - 1
    uint64_t ended = 0;           // kernels ended
    uint32_t holds = 0, released = 0;
    std::vector<DeviceTime> opened_at;  // by hold number - 1; kNever while closed
    uint32_t gate_word = 0;             // raised by release() or a GateOpener (atomic_ref)
  };
  struct Instance {
    Program program;
    DeviceTime kernel_ns = 1'000'000;
    std::vector<Tensor> staging;
  };

  Stream& stream(StreamId id);
  // Works the timeline out up to `t`: opens holds whose gate word is up, starts what is ready,
  // in time order across streams, and counts kernels that ended. With mutex_ held.
  void advance(DeviceTime t);
  void see_open_holds(Stream& s, DeviceTime t);
  DeviceTime ready_at(const Stream& s) const;
  void start_next(Stream& s, DeviceTime at);
  DeviceTime next_end(const Stream& s) const;
  void sleep_until(DeviceTime t) const;

  const std::chrono::steady_clock::time_point origin_;
  std::vector<std::unique_ptr<Instance>> instances_;

  mutable std::mutex mutex_;
  std::deque<Stream> streams_;  // a deque: gate openers point into it
  bool flag_ = false;
  uint64_t ended_ = 0, ended_seen_ = 0;  // kernels ended on every stream; as of the last wait

  std::chrono::nanoseconds block_{0};
  std::function<void()> on_block_;
  bool block_after_lower_ = false, block_next_be_launch_ = false;
  std::atomic<DeviceTime> block_returned_at_{-1};
};

}  // namespace atl::sched::testing
