#pragma once
// The CUDA backend: fp16 NHWC kernels (tensor cores for convolution, Gemm and MatMul), every
// kernel idempotent and preemptible through a device-resident flag. Weights are uploaded once,
// the arena and a fixed workspace are allocated once; the run path only enqueues launches.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"

namespace atl {

// True when a CUDA device this build can run on answers; never throws (no driver, no GPU -> false).
bool cuda_device_available();
// Why cuda_device_available() is false ("" when it is true), for skip messages and notes.
std::string cuda_unavailable_reason();
// The device's PCI bus id ("0000:19:00.0"), which NVML names devices by.
std::string cuda_pci_bus_id(int device);

// How a BE upload's SM copy runs (set_uploads_with_first_kernel): blocks of 256 threads, each
// thread one 16-byte step per PCIe round trip, and which flag value a step tests. "Fresh" (the
// default) tests the value read beside the step's own PCIe read; "ahead" tests the value read
// during the step before, as every grid-stride kernel does, one round trip later. On the H200 the
// launch carrying a batch-32 upload exits 26.7 us after a raise with "ahead" and 21.4 us with
// "fresh" (p50; 16 blocks: 15.6 us but the upload runs 18% longer), session 23. 16 blocks since
// session 32: with 64, the uploads' PCIe reads delayed the GPU's poll of an armed RT lane's gate
// (DISB F on an H100: the stream passed its hold 207.8 us after the gate's store at p99, 73.3 us
// with 16), and DISB F's and G's preemption p99 fell from 196/208 us to 107/111 us.
// ATOLL_CUDA_UPLOAD_BLOCKS and ATOLL_CUDA_UPLOAD_FLAG let atoll_bench_kernel_exit --uploads and
// DISB compare the settings.
struct UploadCopy {
  int blocks = 16;
  bool fresh_flag = true;
};

struct CudaBackendOptions {
  int device = 0;
  // At load, time every tile/split-K alternative of each GEMM-backed kernel (once per distinct
  // geometry, on random operands) and keep the fastest; off keeps the cost model's choice.
  // Either way an instance's choices are fixed once loaded, so its results are deterministic.
  bool autotune = true;
  // Offer the Hopper wgmma GEMM tiles (sm_90 device, sm_90a build) to the planner and autotuner.
  // On by default since the GPU suite passed with them on the H200 (session 8); autotuning keeps
  // them only for the geometries where they time faster than the mma.sync tiles.
  bool wgmma = true;
  // Also offer the TMA tiles to convolutions whose A operand the TMA's im2col mode reads (64k
  // channels; ATOLL_CUDA_TMA_IM2COL=0 turns it off). On since the GPU suite passed with it on
  // the H200 (session 18).
  bool tma_im2col = true;
  // Also offer the ping-pong TMA tile (p128x128: each consumer warpgroup a whole tile, one's
  // epilogue beside the other's MMAs; ATOLL_CUDA_PINGPONG=1 turns it on). Off until the GPU suite
  // has run it and it has been timed on the H200.
  bool pingpong = false;
  // Also offer the 128x64 TMA tile with two blocks per SM (d128x64: three stages each, one block's
  // epilogue beside the other's MMAs; ATOLL_CUDA_DUAL_TILE=0 turns it off). Autotuning keeps it
  // where it times faster: on an H100 (session 37) VGG-19 and ResNet-50 ran 3.5-5.4% faster at
  // batch 8 and 32, VGG-19 b32's features.2 700 -> 524 us.
  bool dual_tile = true;
  // Also offer the cluster tile (c256x256: two blocks of a cluster, 128 rows each, whose producers
  // multicast B's halves into both, halving B's reads from L2; ATOLL_CUDA_CLUSTER_TILE=1 turns it
  // on). Off until the GPU suite has run it and it has been timed (built in session 38, no GPU).
  bool cluster_tile = false;
  // Also offer the GEMV path (gemv.cu) to batch-1 GEMMs of up to 8 rows over a plain A
  // (ATOLL_CUDA_GEMV=0 turns it off); autotuning keeps it wherever it times faster than the tiles.
  // On since session 32: every zoo model ran 0.3-3.6% faster at batch 1 on the H200 (sessions
  // 30-31), and on an H100 VGG-19 b1's exit p99 fell from 11.9 to 6.8 us and DISB A's RT p99 by 3%.
  bool gemv = true;
  // Compile attention's heads-first transposes into the MatMuls around them
  // (CompileTarget::matmul_head_views; ATOLL_CUDA_HEAD_VIEWS=0 turns it off). On since session 18,
  // likewise.
  bool head_views = true;
  // Merge Gemms that share their input into one grouped Gemm (CompileTarget::gemm_groups;
  // ATOLL_CUDA_GEMM_GROUPS=0 turns it off). On since the GPU suite passed with it on the H200
  // and BERT-base ran 7-15% faster at batch 1 and 8 (session 19).
  bool gemm_groups = true;
  // Fuse each attention's scores MatMul, Softmax and context MatMul into one kernel
  // (CompileTarget::fused_attention, attention.cu; ATOLL_CUDA_FUSED_ATTENTION=0 turns it off).
  // On since BERT-base and DistilBERT ran 13-16% faster with it at batch 1, 8 and 32 on the H200
  // and their GPU tests passed (session 24).
  bool fused_attention = true;
  // Instantiations of the flagless program graph each instance rotates through
  // (CudaInstance::set_program_graphs; ATOLL_CUDA_PROGRAM_GRAPHS=2). 1: on the H200 (session 22)
  // no graph launch blocked behind a running instantiation, and DISB E was no better with 2.
  int program_graphs = 1;
  // K tiles between the TMA GEMM's flag checks (a power of two from 1 to 16;
  // ATOLL_CUDA_GEMM_CHECK_TILES). Each check is a barrier of both consumer warpgroups, while a
  // longer distance lets a raise run that many more tiles (about 1 us each on a 128x256 tile).
  // 4 since session 32: on an H100 at BERT-base b32 the Gemm family's flag cost was +2.28% with
  // 2, +1.55% with 4 and +1.43% with 8, its exit p99 11.5, 13.8 and 17.9 us.
  int gemm_check_tiles = 4;
  // 32-column chunks between the wgmma epilogue's flag checks (1, 2, 4 or 8;
  // ATOLL_CUDA_GEMM_EPI_CHECK_CHUNKS). These checks are barriers of both consumer warpgroups too:
  // with K 768 a 128x256 tile makes three in its K loop at distance 4, one before its epilogue and
  // three in it, which is where the GEMMs' flag cost stays past distance 4 (+1.43% at 8, session
  // 32). A longer distance lets a raise run through more of the epilogue's chunks.
  int gemm_epi_check_chunks = 2;
  UploadCopy upload_copy;
  // Where autotuning's choices persist across processes ("" = nowhere; make_cuda_backend(int)
  // uses cuda::default_tune_cache_path(): $ATOLL_TUNE_CACHE, "off" for none, else the user's
  // cache folder). Only geometries not found there are timed at load.
  std::string tune_cache;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);
// Default options on `device`; the environment variable ATOLL_CUDA_AUTOTUNE=0 turns autotuning off.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

// A GEMM-backed kernel's tile/split-K choice, before and after timing the alternatives.
// How a load found its GEMM choices: timed now, or taken from the tuning cache.
struct LoadTuning {
  int timed = 0, cached = 0;  // distinct geometries
  double seconds = 0;         // spent timing and reading and writing the cache
};

struct GemmTuneResult {
  int kernel = -1;
  std::string before, after;  // e.g. "64x64/s4"
  double before_ms = 0, after_ms = 0;
  std::vector<std::pair<std::string, double>> candidates_ms;  // every alternative timed
};

// L2 residency (AutoScratch) as the CUDA backend applies it: a persisting set-aside and, per
// kernel, one access-policy window over the arena (hitProp persisting, missProp streaming). The
// l2 layer plans the windows from a slice config (l2::plan_windows); this struct keeps the
// backend free of that layer.
struct L2Window {
  int64_t offset = 0;  // arena offset
  int64_t bytes = 0;   // 0: the kernel launches without a window
};
struct L2Residency {
  std::vector<L2Window> windows;  // one per kernel, in Program order
  int64_t setaside_bytes = 0;     // requested cudaLimitPersistingL2CacheSize; the driver rounds it up
  double hit_ratio = 1.0;
};

// What load() returns on the CUDA backend, with the operations the scheduler, the profiler and
// the tests need beyond Instance. Instance::run_range and run use stream() and preempt_flag().
class CudaInstance : public Instance {
 public:
  // The instance's own stream (non-blocking) and its own flag word in device memory (0 = run).
  virtual cudaStream_t stream() const = 0;
  virtual int* preempt_flag() const = 0;
  // The scheduler's input and output path. stage_inputs copies every input into staging memory
  // (polling `should_yield` between 64 KiB pieces; when it returns true, stage_inputs returns
  // false having enqueued nothing) and then enqueues the uploads and conversions on `stream`, so
  // that an RT request's input lands right behind its flag write on the high-priority stream.
  // enqueue_outputs enqueues the conversion and download of every output on `stream`;
  // collect_outputs returns, without waiting, what the newest download that has ended wrote (a
  // later one may still be held, enqueued for a task whose request has not arrived): the caller
  // knows that work has ended (the scheduler enqueues it behind a task's last kernel). The
  // tensors are views of pinned memory that no later download writes while they are held.
  virtual bool stage_inputs(std::span<const Tensor> inputs, cudaStream_t stream,
                            const std::function<bool()>& should_yield) = 0;
  virtual void enqueue_outputs(cudaStream_t stream) = 0;
  virtual std::vector<Tensor> collect_outputs() = 0;
  // The same input path split for a task enqueued before its request exists (held behind a
  // StreamGate): enqueue_inputs enqueues the uploads from staging memory; fill_staging later
  // checks and copies the request's inputs there without waiting for any upload, so the caller
  // guarantees the uploads that read staging have not started (held) or have ended.
  virtual void enqueue_inputs(cudaStream_t stream) = 0;
  virtual void fill_staging(std::span<const Tensor> inputs) = 0;
  // Runs every kernel once on zeroed inputs, with the input and output conversions, and waits:
  // CUDA loads a kernel's code at its first launch, which may synchronize the context (work
  // held behind a StreamGate would then block it). Leaves the staging memory zeroed.
  virtual void preload(cudaStream_t stream) = 0;
  // Request tensors over the instance's own pinned staging memory, one per input (f32 where the
  // backend stores f16), valid while the instance lives. A request made of them skips the host
  // copy on every path above; the caller writes them only while no upload of the instance's
  // inputs is pending (a camera driver filling its DMA buffer between frames).
  virtual std::vector<Tensor> staging_inputs() = 0;
  // Whether every one of `inputs` is this instance's staging tensor (staging_inputs).
  virtual bool inputs_are_staging(std::span<const Tensor> inputs) const = 0;

