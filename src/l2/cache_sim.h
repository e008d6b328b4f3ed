#pragma once
// A set-associative L2 model with CUDA's persisting set-aside, fast enough to rank residency
// configs inside a search.
//
// Placement: line id modulo the set count picks the set. The set-aside is the first
// persisting_ways ways of every set. An access is persisting when its range is hinted (inside the
// launch's access-policy window) and its line is selected by hit_ratio; CUDA applies hitProp to
// that fraction of a window's accesses, and we select lines by a fixed hash of the line id, so a
// run repeats exactly and a line is treated the same way every time. A line's class is fixed when
// it is filled: persisting lines fill the set-aside and evict only persisting lines; every other
// line fills the remaining ways. Hits hit wherever the line is and do not change its class (the
// H200 measurement of a producer -> sweep -> consumer chain needs exactly this: the consumer,
// launched without a window, still hit the producer's persisting lines). With no set-aside,
// persisting accesses are normal, as on CUDA. Calibrated presets may take further ways from
// normal lines (normal_lost_ways): the H200 loses twice the set-aside.
//
// Traffic: a read miss fetches its line from DRAM; a write miss allocates without a fetch (kernels
// write whole lines); dirty lines are written back when evicted (charged to the kernel evicting
// them) and, on request, at the end. Lines, not 32-byte sectors, are the unit.
//
// Policies (each also manages the set-aside's ways among persisting lines):
//  LRU.
//  SHiP (Wu et al., MICRO'11): SRRIP with 2-bit re-reference values; a table of 3-bit counters,
//    indexed by the access's signature (kernel and binding slot stand in for the PC), learns which
//    signatures' lines are re-referenced; lines of signatures that never are fill as "distant".
//  SHiP-SW: SHiP with software hints instead of a set-aside: persisting lines fill with the
//    nearest re-reference value and all ways are shared.
//  Belady: evicts the line used farthest in the future, or bypasses the cache when the incoming
//    line is used later still; this is the minimum miss count for each partition. Next uses come
//    from the trace up front (4 bytes per access).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "l2/slices.h"
#include "l2/trace.h"

namespace atl::l2 {

struct CacheGeometry {
  int64_t sets = 0;
  int ways = 0;
  int64_t line_bytes = 0;
  int persisting_ways = 0;   // ways of every set held by the set-aside
  int normal_lost_ways = 0;  // further ways normal lines may not fill (L2Device::setaside_normal_cost)

  static CacheGeometry of(const L2Device& d, int64_t setaside_bytes);
  int64_t capacity_bytes() const { return sets * ways * line_bytes; }
  void validate() const;  // throws kInvalidArgument
};

enum class Policy { kLru, kShip, kShipSw, kBelady };
const char* policy_name(Policy p);               // "lru", "ship", "ship-sw", "belady"
Policy policy_from_name(std::string_view name);  // throws kInvalidArgument naming the choices

struct SimOptions {
  int warmup_passes = 1;                // unmeasured inferences first: the GPU is timed in steady state
  bool flush_at_end = false;            // write back the dirty lines left after the measured inference
  HintMode hints = HintMode::kWindows;  // how simulate() turns a config into hints
  // An activation's lines leave the cache without a write-back at its last read (its next access
  // is the write of another buffer the planner put there): what Hopper's discard.global.L2 in the
  // last reader would do. A what-if: atoll's kernels do not discard yet.
  bool discard_dead = false;
};

struct KernelStats {
  std::string name;  // filled by simulate()
  int64_t accesses = 0;
  int64_t hits = 0;
  int64_t dram_read_bytes = 0;
  int64_t dram_write_bytes = 0;
  double hit_rate() const { return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0; }
};

// Counts of the measured inference.
struct SimResult {
  std::string model;  // model, batch, device and hints are filled by simulate()
  int64_t batch = 0;
  std::string device;
  std::string hints;
  std::string policy;
  CacheGeometry geometry;
  double hit_ratio = 0.0;
  int warmup_passes = 0;
  int64_t accesses = 0;
  int64_t hits = 0;
  int64_t persisting_accesses = 0;  // hinted and selected by hit_ratio (normal when there is no set-aside)
  int64_t dram_read_bytes = 0;
  int64_t dram_write_bytes = 0;  // includes flush_write_bytes
  int64_t flush_write_bytes = 0;
  std::vector<KernelStats> kernels;  // index = kernel index

  int64_t misses() const { return accesses - hits; }
  double hit_rate() const { return accesses ? static_cast<double>(hits) / static_cast<double>(accesses) : 0.0; }
  int64_t dram_bytes() const { return dram_read_bytes + dram_write_bytes; }
};
void to_json(nlohmann::json& j, const SimResult& r);

// Holds the cache state between runs so that a search can simulate many configs without
// reallocating; every run starts from an empty cache.
class CacheSimulator {
 public:
  explicit CacheSimulator(const CacheGeometry& geometry);

  // Simulates warmup_passes + 1 passes over t; hinted accesses persist for lines selected by
  // hit_ratio in [0, 1].
  SimResult run(const Trace& t, Policy policy, double hit_ratio, const SimOptions& options = {});

 private:
  template <Policy P>
  void run_passes(const Trace& t, int passes, uint64_t threshold, bool select_all);
  template <Policy P>
  void access(int64_t set_base, uint32_t line, bool write, bool persisting, uint32_t signature, KernelStats& stats);
  template <Policy P>
  int64_t choose_victim(int64_t first, int64_t end, uint32_t next_use);
  void compute_next_uses(const Trace& t, int passes);
  void compute_dead_after(const Trace& t);

  CacheGeometry geometry_;
  int partition_ways_ = 0;    // persisting ways in this run (0 under SHiP-SW)
  int normal_first_way_ = 0;  // first way normal lines fill in this run
  // One entry per way of every set, set-major. Separate arrays keep a set's tags in one host cache line.
  std::vector<int32_t> tags_;   // line id, -1 when empty
  std::vector<uint32_t> meta_;  // LRU: last-use stamp; SHiP: re-reference value; Belady: next use
  std::vector<uint16_t> signatures_;
  std::vector<uint8_t> flags_;
  std::vector<uint8_t> ship_counters_;
  std::vector<uint32_t> next_use_;
  std::vector<uint8_t> dead_after_;  // per access of one pass: an arena line's last read before a write
  bool discard_dead_ = false;
  uint64_t pass_cursor_ = 0;  // index of the current access within its pass
  std::vector<KernelStats> stats_;
  uint64_t cursor_ = 0;  // index of the current access over all passes
  uint32_t clock_ = 0;
  int64_t persisting_accesses_ = 0;
};

}  // namespace atl::l2
