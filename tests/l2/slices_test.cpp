#include "l2/slices.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "l2_test_util.h"

namespace atl::l2 {
namespace {

using testing::tiny_device;
using testing::tiny_program;

constexpr int64_t kMiB = int64_t{1} << 20;

template <typename F>
Error expect_error(F&& f, ErrorCode code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    return e;
  }
  ADD_FAILURE() << "no error thrown";
  return Error(ErrorCode::kInternal, "none", __FILE__, __LINE__);
}

TEST(L2Device, H200SetAsideRoundsUpToWholeWays) {
  const L2Device d = h200_l2();
  d.validate();
  EXPECT_EQ(d.sets(), 60 * kMiB / (16 * 128));
  const int64_t step = 3932160;  // 3.75 MiB
  EXPECT_EQ(d.round_setaside(0), 0);
  EXPECT_EQ(d.round_setaside(1), step);
  EXPECT_EQ(d.round_setaside(step), step);
  EXPECT_EQ(d.round_setaside(step + 1), 2 * step);
  EXPECT_EQ(d.round_setaside(10 * step), 39321600);  // 37.5 MiB, the maximum
  expect_error([&] { d.round_setaside(10 * step + 1); }, ErrorCode::kInvalidArgument);
  EXPECT_EQ(d.persisting_ways(step), 1);
  EXPECT_EQ(d.persisting_ways(10 * step), 10);
}

TEST(L2Device, PresetsByName) {
  EXPECT_EQ(l2_device_by_name("H200").l2_bytes, 60 * kMiB);
  const L2Device l4 = l2_device_by_name("l4");
  l4.validate();
  EXPECT_EQ(l4.l2_bytes, 48 * kMiB);
  EXPECT_EQ(l4.setaside_max_bytes, 36 * kMiB);
  EXPECT_EQ(l4.persisting_ways(l4.setaside_max_bytes), 12);
  const Error e = expect_error([] { l2_device_by_name("a100"); }, ErrorCode::kNotFound);
  EXPECT_NE(e.message().find("a100"), std::string::npos);
}

TEST(L2Device, RejectsInconsistentGeometry) {
  L2Device d = tiny_device();
  d.l2_bytes = 2000;  // not whole sets
  expect_error([&] { d.validate(); }, ErrorCode::kInvalidArgument);
}

TEST(ResidencyConfig, MakeConfigSizesTheSetAside) {
  const Program p = tiny_program();
  // 512-byte slices of a 3392-byte arena: 6 full slices and one of 320 bytes.
  EXPECT_EQ(slice_count(p.arena_bytes, 512), 7);
  ResidencyConfig c = make_config(p, tiny_device(), {true, false, false, false, true, false, false}, 0.5, 512);
  EXPECT_EQ(c.resident_count(), 2);
  EXPECT_EQ(c.resident_bytes(p.arena_bytes), 1024);
  EXPECT_EQ(c.setaside_bytes, 1024);
  // The short last slice alone needs 320 bytes: one 512-byte step.
  c = make_config(p, tiny_device(), {false, false, false, false, false, false, true}, 0.5, 512);
  EXPECT_EQ(c.setaside_bytes, 512);
  // Three slices want 1536 bytes; the device grants at most 1024.
  c = make_config(p, tiny_device(), {true, true, true, false, false, false, false}, 0.5, 512);
  EXPECT_EQ(c.setaside_bytes, 1024);
  c = make_config(p, tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  EXPECT_EQ(c.setaside_bytes, 0);
}

TEST(ResidencyConfig, JsonRoundTrip) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), {false, true, true, false, false, true, false}, 0.37, 512);
  const ResidencyConfig back = config_from_json_string(config_to_json_string(c));
  EXPECT_EQ(back.fingerprint, p.fingerprint);
  EXPECT_EQ(back.model, "tiny");
  EXPECT_EQ(back.batch, 1);
  EXPECT_EQ(back.slice_bytes, 512);
  EXPECT_EQ(back.resident, c.resident);
  EXPECT_EQ(back.setaside_bytes, 1024);
  EXPECT_EQ(back.hit_ratio, 0.37);
  EXPECT_EQ(nlohmann::json::parse(config_to_json_string(c))["resident"], "0110010");
  back.check_matches(p);
}

