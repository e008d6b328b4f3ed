#include "l2/slices.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_value.h"

namespace atl::l2 {

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr const char* kConfigFormat = "atoll.l2config/1";

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Bytes of slice s in an arena of arena_bytes.
int64_t slice_length(int64_t s, int64_t slice_bytes, int64_t arena_bytes) {
  return std::min(arena_bytes, (s + 1) * slice_bytes) - s * slice_bytes;
}

std::string describe(const std::string& model, int64_t batch, const std::string& fingerprint, int64_t slices,
                     int64_t slice_bytes) {
  return fmt::format("{} batch {} (program {}, {} slices of {} bytes)", model, batch, fingerprint, slices, slice_bytes);
}

}  // namespace

int64_t L2Device::round_setaside(int64_t bytes) const {
  ATOLL_CHECK(bytes >= 0, kInvalidArgument, "negative L2 set-aside request {}", bytes);
  const int64_t granted = ceil_div(bytes, setaside_granularity) * setaside_granularity;
  ATOLL_CHECK(granted <= setaside_max_bytes, kInvalidArgument,
              "L2 set-aside of {} bytes (rounded to {}) exceeds the {} maximum of {} bytes", bytes, granted, name,
              setaside_max_bytes);
  return granted;
}

int L2Device::persisting_ways(int64_t setaside_bytes) const {
  return static_cast<int>(setaside_bytes * ways / l2_bytes);
}

int L2Device::normal_lost_ways(int64_t setaside_bytes) const {
  const int persisting = persisting_ways(setaside_bytes);
  const auto lost = static_cast<int>(std::lround((setaside_normal_cost - 1.0) * persisting));
  return std::clamp(lost, 0, ways - persisting);
}

void L2Device::validate() const {
  ATOLL_CHECK(ways > 0 && line_bytes > 0 && l2_bytes > 0 && l2_bytes % (ways * line_bytes) == 0, kInvalidArgument,
              "L2 device '{}': {} bytes is not a whole number of sets of {} ways x {} byte lines", name, l2_bytes, ways,
              line_bytes);
  ATOLL_CHECK(sector_bytes > 0 && line_bytes % sector_bytes == 0, kInvalidArgument,
              "L2 device '{}': line of {} bytes is not whole sectors of {}", name, line_bytes, sector_bytes);
  ATOLL_CHECK(setaside_granularity > 0 && setaside_max_bytes >= 0 && setaside_max_bytes <= l2_bytes, kInvalidArgument,
              "L2 device '{}': set-aside max {} / granularity {} inconsistent with L2 of {} bytes", name,
              setaside_max_bytes, setaside_granularity, l2_bytes);
  ATOLL_CHECK(max_window_bytes > 0, kInvalidArgument, "L2 device '{}': no access window size", name);
  ATOLL_CHECK(setaside_normal_cost >= 1.0 && setaside_normal_cost <= 16.0, kInvalidArgument,
              "L2 device '{}': set-aside normal cost {} outside [1, 16]", name, setaside_normal_cost);
}

// 16 ways: with it the measured set-aside step (3.75 MiB = 60 MiB / 16) is exactly one way and
// the 37.5 MiB maximum is 10 of the 16 ways, so the per-set way partition the simulator uses
// matches the granularity the driver grants.
L2Device h200_l2() {
  return {.name = "h200",
          .l2_bytes = 60 * kMiB,
          .ways = 16,
          .line_bytes = 128,
          .sector_bytes = 32,
          .setaside_max_bytes = 75 * kMiB / 2,
          .setaside_granularity = 15 * kMiB / 4,
          .max_window_bytes = 128 * kMiB,
          .setaside_normal_cost = 2.0};
}

// Not measured here: 16 ways as on the H200, so one way (3 MiB) is the assumed set-aside step and
// 36 MiB is 12 ways; window maximum as on every GPU since Ampere.
L2Device l4_l2() {
  return {.name = "l4",
          .l2_bytes = 48 * kMiB,
          .ways = 16,
          .line_bytes = 128,
          .sector_bytes = 32,
          .setaside_max_bytes = 36 * kMiB,
          .setaside_granularity = 3 * kMiB,
          .max_window_bytes = 128 * kMiB};
}

