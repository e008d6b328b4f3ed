#pragma once
// The one fitness interface the residency tuners (src/tune/) drive: a config in, a cost out, lower
// is better. The cache simulator implements it here; the GPU measurement implements it in
// runtime/ (l2 stays below runtime), and tests implement it with synthetic costs.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "l2/cache_sim.h"
#include "l2/slices.h"
#include "l2/trace.h"
#include "program/program.h"

namespace atl::l2 {

// One bit per slice, true = persisting (ResidencyConfig::resident).
using Residency = std::vector<bool>;

struct Fitness {
  double cost = 0;          // what the tuners minimize; its unit is the evaluator's (cost_unit())
  int64_t dram_bytes = -1;  // simulated DRAM bytes per inference; -1 where not simulated
  double time_ms = -1;      // measured iteration time; -1 where not measured
};

// How one slice is used by a Program: what the budget heuristic ranks slices by.
struct SliceUse {
  int first_kernel = -1;  // first kernel touching the slice; -1 when none does
  int kernels = 0;        // kernels touching it (reads and writes)
};
// Every kernel's arena bindings mapped onto slices of slice_bytes.
std::vector<SliceUse> slice_uses(const Program& p, int64_t slice_bytes);

class Evaluator {
 public:
  virtual ~Evaluator() = default;
  virtual std::string name() const = 0;
  virtual std::string cost_unit() const = 0;
  virtual int64_t slices() const = 0;
  // Whole slices the device's largest set-aside holds.
  virtual int64_t setaside_slices() const = 0;
  virtual std::vector<SliceUse> slice_uses() const = 0;
  // True when the same config always costs the same (no measurement noise).
  virtual bool deterministic() const = 0;
  // resident.size() == slices(); throws kInvalidArgument otherwise.
  virtual Fitness evaluate(const Residency& resident) = 0;
};

// The part every evaluator of a real Program shares: slices of the Program's arena on an L2
// device, and the config a bit vector stands for.
class ProgramEvaluator : public Evaluator {
 public:
  ProgramEvaluator(Program p, L2Device d, double hit_ratio, int64_t slice_bytes = kDefaultSliceBytes);
  int64_t slices() const override { return slices_; }
  int64_t setaside_slices() const override { return device_.setaside_max_bytes / slice_bytes_; }
  std::vector<SliceUse> slice_uses() const override { return l2::slice_uses(program_, slice_bytes_); }
  // The config `atoll l2 config` would write for these slices (set-aside sized to hold them).
  ResidencyConfig config(const Residency& resident) const;
  const Program& program() const { return program_; }
  const L2Device& device() const { return device_; }

 protected:
  void check_size(const Residency& resident) const;

 private:
  Program program_;
  L2Device device_;
  double hit_ratio_;
  int64_t slice_bytes_;
  int64_t slices_;
};

// Fitness from the cache simulator: cost = simulated DRAM bytes (reads + write-backs) of one
// steady-state inference, in MiB. Bytes rather than a time estimate because the simulator has no
// compute model: a time would be bytes over one bandwidth, the same ranking. The trace is built
// once and results are memoized per config, since the simulation is deterministic.
class SimEvaluator : public ProgramEvaluator {
 public:
  SimEvaluator(Program p, L2Device d, Policy policy, double hit_ratio, SimOptions options = {},
               int64_t slice_bytes = kDefaultSliceBytes);
  std::string name() const override;
  std::string cost_unit() const override { return "simulated DRAM MiB"; }
  bool deterministic() const override { return true; }
  Fitness evaluate(const Residency& resident) override;

 private:
  Policy policy_;
  SimOptions options_;
  Trace trace_;
  std::unordered_map<Residency, Fitness> memo_;
};

}  // namespace atl::l2