  // Enqueues kernel `kernel` on `stream`; its blocks exit early while *flag != 0 (flag is device
  // memory or nullptr for never). Outputs of a stopped kernel are partial; re-running it from
  // its unchanged inputs gives the unpreempted result bit for bit.
  virtual void launch(int kernel, cudaStream_t stream, const int* flag) = 0;
  // Padding slices (KernelLaunch::slice_units, launch_slice): the units kernel `kernel` can run
  // in pieces of (0: only whole), and the launch of units [begin, end) on at most `max_blocks`
  // blocks (0: as many as are resident), which leaves the rest of its outputs untouched.
  virtual int64_t slice_units(int kernel) const = 0;
  // Whether kernel `kernel` is grid-stride (KernelLaunch::grid_stride): its one unit is the whole
  // kernel, which launch_slice runs on at most max_blocks blocks.
  virtual bool grid_stride(int kernel) const = 0;
  virtual void launch_slice(int kernel, cudaStream_t stream, const int* flag, int64_t begin, int64_t end,
                            int max_blocks) = 0;
  // Enqueues the whole program on stream() without waiting: one CUDA-graph launch when graphs are
  // on (the default; captured at the first run), otherwise kernel by kernel.
  virtual void enqueue_run() = 0;
  // Enqueues every kernel on `stream` without the flag (work that is never rolled back: the
  // scheduler's RT tasks) as one launch of a graph captured at preload, instead of one host
  // call per kernel; kernel by kernel under an L2 residency, whose windows a graph would freeze.
  virtual void enqueue_program(cudaStream_t stream) = 0;
  // How many instantiations of that graph enqueue_program rotates through (>= 1; 1 by default).
  // An executable graph runs one launch at a time, so a launch of the one still running is
  // ordered behind it by the driver; with two, a task armed behind the running one launches the
  // other (atoll_bench_launch measures what each costs the host).
  virtual void set_program_graphs(int count) = 0;
  virtual void set_use_graph(bool on) = 0;
  // Off: run(), run_range() and the graph pass no flag, so kernels skip every check (for
  // measuring what the checks cost; the scheduler always leaves this on).
  virtual void set_preemptible(bool on) = 0;
  // On: the input uploads and output downloads run as kernels over mapped host memory instead of
  // copy-engine copies, so they never wait behind other streams' copies (a BE batch's 19 MB
  // upload held an RT request's 602 KB one for up to ~0.4 ms on the H200). They then take SMs
  // for their few microseconds. For the instance's idle moments only.
  virtual void set_sm_copies(bool on) = 0;
  // On (a BE instance in the scheduler): staging inputs copies them into host staging only, and
  // each launch of kernel 0 first uploads them by a preemptible SM copy under the same flag. So a
  // BE upload never holds the copy engine an RT upload needs, a raise stops it like any BE kernel,
  // and a task rolled back to kernel 0 uploads again.
  virtual void set_uploads_with_first_kernel(bool on) = 0;
  virtual void set_upload_copy(UploadCopy copy) = 0;

