#pragma once
// Memory planner: places buffers with known lifetimes in one arena so that no two buffers
// live at the same time overlap. Lifetimes are closed intervals of kernel indices, so a
// kernel's inputs and outputs never share memory (the idempotence guarantee).
#include <cstdint>
#include <vector>

namespace atl {

struct BufferRequest {
  int64_t bytes = 0;
  int first = 0;  // index of the kernel that writes it
  int last = 0;   // index of the last kernel that reads it (>= first)
};

struct ArenaPlan {
  std::vector<int64_t> offsets;  // one per request, aligned
  int64_t arena_bytes = 0;
  int64_t naive_bytes = 0;  // every buffer in its own aligned allocation
};

// Greedy by size: largest buffers first, each at the lowest aligned offset that does not
// collide with an already placed buffer whose lifetime overlaps.
ArenaPlan plan_arena(const std::vector<BufferRequest>& requests, int64_t alignment);

// Throws kInternal if two lifetime-overlapping buffers overlap in memory or a buffer leaves the arena.
void check_arena_plan(const std::vector<BufferRequest>& requests, const ArenaPlan& plan);

}  // namespace atl
