#include "sched/cuda_exec_device.h"

#include "core/env.h"
#include "core/error.h"

#ifdef ATOLL_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <deque>
#include <optional>
#include <span>
#include <thread>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/doorbell.h"
#include "backends/cuda/stream_gate.h"
#include "backends/cuda/stream_write.h"
#include "runtime/kernel_profiler.h"
#include "runtime/l2_measure.h"

namespace atl::sched {

namespace {

DeviceTime host_now() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr size_t kTimedRing = 4096;
// Host waits on the device that the scheduler makes (lowering the flag, draining held work)
// end in microseconds; one that takes this long is stuck behind held work, and says so.
constexpr DeviceTime kStuckWait = 5'000'000'000;
// A stream memory write on an idle stream lands in microseconds.
constexpr DeviceTime kProbeWait = 20'000'000;
constexpr DeviceTime kAnchorAge = 20'000'000;  // 20 ms: drift stays around a microsecond

struct StreamState {
  cuda::Stream stream;
  uint64_t launched = 0;
  cuda::PinnedBuffer counter;  // mapped: the GPU writes the sequence number of each ended launch
  void* counter_device = nullptr;
  std::exception_ptr error;
  // Event pairs of timed launches, by sequence number modulo the ring.
  std::vector<cuda::Event> starts, ends;
  std::vector<uint64_t> ring_seq;
  std::unique_ptr<cuda::StreamGate> gate;  // made at the stream's first hold
  std::deque<uint64_t> holds;              // launches made before each pending hold
  // Doorbells (raise_flag behind a hold) on their own stream, made with the gate: the gate
  // tokens they wait for, oldest first, and the mapped word each writes its token to once rung.
  // A doorbell is a spinning kernel (ATOLL_CUDA_DOORBELL) or, with ATOLL_CUDA_SIDE_FLAG, the
  // stream's own writes behind a wait for the same gate token (side_flag).
  cuda::Stream doorbell_stream;
  cuda::PinnedBuffer rung;
  std::deque<uint32_t> doorbells;
  std::optional<uint32_t> must_ring;  // the newest doorbell whose gate opened, until seen rung
  // ATOLL_CUDA_GATE_STAMPS: mapped words the stream writes each hold's token to, once past the
  // hold and once past the flag write behind it (GateStampWatcher).
  cuda::PinnedBuffer stamps;
  // Launches not held back: what wait_until may wait for.
  uint64_t released_launches() const { return holds.empty() ? launched : holds.front(); }
};

class CudaExecDevice final : public ExecDevice {
 public:
  explicit CudaExecDevice(int device)
      : device_(bound(device)),
        backend_(make_cuda_backend(device)),
        doorbells_on_(doorbells_wanted()),
        side_flag_on_(side_flag_wanted()) {
    if (env_switch("ATOLL_CUDA_GATE_STAMPS", false)) stamp_watcher_ = std::make_unique<GateStampWatcher>();
    ATOLL_CHECK(!(doorbells_on_ && side_flag_on_), kInvalidArgument,
                "ATOLL_CUDA_DOORBELL=1 and ATOLL_CUDA_SIDE_FLAG=1: the flag is raised by one of them, not both");
    ATL_CUDA_CHECK(cudaMemset(flag(), 0, sizeof(int)));
    if (doorbells_on_) cuda::load_doorbell_kernel();
    control_ = cuda::make_stream();
    base_event_ = cuda::make_event(true);
    reanchor();
  }

  // Kernels still queued may use the counters and the flag about to be freed; held work runs
  // first (on whatever its staging holds), or synchronizing would wait forever.
  ~CudaExecDevice() override {
    cudaSetDevice(device_);
    for (StreamState& st : streams_) {
      if (st.gate) st.gate->open_all();
    }
    cudaDeviceSynchronize();
    // Persisting lines and the limit would otherwise slow down whatever runs next on the device.
    if (persisting_) {
      cudaCtxResetPersistingL2Cache();
      cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    }
  }

  std::string name() const override { return "cuda"; }
  std::string description() const override { return backend_->device_description(); }
  CompileTarget target() const override { return backend_->target(); }
  void bind_thread() override { bound(device_); }
  std::string pci_bus_id() const override { return cuda_pci_bus_id(device_); }