  // Median time of each kernel in milliseconds over `repeats` runs: events between kernels, the
  // launches queued behind a device-side wait so that they run back to back.
  virtual std::vector<double> time_kernels(int repeats) = 0;
  // `atoll run --per-kernel` on the GPU: device events, not host timers.
  std::vector<double> kernel_times_ms(int iters) override { return time_kernels(iters); }
  // Times every tile/split-K alternative of each GEMM-backed kernel in place, on the operands of
  // a real run, and keeps the fastest (what autotune does at load, but per kernel and reported).
  virtual std::vector<GemmTuneResult> tune_gemms(int repeats) = 0;
  virtual LoadTuning load_tuning() const = 0;
  // The current tile/split-K choice of a kernel, e.g. "64x64/s4" ("" if it is not GEMM-backed),
  // how many alternatives it has, and selecting one of them (tests run every alternative).
  virtual std::string gemm_choice(int kernel) const = 0;
  virtual int gemm_choice_count(int kernel) const = 0;
  virtual void select_gemm_choice(int kernel, int choice) = 0;

  // Applies a residency (nullptr removes it). Applying sets the persisting limit, drops the lines
  // persisting so far, and from then on every launch of run(), run_range(), enqueue_run() and
  // launch() carries its kernel's window. The window is a stream attribute set before each
  // launch, and launch() clears it afterwards so that other work on a shared stream gets none.
  // While a residency is set, enqueue_run() goes kernel by kernel instead of replaying the CUDA
  // graph: captured kernel nodes would keep the windows of capture time, and re-capturing per
  // config would cost more than the launches it saves in a config search. time_kernels() and
  // tuning launch without windows. Removing turns windows off, resets persisting lines and sets
  // the limit back to 0 (the limit is per device: the last instance to set it wins).
  // Throws kInvalidArgument for a window count other than the kernel count, a window outside the
  // arena or above the device's largest window, a hit ratio outside [0, 1], or a set-aside above
  // cudaDevAttrMaxPersistingL2CacheSize.
  virtual void set_l2_residency(const L2Residency* residency) = 0;
  // The persisting limit the driver granted (cudaDeviceGetLimit), 0 when none is set.
  virtual int64_t persisting_l2_limit() const = 0;
  // Keeps `buffer` persisting in L2 from run to run while other work shares the cache
  // (L2Persist::kOff stops it): one access-policy window over the buffer, hitProp persisting for
  // `hit_ratio` of its lines (the driver picks which), the rest ordinary. Unlike a residency
  // config the window is the same for every kernel, so the CUDA graphs keep it: they are
  // re-captured here, and per-kernel launches set it on their stream for the range and clear it
  // after. The set-aside it persists into is per device and left to the caller, who sizes the
  // hit ratio to it (l2_persist_bytes: the window's bytes, the buffer's up to
  // cudaDevAttrMaxAccessPolicyWindowSize). Waits for the instance's stream. kInvalidArgument
  // while a residency config is set (and set_l2_residency while persistence is on), or for a
  // hit ratio outside [0, 1].
  virtual void set_l2_persistence(L2Persist buffer, double hit_ratio) = 0;
  virtual int64_t l2_persist_bytes(L2Persist buffer) const = 0;

  // For tests and tools: the device bytes of an arena or output binding (waits for the stream),
  // and filling the arena and the outputs with one byte value (0xFF makes every f16 a NaN).
  virtual std::vector<std::byte> read_binding(const Binding& b) = 0;
  virtual void poison(uint8_t byte) = 0;
  // One arena or output binding filled with `byte` (waits for the stream).
  virtual void poison_binding(const Binding& b, uint8_t byte) = 0;
};

}  // namespace atl