L2Device l2_device_by_name(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (lower == "h200") return h200_l2();
  if (lower == "l4") return l4_l2();
  ATOLL_THROW(kNotFound, "unknown L2 device '{}' (known: h200, l4)", name);
}

void to_json(nlohmann::json& j, const L2Device& d) {
  j = {{"name", d.name},
       {"l2_bytes", d.l2_bytes},
       {"ways", d.ways},
       {"sets", d.sets()},
       {"line_bytes", d.line_bytes},
       {"sector_bytes", d.sector_bytes},
       {"setaside_max_bytes", d.setaside_max_bytes},
       {"setaside_granularity", d.setaside_granularity},
       {"max_window_bytes", d.max_window_bytes},
       {"setaside_normal_cost", d.setaside_normal_cost}};
}

int64_t slice_count(int64_t arena_bytes, int64_t slice_bytes) {
  ATOLL_CHECK(slice_bytes > 0, kInvalidArgument, "slice size must be positive, got {}", slice_bytes);
  return ceil_div(arena_bytes, slice_bytes);
}

int64_t ResidencyConfig::resident_count() const {
  return std::count(resident.begin(), resident.end(), true);
}

int64_t ResidencyConfig::resident_bytes(int64_t arena_bytes) const {
  int64_t total = 0;
  for (size_t s = 0; s < resident.size(); ++s) {
    if (resident[s]) total += slice_length(static_cast<int64_t>(s), slice_bytes, arena_bytes);
  }
  return total;
}

void ResidencyConfig::check_matches(const Program& p) const {
  const int64_t program_slices = slice_count(p.arena_bytes, slice_bytes);
  const int64_t config_slices = static_cast<int64_t>(resident.size());
  const char* reason = model != p.model                  ? "a different model"
                       : batch != p.batch                ? "a different batch"
                       : fingerprint != p.fingerprint    ? "a different plan of the same model and batch"
                       : config_slices != program_slices ? "a different slice count"
                                                         : nullptr;
  ATOLL_CHECK(reason == nullptr, kInvalidArgument, "L2 config was made for {}, not for {}: {}",
              describe(model, batch, fingerprint, config_slices, slice_bytes),
              describe(p.model, p.batch, p.fingerprint, program_slices, slice_bytes), reason);
}

void ResidencyConfig::check_fits(const L2Device& d) const {
  ATOLL_CHECK(
      setaside_bytes >= 0 && setaside_bytes % d.setaside_granularity == 0 && setaside_bytes <= d.setaside_max_bytes,
      kInvalidArgument, "L2 config set-aside of {} bytes does not fit {}: it must be a multiple of {} up to {} bytes",
      setaside_bytes, d.name, d.setaside_granularity, d.setaside_max_bytes);
  ATOLL_CHECK(slice_bytes % d.line_bytes == 0 && slice_bytes <= d.max_window_bytes, kInvalidArgument,
              "L2 config slice of {} bytes does not fit {}: it must be a multiple of the {} byte line and at most "
              "the {} byte access window",
              slice_bytes, d.name, d.line_bytes, d.max_window_bytes);
  ATOLL_CHECK(hit_ratio >= 0.0 && hit_ratio <= 1.0, kInvalidArgument, "L2 config hit ratio {} is outside [0, 1]",
              hit_ratio);
}

ResidencyConfig make_config(const Program& p, const L2Device& d, std::vector<bool> resident, double hit_ratio,
                            int64_t slice_bytes) {
  ResidencyConfig c;
  c.fingerprint = p.fingerprint;
  c.model = p.model;
  c.batch = p.batch;
  c.slice_bytes = slice_bytes;
  c.resident = std::move(resident);
  c.hit_ratio = hit_ratio;
  const int64_t wanted = std::min(c.resident_bytes(p.arena_bytes), d.setaside_max_bytes);
  c.setaside_bytes = std::min(ceil_div(wanted, d.setaside_granularity) * d.setaside_granularity,
                              d.setaside_max_bytes / d.setaside_granularity * d.setaside_granularity);
  c.check_matches(p);
  c.check_fits(d);
  return c;
}

void to_json(nlohmann::json& j, const ResidencyConfig& c) {
  std::string bits;
  bits.reserve(c.resident.size());
  for (bool b : c.resident) bits.push_back(b ? '1' : '0');
  j = {{"format", kConfigFormat},
       {"model", c.model},
       {"batch", c.batch},
       {"fingerprint", c.fingerprint},
       {"slice_bytes", c.slice_bytes},
       {"slices", c.resident.size()},
       {"resident", bits},
       {"setaside_bytes", c.setaside_bytes},
       {"hit_ratio", c.hit_ratio}};
}