  InstanceId load(const Program& program, const WeightStore& weights) override {
    bind_thread();
    for (const StreamState& st : streams_) {
      // Allocation and a kernel's first load may synchronize the context, which held work blocks.
      ATOLL_CHECK(st.holds.empty(), kInvalidArgument, "cannot load '{}' while work is held on a stream", program.model);
    }
    std::unique_ptr<Instance> inst = backend_->load(program, weights);
    auto* cuda_inst = dynamic_cast<CudaInstance*>(inst.get());
    ATOLL_CHECK(cuda_inst != nullptr, kInternal, "the CUDA backend returned a non-CUDA instance");
    inst.release();
    instances_.emplace_back(cuda_inst);
    // No kernel may load lazily later, while RT work is held (ExecDevice::hold).
    cuda_inst->preload(control_.get());
    return static_cast<InstanceId>(instances_.size()) - 1;
  }

  const Program& program(InstanceId instance) const override { return inst(instance).program(); }

  // The runtime's one way to apply a residency config (atoll run --l2 uses it too). Resetting
  // persisting lines and setting the limit may synchronize the context, which held work blocks.
  int64_t set_l2_residency(InstanceId instance, const l2::ResidencyConfig* config, const l2::L2Device& d) override {
    bind_thread();
    for (const StreamState& st : streams_) {
      ATOLL_CHECK(st.holds.empty(), kInvalidArgument, "cannot change L2 residency while work is held on a stream");
    }
    return apply_l2_config(inst(instance), config, d);
  }

  int64_t set_l2_persistence(std::span<const InstanceId> instances, L2Persist buffer, int64_t budget_bytes) override {
    bind_thread();
    for (const StreamState& st : streams_) {
      ATOLL_CHECK(st.holds.empty(), kInvalidArgument, "cannot change L2 persistence while work is held on a stream");
    }
    ATOLL_CHECK(budget_bytes >= 0, kInvalidArgument, "L2 persistence budget of {} bytes", budget_bytes);
    int max_setaside = 0;
    ATL_CUDA_CHECK(cudaDeviceGetAttribute(&max_setaside, cudaDevAttrMaxPersistingL2CacheSize, device_));
    const bool on = buffer != L2Persist::kOff && budget_bytes > 0 && !instances.empty();
    const L2Persist asked = on ? buffer : L2Persist::kOff;
    // Lines persisting from an earlier setting would hold the set-aside.
    ATL_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
    ATL_CUDA_CHECK(cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize,
                                      on ? static_cast<size_t>(std::min<int64_t>(budget_bytes, max_setaside)) : 0));
    size_t granted = 0;
    ATL_CUDA_CHECK(cudaDeviceGetLimit(&granted, cudaLimitPersistingL2CacheSize));
    std::vector<int64_t> windows;  // all 0 when off: every ratio is then 0
    for (const InstanceId i : instances) windows.push_back(inst(i).l2_persist_bytes(asked));
    const std::vector<double> ratios = persist_hit_ratios(windows, static_cast<int64_t>(granted));
    for (size_t n = 0; n < instances.size(); ++n) inst(instances[n]).set_l2_persistence(asked, ratios[n]);
    persisting_ = on;
    return static_cast<int64_t>(granted);
  }

  // The kernel profiler (runtime/kernel_profiler.h) on the instance's own stream and flag.
  ModelProfile measure_profile(InstanceId instance, const std::function<void(int, int)>& on_kernel) override {
    bind_thread();
    for (const StreamState& st : streams_) {
      ATOLL_CHECK(st.holds.empty(), kInvalidArgument, "cannot profile while work is held on a stream");
    }
    CudaProfileOptions o;
    o.on_kernel = on_kernel;
    return profile_cuda_instance(inst(instance), description(), o);
  }

  using ExecDevice::write_inputs;
  bool write_inputs(InstanceId instance, StreamId stream, std::span<const Tensor> inputs,
                    const std::function<bool()>& should_yield) override {
    return inst(instance).stage_inputs(inputs, state(stream).stream.get(), should_yield);
  }

  // The downloads were enqueued behind the task's last kernel (see launch), and the caller saw
  // that launch end: the outputs are in host memory already.
  std::vector<Tensor> read_outputs(InstanceId instance, StreamId) override { return inst(instance).collect_outputs(); }

