#include "compile/planner.h"

#include <algorithm>
#include <numeric>

#include "core/error.h"

namespace atl {

namespace {
int64_t align_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }
bool lifetimes_overlap(const BufferRequest& a, const BufferRequest& b) { return a.first <= b.last && b.first <= a.last; }
}  // namespace

ArenaPlan plan_arena(const std::vector<BufferRequest>& requests, int64_t alignment) {
  ATOLL_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, kInvalidArgument,
              "arena alignment {} is not a power of two", alignment);
  ArenaPlan plan;
  plan.offsets.assign(requests.size(), 0);
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });

  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of placed, lifetime-overlapping buffers
  for (size_t r : order) {
    const BufferRequest& req = requests[r];
    ATOLL_CHECK(req.bytes >= 0 && req.first <= req.last, kInternal, "bad buffer request: {} bytes, life [{}, {}]",
                req.bytes, req.first, req.last);
    const int64_t size = align_up(std::max<int64_t>(req.bytes, 1), alignment);
    plan.naive_bytes += size;
    busy.clear();
    for (size_t p : placed) {
      if (lifetimes_overlap(req, requests[p])) {
        busy.emplace_back(plan.offsets[p], plan.offsets[p] + align_up(std::max<int64_t>(requests[p].bytes, 1), alignment));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;
      offset = std::max(offset, align_up(end, alignment));
    }
    plan.offsets[r] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + size);
    placed.push_back(r);
  }
  return plan;
}

void check_arena_plan(const std::vector<BufferRequest>& requests, const ArenaPlan& plan) {
  ATOLL_CHECK(plan.offsets.size() == requests.size(), kInternal, "plan has {} offsets for {} buffers",
              plan.offsets.size(), requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    ATOLL_CHECK(plan.offsets[i] >= 0 && plan.offsets[i] + requests[i].bytes <= plan.arena_bytes, kInternal,
                "buffer {} leaves the arena", i);
    for (size_t j = i + 1; j < requests.size(); ++j) {
      if (!lifetimes_overlap(requests[i], requests[j])) continue;
      const bool disjoint = plan.offsets[i] + requests[i].bytes <= plan.offsets[j] ||
                            plan.offsets[j] + requests[j].bytes <= plan.offsets[i];
      ATOLL_CHECK(disjoint, kInternal, "buffers {} and {} are live together and overlap", i, j);
    }
  }
}

}  // namespace atl
