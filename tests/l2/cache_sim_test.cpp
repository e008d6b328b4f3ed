#include "l2/cache_sim.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <list>
#include <map>

#include "core/error.h"
#include "core/rng.h"
#include "l2_test_util.h"

namespace atl::l2 {
namespace {

using testing::LineAccess;
using testing::make_trace;
using testing::reads;

SimResult run(const std::vector<LineAccess>& accesses, CacheGeometry g, Policy policy, double hit_ratio = 1.0,
              int warmup = 0, bool flush = false) {
  CacheSimulator sim(g);
  return sim.run(make_trace(accesses), policy, hit_ratio, {.warmup_passes = warmup, .flush_at_end = flush});
}

CacheGeometry geometry(int64_t sets, int ways, int persisting_ways = 0) {
  return {sets, ways, 128, persisting_ways};
}

// An independent LRU with a set-aside, written plainly: per set one recency list per partition.
// hit_ratio is 1: every hinted access persists.
struct ReferenceLru {
  struct Counts {
    int64_t hits = 0, read_bytes = 0, write_bytes = 0;
  };
  static Counts run(const Trace& t, CacheGeometry g, int passes) {
    struct Line {
      int64_t id;
      bool dirty;
    };
    std::vector<std::list<Line>> persisting(static_cast<size_t>(g.sets)), normal(static_cast<size_t>(g.sets));
    Counts c;
    for (int pass = 0; pass < passes; ++pass) {
      if (pass == passes - 1) c = {};
      for (const TraceRange& r : t.ranges) {
        for (int64_t line = r.first_line; line < int64_t{r.first_line} + r.lines; ++line) {
          const auto set = static_cast<size_t>(line % g.sets);
          bool hit = false;
          for (auto* list : {&persisting[set], &normal[set]}) {
            auto it = std::find_if(list->begin(), list->end(), [&](const Line& l) { return l.id == line; });
            if (it == list->end()) continue;
            Line l = *it;
            l.dirty |= r.write;
            list->erase(it);
            list->push_front(l);
            hit = true;
          }
          if (hit) {
            ++c.hits;
            continue;
          }
          if (!r.write) c.read_bytes += g.line_bytes;
          const bool to_persisting = r.hinted && g.persisting_ways > 0;
          auto& list = to_persisting ? persisting[set] : normal[set];
          const size_t capacity = static_cast<size_t>(to_persisting ? g.persisting_ways : g.ways - g.persisting_ways);
          if (capacity == 0) {
            if (r.write) c.write_bytes += g.line_bytes;
            continue;
          }
          if (list.size() == capacity) {
            if (list.back().dirty) c.write_bytes += g.line_bytes;
            list.pop_back();
          }
          list.push_front({line, r.write});
        }
      }
    }
    return c;
  }
};

// Random accesses with some locality: a hot set of lines, writes, several kernels and signatures.
std::vector<LineAccess> random_accesses(uint64_t seed, int count, uint32_t lines, uint32_t hot_lines) {
  Rng rng(seed);
  std::vector<LineAccess> out;
  for (int i = 0; i < count; ++i) {
    const bool hot = rng.uniform() < 0.6f;
    LineAccess a;
    a.line = static_cast<uint32_t>(rng.next_u64() % (hot ? hot_lines : lines));
    a.write = rng.uniform() < 0.3f;
    a.kernel = static_cast<uint32_t>(i / 64);
    a.signature = a.kernel * 4 + static_cast<uint32_t>(rng.next_u64() % 3);
    a.hinted = a.line % 7 == 0;
    out.push_back(a);
  }
  return out;
}

// A B A C B A on one set of 2 ways:
//  LRU: only the first re-read of A hits (C evicts B, B evicts A, A evicts C)  -> 1 hit.
//  SHiP (fills at re-reference value 2, counter of the shared signature starts at 1):
//   A, B fill at 2; A hits -> 0 (counter 2); C: age B to 3, evict it unreused (counter 1), fill 2;
//   B: A=1, C=2, age to A=2, C=3, evict C unreused (counter 0), B fills "distant" 3; A hits -> 2 hits.
//  Belady: C is never used again, so it bypasses; B and A then hit -> 3 hits.
TEST(CacheSim, KnownHitCountsPerPolicy) {
  const auto trace = reads({0, 1, 0, 2, 1, 0});
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kLru).hits, 1);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kShip).hits, 2);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kBelady).hits, 3);
  const SimResult lru = run(trace, geometry(1, 2), Policy::kLru);
  EXPECT_EQ(lru.accesses, 6);
  EXPECT_EQ(lru.dram_read_bytes, 5 * 128);
  EXPECT_EQ(lru.dram_write_bytes, 0);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kBelady).dram_read_bytes, 3 * 128);
}