  StreamId create_stream(StreamPriority priority) override {
    bind_thread();
    StreamState st;
    st.stream = cuda::make_priority_stream(priority == StreamPriority::kHigh);
    st.counter = cuda::PinnedBuffer(sizeof(uint32_t), /*mapped=*/true);
    *static_cast<uint32_t*>(st.counter.get()) = 0;
    st.counter_device = st.counter.device_alias();
    st.starts.resize(kTimedRing);
    st.ends.resize(kTimedRing);
    st.ring_seq.assign(kTimedRing, 0);
    streams_.push_back(std::move(st));
    return static_cast<StreamId>(streams_.size()) - 1;
  }

  uint64_t launch(StreamId stream, InstanceId instance, int kernel, const LaunchOptions& options) override {
    StreamState& st = state(stream);
    const uint64_t seq = st.launched + 1;
    return enqueue_timed(st, seq, seq, options, [&] {
      CudaInstance& in = inst(instance);
      in.launch(kernel, st.stream.get(), options.preemptible ? flag() : nullptr);
      // A task's outputs travel to the host behind its last kernel, so that read_outputs need not
      // wait. After a preempted last kernel they are stale, and the rerun enqueues them again.
      if (kernel + 1 == static_cast<int>(in.program().kernels.size())) in.enqueue_outputs(st.stream.get());
    });
  }

  int64_t slice_units(InstanceId instance, int kernel) const override {
    return kernel == 0 ? 0 : inst(instance).slice_units(kernel);
  }

  bool grid_stride(InstanceId instance, int kernel) const override {
    return kernel != 0 && inst(instance).grid_stride(kernel);
  }

  uint64_t launch_slice(StreamId stream, InstanceId instance, int kernel, const KernelSlice& slice,
                        const LaunchOptions& options) override {
    StreamState& st = state(stream);
    const uint64_t seq = st.launched + 1;
    return enqueue_timed(st, seq, seq, options, [&] {
      CudaInstance& in = inst(instance);
      in.launch_slice(kernel, st.stream.get(), options.preemptible ? flag() : nullptr, slice.begin, slice.end,
                      slice.max_blocks);
      // The slice that ends the last kernel: as launch() does for the whole kernel.
      if (kernel + 1 == static_cast<int>(in.program().kernels.size()) && slice.end == in.slice_units(kernel)) {
        in.enqueue_outputs(st.stream.get());
      }
    });
  }

  // The whole program as one graph launch: an RT task costs one host call instead of one per
  // kernel (DenseNet-201: 407), so the scheduler thread is back to other arrivals at once.
  uint64_t launch_range(StreamId stream, InstanceId instance, int first, const LaunchOptions& options) override {
    CudaInstance& in = inst(instance);
    if (first != 0 || options.preemptible) return ExecDevice::launch_range(stream, instance, first, options);
    StreamState& st = state(stream);
    const uint64_t first_seq = st.launched + 1;
    return enqueue_timed(st, first_seq, st.launched + in.program().kernels.size(), options, [&] {
      in.enqueue_program(st.stream.get());
      in.enqueue_outputs(st.stream.get());
    });
  }

  // The counter holds the low 32 bits of the last ended launch; fewer than 2^32 are in flight.
  uint64_t completed(StreamId stream) override { return completed_at(stream, completion_word(stream)); }

