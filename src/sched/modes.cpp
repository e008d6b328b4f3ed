#include "sched/modes.h"

#include <fmt/format.h>

#include "core/error.h"

namespace atl::sched {

namespace {

// clang-format off
constexpr ModeTraits kModeTraits[] = {
  //  mode                      name                  layout                     rt_high be     preempt flag   arms  pads   slices
    {Mode::kRtOnly,             "rt-only",            LaneLayout::kRtQueue,       true,  false, false,  false, true, false, false},
    {Mode::kSeq,                "seq",                LaneLayout::kOneLane,       false, true,  false,  false, false, false, false},
    {Mode::kStreams,            "streams",            LaneLayout::kLanePerClient, false, true,  false,  false, true, false, false},
    {Mode::kStreamsPrio,        "streams-prio",       LaneLayout::kLanePerClient, true,  true,  false,  false, true, false, false},
    {Mode::kWait,               "wait",               LaneLayout::kRtQueue,       true,  true,  true,   false, true, false, false},
    {Mode::kReset,              "reset",              LaneLayout::kRtQueue,       true,  true,  true,   true,  true, false, false},
    {Mode::kPaddingConcurrent,  "padding-concurrent", LaneLayout::kRtQueue,       true,  true,  true,   true,  true, true,  false},
    {Mode::kPaddingSlices,      "padding-slices",     LaneLayout::kRtQueue,       true,  true,  true,   true,  true, true,  true},
};
// clang-format on

}  // namespace

const ModeTraits& mode_traits(Mode m) {
  for (const ModeTraits& t : kModeTraits) {
    if (t.mode == m) return t;
  }
  ATOLL_THROW(kInvalidArgument, "unknown scheduling mode {}", static_cast<int>(m));
}

const char* mode_name(Mode m) {
  for (const ModeTraits& t : kModeTraits) {
    if (t.mode == m) return t.name;
  }
  return "unknown";
}

Mode mode_from_name(std::string_view name) {
  std::string valid;
  for (const ModeTraits& t : kModeTraits) {
    if (name == t.name) return t.mode;
    valid += valid.empty() ? t.name : fmt::format(", {}", t.name);
  }
  ATOLL_THROW(kInvalidArgument, "unknown scheduling mode '{}' (modes: {})", name, valid);
}

std::vector<Mode> all_modes() {
  std::vector<Mode> modes;
  for (const ModeTraits& t : kModeTraits) modes.push_back(t.mode);
  return modes;
}

}  // namespace atl::sched
