// The GEMM tuning cache: the file round trip and its failure modes run anywhere (no GPU needed);
// the second load of a model on the GPU takes every choice from the cache and times nothing.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "../test_env.h"
#include "backends/cuda/tune_cache.h"
#include "core/error.h"
#include "gpu_test_util.h"
#include "runtime/session.h"

namespace atl {
namespace {

using cuda::TuneCache;

std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("atoll_tune_cache_" + std::to_string(getpid()));
}

// This process's scratch folder goes when the process ends, so test runs leave nothing behind.
struct RemoveScratchAtExit {
  ~RemoveScratchAtExit() {
    std::error_code ignored;
    std::filesystem::remove_all(scratch_root(), ignored);
  }
} const remove_scratch_at_exit;

std::string scratch_file(const std::string& name) {
  const auto dir = scratch_root();
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::filesystem::remove(path);
  return path.string();
}

TEST(TuneCache, MissingFileIsEmptyAndSaveCreatesItsFolder) {
  const std::string path = scratch_file("sub/dir/choices.json");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
  TuneCache c = TuneCache::load(path, "H200");
  EXPECT_EQ(c.size(), 0u);
  EXPECT_FALSE(c.find("k").has_value());
  c.remember("k", "w128x128/s1");
  EXPECT_TRUE(c.dirty());
  c.save();
  const TuneCache again = TuneCache::load(path, "H200");
  EXPECT_EQ(again.find("k"), "w128x128/s1");
  EXPECT_FALSE(again.dirty());
}

TEST(TuneCache, DevicesKeepSeparateSectionsAndSavesMerge) {
  const std::string path = scratch_file("merge.json");
  TuneCache a = TuneCache::load(path, "dev A");
  a.remember("k1", "64x64/s2");
  a.save();
  // A second process with another device, and one that loaded before a's save, both merge.
  TuneCache b = TuneCache::load(path, "dev B");
  b.remember("k1", "128x128/s1");
  TuneCache late(path, "dev A");
  late.remember("k2", "32x64/s4");
  b.save();
  late.save();
  const TuneCache ra = TuneCache::load(path, "dev A");
  EXPECT_EQ(ra.find("k1"), "64x64/s2");
  EXPECT_EQ(ra.find("k2"), "32x64/s4");
  EXPECT_EQ(TuneCache::load(path, "dev B").find("k1"), "128x128/s1");
  EXPECT_FALSE(TuneCache::load(path, "dev C").find("k1").has_value());
}

TEST(TuneCache, RememberingTheSameChoiceLeavesItClean) {
  const std::string path = scratch_file("clean.json");
  TuneCache c(path, "dev");
  c.remember("k", "64x64/s1");
  c.save();
  TuneCache again = TuneCache::load(path, "dev");
  again.remember("k", "64x64/s1");
  EXPECT_FALSE(again.dirty());
  again.remember("k", "128x64/s1");
  EXPECT_TRUE(again.dirty());
}

TEST(TuneCache, MalformedFilesAreClearErrorsAndAreReplacedOnSave) {
  for (const char* text : {"", "{", "[1, 2]", R"({"format": 99, "devices": {}})",
                           R"({"format": 1, "devices": {"dev": {"k": 7}}})", R"({"format": 1, "devices": []})"}) {
    SCOPED_TRACE(text);
    const std::string path = scratch_file("bad.json");
    std::ofstream(path) << text;
    try {
      TuneCache::load(path, "dev");
      ADD_FAILURE() << "loaded a malformed cache";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
    }
    TuneCache fresh(path, "dev");
    fresh.remember("k", "64x64/s1");
    fresh.save();
    EXPECT_EQ(TuneCache::load(path, "dev").find("k"), "64x64/s1");
  }
}

TEST(TuneCache, DefaultPathFollowsTheEnvironment) {
  const char* saved = std::getenv("ATOLL_TUNE_CACHE");
  const std::string restore = saved ? saved : "";
  setenv("ATOLL_TUNE_CACHE", "off", 1);
  EXPECT_EQ(cuda::default_tune_cache_path(), "");
  setenv("ATOLL_TUNE_CACHE", "/tmp/x/choices.json", 1);
  EXPECT_EQ(cuda::default_tune_cache_path(), "/tmp/x/choices.json");
  unsetenv("ATOLL_TUNE_CACHE");
  setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(cuda::default_tune_cache_path(), "/tmp/xdg/atoll/gemm_choices.json");
  unsetenv("XDG_CACHE_HOME");
  if (saved) setenv("ATOLL_TUNE_CACHE", restore.c_str(), 1);
}

TEST(GpuTuneCache, SecondLoadTakesEveryChoiceFromTheCache) {
  ATL_REQUIRE_GPU();
  const std::string path = scratch_file("second_load.json");
  const test::ScopedEnv tuning("ATOLL_CUDA_AUTOTUNE", "1");  // whatever the caller's environment says
  setenv("ATOLL_TUNE_CACHE", path.c_str(), 1);
  SessionOptions o;
  o.model = "resnet18";
  o.device = "cuda";
  o.model_options.batch = 2;
  Session first(o);
  const LoadTuning t1 = gputest::as_cuda(first.instance()).load_tuning();
  const std::vector<Tensor> inputs = first.random_inputs(gputest::fresh_seed());
  first.set_inputs(inputs);
  first.instance().run();
  const std::vector<Tensor> want = first.outputs();

  Session second(o);
  CudaInstance& gpu = gputest::as_cuda(second.instance());
  const LoadTuning t2 = gpu.load_tuning();
  setenv("ATOLL_TUNE_CACHE", "off", 1);
  EXPECT_GT(t1.timed, 0);
  EXPECT_EQ(t1.cached, 0);
  EXPECT_EQ(t2.timed, 0);
  EXPECT_EQ(t2.cached, t1.timed);
  if (test::timing_judged()) {
    EXPECT_LT(t2.seconds, t1.seconds);
  }
  // Same choices, so the same function, bit for bit.
  for (int k = 0; k < static_cast<int>(second.program().kernels.size()); ++k) {
    EXPECT_EQ(gpu.gemm_choice(k), gputest::as_cuda(first.instance()).gemm_choice(k)) << k;
  }
  second.set_inputs(inputs);
  second.instance().run();
  const std::vector<Tensor> got = second.outputs();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(gputest::same_bytes(got[i], want[i]));
}

}  // namespace
}  // namespace atl
