#pragma once
// A deterministic discrete-event model of a GPU as one host thread drives it: SMs with block
// slots, in-order streams with priorities, kernels as grids of equal blocks, and a preemption
// flag that preemptible blocks check when they start and at loop points while they run.
// Time is simulated in nanoseconds; nothing sleeps, and the same calls give the same timeline.
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <vector>

#include "backends/backend.h"
#include "program/program.h"

namespace atl::sim {

using SimTime = int64_t;  // nanoseconds since the device was created
inline constexpr SimTime kSimForever = std::numeric_limits<SimTime>::max();

// H200-like defaults. Peaks are effective rates (what tuned fp16 kernels reach), not datasheet.
struct SimGpuConfig {
  int sm_count = 132;
  int blocks_per_sm = 2;             // resident blocks per SM: the device has sm_count * this slots
  double peak_flops = 250e12;        // flop/s
  double peak_bytes_per_s = 3.3e12;  // HBM bytes/s
  SimTime block_floor_ns = 2000;     // shortest block: its fixed start-up and write-back cost
  int64_t elems_per_block = 4096;    // output elements one block computes (the grid-size model)
  SimTime split_block_ns = 20000;    // longer blocks are split (split-K, reductions), up to every slot
  // Host time of the calls the scheduler makes, from DISB C reset on the H200 (session 12,
  // modes[].device_calls): a kernel launch with its completion write 7.8 us, a stream memory
  // op (hold, flag write) 2.1 us, a stream's error query 2.2 us.
  SimTime launch_call_ns = 7800;     // one launch call (a kernel, or a whole program at once)
  SimTime memop_call_ns = 2000;      // one stream memory-op call: a hold or a flag write
  SimTime query_call_ns = 2200;      // take_error's query of a stream
  SimTime launch_latency_ns = 5000;  // from the launch call until the kernel can start on the device
  SimTime flag_write_ns = 1500;      // a stream memory write from its call until it lands
  SimTime gate_open_ns = 1500;       // a host store releasing held work until the stream moves
  SimTime block_exit_ns = 300;       // a block that sees the flag at entry still holds its slot this long
  SimTime loop_check_ns = 2000;      // check interval of kernels whose shape gives none; 0 = never
  // How the CUDA kernels check, from which each kernel's own interval is derived (check_ns_of):
  int64_t gemm_check_k = 128;      // K a GEMM block covers between flag reads (4 tiles of 32)
  // The same for the sm_90 TMA GEMM (GEMMs and convolutions over whole 64-channel K tiles):
  // CudaBackendOptions::gemm_check_tiles' default, 4 tiles of 64.
  int64_t tma_gemm_check_k = 256;
  int64_t item_elems = 2048;   // outputs of one CUDA block of a per-item kernel (256 threads x 8)
  SimTime io_call_ns = 4000;   // host time to copy one request's inputs or outputs

  int64_t slot_count() const { return static_cast<int64_t>(sm_count) * blocks_per_sm; }
};

// One kernel's launch shape in the model: `blocks` equal blocks of `block_ns` each, whose
// running blocks check the preemption flag every `check_ns` (0: SimGpuConfig::loop_check_ns).
struct SimKernelShape {
  int64_t blocks = 1;
  SimTime block_ns = 1000;
  SimTime check_ns = 0;
  friend bool operator==(const SimKernelShape&, const SimKernelShape&) = default;
};

// Grid and block time of every kernel from a roofline over Kernel::flops and bytes_moved. A
// block gets one slot's share of the peaks, so a small grid runs slower than the full-GPU
// roofline, as batch-1 kernels do.
std::vector<SimKernelShape> roofline_shapes(const Program& program, const SimGpuConfig& config);
// How often a running block of `k` (shape `s`) reads the flag, the way the CUDA kernel does:
// GEMM-backed kernels (image stems included) every gemm_check_k of K (tma_gemm_check_k where K
// comes in whole 64-channel tiles, as the TMA GEMM takes it), each read
// tested one check later (so those intervals count twice); every other kernel once per item (a
// CUDA block of item_elems outputs), also tested one item later. Never above block_ns: every block
// checks when it starts.
SimTime check_ns_of(const Kernel& k, const SimKernelShape& s, const SimGpuConfig& config);
// Whether the CUDA backend runs `k` as a tiled GEMM (Gemm, MatMul, every convolution but
// depthwise ones), the kernels it can launch in slices of output tiles.
bool runs_as_gemm(const Kernel& k);
// Whether the CUDA backend runs `k` as grid-stride loops over grids it may cap (KernelLaunch::
// grid_stride): the memory-bound families (elementwise, ScaleShift, pools, ReduceMean, Cast,
// Transpose, layout casts, Slice, Concat, Gather, Softmax, LayerNorm) and depthwise convolutions.
// Not GEMMs (the model has no GEMV path) nor attention, whose grids the data fixes.
bool runs_grid_stride(const Kernel& k);
// Kernel `index` runs whole on a capped grid as a padding slice: runs_grid_stride and not kernel
// 0, which may carry uploads.
bool sim_grid_stride(const Kernel& k, int index);
// The units a padding slice of kernel `index` (shape `s`) takes a range of on the simulated GPU:
// its blocks where the CUDA backend could slice it (runs_as_gemm, two blocks or more, not kernel 0,
// which may carry uploads), 1 where it is sim_grid_stride, else 0.
int64_t sim_slice_units(const Kernel& k, int index, const SimKernelShape& s);

struct SimLaunch {
  SimKernelShape shape;
  bool preemptible = false;
  // When the launch completes without any block having exited on the flag, kernel `kernel` of
  // `work` runs (the numerics of the launch); a cut launch writes nothing.
  Instance* work = nullptr;
  int kernel = 0;
  int tag = 0;  // the caller's label, copied into the trace
  // Called when the launch completes uncut, before `work` runs; false skips the work (a padding
  // slice after which units of its kernel are still to run). Empty: the work runs.
  std::function<bool()> completes_kernel;
};

// One completed kernel launch, in completion order.
struct SimLaunchRecord {
  int stream = 0;
  uint64_t seq = 0;
  int tag = 0;
  int kernel = 0;
  SimTime issued = 0;   // host launch call
  SimTime visible = 0;  // could start from here on
  SimTime start = 0;    // first block dispatched
  SimTime end = 0;      // last block left its slot
  int64_t blocks = 0;
  bool preemptible = false;
  bool cut = false;  // at least one block exited on the flag
  friend bool operator==(const SimLaunchRecord&, const SimLaunchRecord&) = default;
};

struct SimSpan {
  SimTime start = 0;
  SimTime end = 0;
};

class SimGpu {
 public:
  explicit SimGpu(SimGpuConfig config = {}, bool record_trace = false);