void from_json(const nlohmann::json& j, ResidencyConfig& c) {
  std::string bits;
  int64_t slices = 0;
  json_only_keys(j, {"format", "model", "batch", "fingerprint", "slice_bytes", "slices", "resident", "setaside_bytes",
                     "hit_ratio"}, "L2 config");
  try {
    const std::string format = j.at("format").get<std::string>();
    ATOLL_CHECK(format == kConfigFormat, kParse, "not an atoll L2 config (format '{}', expected '{}')", format,
                kConfigFormat);
    c.model = j.at("model").get<std::string>();
    c.batch = json_int64(j.at("batch"), "batch");
    c.fingerprint = j.at("fingerprint").get<std::string>();
    c.slice_bytes = json_int64(j.at("slice_bytes"), "slice_bytes");
    slices = json_int64(j.at("slices"), "slices");
    bits = j.at("resident").get<std::string>();
    c.setaside_bytes = json_int64(j.at("setaside_bytes"), "setaside_bytes");
    c.hit_ratio = j.at("hit_ratio").get<double>();
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "L2 config JSON: {}", json_error_text(e));
  }
  ATOLL_CHECK(static_cast<int64_t>(bits.size()) == slices, kParse,
              "L2 config: 'resident' has {} bits but 'slices' says {}", bits.size(), slices);
  c.resident.assign(bits.size(), false);
  for (size_t i = 0; i < bits.size(); ++i) {
    ATOLL_CHECK(bits[i] == '0' || bits[i] == '1', kParse, "L2 config: 'resident' has '{}' at position {}", bits[i], i);
    c.resident[i] = bits[i] == '1';
  }
  ATOLL_CHECK(c.slice_bytes > 0 && c.setaside_bytes >= 0, kInvalidArgument,
              "L2 config: slice_bytes {} and setaside_bytes {} must be positive", c.slice_bytes, c.setaside_bytes);
  ATOLL_CHECK(c.hit_ratio >= 0.0 && c.hit_ratio <= 1.0, kInvalidArgument, "L2 config: hit ratio {} is outside [0, 1]",
              c.hit_ratio);
}

std::string config_to_json_string(const ResidencyConfig& c) {
  nlohmann::json j = c;
  return j.dump(1);
}

ResidencyConfig config_from_json_string(const std::string& text) {
  return parse_json_document(text, "L2 config").get<ResidencyConfig>();
}

ResidencyConfig load_config(const std::string& path) {
  std::ifstream in(path);
  ATOLL_CHECK(in.good(), kIo, "cannot open L2 config '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  try {
    return config_from_json_string(text.str());
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", path, e.message()), e.file(), e.line());
  }
}

void save_config(const ResidencyConfig& c, const std::string& path) {
  write_file_atomic(path, config_to_json_string(c) + '\n');
}

namespace {

struct TouchedSlice {
  int64_t slice;
  int64_t bytes;  // bytes of this slice the kernel reads or writes
  bool resident;
};

// Slices a kernel touches through its arena bindings, in slice order; overlapping bindings count once.
std::vector<TouchedSlice> touched_slices(const Kernel& k, const ResidencyConfig& c) {
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const auto* list : {&k.inputs, &k.outputs}) {
    for (const Binding& b : *list) {
      if (b.kind == Binding::Kind::kArena && b.bytes > 0) spans.emplace_back(b.offset, b.offset + b.bytes);
    }
  }
  std::sort(spans.begin(), spans.end());
  std::vector<TouchedSlice> out;
  int64_t covered_to = 0;  // bytes before this are already counted
  for (auto [begin, end] : spans) {
    begin = std::max(begin, covered_to);
    while (begin < end) {
      const int64_t s = begin / c.slice_bytes;
      ATOLL_CHECK(s < static_cast<int64_t>(c.resident.size()), kInternal,
                  "kernel '{}' touches arena byte {}, past the {} slices of the config", k.name, begin,
                  c.resident.size());
      const int64_t piece_end = std::min(end, (s + 1) * c.slice_bytes);
      if (!out.empty() && out.back().slice == s) {
        out.back().bytes += piece_end - begin;
      } else {
        out.push_back({s, piece_end - begin, static_cast<bool>(c.resident[static_cast<size_t>(s)])});
      }
      begin = piece_end;
    }
    covered_to = std::max(covered_to, end);
  }
  return out;
}