// A B C A on one set of 2 ways, A hinted, no set-aside:
//  LRU and SHiP evict A before it returns (SHiP: all at 2, aged to 3, A is the first) -> 0 hits.
//  SHiP-SW fills the hinted A at 0, so C's ageing evicts B instead -> 1 hit.
//  Belady bypasses C (never used again) -> 1 hit.
TEST(CacheSim, SoftwareHintsProtectHintedLines) {
  std::vector<LineAccess> trace = reads({0, 1, 2, 0});
  trace[0].hinted = trace[3].hinted = true;
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kLru).hits, 0);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kShip).hits, 0);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kShipSw).hits, 1);
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kBelady).hits, 1);
  // The hint is selected per line by hit_ratio: at 0 it is no hint at all.
  EXPECT_EQ(run(trace, geometry(1, 2), Policy::kShipSw, 0.0).hits, 0);
}

// One set, one way: write A (allocates, no fetch), read B in kernel 1 (fetches B, writes back
// dirty A), read A in kernel 2 (fetches A, B is clean).
TEST(CacheSim, WriteBackAccountingPerKernel) {
  const std::vector<LineAccess> trace = {
      {.line = 0, .write = true}, {.line = 1, .kernel = 1}, {.line = 0, .kernel = 2}};
  const SimResult r = run(trace, geometry(1, 1), Policy::kLru);
  EXPECT_EQ(r.hits, 0);
  EXPECT_EQ(r.dram_read_bytes, 2 * 128);
  EXPECT_EQ(r.dram_write_bytes, 128);
  ASSERT_EQ(r.kernels.size(), 3u);
  EXPECT_EQ(r.kernels[0].dram_read_bytes, 0);
  EXPECT_EQ(r.kernels[1].dram_read_bytes, 128);
  EXPECT_EQ(r.kernels[1].dram_write_bytes, 128);
  EXPECT_EQ(r.kernels[2].dram_read_bytes, 128);
  EXPECT_EQ(r.kernels[2].dram_write_bytes, 0);
  // Two writes: the first is written back on eviction, the second only by the final flush.
  const std::vector<LineAccess> writes = {{.line = 0, .write = true}, {.line = 1, .write = true}};
  EXPECT_EQ(run(writes, geometry(1, 1), Policy::kLru).dram_write_bytes, 128);
  const SimResult flushed = run(writes, geometry(1, 1), Policy::kLru, 1.0, 0, true);
  EXPECT_EQ(flushed.dram_write_bytes, 256);
  EXPECT_EQ(flushed.flush_write_bytes, 128);
}

