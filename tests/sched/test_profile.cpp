// Kernel profiles: the file format and its checks, the simulator's own profile, and the
// simulator running the kernel durations a profile gives it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/sim/sim_gpu.h"
#include "backends/engine_target.h"
#include "backends/sim/sim_profile.h"
#include "core/error.h"
#include "runtime/model_source.h"
#include "sched/profiles.h"
#include "sched/sim_exec_device.h"

namespace atl::sched {
namespace {

const CompiledModel& tiny_cnn() {
  static const CompiledModel m = compile_zoo_model({.name = "tiny_cnn"}, SimExecDevice().target(), false);
  return m;
}

ErrorCode code_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message != nullptr) *message = e.message();
    return e.code();
  }
  ADD_FAILURE() << "no error";
  return ErrorCode::kInternal;
}

TEST(Profile, SimProfileOfAZooModelHasOneSaneEntryPerKernel) {
  ProfileRequest r;
  r.model = {.name = "tiny_cnn"};
  int last_done = 0, last_total = 0;
  r.on_kernel = [&](int done, int total) {
    last_done = done;
    last_total = total;
  };
  const ModelProfile p = profile_zoo_model(r);
  const Program& program = tiny_cnn().program;
  EXPECT_EQ(p.fingerprint, program.fingerprint) << "profiled as the runners compile it";
  ASSERT_EQ(p.kernels.size(), program.kernels.size());
  EXPECT_EQ(last_done, last_total);
  EXPECT_EQ(last_total, static_cast<int>(program.kernels.size()));
  EXPECT_EQ(p.sm_count, sim::SimGpuConfig{}.sm_count);
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelProfile& k = p.kernels[i];
    EXPECT_EQ(k.name, program.kernels[i].name);
    EXPECT_GT(k.time_us, 0);
    EXPECT_GT(k.sm_share, 0);
    EXPECT_LE(k.sm_share, 1);
    EXPECT_GE(k.grid_blocks, 1);
    EXPECT_EQ(k.resident_blocks_per_sm, sim::SimGpuConfig{}.blocks_per_sm);
    ASSERT_TRUE(k.exit_us.has_value());
    EXPECT_LE(*k.exit_us, k.time_us);
  }
  EXPECT_NO_THROW(check_profile(p, program, SimExecDevice().description()));
}

TEST(Profile, PaddingRoomCountsTheSmsBeyondEachGridOverTheModelsTime) {
  ModelProfile p;
  p.sm_count = 100;
  auto kernel = [](double us, int64_t grid) {
    KernelProfile k;
    k.time_us = us;
    k.grid_blocks = grid;
    return k;
  };
  // 10 us on 25 blocks (75 SMs idle), 30 us on 400 (none: more blocks than SMs), 60 us on 99 (1).
  p.kernels = {kernel(10, 25), kernel(30, 400), kernel(60, 99)};
  const PaddingRoom room = padding_room(p);
  EXPECT_NEAR(room.time_share_with_idle_sms, 0.70, 1e-12);
  EXPECT_NEAR(room.mean_idle_sms, (10 * 75 + 60 * 1) / 100.0, 1e-12);
  p.kernels = {kernel(5, 100), kernel(5, 1000)};
  EXPECT_EQ(padding_room(p).time_share_with_idle_sms, 0);
  EXPECT_EQ(padding_room(p).mean_idle_sms, 0);
  EXPECT_EQ(padding_room(ModelProfile{}).mean_idle_sms, 0);  // no kernels, no SMs: nothing, no NaN
}

// A timing-only simulator runs the CUDA engine's own Programs, so a profile `atoll profile --device
// cuda` wrote fits it; BERT-base is the model the engine's grouped Gemms, head views and fused
// attention change. Numerics runs keep the CPU backend's f32 Program.
TEST(Profile, TimingOnlySimulatorCompilesTheCudaEnginesPrograms) {
  const ZooModel bert{.name = "bert_base"};
  const CompiledModel engine = compile_zoo_model(bert, cuda_engine_target(), false);
  const CompiledModel sim = compile_zoo_model(bert, SimExecDevice().target(), false);
  EXPECT_EQ(sim.program.fingerprint, engine.program.fingerprint);
  EXPECT_EQ(sim.program.kernels.size(), engine.program.kernels.size());
  const CompiledModel numerics = compile_zoo_model(bert, SimExecDevice({.gpu = {}, .numerics = true}).target(), false);
  EXPECT_NE(numerics.program.fingerprint, engine.program.fingerprint);
  EXPECT_GT(numerics.program.kernels.size(), engine.program.kernels.size()) << "no fused attention on the CPU";
}