  std::optional<LaunchSpan> launch_span(StreamId stream, uint64_t seq) override {
    StreamState& st = state(stream);
    const size_t slot = seq % kTimedRing;
    if (st.ring_seq[slot] != seq || !st.starts[slot] || completed(stream) < seq) return std::nullopt;
    // The GPU's event clock and the host clock drift apart by tens of microseconds per second:
    // convert through an anchor taken at most kAnchorAge ago.
    if (host_now() - base_host_ > kAnchorAge) reanchor();
    float start_ms = 0, end_ms = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&start_ms, base_event_.get(), st.starts[slot].get()));
    ATL_CUDA_CHECK(cudaEventElapsedTime(&end_ms, base_event_.get(), st.ends[slot].get()));
    return LaunchSpan{base_host_ + static_cast<DeviceTime>(static_cast<double>(start_ms) * 1e6),
                      base_host_ + static_cast<DeviceTime>(static_cast<double>(end_ms) * 1e6)};
  }

  std::exception_ptr take_error(StreamId stream) override {
    StreamState& st = state(stream);
    if (!st.error) {
      const cudaError_t e = cudaStreamQuery(st.stream.get());
      if (e != cudaSuccess && e != cudaErrorNotReady) {
        try {
          cuda::throw_cuda_error(e, "cudaStreamQuery", __FILE__, __LINE__);
        } catch (...) {
          st.error = std::current_exception();
        }
      }
    }
    return std::exchange(st.error, nullptr);
  }

  // Behind a hold, a doorbell (when on) raises the flag as soon as the GPU sees the gate open,
  // several microseconds before the held stream's own write (doorbell.h); the write stays, for
  // a doorbell that found no SM free.
  // With the side flag, the write goes on the doorbell stream instead, behind a wait for the
  // same gate token: the held stream's upload then starts at the gate as in rt-only, not behind
  // the write's landing (4.6-6.7 us p50 after the gate, atoll_bench_gate).
  void raise_flag(StreamId via) override {
    StreamState& st = state(via);
    if ((doorbells_on_ || side_flag_on_) && st.gate && st.gate->pending() > 0) {
      const uint32_t token = st.gate->newest_hold_token();
      auto* rung = static_cast<uint32_t*>(st.rung.device_alias());
      if (side_flag_on_) {
        st.gate->follow(st.doorbell_stream.get());
        cuda::stream_write_value32(st.doorbell_stream.get(), flag(), 1);
        cuda::stream_write_value32(st.doorbell_stream.get(), rung, token);
      } else {
        cuda::launch_doorbell(st.gate->device_word(), token, flag(), rung, st.doorbell_stream.get());
      }
      st.doorbells.push_back(token);
      if (side_flag_on_) return;
    }
    cuda::stream_write_value32(st.stream.get(), flag(), 1);
    if (stamp_watcher_ && st.gate && st.gate->pending() > 0) {
      cuda::stream_write_value32(st.stream.get(), stamp_word(st, 1), st.gate->newest_hold_token());
    }
  }

  // A doorbell whose gate opened may still be waiting for an SM; lowering the flag before it
  // rings would leave the flag up behind the scheduler's back, so the lowering waits for it.
  void lower_flag() override {
    bind_thread();  // also called where the scheduler is destroyed, off its thread
    wait_for_opened_doorbells();
    ATL_CUDA_CHECK(cudaMemsetAsync(flag(), 0, sizeof(int), control_.get()));
    wait_bounded(control_.get(), "lowering the preemption flag");
  }

  std::optional<GateStamps> take_gate_stamps() override {
    return stamp_watcher_ ? std::optional<GateStamps>(stamp_watcher_->take()) : std::nullopt;
  }

  bool can_hold() const override { return true; }

  // Holds every stream of `held`, then has every other stream and the control stream write a
  // mapped word: a write that does not land within kProbeWait sits behind a hold in a shared
  // hardware queue. The holds are opened and the streams drained before it returns.
  bool holds_isolate(std::span<const StreamId> held) override {
    bind_thread();
    std::vector<cudaStream_t> others{control_.get()};
    for (size_t s = 0; s < streams_.size(); ++s) {
      if (std::find(held.begin(), held.end(), static_cast<StreamId>(s)) == held.end()) {
        others.push_back(streams_[s].stream.get());
      }
    }
    for (const StreamId s : held) make_gate(state(s));
    if (doorbells_on_ || side_flag_on_) {
      // A doorbell stuck behind another stream's hold would ring late, and lowering the flag
      // waits for it: the held streams' doorbell streams must pass too. A side flag's stream
      // holds as well, and nothing else may wait behind it.
      std::vector<cudaStream_t> with_bells = others;
      for (const StreamId s : held) with_bells.push_back(state(s).doorbell_stream.get());
      if (probe_holds(held, with_bells, false) && (!side_flag_on_ || side_streams_isolate(held, others))) return true;
      spdlog::warn(
          "cuda: doorbell streams share hardware queues with held streams; the flag is raised by the held "
          "streams alone");
      doorbells_on_ = side_flag_on_ = false;
    }
    return probe_holds(held, others, false);
  }

  // With side flags, twice as many streams wait on gates: none may hold up the others' streams,
  // nor another lane's (its upload would wait for the other lane's next request).
  bool side_streams_isolate(std::span<const StreamId> held, std::span<const cudaStream_t> others) {
    if (!probe_holds(held, others, true)) return false;
    for (const StreamId lane : held) {
      std::vector<StreamId> rest;
      for (const StreamId s : held) {
        if (s != lane) rest.push_back(s);
      }
      const cudaStream_t own[] = {state(lane).stream.get(), state(lane).doorbell_stream.get()};
      if (!probe_holds(rest, own, true)) return false;
    }
    return true;
  }

  // Whether every stream of `others` gets past a mapped write while `held` hold work (and, with
  // `bells_follow`, their doorbell streams wait on the same holds, as side flags do).
  bool probe_holds(std::span<const StreamId> held, std::span<const cudaStream_t> others, bool bells_follow) {
    cuda::PinnedBuffer words(others.size() * sizeof(uint32_t), /*mapped=*/true);
    auto* word = static_cast<uint32_t*>(words.get());
    std::fill(word, word + others.size(), 0u);
    for (const StreamId s : held) {
      hold(s);
      if (bells_follow) state(s).gate->follow(state(s).doorbell_stream.get());
    }
    for (size_t i = 0; i < others.size(); ++i) {
      cuda::stream_write_value32(others[i], static_cast<uint32_t*>(words.device_alias()) + i, 1);
    }
    auto all_landed = [&] {
      return std::all_of(word, word + others.size(),
                         [](uint32_t& w) { return std::atomic_ref<uint32_t>(w).load(std::memory_order_acquire) == 1; });
    };
    const DeviceTime deadline = host_now() + kProbeWait;
    while (!all_landed() && host_now() < deadline) std::this_thread::yield();
    const bool isolated = all_landed();
    for (const StreamId s : held) release(s);
    for (cudaStream_t s : others) wait_bounded(s, "the hold probe");
    for (const StreamId s : held) {
      wait_bounded(state(s).stream.get(), "the hold probe");
      if (bells_follow) wait_bounded(state(s).doorbell_stream.get(), "the hold probe");
    }
    return isolated;
  }

  void hold(StreamId stream) override {
    StreamState& st = state(stream);
    make_gate(st);
    st.gate->hold(st.stream.get());
    if (stamp_watcher_) cuda::stream_write_value32(st.stream.get(), stamp_word(st, 0), st.gate->newest_hold_token());
    st.holds.push_back(st.launched);
  }

  void release(StreamId stream) override {
    StreamState& st = state(stream);
    ATOLL_CHECK(!st.holds.empty(), kInvalidArgument, "stream {} has no hold to release", stream);
    st.gate->open();
    st.holds.pop_front();
    const uint32_t opened = st.gate->token_after(0);
    while (!st.doorbells.empty() && static_cast<int32_t>(opened - st.doorbells.front()) >= 0) {
      st.must_ring = st.doorbells.front();
      st.doorbells.pop_front();
    }
  }

  void enqueue_inputs(InstanceId instance, StreamId stream) override {
    inst(instance).enqueue_inputs(state(stream).stream.get());
  }

  void stage_inputs(InstanceId instance, std::span<const Tensor> inputs) override {
    inst(instance).fill_staging(inputs);
  }

  std::vector<Tensor> request_buffers(InstanceId instance) override { return inst(instance).staging_inputs(); }
  bool inputs_in_staging(InstanceId instance, std::span<const Tensor> inputs) override {
    return inst(instance).inputs_are_staging(inputs);
  }

  std::optional<GateOpener> gate_opener(StreamId stream, int holds) override {
    StreamState& st = state(stream);
    if (!st.gate || holds <= 0 || st.gate->pending() < static_cast<uint32_t>(holds)) return std::nullopt;
    return GateOpener{st.gate->host_word(), st.gate->token_after(static_cast<uint32_t>(holds))};
  }

  // Any thread: reads only the stream's mapped counter (state() also grows seen_).
  uint32_t completion_word(StreamId stream) override {
    ATOLL_CHECK(stream >= 0 && stream < static_cast<StreamId>(streams_.size()), kInvalidArgument, "no stream {}",
                stream);
    const StreamState& st = streams_[static_cast<size_t>(stream)];
    return std::atomic_ref<uint32_t>(*static_cast<uint32_t*>(st.counter.get())).load(std::memory_order_acquire);
  }

  uint64_t completed_at(StreamId stream, uint32_t word) override {
    const StreamState& st = state(stream);
    return st.launched - static_cast<uint32_t>(static_cast<uint32_t>(st.launched) - word);
  }

  void set_sm_copies(InstanceId instance, bool on) override { inst(instance).set_sm_copies(on); }
  bool can_copy_on_sms() const override { return true; }
  void set_uploads_with_first_kernel(InstanceId instance, bool on) override {
    inst(instance).set_uploads_with_first_kernel(on);
  }

  DeviceTime now() override { return host_now(); }

  void wait_until(DeviceTime deadline) override {
    // Spins on the mapped counters: a launch ending shows up within a microsecond or so.
    seen_.resize(streams_.size(), 0);
    bool in_flight = false;
    for (size_t s = 0; s < streams_.size(); ++s) {
      const uint64_t done = completed(static_cast<StreamId>(s));
      in_flight |= done < streams_[s].released_launches();
      if (done > seen_[s]) {
        seen_[s] = done;
        return;  // something ended since the previous call
      }
    }
    if (!in_flight && deadline == kNever) return;
    while (host_now() < deadline) {
      for (size_t s = 0; s < streams_.size(); ++s) {
        const uint64_t c = completed(static_cast<StreamId>(s));
        if (c > seen_[s]) {
          seen_[s] = c;
          return;
        }
      }
      if (!in_flight) std::this_thread::yield();
    }
  }

  void synchronize(StreamId stream) override {
    bind_thread();
    StreamState& st = state(stream);
    ATOLL_CHECK(st.holds.empty(), kInvalidArgument, "stream {} has held work: synchronizing would never return",
                stream);
    wait_bounded(st.stream.get(), "synchronizing a scheduler stream");
  }

 private:
  static int bound(int device) {
    ATL_CUDA_CHECK(cudaSetDevice(device));
    return device;
  }
  int* flag() const { return static_cast<int*>(flag_buffer_.get()); }
  // Off unless ATOLL_CUDA_DOORBELL=1: on the H200 (DISB B and C, session 25) the doorbell stopped
  // the running BE kernels 5 us sooner but moved no RT task's start, and its spinning block cost
  // the RT tasks 12 us on the device and 2-3 points of RT p99.
  // Word `i` of the stream's gate stamps (0: past the hold, 1: past the flag write), as the device sees it.
  static uint32_t* stamp_word(StreamState& st, int i) { return static_cast<uint32_t*>(st.stamps.device_alias()) + i; }
  static bool doorbells_wanted() { return env_switch("ATOLL_CUDA_DOORBELL", false); }
  // Off until measured: moves the flag write off the held stream (raise_flag).
  static bool side_flag_wanted() { return env_switch("ATOLL_CUDA_SIDE_FLAG", false); }
  void make_gate(StreamState& st) {
    if (st.gate) return;
    st.gate = std::make_unique<cuda::StreamGate>();
    if (stamp_watcher_) {
      st.stamps = cuda::PinnedBuffer(2 * sizeof(uint32_t), /*mapped=*/true);
      auto* words = static_cast<uint32_t*>(st.stamps.get());
      words[0] = words[1] = 0;
      stamp_watcher_->watch(st.gate->host_word(), words, words + 1);
    }
    if (!doorbells_on_ && !side_flag_on_) return;
    st.doorbell_stream = cuda::make_priority_stream(true);
    st.rung = cuda::PinnedBuffer(sizeof(uint32_t), /*mapped=*/true);
    *static_cast<uint32_t*>(st.rung.get()) = 0;
  }
  // Each doorbell whose gate opened rings within microseconds of getting an SM, which the flag
  // (raised by the held stream's write too) frees: a bounded wait.
  void wait_for_opened_doorbells() {
    const DeviceTime deadline = host_now() + kStuckWait;
    for (StreamState& st : streams_) {
      if (!st.must_ring) continue;
      std::atomic_ref<uint32_t> rung(*static_cast<uint32_t*>(st.rung.get()));
      while (static_cast<int32_t>(rung.load(std::memory_order_acquire) - *st.must_ring) < 0) {
        ATOLL_CHECK(host_now() < deadline, kInternal, "a doorbell whose gate opened did not ring in {} s",
                    kStuckWait / 1'000'000'000);
        std::this_thread::yield();
      }
      st.must_ring.reset();
    }
  }
  CudaInstance& inst(InstanceId id) const {
    ATOLL_CHECK(id >= 0 && id < static_cast<InstanceId>(instances_.size()), kInvalidArgument, "no instance {}", id);
    return *instances_[static_cast<size_t>(id)];
  }
  StreamState& state(StreamId id) {
    ATOLL_CHECK(id >= 0 && id < static_cast<StreamId>(streams_.size()), kInvalidArgument, "no stream {}", id);
    if (seen_.size() < streams_.size()) seen_.resize(streams_.size(), 0);
    return streams_[static_cast<size_t>(id)];
  }
  // Enqueues `work` as launches first..last of `st`: timed, launch_span of both ends answers with
  // its start and end; the counter is written after it when reported, and also when it failed,
  // so the sequence stays whole and the scheduler sees the error through take_error().
  template <typename Work>
  uint64_t enqueue_timed(StreamState& st, uint64_t first, uint64_t last, const LaunchOptions& options, Work&& work) {
    st.launched = last;
    const std::array<size_t, 2> both{first % kTimedRing, last % kTimedRing};
    const std::span<const size_t> slots(both.data(), first == last ? 1 : 2);  // one launch: one slot
    bool failed = false;
    try {
      if (options.timed) {
        for (const size_t slot : slots) {
          if (!st.starts[slot]) {
            st.starts[slot] = cuda::make_event(true);
            st.ends[slot] = cuda::make_event(true);
          }
          ATL_CUDA_CHECK(cudaEventRecord(st.starts[slot].get(), st.stream.get()));
        }
        st.ring_seq[both[0]] = first;
        st.ring_seq[both[1]] = last;
      }
      work();
      if (options.timed) {
        for (const size_t slot : slots) ATL_CUDA_CHECK(cudaEventRecord(st.ends[slot].get(), st.stream.get()));
      }
    } catch (...) {
      failed = true;
      if (!st.error) st.error = std::current_exception();
    }
    if (options.report || failed)
      cuda::stream_write_value32(st.stream.get(), st.counter_device, static_cast<uint32_t>(last));
    return last;
  }
  // Waits for `stream` to drain, failing after kStuckWait instead of hanging.
  void wait_bounded(cudaStream_t stream, const char* what) {
    const DeviceTime deadline = host_now() + kStuckWait;
    for (;;) {
      const cudaError_t e = cudaStreamQuery(stream);
      if (e == cudaSuccess) return;
      if (e != cudaErrorNotReady) cuda::throw_cuda_error(e, "cudaStreamQuery", __FILE__, __LINE__);
      if (host_now() > deadline) {
        size_t held = 0;
        for (const StreamState& st : streams_) held += st.holds.empty() ? 0 : 1;
        ATOLL_THROW(kInternal, "{} did not finish in {} s: {} streams hold work ({} hardware queues)", what,
                    kStuckWait / 1'000'000'000, held, cuda::hardware_queues());
      }
      std::this_thread::yield();
    }
  }

  // Pairs a device event with the host clock: the event lands between the two host readings
  // (on an idle control stream, microseconds apart), so their midpoint is its host time.
  void reanchor() {
    const DeviceTime before = host_now();
    ATL_CUDA_CHECK(cudaEventRecord(base_event_.get(), control_.get()));
    ATL_CUDA_CHECK(cudaEventSynchronize(base_event_.get()));
    base_host_ = before + (host_now() - before) / 2;
  }

  int device_;               // first: the members below allocate on it
  bool persisting_ = false;  // set_l2_persistence set a set-aside
  std::unique_ptr<Backend> backend_;
  bool doorbells_on_;  // doorbells_wanted()
  bool side_flag_on_;  // side_flag_wanted()
  std::vector<std::unique_ptr<CudaInstance>> instances_;
  std::deque<StreamState> streams_;
  std::vector<uint64_t> seen_;
  cuda::DeviceBuffer flag_buffer_{sizeof(int)};  // allocated on device_
  cuda::Stream control_;
  cuda::Event base_event_;
  DeviceTime base_host_ = 0;
  // Last: stopped before the streams' stamp words are freed. Null unless ATOLL_CUDA_GATE_STAMPS=1.
  std::unique_ptr<GateStampWatcher> stamp_watcher_;
};

}  // namespace

std::unique_ptr<ExecDevice> make_cuda_exec_device(int device) {
  ATOLL_CHECK(cuda_device_available(), kUnsupported, "--device cuda: {}", cuda_unavailable_reason());
  return std::make_unique<CudaExecDevice>(device);
}

}  // namespace atl::sched

#else

namespace atl::sched {

std::unique_ptr<ExecDevice> make_cuda_exec_device(int) {
  ATOLL_THROW(kUnsupported, "--device cuda: this build has no CUDA backend (configure with nvcc present)");
}

}  // namespace atl::sched

#endif
