#pragma once
// The CUDA backend: fp16 NHWC kernels (tensor cores for convolution, Gemm and MatMul), every
// kernel idempotent and preemptible through a device-resident flag. Weights are uploaded once,
// the arena and a fixed workspace are allocated once; the run path only enqueues launches.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/backend.h"

namespace atl {

// True when a CUDA device this build can run on answers; never throws (no driver, no GPU -> false).
bool cuda_device_available();
// Why cuda_device_available() is false ("" when it is true), for skip messages and notes.
std::string cuda_unavailable_reason();

struct CudaBackendOptions {
  int device = 0;
  // At load, time every tile/split-K alternative of each GEMM-backed kernel (once per distinct
  // geometry, on random operands) and keep the fastest; off keeps the cost model's choice.
  // Either way an instance's choices are fixed once loaded, so its results are deterministic.
  bool autotune = true;
};

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options);
// Default options on `device`; the environment variable ATOLL_CUDA_AUTOTUNE=0 turns autotuning off.
std::unique_ptr<Backend> make_cuda_backend(int device = 0);

// A GEMM-backed kernel's tile/split-K choice, before and after timing the alternatives.
struct GemmTuneResult {
  int kernel = -1;
  std::string before, after;  // e.g. "64x64/s4"
  double before_ms = 0, after_ms = 0;
  std::vector<std::pair<std::string, double>> candidates_ms;  // every alternative timed
};

// What load() returns on the CUDA backend, with the operations the scheduler, the profiler and
// the tests need beyond Instance. Instance::run_range and run use stream() and preempt_flag().
class CudaInstance : public Instance {
 public:
  // The instance's own stream (non-blocking) and its own flag word in device memory (0 = run).
  virtual cudaStream_t stream() const = 0;
  virtual int* preempt_flag() const = 0;

  // Enqueues kernel `kernel` on `stream`; its blocks exit early while *flag != 0 (flag is device
  // memory or nullptr for never). Outputs of a stopped kernel are partial; re-running it from
  // its unchanged inputs gives the unpreempted result bit for bit.
  virtual void launch(int kernel, cudaStream_t stream, const int* flag) = 0;
  // Enqueues the whole program on stream() without waiting: one CUDA-graph launch when graphs are
  // on (the default; captured at the first run), otherwise kernel by kernel.
  virtual void enqueue_run() = 0;
  virtual void set_use_graph(bool on) = 0;
  // Off: run(), run_range() and the graph pass no flag, so kernels skip every check (for
  // measuring what the checks cost; the scheduler always leaves this on).
  virtual void set_preemptible(bool on) = 0;

  // Median time of each kernel in milliseconds over `repeats` runs: events between kernels, the
  // launches queued behind a device-side wait so that they run back to back.
  virtual std::vector<double> time_kernels(int repeats) = 0;
  // Times every tile/split-K alternative of each GEMM-backed kernel in place, on the operands of
  // a real run, and keeps the fastest (what autotune does at load, but per kernel and reported).
  virtual std::vector<GemmTuneResult> tune_gemms(int repeats) = 0;
  // The current tile/split-K choice of a kernel, e.g. "64x64/s4" ("" if it is not GEMM-backed),
  // how many alternatives it has, and selecting one of them (tests run every alternative).
  virtual std::string gemm_choice(int kernel) const = 0;
  virtual int gemm_choice_count(int kernel) const = 0;
  virtual void select_gemm_choice(int kernel, int choice) = 0;

  // For tests and tools: the device bytes of an arena or output binding (waits for the stream),
  // and filling the arena and the outputs with one byte value (0xFF makes every f16 a NaN).
  virtual std::vector<std::byte> read_binding(const Binding& b) = 0;
  virtual void poison(uint8_t byte) = 0;
};

}  // namespace atl