TEST(Profile, JsonRoundTripKeepsEveryField) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  ModelProfile p = device.measure_profile(i, {});
  p.kernels[0].exit_us.reset();  // absent stays absent
  p.kernels[1].threads_per_block = 256;
  p.kernels[2].choice = "t128x256/s1";
  ASSERT_GT(p.kernels[2].flops, 0);
  ASSERT_GT(p.peak_flops, 0);
  const ModelProfile q = profile_from_json(profile_to_json(p), "test");
  EXPECT_EQ(profile_to_json(q), profile_to_json(p));
  EXPECT_FALSE(q.kernels[0].exit_us.has_value());
  EXPECT_EQ(q.kernels[1].threads_per_block, 256);
  EXPECT_EQ(q.kernels[2].choice, "t128x256/s1");
  EXPECT_EQ(q.kernels[2].flops, p.kernels[2].flops);
  EXPECT_EQ(q.kernels[2].op, p.kernels[2].op);
  EXPECT_EQ(q.peak_bytes_per_s, p.peak_bytes_per_s);
}

// Files written before the roofline fields (op, flops, bytes, choice, the device's peaks) still
// load, with those unknown; negative or non-finite counts and peaks are refused.
TEST(Profile, RooflineFieldsAreOptionalAndChecked) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  const ModelProfile p = device.measure_profile(i, {});
  nlohmann::json j = nlohmann::json::parse(profile_to_json(p));
  j.erase("peak_flops");
  j.erase("peak_bytes_per_s");
  for (nlohmann::json& k : j["kernels"]) {
    for (const char* key : {"op", "flops", "bytes", "choice"}) k.erase(key);
  }
  const ModelProfile old = profile_from_json(j.dump(), "old");
  EXPECT_EQ(old.peak_flops, 0);
  EXPECT_EQ(old.kernels[0].flops, 0);
  EXPECT_EQ(roofline_of(old, old.kernels[0]).flops_share, 0) << "no peak, no share";
  nlohmann::json bad = nlohmann::json::parse(profile_to_json(p));
  bad["kernels"][0]["flops"] = -1.0;
  EXPECT_EQ(code_of([&] { profile_from_json(bad.dump(), "bad"); }), ErrorCode::kParse);
  bad = nlohmann::json::parse(profile_to_json(p));
  bad["peak_bytes_per_s"] = -3.0;
  EXPECT_EQ(code_of([&] { profile_from_json(bad.dump(), "bad"); }), ErrorCode::kParse);
}

