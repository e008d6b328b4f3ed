#pragma once
// A deterministic memory access trace of one inference of a Program at cache-line granularity.
//
// Address space: the activation arena at 0, then every weight, input and output tensor at its own
// aligned base, in that order (as separate device allocations would be). Each kernel reads its
// input bindings, then writes its output bindings, each binding once from front to back; a binding
// covers [offset, offset + bytes). This models the re-reads a GEMM or convolution really does only
// coarsely: a kernel re-reads operand tiles many times, but while a tile is live those re-reads
// hit in shared memory or L2, so one pass per binding keeps the traffic that competes for L2
// across kernels, which is what residency changes. A Gather reads as many table rows as it has
// indices (the rows themselves depend on the input data). Ranges stay compact; consumers expand them.
#include <cstdint>
#include <vector>

#include "l2/slices.h"
#include "program/program.h"

namespace atl::l2 {

// splitmix64 finalizer: a fixed, well-mixed hash so traces and simulations repeat exactly.
inline uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Consecutive lines [first_line, first_line + lines) accessed by one binding of one kernel.
struct TraceRange {
  uint32_t first_line = 0;
  uint32_t lines = 0;
  uint32_t kernel = 0;
  uint32_t signature = 0;  // hash of (kernel, binding slot): the "PC" a SHiP predictor learns on
  bool write = false;
  bool hinted = false;  // inside the launch's access-policy window (or a software residency hint)
};

// Where one tensor lives in the trace's address space.
struct TraceRegion {
  Binding::Kind kind = Binding::Kind::kArena;
  int index = -1;  // weight / input / output index; -1 for the arena
  int64_t base = 0;
  int64_t bytes = 0;
};

struct Trace {
  int64_t line_bytes = 0;
  int64_t arena_bytes = 0;
  int64_t address_bytes = 0;  // end of the last region
  int kernel_count = 0;
  std::vector<TraceRegion> regions;  // arena, weights, inputs, outputs, in address order
  std::vector<TraceRange> ranges;    // kernel order; within a kernel its reads, then its writes

  int64_t total_lines() const { return (address_bytes + line_bytes - 1) / line_bytes; }
  int64_t arena_lines() const { return (arena_bytes + line_bytes - 1) / line_bytes; }
  int64_t accesses() const;  // line accesses in one inference
};

// Regions are aligned to max(256, line_bytes), so no line holds bytes of two tensors.
Trace build_trace(const Program& p, int64_t line_bytes);

// Bytes each weight occupies on the device: convolution and GEMM weights and gather tables are
// stored in the Program's act_dtype (f16 on CUDA), everything else as its spec says.
std::vector<int64_t> device_weight_bytes(const Program& p);

// Half-open range of line ids.
struct LineSpan {
  int64_t first = 0;
  int64_t end = 0;
};

// Copy of t in which the arena lines that kernel k touches inside spans[k] are hinted; ranges are
// split at span edges. spans has one sorted, disjoint list per kernel.
Trace with_hints(const Trace& t, const std::vector<std::vector<LineSpan>>& spans);

enum class HintMode {
  kWindows,      // what the GPU does under plan_windows: each launch's whole covering window
  kExactSlices,  // exactly the resident slices, the ideal a residency-aware layout would reach
};
const char* hint_mode_name(HintMode m);

// Hints for config c (checked against p and d first).
Trace hinted_trace(const Trace& t, const Program& p, const ResidencyConfig& c, const L2Device& d, HintMode mode);

}  // namespace atl::l2
