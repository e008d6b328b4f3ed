#include "l2/cache_sim.h"

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace atl::l2 {

namespace {

constexpr uint8_t kDirty = 1;
constexpr uint8_t kReused = 2;                                     // SHiP: re-referenced since filled
constexpr uint32_t kNever = std::numeric_limits<uint32_t>::max();  // Belady: no next use
constexpr int64_t kNoLine = std::numeric_limits<int32_t>::max();   // line ids must stay below (tags are int32)
constexpr uint32_t kShipTableBits = 14;
constexpr uint8_t kShipCounterMax = 7;   // 3-bit counters
constexpr uint8_t kShipCounterInit = 1;  // weakly "re-referenced": fill as intermediate until learnt
constexpr uint32_t kRrpvDistant = 3;     // 2-bit re-reference values
constexpr uint32_t kRrpvIntermediate = 2;
constexpr uint64_t kLineSalt = 0x5ca1ab1e0ddba11ull;  // decorrelates the hit-ratio hash from other uses

}  // namespace

CacheGeometry CacheGeometry::of(const L2Device& d, int64_t setaside_bytes) {
  d.validate();
  return {d.sets(), d.ways, d.line_bytes, d.persisting_ways(setaside_bytes), d.normal_lost_ways(setaside_bytes)};
}

void CacheGeometry::validate() const {
  ATOLL_CHECK(sets > 0 && sets <= std::numeric_limits<int32_t>::max() / std::max(ways, 1) && ways > 0 &&
                  line_bytes > 0 && persisting_ways >= 0 && normal_lost_ways >= 0 &&
                  persisting_ways + normal_lost_ways <= ways,
              kInvalidArgument, "bad cache geometry: {} sets x {} ways of {} bytes, {} persisting ways, {} more lost",
              sets, ways, line_bytes, persisting_ways, normal_lost_ways);
}

const char* policy_name(Policy p) {
  switch (p) {
    case Policy::kLru:
      return "lru";
    case Policy::kShip:
      return "ship";
    case Policy::kShipSw:
      return "ship-sw";
    case Policy::kBelady:
      return "belady";
  }
  return "?";
}

Policy policy_from_name(std::string_view name) {
  for (Policy p : {Policy::kLru, Policy::kShip, Policy::kShipSw, Policy::kBelady}) {
    if (name == policy_name(p)) return p;
  }
  ATOLL_THROW(kInvalidArgument, "unknown replacement policy '{}' (known: lru, ship, ship-sw, belady)", name);
}

void to_json(nlohmann::json& j, const SimResult& r) {
  auto kernels = nlohmann::json::array();
  for (const KernelStats& k : r.kernels) {
    kernels.push_back({{"name", k.name},
                       {"accesses", k.accesses},
                       {"hits", k.hits},
                       {"hit_rate", k.hit_rate()},
                       {"dram_read_bytes", k.dram_read_bytes},
                       {"dram_write_bytes", k.dram_write_bytes}});
  }
  j = {{"model", r.model},
       {"batch", r.batch},
       {"device", r.device},
       {"policy", r.policy},
       {"hints", r.hints},
       {"sets", r.geometry.sets},
       {"ways", r.geometry.ways},
       {"line_bytes", r.geometry.line_bytes},
       {"persisting_ways", r.geometry.persisting_ways},
       {"normal_lost_ways", r.geometry.normal_lost_ways},
       {"hit_ratio", r.hit_ratio},
       {"warmup_passes", r.warmup_passes},
       {"accesses", r.accesses},
       {"hits", r.hits},
       {"hit_rate", r.hit_rate()},
       {"persisting_accesses", r.persisting_accesses},
       {"dram_read_bytes", r.dram_read_bytes},
       {"dram_write_bytes", r.dram_write_bytes},
       {"flush_write_bytes", r.flush_write_bytes},
       {"kernels", std::move(kernels)}};
}

CacheSimulator::CacheSimulator(const CacheGeometry& geometry) : geometry_(geometry) {
  geometry_.validate();
  const auto slots = static_cast<size_t>(geometry_.sets * geometry_.ways);
  tags_.resize(slots);
  meta_.resize(slots);
  signatures_.resize(slots);
  flags_.resize(slots);
  ship_counters_.resize(size_t{1} << kShipTableBits);
}

void CacheSimulator::compute_next_uses(const Trace& t, int passes) {
  const uint64_t total = static_cast<uint64_t>(passes) * static_cast<uint64_t>(t.accesses());
  next_use_.resize(total);
  std::vector<uint32_t> last(static_cast<size_t>(t.total_lines()), kNever);
  uint64_t index = total;
  for (int pass = 0; pass < passes; ++pass) {
    for (auto r = t.ranges.rbegin(); r != t.ranges.rend(); ++r) {
      for (uint32_t i = r->lines; i-- > 0;) {
        const uint32_t line = r->first_line + i;
        --index;
        next_use_[index] = last[line];
        last[line] = static_cast<uint32_t>(index);
      }
    }
  }
}

// An access is an arena line's last read when the line's next access, going round the inference
// (the next pass repeats it), is a write.
void CacheSimulator::compute_dead_after(const Trace& t) {
  const auto total = static_cast<size_t>(t.accesses());
  dead_after_.assign(total, 0);
  std::vector<int8_t> next_is_write(static_cast<size_t>(t.arena_lines()), -1);  // -1: not seen yet
  for (int round = 0; round < 2; ++round) {  // the second round sees each line's wrap-around successor
    size_t index = total;
    for (auto r = t.ranges.rbegin(); r != t.ranges.rend(); ++r) {
      for (uint32_t i = r->lines; i-- > 0;) {
        --index;
        const uint32_t line = r->first_line + i;
        if (line >= next_is_write.size()) continue;
        dead_after_[index] = !r->write && next_is_write[line] == 1;
        next_is_write[line] = r->write ? 1 : 0;
      }
    }
  }
}

template <Policy P>
int64_t CacheSimulator::choose_victim(int64_t first, int64_t end, uint32_t next_use) {
  for (int64_t s = first; s < end; ++s) {
    if (tags_[static_cast<size_t>(s)] < 0) return s;
  }
  const uint32_t* meta = meta_.data();
  if constexpr (P == Policy::kLru) {
    int64_t victim = first;
    for (int64_t s = first + 1; s < end; ++s) {
      if (meta[s] < meta[victim]) victim = s;
    }
    return victim;
  } else if constexpr (P == Policy::kBelady) {
    int64_t victim = first;
    for (int64_t s = first + 1; s < end; ++s) {
      if (meta[s] > meta[victim]) victim = s;
    }
    return next_use >= meta[victim] ? -1 : victim;
  } else {
    // SRRIP: the first line predicted "distant", after ageing the set until one is.
    int64_t victim = first;
    for (int64_t s = first + 1; s < end; ++s) {
      if (meta[s] > meta[victim]) victim = s;
    }
    const uint32_t age = kRrpvDistant - meta[victim];
    if (age > 0) {
      for (int64_t s = first; s < end; ++s) meta_[static_cast<size_t>(s)] += age;
    }
    return victim;
  }
}

template <Policy P>
void CacheSimulator::access(int64_t set_base, uint32_t line, bool write, bool persisting, uint32_t signature,
                            KernelStats& stats) {
  uint32_t next_use = 0;
  if constexpr (P == Policy::kBelady) next_use = next_use_[cursor_++];
  const bool discard = discard_dead_ && dead_after_[pass_cursor_++];
  const int64_t line_bytes = geometry_.line_bytes;
  const auto tag = static_cast<int32_t>(line);

  const int32_t* tags = tags_.data() + set_base;
  int way = 0;
  while (way < geometry_.ways && tags[way] != tag) ++way;
  if (way < geometry_.ways) {
    const auto hit = static_cast<size_t>(set_base + way);
    ++stats.hits;
    if (discard) {  // read, then invalidated without a write-back
      tags_[hit] = -1;
      flags_[hit] = 0;
      return;
    }
    if (write) flags_[hit] |= kDirty;
    if constexpr (P == Policy::kLru) {
      meta_[hit] = ++clock_;
    } else if constexpr (P == Policy::kBelady) {
      meta_[hit] = next_use;
    } else {
      meta_[hit] = 0;
      flags_[hit] |= kReused;
      uint8_t& counter = ship_counters_[signatures_[hit]];
      if (counter < kShipCounterMax) ++counter;
    }
    return;
  }

  if (!write) stats.dram_read_bytes += line_bytes;
  if (discard) return;  // read from DRAM, not kept
  const bool in_setaside = persisting && partition_ways_ > 0;
  const int64_t first = set_base + (in_setaside ? 0 : normal_first_way_);
  const int64_t end = set_base + (in_setaside ? partition_ways_ : geometry_.ways);
  const int64_t victim = first < end ? choose_victim<P>(first, end, next_use) : -1;
  if (victim < 0) {  // bypass: no way to fill (a set-aside of every way) or Belady's choice
    if (write) stats.dram_write_bytes += line_bytes;
    return;
  }

  const auto slot = static_cast<size_t>(victim);
  if (tags_[slot] >= 0) {
    if (flags_[slot] & kDirty) stats.dram_write_bytes += line_bytes;
    if constexpr (P == Policy::kShip || P == Policy::kShipSw) {
      uint8_t& counter = ship_counters_[signatures_[slot]];
      if (!(flags_[slot] & kReused) && counter > 0) --counter;
    }
  }
  tags_[slot] = tag;
  flags_[slot] = write ? kDirty : 0;
  const auto predictor = static_cast<uint16_t>(signature & ((1u << kShipTableBits) - 1));
  signatures_[slot] = predictor;
  if constexpr (P == Policy::kLru) {
    meta_[slot] = ++clock_;
  } else if constexpr (P == Policy::kBelady) {
    meta_[slot] = next_use;
  } else if constexpr (P == Policy::kShipSw) {
    meta_[slot] = persisting ? 0 : ship_counters_[predictor] == 0 ? kRrpvDistant : kRrpvIntermediate;
  } else {
    meta_[slot] = ship_counters_[predictor] == 0 ? kRrpvDistant : kRrpvIntermediate;
  }
}

template <Policy P>
void CacheSimulator::run_passes(const Trace& t, int passes, uint64_t threshold, bool select_all) {
  const auto sets = static_cast<uint32_t>(geometry_.sets);
  const int64_t ways = geometry_.ways;
  // Ranges are runs of consecutive lines, so the set index advances by one per line: no division,
  // and the set kPrefetchLines ahead can be fetched into the host cache early.
  constexpr uint32_t kPrefetchLines = 16;
  const uint32_t prefetch_offset = kPrefetchLines % sets;
  for (int pass = 0; pass < passes; ++pass) {
    pass_cursor_ = 0;
    if (pass == passes - 1) {  // only the last pass is measured
      for (KernelStats& k : stats_) k = KernelStats{};
      persisting_accesses_ = 0;
    }
    for (const TraceRange& r : t.ranges) {
      KernelStats& stats = stats_[r.kernel];
      stats.accesses += r.lines;
      uint32_t set = r.first_line % sets;
      uint32_t ahead = set + prefetch_offset >= sets ? set + prefetch_offset - sets : set + prefetch_offset;
      const uint32_t end = r.first_line + r.lines;
      for (uint32_t line = r.first_line; line < end; ++line) {
        __builtin_prefetch(tags_.data() + ahead * ways);
        __builtin_prefetch(meta_.data() + ahead * ways);
        const bool persisting = r.hinted && (select_all || mix64(line ^ kLineSalt) < threshold);
        persisting_accesses_ += persisting;
        access<P>(static_cast<int64_t>(set) * ways, line, r.write, persisting, r.signature, stats);
        if (++set == sets) set = 0;
        if (++ahead == sets) ahead = 0;
      }
    }
  }
}

SimResult CacheSimulator::run(const Trace& t, Policy policy, double hit_ratio, const SimOptions& options) {
  ATOLL_CHECK(hit_ratio >= 0.0 && hit_ratio <= 1.0, kInvalidArgument, "hit ratio {} is outside [0, 1]", hit_ratio);
  ATOLL_CHECK(options.warmup_passes >= 0, kInvalidArgument, "negative warm-up pass count {}", options.warmup_passes);
  ATOLL_CHECK(t.line_bytes == geometry_.line_bytes, kInvalidArgument,
              "trace of {} byte lines simulated on a cache of {} byte lines", t.line_bytes, geometry_.line_bytes);
  const int passes = options.warmup_passes + 1;
  for (const TraceRange& r : t.ranges) {
    ATOLL_CHECK(static_cast<int64_t>(r.kernel) < t.kernel_count &&
                    int64_t{r.first_line} + r.lines <= std::min<int64_t>(t.total_lines(), kNoLine),
                kInvalidArgument,
                "trace range of kernel {} over lines [{}, {}) is outside the trace's {} kernels and {} lines", r.kernel,
                r.first_line, int64_t{r.first_line} + r.lines, t.kernel_count, t.total_lines());
  }

  std::fill(tags_.begin(), tags_.end(), -1);
  std::fill(meta_.begin(), meta_.end(), 0);
  std::fill(flags_.begin(), flags_.end(), 0);
  std::fill(ship_counters_.begin(), ship_counters_.end(), kShipCounterInit);
  stats_.assign(static_cast<size_t>(t.kernel_count), KernelStats{});
  cursor_ = 0;
  clock_ = 0;
  partition_ways_ = policy == Policy::kShipSw ? 0 : geometry_.persisting_ways;
  normal_first_way_ = policy == Policy::kShipSw ? 0 : geometry_.persisting_ways + geometry_.normal_lost_ways;
  ATOLL_CHECK(static_cast<uint64_t>(passes) * static_cast<uint64_t>(t.accesses()) < kNever, kUnsupported,
              "{} passes of {} accesses overflow the 32-bit access clock", passes, t.accesses());

  // hit_ratio as a threshold on a uniform 64-bit hash; 1.0 selects every line.
  const bool select_all = hit_ratio >= 1.0;
  // 2^64 itself does not fit: converting it would be undefined, so every line is selected apart.
  const uint64_t threshold = select_all ? UINT64_MAX : static_cast<uint64_t>(hit_ratio * 18446744073709551616.0);
  discard_dead_ = options.discard_dead;
  if (discard_dead_) compute_dead_after(t);
  switch (policy) {
    case Policy::kLru:
      run_passes<Policy::kLru>(t, passes, threshold, select_all);
      break;
    case Policy::kShip:
      run_passes<Policy::kShip>(t, passes, threshold, select_all);
      break;
    case Policy::kShipSw:
      run_passes<Policy::kShipSw>(t, passes, threshold, select_all);
      break;
    case Policy::kBelady:
      compute_next_uses(t, passes);
      run_passes<Policy::kBelady>(t, passes, threshold, select_all);
      break;
  }

  SimResult r;
  r.policy = policy_name(policy);
  r.geometry = geometry_;
  r.geometry.persisting_ways = partition_ways_;
  r.geometry.normal_lost_ways = normal_first_way_ - partition_ways_;
  r.hit_ratio = hit_ratio;
  r.warmup_passes = options.warmup_passes;
  r.persisting_accesses = persisting_accesses_;
  for (const KernelStats& k : stats_) {
    r.accesses += k.accesses;
    r.hits += k.hits;
    r.dram_read_bytes += k.dram_read_bytes;
    r.dram_write_bytes += k.dram_write_bytes;
  }
  if (options.flush_at_end) {
    for (size_t s = 0; s < tags_.size(); ++s) {
      if (tags_[s] >= 0 && (flags_[s] & kDirty)) r.flush_write_bytes += geometry_.line_bytes;
    }
    r.dram_write_bytes += r.flush_write_bytes;
  }
  r.kernels = stats_;
  return r;
}

}  // namespace atl::l2