TEST(Profile, RooflineRatesAndTheHeaviestKernels) {
  ModelProfile p;
  p.sm_count = 100;
  p.peak_flops = 1e15;
  p.peak_bytes_per_s = 4e12;
  auto kernel = [](double us, double flops, double bytes) {
    KernelProfile k;
    k.time_us = us;
    k.flops = flops;
    k.bytes = bytes;
    return k;
  };
  p.kernels = {kernel(10, 2e9, 1e6), kernel(30, 0, 6e7), kernel(60, 3e10, 0)};
  const KernelRoofline r = roofline_of(p, p.kernels[0]);
  EXPECT_DOUBLE_EQ(r.flops_per_s, 2e14);
  EXPECT_DOUBLE_EQ(r.flops_share, 0.2);
  EXPECT_DOUBLE_EQ(r.bytes_per_s, 1e11);
  EXPECT_DOUBLE_EQ(r.bytes_share, 0.025);
  EXPECT_DOUBLE_EQ(roofline_of(p, p.kernels[1]).bytes_share, 0.5);
  // 60 of 100 us cover half; 60 + 30 cover 80%.
  EXPECT_EQ(heaviest_kernels(p, 0.5, 10), (std::vector<size_t>{2}));
  EXPECT_EQ(heaviest_kernels(p, 0.8, 10), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(heaviest_kernels(p, 1.0, 2), (std::vector<size_t>{2, 1}));
  EXPECT_EQ(heaviest_kernels(p, 1.0, 10), (std::vector<size_t>{2, 1, 0}));
  EXPECT_TRUE(heaviest_kernels(p, 0, 10).empty());
}

// The simulator's roofline (a block gets one slot's share of the peaks) never lets a kernel run
// past the device's peaks: its profile's shares stay within 1 on every kernel of these models (up
// to the rounding of block times to whole nanoseconds).
TEST(Profile, SimKernelsStayWithinTheDevicesPeaks) {
  for (const char* model : {"resnet50", "vgg19", "mobilenet_v2", "bert_base"}) {
    ProfileRequest r;
    r.model = {.name = model, .batch = 8};
    const ModelProfile p = profile_zoo_model(r);
    int counted = 0;
    for (const KernelProfile& k : p.kernels) {
      const KernelRoofline roof = roofline_of(p, k);
      EXPECT_LE(roof.flops_share, 1 + 1e-4) << model << " " << k.name;
      EXPECT_LE(roof.bytes_share, 1 + 1e-4) << model << " " << k.name;
      counted += k.flops > 0 ? 1 : 0;
    }
    EXPECT_GT(counted, 0) << model << ": the Program's flop counts reach the profile";
  }
}

TEST(Profile, LoaderRefusesOtherProgramsOtherDevicesAndBadFiles) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  const ModelProfile p = device.measure_profile(i, {});
  const Program& program = tiny_cnn().program;
  std::string message;

  ModelProfile other = p;
  other.fingerprint = "0123456789abcdef";
  EXPECT_EQ(code_of([&] { check_profile(other, program, p.device); }, &message), ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("0123456789abcdef"), std::string::npos) << message;
  EXPECT_NE(message.find("atoll profile tiny_cnn"), std::string::npos) << message;

  EXPECT_EQ(code_of([&] { check_profile(p, program, "NVIDIA H200"); }, &message), ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("NVIDIA H200"), std::string::npos) << message;

  ModelProfile renamed = p;
  renamed.kernels[2].name = "elsewhere";
  EXPECT_EQ(code_of([&] { check_profile(renamed, program, p.device); }), ErrorCode::kInvalidArgument);

  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/atoll_profile_test.json";
  save_profile(p, path);
  EXPECT_EQ(profile_to_json(load_profile(path)), profile_to_json(p));
  std::ofstream(path) << R"({"format": "atoll.profile/1", "model": "x"})";
  EXPECT_EQ(code_of([&] { load_profile(path); }), ErrorCode::kParse);
  ModelProfile negative = p;
  negative.kernels[0].time_us = -1;
  EXPECT_EQ(code_of([&] { profile_from_json(profile_to_json(negative), "test"); }), ErrorCode::kParse);
  ModelProfile overfull = p;
  overfull.kernels[0].sm_share = 1.5;
  EXPECT_EQ(code_of([&] { profile_from_json(profile_to_json(overfull), "test"); }), ErrorCode::kParse);
  std::filesystem::remove(path);
  EXPECT_EQ(code_of([&] { load_profile(path); }), ErrorCode::kNotFound);
}

// Grid-stride kernels (not kernel 0) have one slice unit, the whole kernel, and say so; the field
// is optional in files written before it, and only a kernel of one unit may carry it.
TEST(Profile, GridStrideKernelsAreMarkedAndTheFieldIsOptional) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  const ModelProfile p = device.measure_profile(i, {});
  const Program& program = tiny_cnn().program;
  int marked = 0;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const bool grid_stride = k > 0 && sim::runs_grid_stride(program.kernels[k]);
    EXPECT_EQ(p.kernels[k].grid_stride, grid_stride) << "kernel " << k;
    EXPECT_EQ(device.grid_stride(i, static_cast<int>(k)), grid_stride) << "kernel " << k;
    if (grid_stride) {
      EXPECT_EQ(p.kernels[k].slice_units, 1) << "kernel " << k;
    }
    marked += grid_stride ? 1 : 0;
  }
  EXPECT_GT(marked, 0) << "tiny_cnn has pools and activations";
  const ModelProfile q = profile_from_json(profile_to_json(p), "test");
  for (size_t k = 0; k < p.kernels.size(); ++k) EXPECT_EQ(q.kernels[k].grid_stride, p.kernels[k].grid_stride);
  std::string old = profile_to_json(p);
  for (size_t at; (at = old.find(",\n   \"grid_stride\": true")) != std::string::npos;) old.erase(at, 24);
  ASSERT_EQ(old.find("grid_stride"), std::string::npos) << old;
  for (const KernelProfile& k : profile_from_json(old, "old").kernels) EXPECT_FALSE(k.grid_stride);
  ModelProfile tiled = p;
  tiled.kernels[1].grid_stride = true;
  tiled.kernels[1].slice_units = 4;
  EXPECT_EQ(code_of([&] { profile_from_json(profile_to_json(tiled), "test"); }), ErrorCode::kParse);
  EXPECT_EQ(code_of([&] { check_profile(tiled, program, p.device); }), ErrorCode::kInvalidArgument);
}

