#pragma once
// AutoScratch's unit of L2 residency: a Program's activation arena cut into equal slices, a config
// saying which slices persist in L2, the device limits that bound a config, and the mapping of a
// config onto CUDA access-policy windows (CUDA allows one window per launch).
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "program/program.h"

namespace atl::l2 {

inline constexpr int64_t kDefaultSliceBytes = int64_t{1} << 20;

// L2 limits of one GPU model; sizes in bytes.
struct L2Device {
  std::string name;
  int64_t l2_bytes = 0;
  int ways = 0;  // associativity the simulator models (NVIDIA does not publish it)
  int64_t line_bytes = 0;
  int64_t sector_bytes = 0;          // informational: the simulator moves whole lines
  int64_t setaside_max_bytes = 0;    // largest cudaLimitPersistingL2CacheSize the driver accepts
  int64_t setaside_granularity = 0;  // the driver grants set-aside in these steps, rounded up
  int64_t max_window_bytes = 0;      // cudaDevAttrMaxAccessPolicyWindowSize
  // Normal-line capacity a set-aside costs, in multiples of its size. 1 is CUDA's documented
  // model; the H200 behaves as if each of its two L2 partitions reserved the set-aside (2,
  // calibrated on measured configs: docs/PERFORMANCE.md, "L2 residency").
  double setaside_normal_cost = 1.0;

  int64_t sets() const { return l2_bytes / (ways * line_bytes); }
  // What the driver grants for a request of `bytes`: rounded up to the granularity.
  // Throws kInvalidArgument when that exceeds the maximum (the driver refuses it).
  int64_t round_setaside(int64_t bytes) const;
  // Ways of every set that a set-aside of `bytes` holds. The simulator models the set-aside as a
  // per-set way partition; with the presets one granularity step is exactly one way.
  int persisting_ways(int64_t setaside_bytes) const;
  // Ways normal lines lose beyond the persisting ways (setaside_normal_cost - 1 times as many,
  // rounded, at most what is left).
  int normal_lost_ways(int64_t setaside_bytes) const;
  // Throws kInvalidArgument unless the geometry is consistent (whole sets, set-aside <= L2, ...).
  void validate() const;
};

// H200 (measured, see BRIEF.md): 60 MiB, set-aside max 37.5 MiB in 3.75 MiB steps, window max
// 128 MiB, set-aside normal cost 2 (calibrated).
L2Device h200_l2();
// L4 (AutoScratch's GPU): 48 MiB, 36 MiB settable.
L2Device l4_l2();
// "h200" or "l4", any case; throws kNotFound naming the presets.
L2Device l2_device_by_name(std::string_view name);
void to_json(nlohmann::json& j, const L2Device& d);

// Slices covering the arena; the last one is short when the arena is not a multiple of slice_bytes.
int64_t slice_count(int64_t arena_bytes, int64_t slice_bytes);

// A residency configuration, tied to the Program it was made for.
struct ResidencyConfig {
  std::string fingerprint;  // Program::fingerprint
  std::string model;
  int64_t batch = 0;
  int64_t slice_bytes = kDefaultSliceBytes;
  std::vector<bool> resident;  // one bit per slice: true = persisting
  int64_t setaside_bytes = 0;  // a multiple of the device's granularity
  double hit_ratio = 1.0;      // cudaAccessPolicyWindow::hitRatio for every window

  int64_t resident_count() const;
  // Arena bytes inside resident slices (the last slice may be short).
  int64_t resident_bytes(int64_t arena_bytes) const;
  // Throws kInvalidArgument naming both sides unless the config was made for this Program
  // (same fingerprint, model, batch and slice count).
  void check_matches(const Program& p) const;
  // Throws kInvalidArgument unless the device can apply it: set-aside on a granularity step and
  // within the maximum, slice a multiple of the line and no larger than the largest window.
  void check_fits(const L2Device& d) const;
};

// A config for p with the given slices resident and the set-aside sized to hold them: their bytes
// rounded up to the granularity, capped at the device maximum (more resident bytes than that
// then compete for the set-aside, as they do on the GPU).
ResidencyConfig make_config(const Program& p, const L2Device& d, std::vector<bool> resident, double hit_ratio,
                            int64_t slice_bytes = kDefaultSliceBytes);

void to_json(nlohmann::json& j, const ResidencyConfig& c);
// Throws kParse on malformed JSON and kInvalidArgument on values out of range.
void from_json(const nlohmann::json& j, ResidencyConfig& c);
std::string config_to_json_string(const ResidencyConfig& c);
ResidencyConfig config_from_json_string(const std::string& text);
ResidencyConfig load_config(const std::string& path);  // kIo, kParse, kInvalidArgument
void save_config(const ResidencyConfig& c, const std::string& path);

// The access-policy window of one launch, as offsets into the arena.
//
// A kernel may touch resident slices that are not adjacent (its input and output live in
// different parts of the arena). One window must then span the gap, and every line in the gap
// that the kernel itself touches becomes persisting although its slice is not resident
// (touched_nonresident_bytes): it occupies set-aside ways a resident slice should have.
// Gap bytes the kernel does not touch cost nothing during that launch (covered_nonresident_bytes
// only says how loose the window is). We still choose the minimal covering window because
// dropping a resident slice from it loses that slice's residency for the whole launch, whereas
// the wrongly covered lines only compete inside the set-aside, and a config search sees the cost
// and can avoid it. A window longer than the device maximum is cut to the span of at most that
// length holding the most touched resident bytes; what it leaves out is missed_resident_bytes.
struct AccessWindow {
  int64_t offset = 0;                     // arena offset of the window (a slice boundary)
  int64_t bytes = 0;                      // 0: launch without a window
  int64_t resident_bytes = 0;             // resident bytes the kernel touches inside the window
  int64_t touched_nonresident_bytes = 0;  // non-resident bytes the kernel touches inside it
  int64_t covered_nonresident_bytes = 0;  // window bytes in non-resident slices
  int64_t missed_resident_bytes = 0;      // resident bytes the kernel touches outside it
};

// How to apply a config on CUDA: cudaLimitPersistingL2CacheSize = setaside_bytes, and each launch
// i gets the window windows[i] (base = arena + offset, num_bytes = bytes, hitRatio = hit_ratio,
// hitProp = persisting, missProp = streaming); launches with bytes == 0 get none.
struct WindowPlan {
  int64_t setaside_bytes = 0;
  double hit_ratio = 1.0;
  std::vector<AccessWindow> windows;  // one per kernel, in Program order
  int64_t resident_bytes = 0;         // sums over kernels of the fields above
  int64_t touched_nonresident_bytes = 0;
  int64_t missed_resident_bytes = 0;
};

// Checks the config against p and d first.
WindowPlan plan_windows(const Program& p, const ResidencyConfig& c, const L2Device& d);
void to_json(nlohmann::json& j, const WindowPlan& w);

}  // namespace atl::l2
