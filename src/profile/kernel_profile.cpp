#include "profile/kernel_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json_value.h"

namespace atl {

namespace {

constexpr const char* kProfileFormat = "atoll.profile/1";

// Field checks shared by the parser (kParse) and the program check (kInvalidArgument).
void check_fields(const ModelProfile& p, ErrorCode code, const std::string& source) {
  const auto fail = [&](const std::string& what) {
    throw Error(code, fmt::format("{}: {}", source, what), __FILE__, __LINE__);
  };
  if (p.sm_count < 1) fail(fmt::format("SM count {} must be positive", p.sm_count));
  if (p.kernels.empty()) fail("no kernels");
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelProfile& k = p.kernels[i];
    const std::string who = fmt::format("kernel {} ('{}')", i, k.name);
    if (!std::isfinite(k.time_us) || k.time_us <= 0)
      fail(fmt::format("{} time {} us must be positive", who, k.time_us));
    if (k.grid_blocks < 1 || k.resident_blocks_per_sm < 1 || k.launches < 1 || k.threads_per_block < 0) {
      fail(fmt::format("{} has {} blocks, {} resident per SM, {} launches, {} threads per block", who, k.grid_blocks,
                       k.resident_blocks_per_sm, k.launches, k.threads_per_block));
    }
    if (k.slice_units < 0) fail(fmt::format("{} has {} slice units", who, k.slice_units));
    if (k.grid_stride && k.slice_units != 1) {
      fail(fmt::format("{} is grid-stride with {} slice units (1: the whole kernel)", who, k.slice_units));
    }
    if (!(k.sm_share > 0 && k.sm_share <= 1)) fail(fmt::format("{} SM share {} is outside (0, 1]", who, k.sm_share));
    if (k.exit_us && !(std::isfinite(*k.exit_us) && *k.exit_us >= 0)) {
      fail(fmt::format("{} exit latency {} us is negative", who, *k.exit_us));
    }
    if (!(std::isfinite(k.flops) && k.flops >= 0 && std::isfinite(k.bytes) && k.bytes >= 0)) {
      fail(fmt::format("{} has {} flops and {} bytes; both must be finite and not negative", who, k.flops, k.bytes));
    }
  }
  if (!(std::isfinite(p.peak_flops) && p.peak_flops >= 0 && std::isfinite(p.peak_bytes_per_s) &&
        p.peak_bytes_per_s >= 0)) {
    fail(fmt::format("peaks of {} flop/s and {} bytes/s must be finite and not negative", p.peak_flops,
                     p.peak_bytes_per_s));
  }
}

nlohmann::json kernel_json(const KernelProfile& k) {
  nlohmann::json j{{"name", k.name},
                   {"time_us", k.time_us},
                   {"grid_blocks", k.grid_blocks},
                   {"threads_per_block", k.threads_per_block},
                   {"resident_blocks_per_sm", k.resident_blocks_per_sm},
                   {"launches", k.launches},
                   {"sm_share", k.sm_share}};
  if (k.exit_us) j["exit_us"] = *k.exit_us;
  if (k.slice_units > 0) j["slice_units"] = k.slice_units;
  if (k.grid_stride) j["grid_stride"] = true;
  if (!k.op.empty()) j["op"] = k.op;
  if (k.flops > 0) j["flops"] = k.flops;
  if (k.bytes > 0) j["bytes"] = k.bytes;
  if (!k.choice.empty()) j["choice"] = k.choice;
  return j;
}

KernelProfile kernel_from(const nlohmann::json& j) {
  KernelProfile k;
  k.name = j.at("name").get<std::string>();
  k.time_us = j.at("time_us").get<double>();
  k.grid_blocks = json_int64(j.at("grid_blocks"), "grid_blocks");
  k.threads_per_block = json_int(j.at("threads_per_block"), "threads_per_block");
  k.resident_blocks_per_sm = json_int(j.at("resident_blocks_per_sm"), "resident_blocks_per_sm");
  k.launches = json_int(j.at("launches"), "launches");
  k.sm_share = j.at("sm_share").get<double>();
  if (j.contains("exit_us")) k.exit_us = j.at("exit_us").get<double>();
  if (j.contains("slice_units")) k.slice_units = json_int64(j.at("slice_units"), "slice_units");
  if (j.contains("grid_stride")) k.grid_stride = j.at("grid_stride").get<bool>();
  if (j.contains("op")) k.op = j.at("op").get<std::string>();
  if (j.contains("flops")) k.flops = j.at("flops").get<double>();
  if (j.contains("bytes")) k.bytes = j.at("bytes").get<double>();
  if (j.contains("choice")) k.choice = j.at("choice").get<std::string>();
  return k;
}

}  // namespace

double ModelProfile::total_us() const {
  double t = 0;
  for (const KernelProfile& k : kernels) t += k.time_us;
  return t;
}

PaddingRoom padding_room(const ModelProfile& profile) {
  PaddingRoom room;
  const double total = profile.total_us();
  if (total <= 0 || profile.sm_count <= 0) return room;
  double idle_us = 0, idle_sm_us = 0;
  for (const KernelProfile& k : profile.kernels) {
    const int64_t idle = std::max<int64_t>(0, profile.sm_count - k.grid_blocks);
    if (idle > 0) idle_us += k.time_us;
    idle_sm_us += static_cast<double>(idle) * k.time_us;
  }
  room.time_share_with_idle_sms = idle_us / total;
  room.mean_idle_sms = idle_sm_us / total;
  return room;
}