// Line 0 is written, read by the next kernel, then overwritten by another buffer the planner put
// there (its last read is dead); line 1 is read twice in a row (its first read is not its last).
TEST(CacheSim, DiscardDropsLinesAtTheirLastReadWithoutAWriteBack) {
  const std::vector<LineAccess> trace = {{.line = 0, .write = true},
                                         {.line = 0, .kernel = 1},
                                         {.line = 1, .kernel = 1},
                                         {.line = 1, .kernel = 2},
                                         {.line = 2, .write = true, .kernel = 2},
                                         {.line = 2, .kernel = 3}};
  CacheSimulator sim(geometry(1, 1));
  const Trace t = make_trace(trace);
  const SimResult kept = sim.run(t, Policy::kLru, 1.0, {.warmup_passes = 1});
  const SimResult dropped = sim.run(t, Policy::kLru, 1.0, {.warmup_passes = 1, .discard_dead = true});
  // One way: without discarding, line 0's dirty copy is written back when line 1 evicts it, and
  // line 2's when the next pass's line 0 evicts it; discarded at their last reads, neither is.
  EXPECT_EQ(kept.dram_write_bytes, 2 * 128);
  EXPECT_EQ(dropped.dram_write_bytes, 0);
  EXPECT_EQ(kept.hits, 3);
  EXPECT_EQ(dropped.hits, 3) << "a discard after the last read costs no hit (line 1's reads are not dead)";
  // Weights and inputs (outside the arena) are never discarded.
  Trace outside = t;
  outside.arena_bytes = 0;
  EXPECT_EQ(sim.run(outside, Policy::kLru, 1.0, {.warmup_passes = 1, .discard_dead = true}).dram_write_bytes,
            kept.dram_write_bytes);
}

TEST(CacheSim, WarmupPassesAreNotCounted) {
  // Three lines fit in 4 ways: the measured pass after one warm-up hits every access.
  const auto trace = reads({0, 1, 2, 0});
  const SimResult cold = run(trace, geometry(1, 4), Policy::kLru);
  EXPECT_EQ(cold.hits, 1);
  const SimResult warm = run(trace, geometry(1, 4), Policy::kLru, 1.0, 1);
  EXPECT_EQ(warm.accesses, 4);
  EXPECT_EQ(warm.hits, 4);
  EXPECT_EQ(warm.dram_read_bytes, 0);
}

TEST(CacheSim, LruMatchesAnIndependentReference) {
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    const Trace t = make_trace(random_accesses(seed, 3000, 96, 20));
    for (CacheGeometry g : {geometry(4, 4), geometry(8, 3, 1), geometry(2, 8, 6), geometry(1, 4, 4)}) {
      for (int warmup : {0, 1}) {
        CacheSimulator sim(g);
        const SimResult r = sim.run(t, Policy::kLru, 1.0, {.warmup_passes = warmup});
        const ReferenceLru::Counts expected = ReferenceLru::run(t, g, warmup + 1);
        ASSERT_EQ(r.hits, expected.hits) << "seed " << seed << " persisting ways " << g.persisting_ways;
        ASSERT_EQ(r.dram_read_bytes, expected.read_bytes) << "seed " << seed;
        ASSERT_EQ(r.dram_write_bytes, expected.write_bytes) << "seed " << seed;
      }
    }
  }
}

// Fewest misses over every choice (bypass, fill an empty way or evict any line) on one fully
// associative set; memoized on (position, sorted cache contents).
int64_t optimal_misses(const std::vector<uint32_t>& seq, size_t at, std::vector<uint32_t> cache, size_t ways,
                       std::map<std::pair<size_t, std::vector<uint32_t>>, int64_t>& memo) {
  if (at == seq.size()) return 0;
  std::sort(cache.begin(), cache.end());
  const auto key = std::make_pair(at, cache);
  if (auto it = memo.find(key); it != memo.end()) return it->second;
  int64_t best;
  if (std::find(cache.begin(), cache.end(), seq[at]) != cache.end()) {
    best = optimal_misses(seq, at + 1, cache, ways, memo);
  } else {
    best = 1 + optimal_misses(seq, at + 1, cache, ways, memo);  // bypass
    if (cache.size() < ways) {
      std::vector<uint32_t> filled = cache;
      filled.push_back(seq[at]);
      best = std::min(best, 1 + optimal_misses(seq, at + 1, filled, ways, memo));
    }
    for (size_t v = 0; v < cache.size(); ++v) {
      std::vector<uint32_t> swapped = cache;
      swapped[v] = seq[at];
      best = std::min(best, 1 + optimal_misses(seq, at + 1, swapped, ways, memo));
    }
  }
  memo[key] = best;
  return best;
}