TEST(ResidencyConfig, FileRoundTripAndMissingFile) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), {true, false, false, false, false, false, true}, 0.9, 512);
  const std::string path =
      (std::filesystem::temp_directory_path() / ("atl_l2_config_" + std::to_string(::getpid()) + ".json")).string();
  save_config(c, path);
  const ResidencyConfig back = load_config(path);
  std::remove(path.c_str());
  EXPECT_EQ(back.resident, c.resident);
  EXPECT_EQ(back.hit_ratio, 0.9);
  const Error e = expect_error([&] { load_config(path); }, ErrorCode::kIo);
  EXPECT_NE(e.message().find(path), std::string::npos);
}

TEST(ResidencyConfig, MalformedJsonIsAParseError) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  nlohmann::json good = c;
  auto with = [&](const char* key, nlohmann::json value) {
    nlohmann::json j = good;
    j[key] = std::move(value);
    return j.dump();
  };
  expect_error([&] { config_from_json_string("{not json"); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("format", "atoll.program/1")); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("resident", "00x0000")); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("resident", "000")); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("batch", "eight")); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("slice_bytes", 1e300)); }, ErrorCode::kParse);  // found by fuzzing
  nlohmann::json missing = good;
  missing.erase("hit_ratio");
  expect_error([&] { config_from_json_string(missing.dump()); }, ErrorCode::kParse);
  expect_error([&] { config_from_json_string(with("hit_ratio", 1.5)); }, ErrorCode::kInvalidArgument);
  expect_error([&] { config_from_json_string(with("slice_bytes", 0)); }, ErrorCode::kInvalidArgument);
  // A misspelt key is refused, not ignored; a key given twice too.
  expect_error([&] { config_from_json_string(with("hti_ratio", 0.5)); }, ErrorCode::kParse);
  std::string twice = good.dump();
  twice.insert(twice.size() - 1, R"(,"hit_ratio":0.5)");
  expect_error([&] { config_from_json_string(twice); }, ErrorCode::kParse);
}

