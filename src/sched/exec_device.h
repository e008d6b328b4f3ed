#pragma once
// The device as the scheduler drives it: loaded program instances, streams with a priority,
// kernel-at-a-time launches, per-stream completion counters, one preemption flag and a clock.
// Preemption is expressed only through these operations, so the scheduler never knows which
// backend it drives. Every call comes from the one scheduler thread, except where noted.
//
// Mapping onto CUDA: a stream is a cudaStream_t created with a priority; launch() calls the
// CUDA backend's launch of kernel i with the flag pointer (preemptible) or nullptr, then records
// an event (or cuStreamWriteValue32 of the sequence number to a host-mapped counter), so
// completed() reads counters or queries events without synchronizing; raise_flag() is
// cuStreamWriteValue32 on the given stream; lower_flag() writes the flag and waits for it.
#include <cstdint>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/gate_word.h"
#include "core/tensor.h"
#include "ir/graph.h"
#include "profile/kernel_profile.h"
#include "program/program.h"
#include "sched/gate_stamps.h"

namespace atl::l2 {
struct ResidencyConfig;
struct L2Device;
}  // namespace atl::l2

namespace atl::sched {

using DeviceTime = int64_t;  // nanoseconds on the device's clock
inline constexpr DeviceTime kNever = std::numeric_limits<DeviceTime>::max();
using StreamId = int;
using InstanceId = int;

enum class StreamPriority : uint8_t { kLow, kHigh };

struct LaunchOptions {
  bool preemptible = false;  // the kernel checks the flag: at block entry and in its loops
  bool timed = false;        // launch_span() must answer for this launch
  // false: the device may skip reporting this launch's end on its own; completed() then counts
  // it when a later launch on the stream ends. Saves a device write per kernel of tasks that are
  // never rolled back. A failed launch is always reported.
  bool report = true;
};

// Opens holds from any thread: raises a gate word to a token (core/gate_word.h).
struct GateOpener {
  uint32_t* word = nullptr;
  uint32_t token = 0;
  void open() const { raise_gate_word(word, token); }
};

// Units [begin, end) of a kernel (ExecDevice::launch_slice) on at most max_blocks blocks (0: as
// many as are resident); of a grid-stride kernel, [0, 1): the whole kernel on a capped grid.
struct KernelSlice {
  int64_t begin = 0, end = 0;
  int max_blocks = 0;
};

struct LaunchSpan {
  DeviceTime start = 0;  // first block started
  DeviceTime end = 0;    // last block finished or exited
};

class ExecDevice {
 public:
  virtual ~ExecDevice() = default;

  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Makes this device the calling thread's own (CUDA: its current device), for a thread that
  // drives it while other devices share the process; the methods that are not on the launch
  // path bind themselves.
  virtual void bind_thread() {}
  // The PCI bus id of a real GPU ("" for the simulated one), which NVML names devices by.
  virtual std::string pci_bus_id() const { return ""; }
  // What compile_graph must produce for load().
  virtual CompileTarget target() const = 0;
  // Whether launches compute outputs from weight values; a timing-only device loads programs
  // with no weights at all.
  virtual bool computes() const { return true; }

  // Uploads weights and allocates the activation arena. An instance serves one task at a time.
  virtual InstanceId load(const Program& program, const WeightStore& weights) = 0;
  virtual const Program& program(InstanceId instance) const = 0;
  // Host tensors as Instance::set_input/get_output take them; the caller guarantees no launch
  // of the instance is in flight. write_inputs may copy asynchronously, ordered on `stream`
  // ahead of the kernels launched there next (the tensors may be freed when it returns). It polls
  // `should_yield` (may be empty) while it copies on the host; once that returns true it stops
  // and returns false, having enqueued nothing. read_outputs returns the outputs of the last
  // kernels that ended on `stream`. Devices that track only timing return no outputs.
  virtual bool write_inputs(InstanceId instance, StreamId stream, std::span<const Tensor> inputs,
                            const std::function<bool()>& should_yield) = 0;
  void write_inputs(InstanceId instance, StreamId stream, std::span<const Tensor> inputs) {
    write_inputs(instance, stream, inputs, {});
  }
  virtual std::vector<Tensor> read_outputs(InstanceId instance, StreamId stream) = 0;