TEST(CacheSim, BeladyMatchesExhaustiveSearch) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    Rng rng(seed);
    const size_t ways = 2 + seed % 2;
    std::vector<uint32_t> seq;
    std::vector<LineAccess> trace;
    for (int i = 0; i < 16; ++i) {
      seq.push_back(static_cast<uint32_t>(rng.next_u64() % 6));
      trace.push_back({.line = seq.back()});
    }
    const SimResult r = run(trace, geometry(1, static_cast<int>(ways)), Policy::kBelady);
    std::map<std::pair<size_t, std::vector<uint32_t>>, int64_t> memo;
    ASSERT_EQ(r.misses(), optimal_misses(seq, 0, {}, ways, memo)) << "seed " << seed;
  }
}

TEST(CacheSim, BeladyNeverMissesMoreThanAnyOtherPolicy) {
  for (uint64_t seed = 100; seed < 400; ++seed) {
    const Trace t = make_trace(random_accesses(seed, 2000, 128, 24));
    CacheSimulator sim(geometry(4, 4));
    const int64_t belady = sim.run(t, Policy::kBelady, 1.0, {.warmup_passes = 0}).misses();
    for (Policy p : {Policy::kLru, Policy::kShip, Policy::kShipSw}) {
      const int64_t other = sim.run(t, p, 1.0, {.warmup_passes = 0}).misses();
      ASSERT_LE(belady, other) << "seed " << seed << " vs " << policy_name(p);
    }
  }
}

// 8 sets x 4 ways, 2 of them set aside. Kernel 0 reads 16 hinted lines (2 per set: exactly the
// set-aside), kernel 1 streams 1000 other lines, kernel 2 (no window) re-reads the 16.
std::vector<LineAccess> producer_sweep_consumer(bool sweep_hinted) {
  std::vector<LineAccess> t;
  for (uint32_t l = 0; l < 16; ++l) t.push_back({.line = l, .hinted = true});
  for (uint32_t l = 0; l < 1000; ++l) t.push_back({.line = 16 + l, .kernel = 1, .hinted = sweep_hinted});
  for (uint32_t l = 0; l < 16; ++l) t.push_back({.line = l, .kernel = 2});
  return t;
}

TEST(CacheSim, PersistingLinesSurviveAStreamingSweep) {
  for (Policy p : {Policy::kLru, Policy::kShip, Policy::kBelady}) {
    const SimResult with = run(producer_sweep_consumer(false), geometry(8, 4, 2), p);
    EXPECT_EQ(with.kernels[2].hits, 16) << policy_name(p);
    EXPECT_EQ(with.kernels[2].dram_read_bytes, 0) << policy_name(p);
    EXPECT_EQ(with.persisting_accesses, 16) << policy_name(p);
  }
  // Without a set-aside the sweep flushes them.
  EXPECT_EQ(run(producer_sweep_consumer(false), geometry(8, 4, 0), Policy::kLru).kernels[2].hits, 0);
  // Persisting lines are evicted by persisting lines: a hinted sweep replaces them.
  EXPECT_EQ(run(producer_sweep_consumer(true), geometry(8, 4, 2), Policy::kLru).kernels[2].hits, 0);
}

TEST(CacheSim, NormalLinesCannotUseTheSetAside) {
  // 1 set, 4 ways, 3 set aside: unhinted lines 0 and 1 compete for the one normal way.
  const auto trace = reads({0, 1, 0, 1});
  EXPECT_EQ(run(trace, geometry(1, 4, 3), Policy::kLru).hits, 0);
  EXPECT_EQ(run(trace, geometry(1, 4, 0), Policy::kLru).hits, 2);
  // A set-aside of every way leaves nothing for normal lines: they bypass.
  const SimResult all = run(trace, geometry(1, 4, 4), Policy::kLru);
  EXPECT_EQ(all.hits, 0);
  EXPECT_EQ(all.dram_read_bytes, 4 * 128);
}