KernelRoofline roofline_of(const ModelProfile& profile, const KernelProfile& kernel) {
  KernelRoofline r;
  if (kernel.time_us <= 0) return r;
  const double seconds = kernel.time_us * 1e-6;
  r.flops_per_s = kernel.flops / seconds;
  r.bytes_per_s = kernel.bytes / seconds;
  if (profile.peak_flops > 0) r.flops_share = r.flops_per_s / profile.peak_flops;
  if (profile.peak_bytes_per_s > 0) r.bytes_share = r.bytes_per_s / profile.peak_bytes_per_s;
  return r;
}

std::vector<size_t> heaviest_kernels(const ModelProfile& profile, double share, size_t most) {
  std::vector<size_t> order(profile.kernels.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return profile.kernels[a].time_us > profile.kernels[b].time_us;
  });
  const double total = profile.total_us();
  double covered = 0;
  size_t n = 0;
  while (n < order.size() && n < most && covered < share * total) covered += profile.kernels[order[n++]].time_us;
  order.resize(n);
  return order;
}

double sm_share_of(int64_t grid_blocks, int resident_blocks_per_sm, int sm_count) {
  const double capacity = static_cast<double>(std::max(1, resident_blocks_per_sm)) * std::max(1, sm_count);
  return std::min(1.0, static_cast<double>(std::max<int64_t>(1, grid_blocks)) / capacity);
}

void check_profile_program(const ModelProfile& profile, const Program& program) {
  const std::string source = fmt::format("profile of '{}' batch {}", profile.model, profile.batch);
  check_fields(profile, ErrorCode::kInvalidArgument, source);
  ATOLL_CHECK(profile.fingerprint == program.fingerprint, kInvalidArgument,
              "{} belongs to program {}, not to '{}' batch {} (program {}): profile this build of the model again "
              "(atoll profile {} --batch {})",
              source, profile.fingerprint, program.model, program.batch, program.fingerprint, program.model,
              program.batch);
  ATOLL_CHECK(profile.kernels.size() == program.kernels.size(), kInvalidArgument,
              "{} has {} kernels; the program has {}", source, profile.kernels.size(), program.kernels.size());
  for (size_t i = 0; i < program.kernels.size(); ++i) {
    ATOLL_CHECK(profile.kernels[i].name == program.kernels[i].name, kInvalidArgument,
                "{}: kernel {} is '{}'; the program's is '{}'", source, i, profile.kernels[i].name,
                program.kernels[i].name);
  }
}

void check_profile(const ModelProfile& profile, const Program& program, const std::string& device) {
  check_profile_program(profile, program);
  ATOLL_CHECK(profile.device == device, kInvalidArgument,
              "profile of '{}' batch {} was measured on '{}', not on this device ('{}')", profile.model, profile.batch,
              profile.device, device);
}

std::string profile_to_json(const ModelProfile& p) {
  nlohmann::json j{{"format", kProfileFormat},     {"model", p.model},        {"batch", p.batch},
                   {"fingerprint", p.fingerprint}, {"device", p.device},      {"sm_count", p.sm_count},
                   {"repeats", p.repeats},         {"total_us", p.total_us()}};
  if (p.peak_flops > 0) j["peak_flops"] = p.peak_flops;
  if (p.peak_bytes_per_s > 0) j["peak_bytes_per_s"] = p.peak_bytes_per_s;
  j["kernels"] = nlohmann::json::array();
  for (const KernelProfile& k : p.kernels) j["kernels"].push_back(kernel_json(k));
  return j.dump(1) + "\n";
}

ModelProfile profile_from_json(const std::string& text, const std::string& source) {
  ModelProfile p;
  try {
    const nlohmann::json j = parse_json_document(text, source);
    const std::string format = j.at("format").get<std::string>();
    ATOLL_CHECK(format == kProfileFormat, kParse, "{}: not an atoll kernel profile (format '{}', expected '{}')",
                source, format, kProfileFormat);
    p.model = j.at("model").get<std::string>();
    p.batch = json_int64(j.at("batch"), "batch");
    p.fingerprint = j.at("fingerprint").get<std::string>();
    p.device = j.at("device").get<std::string>();
    p.sm_count = json_int(j.at("sm_count"), "sm_count");
    p.repeats = json_int(j.at("repeats"), "repeats");
    if (j.contains("peak_flops")) p.peak_flops = j.at("peak_flops").get<double>();
    if (j.contains("peak_bytes_per_s")) p.peak_bytes_per_s = j.at("peak_bytes_per_s").get<double>();
    for (const nlohmann::json& k : j.at("kernels")) p.kernels.push_back(kernel_from(k));
  } catch (const nlohmann::json::exception& e) {
    ATOLL_THROW(kParse, "{}: kernel profile JSON: {}", source, json_error_text(e));
  }
  check_fields(p, ErrorCode::kParse, source);
  return p;
}

void save_profile(const ModelProfile& profile, const std::string& path) {
  write_file_atomic(path, profile_to_json(profile));
}

ModelProfile load_profile(const std::string& path) {
  ATOLL_CHECK(std::filesystem::is_regular_file(path), kNotFound, "kernel profile '{}' not found", path);
  std::ifstream in(path);
  ATOLL_CHECK(in.good(), kIo, "cannot open kernel profile '{}'", path);
  std::stringstream text;
  text << in.rdbuf();
  return profile_from_json(text.str(), path);
}

}  // namespace atl