  virtual StreamId create_stream(StreamPriority priority) = 0;
  // Enqueues kernel `kernel` of `instance` on `stream` without waiting. Returns the launch's
  // sequence number on that stream: 1 for its first launch, then 2, 3, ...
  virtual uint64_t launch(StreamId stream, InstanceId instance, int kernel, const LaunchOptions& options) = 0;
  // Enqueues kernels [first, last] of `instance` (last: the program's final kernel) on `stream`,
  // each taking one sequence number as launch() would give; returns the last. A device may send
  // them as one unit (CUDA: one graph launch of the whole program, when first is 0 and the range
  // is not preemptible). `timed`: launch_span of the first and of the last sequence number both
  // cover at least the range's kernels (the first's start and the last's end are the range's);
  // `report`: the range's end is reported. The default launches kernel by kernel.
  virtual uint64_t launch_range(StreamId stream, InstanceId instance, int first, const LaunchOptions& options);
  // ---- Slices of a kernel (padding) ----
  // The units kernel `kernel` of `instance` can run in pieces of: each writes only its own
  // outputs, so slices covering every unit once leave what one launch leaves. 0: it runs only
  // whole (kernel 0, which may carry the input uploads, always does). A device with a profile
  // attached counts units as the profile does (KernelProfile::slice_units).
  virtual int64_t slice_units(InstanceId instance, int kernel) const;
  // Whether kernel `kernel`'s one unit is the whole of a grid-stride kernel, which a slice runs on
  // at most its max_blocks blocks (padding's capped grids); false for kernel 0 and where units are
  // tiles. A device with a profile attached answers as the profile does (KernelProfile::grid_stride).
  virtual bool grid_stride(InstanceId instance, int kernel) const;
  // Enqueues one slice as one launch (one sequence number, as launch() gives). kUnsupported by
  // default, kInvalidArgument for a range outside the kernel's units.
  virtual uint64_t launch_slice(StreamId stream, InstanceId instance, int kernel, const KernelSlice& slice,
                                const LaunchOptions& options);
  // How many launches on `stream` have ended, run to completion or exited on the flag. Launches
  // end in sequence order; the count never decreases. Cheap: no synchronization.
  virtual uint64_t completed(StreamId stream) = 0;
  // Device start and end of an ended launch made with `timed`; nullopt once it has been
  // forgotten (devices keep at least the 4096 most recent per stream).
  virtual std::optional<LaunchSpan> launch_span(StreamId stream, uint64_t seq) = 0;
  // The first failure of a launch on `stream` since the last call, or null.
  virtual std::exception_ptr take_error(StreamId stream) = 0;

  // Raises the flag with a device write ordered on `via`: later work on `via` starts after it.
  // Preemptible kernels queued anywhere then exit at block entry, running ones at a loop point.
  virtual void raise_flag(StreamId via) = 0;
  // Lowers the flag; every kernel launched after this returns sees it low.
  virtual void lower_flag() = 0;

  // ---- A task enqueued before its request arrives ----
  // The RT arrival path without API calls: the scheduler enqueues an RT client's next task
  // (flag write, input upload, kernels) behind holds, and on arrival stages the inputs and
  // releases the holds. Devices that cannot hold say so; the others are unsupported there.
  virtual bool can_hold() const { return false; }
  // Whether work held on every stream of `held` at once leaves every other stream free to run.
  // A GPU runs streams on a few hardware queues in submission order, so a hold can delay the
  // streams that share its queue; CUDA finds out by trying.
  virtual bool holds_isolate(std::span<const StreamId> held) {
    (void)held;
    return can_hold();
  }
  // Work enqueued on `stream` after hold() waits on the device until the matching release();
  // a stream's holds are released in the order they were made. Launches behind a pending hold
  // are not in flight: wait_until does not wait for them. Pending holds block synchronize() and
  // load(); a device opens them all when it is destroyed.
  virtual void hold(StreamId stream);
  virtual void release(StreamId stream);
  // Enqueues on `stream` the upload of the inputs that stage_inputs later writes for `instance`.
  virtual void enqueue_inputs(InstanceId instance, StreamId stream);
  // Checks `inputs` (throws kInvalidArgument, having changed nothing) and writes them where the
  // enqueued upload reads them. The upload must still be held, or the instance idle.
  virtual void stage_inputs(InstanceId instance, std::span<const Tensor> inputs);
  // Request tensors over the instance's staging memory (empty where the device has none): a
  // request made of them skips the host copy into staging, so none lies on an RT request's way
  // to its first kernel. The caller writes them only while none of the instance's uploads is
  // pending, and not after the device is gone.
  virtual std::vector<Tensor> request_buffers(InstanceId instance);
  // Whether `inputs` are the instance's request_buffers: staging them copies nothing.
  virtual bool inputs_in_staging(InstanceId instance, std::span<const Tensor> inputs);

