// Whole models on the CPU backend: the compiler's fusions (BatchNorm folding, epilogue fusion)
// change nothing beyond fp32 rounding; with ATOLL_OP_PERF=1, timing reports.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "../test_env.h"
#include "backends/cpu/cpu_backend.h"
#include "compile/compiler.h"
#include "core/rng.h"
#include "core/stats.h"
#include "models/zoo.h"

namespace atl {
namespace {

// Largest index a Program input may hold: the row count of the table a Gather reads it with.
int64_t index_limit(const Program& p, int input) {
  for (const Kernel& k : p.kernels) {
    if (k.op == OpKind::kGather && k.inputs[1].kind == Binding::Kind::kInput && k.inputs[1].index == input) {
      return k.inputs[0].shape[0];
    }
  }
  ATOLL_THROW(kInvalidArgument, "integer input {} of '{}' feeds no Gather", input, p.model);
}

std::vector<Tensor> random_inputs(const Program& p, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const TensorSpec& spec = p.inputs[i];
    Rng rng(seed, spec.name);
    if (is_float(spec.dtype)) {
      Tensor t(DType::kF32, spec.shape);
      for (auto& v : t.as<float>()) v = rng.normal();
      inputs.push_back(std::move(t));
    } else {
      Tensor t(DType::kI64, spec.shape);
      const auto limit = static_cast<uint64_t>(index_limit(p, static_cast<int>(i)));
      for (auto& v : t.as<int64_t>()) v = static_cast<int64_t>(rng.next_u64() % limit);
      inputs.push_back(std::move(t));
    }
  }
  return inputs;
}

std::vector<Tensor> run_model(const CompiledModel& m, const std::vector<Tensor>& inputs) {
  auto inst = make_cpu_backend()->load(m.program, m.weights);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();
  std::vector<Tensor> out;
  for (size_t i = 0; i < m.program.outputs.size(); ++i) out.push_back(inst->get_output(static_cast<int>(i)));
  return out;
}

double rel_l2(const Tensor& got, const Tensor& want) {
  double diff = 0.0, norm = 0.0;
  const auto g = got.as<float>();
  const auto w = want.as<float>();
  for (size_t i = 0; i < w.size(); ++i) {
    diff += (static_cast<double>(g[i]) - w[i]) * (static_cast<double>(g[i]) - w[i]);
    norm += static_cast<double>(w[i]) * w[i];
  }
  return std::sqrt(diff / norm);
}

// Both programs on the same inputs: finite outputs within `tol` (relative L2) of each other.
void expect_same_outputs(const CompiledModel& a_model, const CompiledModel& b_model, uint64_t seed, double tol) {
  const std::vector<Tensor> inputs = random_inputs(a_model.program, seed);
  const std::vector<Tensor> a = run_model(a_model, inputs);
  const std::vector<Tensor> b = run_model(b_model, inputs);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    for (float v : a[i].as<float>()) ASSERT_TRUE(std::isfinite(v)) << "output " << i;
    EXPECT_LE(rel_l2(a[i], b[i]), tol) << "output " << i;
  }
}

class CpuModelTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CpuModelTest, FusionChangesOnlyRounding) {
  ModelOptions opts;
  opts.batch = 2;
  opts.seq_len = 24;
  opts.seed = 11;
  const Graph g = build_model(GetParam(), opts);
  const CompileTarget target = make_cpu_backend()->target();
  const CompiledModel fused = compile_graph(g, target);
  CompileOptions plain;
  plain.fuse_epilogues = false;
  plain.fold_batchnorm = false;
  const CompiledModel unfused = compile_graph(g, target, plain);
  ASSERT_LT(fused.program.kernels.size(), unfused.program.kernels.size()) << "nothing was fused";
  SCOPED_TRACE(GetParam());
  expect_same_outputs(fused, unfused, 99, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(TinyModels, CpuModelTest, ::testing::Values("tiny_cnn", "tiny_vgg", "tiny_bert"));

// tiny_bert compiled for the CPU backend (whose target turns `feature` on) and with it off.
struct WithAndWithout {
  CompiledModel with, without;
};
WithAndWithout compile_tiny_bert(int64_t batch, int64_t seq_len, bool CompileTarget::*feature) {
  ModelOptions opts;
  opts.batch = batch;
  opts.seq_len = seq_len;
  opts.seed = 5;
  const Graph g = build_model("tiny_bert", opts);
  CompileTarget on = make_cpu_backend()->target();
  EXPECT_TRUE(on.*feature);
  CompileTarget off = on;
  off.*feature = false;
  return {compile_graph(g, on), compile_graph(g, off)};
}

// CompileTarget::matmul_head_views: the attention MatMuls read Q, K, V and write the context in
// the projections' [batch, seq, heads, head_dim] layout, so no Transpose kernel is left (tiny_bert:
// four per layer without), and the outputs are those of the program with the transposes.
TEST(CpuModelHeads, HeadViewsReplaceTheAttentionTransposes) {
  const auto [folded, unfolded] = compile_tiny_bert(3, 19, &CompileTarget::matmul_head_views);
  const auto count = [](const Program& p, OpKind op) {
    return std::count_if(p.kernels.begin(), p.kernels.end(), [&](const Kernel& k) { return k.op == op; });
  };
  EXPECT_EQ(count(folded.program, OpKind::kTranspose), 0);
  EXPECT_EQ(count(unfolded.program, OpKind::kTranspose), 8);
  EXPECT_EQ(folded.program.kernels.size() + 8, unfolded.program.kernels.size());
  int swapped = 0;
  for (const Kernel& k : folded.program.kernels) {
    if (k.op != OpKind::kAttention) continue;
    for (const char* attr : {"q_swap12", "k_swap12", "v_swap12", "y_swap12"}) {
      swapped += static_cast<int>(k.attrs.get_int(attr, 0));
    }
  }
  EXPECT_EQ(swapped, 8) << "Q, K, V and the context of each of the 2 layers";
  expect_same_outputs(folded, unfolded, 7, 1e-6);
}

// Q, K and V read one input with equal attributes: one grouped Gemm per layer computes all three,
// its output's slices are their views, and the outputs match the program with three Gemms.
TEST(CpuModelHeads, SharedInputGemmsBecomeOneGroupedGemm) {
  // 33 x 64 f32 per slice: 64-byte aligned like the arena's buffers.
  const auto [merged, separate] = compile_tiny_bert(3, 11, &CompileTarget::gemm_groups);
  int groups = 0;
  for (const Kernel& k : merged.program.kernels) {
    if (k.op != OpKind::kGemm || k.attrs.get_int("groups", 1) == 1) continue;
    ++groups;
    EXPECT_EQ(k.attrs.get_int("groups", 1), 3) << k.name;
    EXPECT_NE(k.name.find("query+key+value"), std::string::npos) << k.name;
    EXPECT_EQ(k.outputs[0].shape.dim(0), 3) << k.name;
  }
  EXPECT_EQ(groups, 2) << "one per layer";
  EXPECT_EQ(merged.program.kernels.size() + 4, separate.program.kernels.size());
  // The views of a grouped output start where its slices do.
  for (const Kernel& k : merged.program.kernels) {
    if (k.op != OpKind::kAttention || k.inputs[0].kind != Binding::Kind::kArena) continue;
    EXPECT_EQ(k.inputs[0].offset % 64, 0) << k.name << ": a slice starts where the arena's buffers may";
  }
  expect_same_outputs(merged, separate, 7, 1e-6);
}

// CompileTarget::fused_attention: each layer's scores MatMul, Softmax and context MatMul become
// one Attention kernel reading Q, K and V where the projections left them, and the outputs are
// those of the three kernels.
TEST(CpuModelHeads, AttentionChainsBecomeOneKernel) {
  const auto [fused, chained] = compile_tiny_bert(2, 13, &CompileTarget::fused_attention);
  const auto count = [](const Program& p, OpKind op) {
    return std::count_if(p.kernels.begin(), p.kernels.end(), [&](const Kernel& k) { return k.op == op; });
  };
  EXPECT_EQ(count(fused.program, OpKind::kAttention), 2) << "one per layer";
  EXPECT_EQ(count(fused.program, OpKind::kSoftmax) + count(fused.program, OpKind::kMatMul), 0);
  EXPECT_EQ(count(chained.program, OpKind::kAttention), 0);
  EXPECT_EQ(count(chained.program, OpKind::kSoftmax), 2);
  EXPECT_EQ(fused.program.kernels.size() + 4, chained.program.kernels.size());
  EXPECT_LE(fused.program.arena_bytes, chained.program.arena_bytes) << "no scores or probabilities in the arena";
  expect_same_outputs(fused, chained, 7, 1e-5);
}

double median_run_ms(Instance& inst, int iters) {
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    inst.run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(std::move(ms));
}

void print_timing(const std::string& model, int iters) {
  ModelOptions opts;
  opts.batch = 1;
  opts.seq_len = 128;
  const Graph g = build_model(model, opts);
  auto backend = make_cpu_backend();
  const CompiledModel m = compile_graph(g, backend->target());
  auto inst = backend->load(m.program, m.weights);
  const std::vector<Tensor> inputs = random_inputs(m.program, 1);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();  // warm-up: first touch of the arena and the weights
  const double ms = median_run_ms(*inst, iters);
  const MemoryReport mem = inst->memory();
  std::printf(
      "[timing] %s bs1 on %s: %.1f ms/run (median of %d), %zu kernels, %.1f GFLOP/s; arena %.1f MiB, "
      "workspace %.1f MiB\n",
      model.c_str(), backend->device_description().c_str(), ms, iters, m.program.kernels.size(),
      m.program.total_flops() / (ms * 1e6), static_cast<double>(mem.arena_bytes) / (1 << 20),
      static_cast<double>(mem.workspace_bytes) / (1 << 20));
}

// A negative BatchNorm variance makes its scale NaN; as in PyTorch, the logits must show it,
// folded into the conv or not, rather than a ReLU turning it back into zeros.
TEST(CpuModelNaN, NegativeBatchNormVarianceGivesNaNLogits) {
  Graph g = build_model("tiny_cnn", ModelOptions{});
  for (float& v : g.weights().at("block.bn1.running_var").as<float>()) v = -1.0f;
  for (const bool fold : {true, false}) {
    CompileOptions o;
    o.fold_batchnorm = fold;
    const CompiledModel m = compile_graph(g, make_cpu_backend()->target(), o);
    const Tensor logits = run_model(m, random_inputs(m.program, 3))[0];
    for (float v : logits.as<float>()) EXPECT_TRUE(std::isnan(v)) << "fold " << fold << ": " << v;
  }
}

// Reports, not assertions (CPU speed varies by machine, and under the sanitizers says nothing), so
// they run only in perf mode rather than as tests that cannot fail.

TEST(CpuModelTiming, ResNet50) {
  if (!test::perf_mode()) GTEST_SKIP() << "set ATOLL_OP_PERF=1 to time ResNet-50";
  print_timing("resnet50", 3);
}

TEST(CpuModelTiming, BertBase) {
  if (!test::perf_mode()) GTEST_SKIP() << "set ATOLL_OP_PERF=1 to time BERT-base";
  print_timing("bert_base", 3);
}

}  // namespace
}  // namespace atl