// A slice of a grid-stride kernel runs it whole on max_blocks slots for the whole time x full grid
// / max_blocks (at least the whole time); with no cap, as one launch.
TEST(Profile, SimRunsAGridStrideKernelWholeOnACappedGrid) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  int kernel = -1;
  for (int k = 1; k < static_cast<int>(tiny_cnn().program.kernels.size()) && kernel < 0; ++k) {
    if (device.grid_stride(i, k)) kernel = k;
  }
  ASSERT_GE(kernel, 1);
  std::vector<sim::SimKernelShape> shapes = device.kernel_shapes(i);
  shapes[static_cast<size_t>(kernel)] = {300, 4'000};  // two waves of 264 slots: 8 us
  device.set_kernel_shapes(i, shapes);
  device.run_profile(i, device.measure_profile(i, {}));
  EXPECT_EQ(device.slice_units(i, kernel), 1);
  const StreamId s = device.create_stream(StreamPriority::kLow);
  const auto span_of = [&](int max_blocks) {
    const uint64_t seq = device.launch_slice(s, i, kernel, KernelSlice{0, 1, max_blocks}, LaunchOptions{.timed = true});
    device.synchronize(s);
    const auto span = device.launch_span(s, seq);
    return span ? span->end - span->start : DeviceTime{-1};
  };
  EXPECT_EQ(span_of(0), 8'000);
  EXPECT_EQ(span_of(300), 8'000);
  EXPECT_EQ(span_of(100), 8'000 * 300 / 100);
  EXPECT_EQ(span_of(7), (8'000 * 300 + 6) / 7);
  EXPECT_EQ(code_of([&] { device.launch_slice(s, i, kernel, KernelSlice{0, 2, 7}, {}); }), ErrorCode::kInvalidArgument);
}

TEST(Profile, SimOwnProfileGivesItsShapesBack) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  const std::vector<sim::SimKernelShape> before = device.kernel_shapes(i);
  device.run_profile(i, device.measure_profile(i, {}));
  EXPECT_EQ(device.kernel_shapes(i), before);
}

// A profile measured elsewhere (another SM count and occupancy): each kernel, run alone on the
// simulator, takes its profiled time, and fills the same share of the slots.
TEST(Profile, SimKernelDurationsFollowAGivenProfile) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  ModelProfile p = device.measure_profile(i, {});
  p.device = "a measured GPU";
  p.sm_count = 100;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    KernelProfile& kp = p.kernels[k];
    kp.time_us = 7.0 + 3.0 * static_cast<double>(k);
    kp.resident_blocks_per_sm = 4;
    kp.grid_blocks = k % 2 == 0 ? 100 : 1000;  // a quarter of the SMs, or 2.5 waves
    kp.sm_share = sm_share_of(kp.grid_blocks, kp.resident_blocks_per_sm, p.sm_count);
  }
  device.run_profile(i, p);
  ASSERT_NE(device.profile(i), nullptr);
  EXPECT_EQ(device.profile(i)->device, "a measured GPU");
  const StreamId s = device.create_stream(StreamPriority::kLow);
  const int64_t slots = device.gpu().slots();
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const uint64_t seq = device.launch(s, i, static_cast<int>(k), LaunchOptions{.timed = true});
    device.synchronize(s);
    const auto span = device.launch_span(s, seq);
    ASSERT_TRUE(span.has_value());
    EXPECT_NEAR(static_cast<double>(span->end - span->start), p.kernels[k].time_us * 1e3, 3.0) << "kernel " << k;
    const int64_t blocks = device.kernel_shapes(i)[k].blocks;
    EXPECT_EQ(blocks, k % 2 == 0 ? slots / 4 : slots * 5 / 2) << "kernel " << k;
  }
}

TEST(Profile, SetProfileChecksTheProgramAndOffTheSimulatorTheDevice) {
  SimExecDevice device;
  const InstanceId i = device.load(tiny_cnn().program, tiny_cnn().weights);
  ModelProfile p = device.measure_profile(i, {});
  p.device = "another GPU";
  EXPECT_NO_THROW(device.set_profile(i, p)) << "the simulator runs any device's profile";
  p.fingerprint = "ffffffffffffffff";
  EXPECT_EQ(code_of([&] { device.set_profile(i, p); }), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace atl::sched