  // ---- Opening holds from another thread (the arrival sentinel) ----
  // The store that releases the next `holds` pending holds of `stream`, for a thread other than
  // the scheduler's to make first; the scheduler's own release() calls still follow and then
  // change nothing on the device. nullopt where the device has no such store or fewer holds
  // are pending.
  virtual std::optional<GateOpener> gate_opener(StreamId stream, int holds);
  // The raw completion word of `stream` (the low 32 bits of completed()), readable from any
  // thread, and the count it stands for, read back on the scheduler's thread.
  virtual uint32_t completion_word(StreamId stream);
  virtual uint64_t completed_at(StreamId stream, uint32_t word);
  // The instance's uploads and downloads run as kernels over mapped host memory (CUDA) instead of
  // copy-engine copies, which queue behind other streams' copies. kUnsupported by default.
  virtual void set_sm_copies(InstanceId instance, bool on);
  // A BE instance's input upload goes with each launch of its kernel 0, as a preemptible copy
  // by the SMs under the launch's flag (CUDA), instead of a copy-engine copy at staging: an RT
  // upload then never waits behind it, and a task rolled back to kernel 0 uploads again.
  // kUnsupported by default.
  virtual void set_uploads_with_first_kernel(InstanceId instance, bool on);
  // Whether set_sm_copies and set_uploads_with_first_kernel are supported.
  virtual bool can_copy_on_sms() const { return false; }

  // ---- Kernel profiles (the padding modes) ----
  // Attaches `profile` to an instance after checking it against the instance's program and,
  // unless the device simulates whichever device a profile was measured on, this device's
  // description (kInvalidArgument otherwise). Replaces an earlier one.
  virtual void set_profile(InstanceId instance, ModelProfile profile);
  // The instance's profile, or null when none is attached.
  virtual const ModelProfile* profile(InstanceId instance) const;
  // Profiles an idle instance on this device (the simulator: from its model; CUDA: the kernel
  // profiler), calling `on_kernel(done, total)` after each kernel. kUnsupported by default.
  virtual ModelProfile measure_profile(InstanceId instance, const std::function<void(int, int)>& on_kernel);

  // ---- L2 residency (AutoScratch) ----
  // Applies `config` to every later launch of an idle instance, as `atoll run --l2` does
  // (runtime/l2_measure.h, apply_l2_config: windows planned for preset `d`, which checks the
  // config against the instance's program; kInvalidArgument for another program). nullptr
  // removes it. The set-aside is one limit per device: the last instance to set it wins. Returns
  // the set-aside the driver granted (0 after removal). kUnsupported on devices without L2 control.
  virtual int64_t set_l2_residency(InstanceId instance, const l2::ResidencyConfig* config, const l2::L2Device& d);
  // Keeps `buffer` of each of `instances` (idle, no work held) persisting in L2 across their runs
  // (`atoll bench disb --rt-l2`): the device's set-aside becomes min(budget_bytes, its largest),
  // shared among the instances by persist_hit_ratios, lines persisting so far dropped.
  // L2Persist::kOff or a zero budget turns persistence off for them and the set-aside to 0.
  // Returns the set-aside granted. kUnsupported on devices without L2 control.
  virtual int64_t set_l2_persistence(std::span<const InstanceId> instances, L2Persist buffer, int64_t budget_bytes);

  // ---- Where an armed task's start goes (a diagnostic) ----
  // The delays, since the last call, from each host store that opened a hold to the device's
  // stream passing it and to the flag written behind it, on the host's clock (gate_stamps.h);
  // nullopt where the device does not stamp (CUDA: unless ATOLL_CUDA_GATE_STAMPS=1).
  virtual std::optional<GateStamps> take_gate_stamps() { return std::nullopt; }

  virtual DeviceTime now() = 0;
  // Whether now() is a simulated clock, moving only when driven, on which no host thread's delay
  // shows: the arrival sentinel then keeps normal priority (SentinelOptions::fifo_priority).
  virtual bool simulated_clock() const { return false; }
  // Blocks until a launch has ended since the previous call (or already had) or the clock
  // reaches `deadline`. May return early; never sleeps past the deadline. With kNever and
  // nothing in flight it returns at once.
  virtual void wait_until(DeviceTime deadline) = 0;
  // Waits until every launch on `stream` has ended.
  virtual void synchronize(StreamId stream) = 0;

 protected:
  // The simulator runs any device's profile (its kernels then take the measured times).
  virtual bool runs_foreign_profiles() const { return false; }

 private:
  std::map<InstanceId, ModelProfile> profiles_;
};

// How set_l2_persistence shares a set-aside of `setaside_bytes` among windows of `window_bytes`:
// the hit ratio of each (the share of its lines that persist), filling the smallest windows
// first and splitting what is left evenly, so no byte of the set-aside goes unused while a
// window is only partly covered and the covered bytes never exceed it.
std::vector<double> persist_hit_ratios(std::span<const int64_t> window_bytes, int64_t setaside_bytes);

}  // namespace atl::sched
