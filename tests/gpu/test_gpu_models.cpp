// Every zoo model at batch 1 and 8 on the CUDA backend against the CPU reference backend, same
// weights and inputs: relative L2 error of every output <= 1e-2 (f16 storage, f32 accumulation).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>

#include "gpu_test_util.h"
#include "runtime/session.h"

namespace atl {
namespace {

constexpr double kModelTolerance = 1e-2;

struct ModelCase {
  std::string model;
  int64_t batch = 1;
};

void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.model << "_b" << c.batch; }

std::vector<ModelCase> model_cases() {
  std::vector<ModelCase> cases;
  for (const ModelInfo& m : list_models()) {
    for (int64_t batch : {1, 8}) cases.push_back({m.name, batch});
  }
  return cases;
}

SessionOptions options(const ModelCase& c, const char* device) {
  SessionOptions o;
  o.model = c.model;
  o.device = device;
  o.model_options.batch = c.batch;
  return o;
}

// How many fused Attention kernels a GPU program must hold.
enum class Attention { kAny, kFused, kUnfused };

// `c` on the GPU against the CPU reference, same weights and inputs.
void expect_matches_cpu(const ModelCase& c, Attention attention) {
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(::testing::Message() << c.model << " batch " << c.batch << " seed " << seed);
  Session cpu(options(c, "cpu"));
  Session gpu(options(c, "cuda"));
  const auto& kernels = gpu.program().kernels;
  const auto fused =
      std::count_if(kernels.begin(), kernels.end(), [](const Kernel& k) { return k.op == OpKind::kAttention; });
  if (attention == Attention::kFused) {
    EXPECT_GT(fused, 0) << "no attention was fused";
  } else if (attention == Attention::kUnfused) {
    EXPECT_EQ(fused, 0) << "attention was fused";
  }
  const std::vector<Tensor> inputs = cpu.random_inputs(seed);
  cpu.set_inputs(inputs);
  cpu.instance().run();
  const std::vector<Tensor> want = cpu.outputs();

  CudaInstance& cuda = gputest::as_cuda(gpu.instance());
  gpu.set_inputs(inputs);
  cuda.poison(0xFF);
  gpu.instance().run();  // CUDA graph replay
  const std::vector<Tensor> got = gpu.outputs();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_LE(gputest::rel_l2(got[i], want[i]), kModelTolerance) << "output " << gpu.program().outputs[i].name;
  }

  // Kernel by kernel without the graph: the same bits.
  cuda.set_use_graph(false);
  cuda.poison(0xFF);
  gpu.instance().run();
  const std::vector<Tensor> again = gpu.outputs();
  for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(gputest::same_bytes(again[i], got[i])) << "output " << i;
}

class GpuModelTest : public ::testing::TestWithParam<ModelCase> {};

TEST_P(GpuModelTest, MatchesCpuReference) {
  ATL_REQUIRE_GPU();
  expect_matches_cpu(GetParam(), Attention::kAny);
}

INSTANTIATE_TEST_SUITE_P(Zoo, GpuModelTest, ::testing::ValuesIn(model_cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& info) {
                           return info.param.model + "_b" + std::to_string(info.param.batch);
                         });

// The attention models with each layer's attention fused into one kernel (the default), and
// with ATOLL_CUDA_FUSED_ATTENTION=0 (read when a session makes its backend) as three.
TEST(GpuModelFusedAttention, AttentionModelsMatchCpuReferenceFusedOrNot) {
  ATL_REQUIRE_GPU();
  for (const char* model : {"tiny_bert", "bert_base", "distilbert"}) {
    for (int64_t batch : {1, 8}) expect_matches_cpu({model, batch}, Attention::kFused);
  }
  struct EnvOff {
    EnvOff() { setenv("ATOLL_CUDA_FUSED_ATTENTION", "0", 1); }
    ~EnvOff() { unsetenv("ATOLL_CUDA_FUSED_ATTENTION"); }
  } env;
  for (const char* model : {"tiny_bert", "distilbert"}) expect_matches_cpu({model, 8}, Attention::kUnfused);
}

}  // namespace
}  // namespace atl