TEST(ResidencyConfig, RejectsAConfigMadeForAnotherProgram) {
  const Program p1 = tiny_program(1);
  const Program p8 = tiny_program(8);
  const ResidencyConfig c = make_config(p1, tiny_device(), std::vector<bool>(7, false), 1.0, 512);

  Error e = expect_error([&] { c.check_matches(p8); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("batch 1"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("batch 8"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(p1.fingerprint), std::string::npos) << e.message();
  EXPECT_NE(e.message().find(p8.fingerprint), std::string::npos) << e.message();

  Program other_model = tiny_program(1);
  other_model.model = "other";
  other_model.fingerprint = other_model.compute_fingerprint();
  e = expect_error([&] { c.check_matches(other_model); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("a different model"), std::string::npos) << e.message();

  Program replanned = tiny_program(1);
  replanned.arena_bytes = 4096;
  replanned.fingerprint = replanned.compute_fingerprint();
  e = expect_error([&] { c.check_matches(replanned); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("different plan"), std::string::npos) << e.message();

  ResidencyConfig wrong_slices = c;
  wrong_slices.resident.resize(4);
  e = expect_error([&] { wrong_slices.check_matches(p1); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(e.message().find("4 slices"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("7 slices"), std::string::npos) << e.message();
}

TEST(ResidencyConfig, ChecksWhatTheDeviceCanApply) {
  const Program p = tiny_program();
  ResidencyConfig c = make_config(p, tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  c.setaside_bytes = 700;  // not a 512-byte step
  expect_error([&] { c.check_fits(tiny_device()); }, ErrorCode::kInvalidArgument);
  c.setaside_bytes = 1536;  // above the 1024 maximum
  expect_error([&] { c.check_fits(tiny_device()); }, ErrorCode::kInvalidArgument);
  c.setaside_bytes = 1024;
  c.check_fits(tiny_device());
  c.slice_bytes = 200;  // not whole lines
  expect_error([&] { c.check_fits(tiny_device()); }, ErrorCode::kInvalidArgument);
  c.slice_bytes = 512;
  expect_error([&] { c.check_fits(tiny_device(256)); }, ErrorCode::kInvalidArgument);  // slice > window
}

// Kernels touch (512-byte slices): conv writes [0,1600) = slices 0-3 (512, 512, 512, 64 bytes);
// relu reads [0,1600) and writes [1792,3392) = slices 3 (256), 4, 5, 6 (320);
// pool reads [1792,3392).
TEST(WindowPlan, MinimalCoveringWindowPerKernel) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), {true, false, false, false, true, false, false}, 0.8, 512);
  const WindowPlan plan = plan_windows(p, c, tiny_device());
  ASSERT_EQ(plan.windows.size(), 3u);
  EXPECT_EQ(plan.setaside_bytes, 1024);
  EXPECT_EQ(plan.hit_ratio, 0.8);

  const AccessWindow& conv = plan.windows[0];
  EXPECT_EQ(conv.offset, 0);
  EXPECT_EQ(conv.bytes, 512);
  EXPECT_EQ(conv.resident_bytes, 512);
  EXPECT_EQ(conv.touched_nonresident_bytes, 0);
  EXPECT_EQ(conv.covered_nonresident_bytes, 0);

  // relu touches resident slices 0 and 4: one window over slices 0-4 that also covers 1-3.
  const AccessWindow& relu = plan.windows[1];
  EXPECT_EQ(relu.offset, 0);
  EXPECT_EQ(relu.bytes, 2560);
  EXPECT_EQ(relu.resident_bytes, 1024);
  EXPECT_EQ(relu.touched_nonresident_bytes, 512 + 512 + 64 + 256);
  EXPECT_EQ(relu.covered_nonresident_bytes, 3 * 512);
  EXPECT_EQ(relu.missed_resident_bytes, 0);

  const AccessWindow& pool = plan.windows[2];
  EXPECT_EQ(pool.offset, 2048);
  EXPECT_EQ(pool.bytes, 512);
  EXPECT_EQ(pool.resident_bytes, 512);
  EXPECT_EQ(pool.touched_nonresident_bytes, 0);

  EXPECT_EQ(plan.resident_bytes, 2048);
  EXPECT_EQ(plan.touched_nonresident_bytes, 1344);
  EXPECT_EQ(plan.missed_resident_bytes, 0);
}

TEST(WindowPlan, WindowCutToTheDeviceMaximumKeepsTheMostResidentBytes) {
  const Program p = tiny_program();
  // Resident 0, 4, 5. A 2048-byte window spans at most 4 slices: relu's best is slices 4-5.
  const L2Device d = tiny_device(2048);
  const ResidencyConfig c = make_config(p, d, {true, false, false, false, true, true, false}, 1.0, 512);
  const WindowPlan plan = plan_windows(p, c, d);
  const AccessWindow& relu = plan.windows[1];
  EXPECT_EQ(relu.offset, 2048);
  EXPECT_EQ(relu.bytes, 1024);
  EXPECT_EQ(relu.resident_bytes, 1024);
  EXPECT_EQ(relu.missed_resident_bytes, 512);
  EXPECT_EQ(relu.touched_nonresident_bytes, 0);
  // The last slice is short: a window ending there stops at the arena's end.
  const ResidencyConfig last = make_config(p, d, {false, false, false, false, false, false, true}, 1.0, 512);
  const AccessWindow pool = plan_windows(p, last, d).windows[2];
  EXPECT_EQ(pool.offset, 3072);
  EXPECT_EQ(pool.bytes, 320);
}

TEST(WindowPlan, NoResidentSlicesMeansNoWindows) {
  const Program p = tiny_program();
  const ResidencyConfig c = make_config(p, tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  for (const AccessWindow& w : plan_windows(p, c, tiny_device()).windows) EXPECT_EQ(w.bytes, 0);
  const ResidencyConfig other = make_config(tiny_program(8), tiny_device(), std::vector<bool>(7, false), 1.0, 512);
  expect_error([&] { plan_windows(p, other, tiny_device()); }, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace atl::l2