  const SimGpuConfig& config() const { return config_; }
  int64_t slots() const { return slots_; }

  // Streams run their work in order; blocks of higher-priority streams are dispatched first.
  int create_stream(int priority);
  // Enqueues a kernel; returns its sequence number on the stream (1, 2, ...). The host clock
  // advances by launch_call_ns.
  uint64_t launch(int stream, const SimLaunch& launch);
  // Enqueues `launches` in order with one launch call's host time (a CUDA graph launch); returns
  // the last one's sequence number.
  uint64_t launch_all(int stream, const std::vector<SimLaunch>& launches);
  // Enqueues a write of the preemption flag, ordered after earlier work on `stream`.
  void write_flag(int stream, bool raised);
  // Enqueues a hold: later work on `stream` waits until release() (a host store, no call cost).
  void hold(int stream);
  // Opens the stream's oldest pending hold. Throws kInvalidArgument when none is pending.
  void release(int stream);
  // Writes the flag from the host and waits until it has landed.
  void write_flag_blocking(bool raised);
  bool flag() const { return flag_; }

  uint64_t launched(int stream) const;
  uint64_t completed(int stream) const;
  // Start/end of a completed launch among the stream's most recent 4096.
  std::optional<SimSpan> span(int stream, uint64_t seq) const;
  // The first error a launch's numerics raised on this stream since the last call, or null.
  std::exception_ptr take_error(int stream);

  SimTime now() const { return now_; }
  // The host spends `ns`: device events up to then happen meanwhile.
  void advance(SimTime ns);
  // Returns as soon as a launch has completed since the previous call (the clock stops at that
  // completion), or when the clock reaches `deadline` (never moves it past; kSimForever with no
  // work left returns at once).
  void run_until_completion(SimTime deadline);
  // Runs until every launch on `stream` has completed.
  void synchronize(int stream);
  bool busy() const;

  const std::vector<SimLaunchRecord>& trace() const { return trace_; }

 private:
  struct Item {
    bool flag_write = false;
    bool flag_value = false;
    bool gate = false;  // a hold: visible once released
    uint64_t seq = 0;   // kernels only
    SimLaunch launch;
    SimTime issued = 0, visible = 0, ready = 0, start = -1;
    int64_t dispatched = 0;
    int running_groups = 0;
    bool cut = false;
  };
  struct Stream {
    int priority = 0;
    std::deque<Item> items;
    bool head_active = false;  // the front kernel is dispatching or running
    uint64_t launched = 0, completed = 0;
    std::vector<std::pair<uint64_t, SimSpan>> spans;  // ring indexed by seq
    std::exception_ptr error;
  };
  // Blocks of one kernel dispatched at one instant: they start together and end together.
  struct Group {
    int stream = 0;
    Item* item = nullptr;
    int64_t blocks = 0;
    SimTime start = 0, end = 0;
    uint32_t generation = 0;
    bool live = false;
    bool exiting = false;  // saw the flag (at entry or a loop point)
  };
  enum class EventKind : uint8_t { kStreamHead, kGroupEnd };
  struct Event {
    SimTime time;
    uint64_t order;  // ties broken by insertion order: the timeline is deterministic
    EventKind kind;
    int index;
    uint32_t generation;
    bool operator>(const Event& o) const { return time != o.time ? time > o.time : order > o.order; }
  };

  Stream& stream_at(int stream);
  const Stream& stream_at(int stream) const;
  void push_event(SimTime time, EventKind kind, int index, uint32_t generation = 0);
  void process(const Event& e);
  void activate_head(int stream);
  void dispatch();
  void end_group(int index);
  void complete_head(int stream);
  void set_flag(bool raised);
  void run_events_until(SimTime time);

  SimGpuConfig config_;
  int64_t slots_;
  bool record_trace_;
  SimTime now_ = 0;
  bool flag_ = false;
  int64_t free_slots_;
  uint64_t event_order_ = 0;
  uint64_t completions_ = 0;
  uint64_t completions_seen_ = 0;
  std::vector<Stream> streams_;
  std::vector<Group> groups_;
  std::vector<int> free_groups_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::vector<SimLaunchRecord> trace_;
};

}  // namespace atl::sim
