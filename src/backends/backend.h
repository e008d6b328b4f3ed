#pragma once
// The one interface every backend implements: load a Program with its weights into an
// Instance (weights resident, arena allocated), then run it. Nothing is allocated on run().
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"
#include "program/program.h"

namespace atl {

struct MemoryReport {
  int64_t weight_bytes = 0;
  int64_t arena_bytes = 0;
  int64_t workspace_bytes = 0;
  int64_t io_bytes = 0;
};

// Which of an instance's buffers stays persisting in L2 across its runs while other work shares
// the cache (CUDA: one access-policy window over the buffer, `atoll bench disb --rt-l2`). The
// weights are what an RT task re-reads from one request to the next; the arena (activations) is
// rewritten by every run, so keeping it pays only where other work runs beside the task.
enum class L2Persist : uint8_t { kOff, kWeights, kArena };
const char* l2_persist_name(L2Persist p);       // "off", "weights", "arena"
L2Persist l2_persist_from_name(std::string_view name);  // throws kInvalidArgument naming the choices

class Instance {
 public:
  virtual ~Instance() = default;
  virtual const Program& program() const = 0;
  // Host tensors use the IR dtype of each input/output (f32 for floats, i64 for indices) and
  // logical row-major layout; the backend converts. Shape mismatches throw kInvalidArgument.
  virtual void set_input(int index, const Tensor& t) = 0;
  virtual Tensor get_output(int index) = 0;
  // Runs every kernel in order and waits for the result.
  virtual void run() = 0;
  // Runs kernels [first, last) without waiting; for per-kernel timing, tests and the scheduler.
  virtual void run_range(int first, int last) = 0;
  virtual void synchronize() = 0;
  virtual MemoryReport memory() const = 0;
  // Median time of each kernel over `iters` runs of the whole program. This default times
  // run_range(k, k+1) + synchronize() on the host; device backends override with device timers.
  virtual std::vector<double> kernel_times_ms(int iters);
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  virtual std::string device_description() const = 0;
  virtual CompileTarget target() const = 0;
  // Validates every kernel once (can_implement) and uploads weights; throws kUnsupported for
  // a kernel it cannot run, naming it.
  virtual std::unique_ptr<Instance> load(const Program& program, const WeightStore& weights) = 0;
};

}  // namespace atl