AccessWindow window_for(const std::vector<TouchedSlice>& touched, const ResidencyConfig& c, int64_t arena_bytes,
                        int64_t max_window_bytes) {
  AccessWindow w;
  const size_t n = touched.size();
  std::vector<int64_t> resident_prefix(n + 1, 0), nonresident_prefix(n + 1, 0);
  for (size_t i = 0; i < n; ++i) {
    resident_prefix[i + 1] = resident_prefix[i] + (touched[i].resident ? touched[i].bytes : 0);
    nonresident_prefix[i + 1] = nonresident_prefix[i] + (touched[i].resident ? 0 : touched[i].bytes);
  }
  const int64_t total_resident = resident_prefix[n];
  if (total_resident == 0) return w;

  // Window from touched[first] to touched[last], both resident, spanning at most max_slices.
  const int64_t max_slices = max_window_bytes / c.slice_bytes;
  size_t best_first = 0, best_last = 0;
  int64_t best_resident = -1, best_nonresident = 0;
  size_t last = 0;
  for (size_t first = 0; first < n; ++first) {
    if (!touched[first].resident) continue;
    last = std::max(last, first);
    while (last + 1 < n && touched[last + 1].slice - touched[first].slice < max_slices) ++last;
    size_t end = last;
    while (!touched[end].resident) --end;
    const int64_t res = resident_prefix[end + 1] - resident_prefix[first];
    const int64_t nonres = nonresident_prefix[end + 1] - nonresident_prefix[first];
    if (res > best_resident || (res == best_resident && nonres < best_nonresident)) {
      best_first = first;
      best_last = end;
      best_resident = res;
      best_nonresident = nonres;
    }
  }
  const int64_t first_slice = touched[best_first].slice, last_slice = touched[best_last].slice;
  w.offset = first_slice * c.slice_bytes;
  w.bytes = std::min(arena_bytes, (last_slice + 1) * c.slice_bytes) - w.offset;
  w.resident_bytes = best_resident;
  w.touched_nonresident_bytes = best_nonresident;
  w.missed_resident_bytes = total_resident - best_resident;
  for (int64_t s = first_slice; s <= last_slice; ++s) {
    if (!c.resident[static_cast<size_t>(s)]) w.covered_nonresident_bytes += slice_length(s, c.slice_bytes, arena_bytes);
  }
  return w;
}

}  // namespace

WindowPlan plan_windows(const Program& p, const ResidencyConfig& c, const L2Device& d) {
  c.check_matches(p);
  c.check_fits(d);
  WindowPlan plan;
  plan.setaside_bytes = c.setaside_bytes;
  plan.hit_ratio = c.hit_ratio;
  plan.windows.reserve(p.kernels.size());
  for (const Kernel& k : p.kernels) {
    AccessWindow w = window_for(touched_slices(k, c), c, p.arena_bytes, d.max_window_bytes);
    plan.resident_bytes += w.resident_bytes;
    plan.touched_nonresident_bytes += w.touched_nonresident_bytes;
    plan.missed_resident_bytes += w.missed_resident_bytes;
    plan.windows.push_back(w);
  }
  return plan;
}

void to_json(nlohmann::json& j, const WindowPlan& w) {
  auto windows = nlohmann::json::array();
  for (const AccessWindow& a : w.windows) {
    windows.push_back({{"offset", a.offset},
                       {"bytes", a.bytes},
                       {"resident_bytes", a.resident_bytes},
                       {"touched_nonresident_bytes", a.touched_nonresident_bytes},
                       {"covered_nonresident_bytes", a.covered_nonresident_bytes},
                       {"missed_resident_bytes", a.missed_resident_bytes}});
  }
  j = {{"setaside_bytes", w.setaside_bytes},
       {"hit_ratio", w.hit_ratio},
       {"resident_bytes", w.resident_bytes},
       {"touched_nonresident_bytes", w.touched_nonresident_bytes},
       {"missed_resident_bytes", w.missed_resident_bytes},
       {"windows", std::move(windows)}};
}

}  // namespace atl::l2