TEST(CacheSim, CalibratedSetAsideTakesMoreWaysFromNormalLines) {
  // 1 set, 4 ways, 1 set aside: three lines cycling fit the 3 normal ways, but not the 2 left
  // when the set-aside costs normal lines twice its size.
  const auto trace = reads({0, 1, 2, 0, 1, 2});
  EXPECT_EQ(run(trace, CacheGeometry{1, 4, 128, 1, 0}, Policy::kLru).hits, 3);
  EXPECT_EQ(run(trace, CacheGeometry{1, 4, 128, 1, 1}, Policy::kLru).hits, 0);
  // Under SHiP-SW there is no set-aside, so nothing is lost either.
  EXPECT_EQ(run(trace, CacheGeometry{1, 4, 128, 1, 1}, Policy::kShipSw).hits, 3);
  EXPECT_THROW(CacheSimulator(CacheGeometry{1, 4, 128, 3, 2}), Error);

  const L2Device h200 = h200_l2();
  const int64_t way = h200.l2_bytes / h200.ways;
  EXPECT_EQ(h200.normal_lost_ways(0), 0);
  EXPECT_EQ(h200.normal_lost_ways(way), 1);
  EXPECT_EQ(h200.normal_lost_ways(h200.setaside_max_bytes), h200.ways - 10) << "10 ways set aside leave 6 to lose";
  EXPECT_EQ(l4_l2().normal_lost_ways(l4_l2().setaside_max_bytes), 0) << "the L4 preset is not calibrated";
}

// 256 sets x 20 ways, 16 set aside. 4096 hinted lines (16 per set) are read, 100,000 unhinted
// lines stream through the 4 normal ways, then the 4096 are read again without a window: exactly
// the lines selected as persisting survive.
TEST(CacheSim, HitRatioSelectsThatFractionOfLines) {
  std::vector<LineAccess> trace;
  for (uint32_t l = 0; l < 4096; ++l) trace.push_back({.line = l, .hinted = true});
  for (uint32_t l = 0; l < 100000; ++l) trace.push_back({.line = 4096 + l, .kernel = 1});
  for (uint32_t l = 0; l < 4096; ++l) trace.push_back({.line = l, .kernel = 2});
  const Trace t = make_trace(trace);
  CacheSimulator sim(geometry(256, 20, 16));
  for (double ratio : {0.0, 0.3, 0.9, 1.0}) {
    const SimResult r = sim.run(t, Policy::kLru, ratio, {.warmup_passes = 0});
    EXPECT_EQ(r.kernels[2].hits, r.persisting_accesses) << ratio;
    // Binomial(4096, ratio): 4 standard deviations.
    const double expected = 4096 * ratio;
    const double tolerance = 4 * std::sqrt(4096 * ratio * (1 - ratio));
    EXPECT_NEAR(static_cast<double>(r.persisting_accesses), expected, tolerance) << ratio;
    EXPECT_EQ(sim.run(t, Policy::kLru, ratio, {.warmup_passes = 0}).kernels[2].hits, r.kernels[2].hits)
        << "runs repeat";
  }
}

TEST(CacheSim, RejectsBadArguments) {
  const Trace t = make_trace(reads({0, 1}));
  CacheSimulator sim(geometry(1, 2));
  EXPECT_THROW(sim.run(t, Policy::kLru, 1.5), Error);
  EXPECT_THROW(sim.run(t, Policy::kLru, 1.0, {.warmup_passes = -1}), Error);
  CacheSimulator wide({1, 2, 64, 0});
  EXPECT_THROW(wide.run(t, Policy::kLru, 1.0), Error);  // 128-byte trace lines on 64-byte cache lines
  EXPECT_THROW(CacheSimulator({1, 2, 128, 3}), Error);
  Trace bad_kernel = t;
  bad_kernel.ranges[1].kernel = 5;  // the trace has one kernel
  EXPECT_THROW(sim.run(bad_kernel, Policy::kLru, 1.0), Error);
  Trace bad_line = t;
  bad_line.ranges[1].first_line = 2;  // the trace has lines 0 and 1
  EXPECT_THROW(sim.run(bad_line, Policy::kLru, 1.0), Error);
  EXPECT_EQ(policy_from_name("ship-sw"), Policy::kShipSw);
  EXPECT_THROW(policy_from_name("fifo"), Error);
}

}  // namespace
}  // namespace atl::l2
