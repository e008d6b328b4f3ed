// L2 residency on the GPU: a config that keeps the reused buffer persisting beats no residency,
// a config marking the whole arena (more than the set-aside holds) does worse than it, results
// do not change under residency, bad configs are rejected, and removal leaves the limit at 0.
//
// The micro-benchmark (as measured in BRIEF.md): a "hot" activation buffer h = relu(x) that every
// layer reads, a ping-pong chain a_{i+1} = a_i + h, and between the adds a GEMV over a 64 MiB
// weight that streams through L2 and evicts what is not persisting. Each layer's GEMV reads a row
// of a_i, so the compiler keeps the layers in order.
#include <cuda_runtime_api.h>
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cstdio>

#include "../test_env.h"
#include "backends/cuda/cuda_backend.h"
#include "compile/compiler.h"
#include "core/error.h"
#include "core/rng.h"
#include "gpu_test_util.h"
#include "l2/slices.h"
#include "runtime/devices.h"
#include "runtime/l2_measure.h"
#include "tune/tuner.h"

namespace atl {
namespace {

struct ChainShape {
  int64_t rows, cols, gemv_k;
  int layers;
};

// 24 MiB f16 activations (h, a_i, a_{i+1}: a 72 MiB arena, twice the largest set-aside) and a
// [8192, 4096] f16 weight (64 MiB) per layer, more than the 60 MiB L2.
constexpr ChainShape kBench{1536, 8192, 4096, 8};
constexpr ChainShape kSmall{8, 64, 32, 2};

CompiledModel compile_chain(const ChainShape& c, uint64_t seed, DType act_dtype = DType::kF16) {
  Graph g;
  g.set_name(fmt::format("l2_chain_{}x{}x{}", c.rows, c.cols, c.layers));
  const ValueId x = g.add_input("x", DType::kF32, Shape{c.rows, c.cols});
  const ValueId hot = g.add(OpKind::kRelu, "hot", {x});
  ValueId a = hot;
  for (int i = 0; i < c.layers; ++i) {
    const ValueId row = g.add(OpKind::kSlice, fmt::format("row{}", i), {a},
                              {{"axes", std::vector<int64_t>{0, 1}},
                               {"starts", std::vector<int64_t>{0, 0}},
                               {"ends", std::vector<int64_t>{1, c.gemv_k}}});
    const ValueId w = g.add_weight(fmt::format("w{}", i), Shape{c.cols, c.gemv_k},
                                   WeightInit{WeightInit::Kind::kUniform, -1e-3f, 1e-3f});
    g.mark_output(g.add(OpKind::kGemm, fmt::format("gemv{}", i), {row, w}));
    a = g.add(OpKind::kAdd, fmt::format("add{}", i), {a, hot});
  }
  g.mark_output(a);
  g.init_weights(seed);
  CompileTarget t;
  t.act_dtype = act_dtype;
  return compile_graph(g, t);
}

// Slices holding the output of the kernel named `name`.
std::vector<bool> slices_of(const Program& p, const std::string& name) {
  std::vector<bool> bits(static_cast<size_t>(l2::slice_count(p.arena_bytes, l2::kDefaultSliceBytes)), false);
  for (const Kernel& k : p.kernels) {
    if (k.name != name) continue;
    const Binding& b = k.outputs.at(0);
    EXPECT_EQ(b.kind, Binding::Kind::kArena) << name << " does not write the arena";
    for (int64_t s = b.offset / l2::kDefaultSliceBytes; s * l2::kDefaultSliceBytes < b.offset + b.bytes; ++s) {
      bits.at(static_cast<size_t>(s)) = true;
    }
    return bits;
  }
  ADD_FAILURE() << "no kernel named " << name;
  return bits;
}

// No windows yet: one empty window per kernel.
L2Residency windowless(size_t kernels, int64_t setaside_bytes, double hit_ratio) {
  L2Residency r;
  r.windows.resize(kernels);
  r.setaside_bytes = setaside_bytes;
  r.hit_ratio = hit_ratio;
  return r;
}

TEST(GpuL2, ResidentHotBufferBeatsNoneAndWholeArenaThrashes) {
  ATL_REQUIRE_GPU();
  const l2::L2Device d = l2::h200_l2();
  int device = 0, max_setaside = 0;
  ASSERT_EQ(cudaGetDevice(&device), cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&max_setaside, cudaDevAttrMaxPersistingL2CacheSize, device), cudaSuccess);
  if (max_setaside < d.setaside_max_bytes) {
    GTEST_SKIP() << "needs an H200-class L2: this GPU sets aside at most " << max_setaside << " bytes, the H200 "
                 << d.setaside_max_bytes;
  }
  if (!test::timing_judged()) GTEST_SKIP() << "a speed comparison, not judged at ATOLL_TEST_SLOWDOWN " << test::slowdown();
  const uint64_t seed = gputest::fresh_seed();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  const CompiledModel cm = compile_chain(kBench, seed);
  const Program& p = cm.program;
  auto backend = make_cuda_backend(0);
  std::unique_ptr<Instance> inst = backend->load(p, cm.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  Tensor x(DType::kF32, p.inputs.at(0).shape);
  Rng rng(seed);
  for (float& v : x.as<float>()) v = rng.uniform(-1.0f, 1.0f);
  gpu.set_input(0, x);

  const std::vector<bool> hot_bits = slices_of(p, "hot");
  const l2::ResidencyConfig hot = l2::make_config(p, d, hot_bits, 1.0);
  const l2::ResidencyConfig all = l2::make_config(p, d, std::vector<bool>(hot_bits.size(), true), 1.0);
  ASSERT_LT(hot.setaside_bytes, d.setaside_max_bytes);
  ASSERT_GT(all.resident_bytes(p.arena_bytes), 3 * d.setaside_max_bytes / 2) << "the whole arena must overflow";

  // Residency is a cache hint: the results are the same bytes with and without it, graph path included.
  inst->run();
  const Tensor want = inst->get_output(static_cast<int>(p.outputs.size()) - 1);
  const l2::WindowPlan plan = l2::plan_windows(p, all, d);
  L2Residency r = windowless(0, plan.setaside_bytes, plan.hit_ratio);
  for (const l2::AccessWindow& w : plan.windows) r.windows.push_back({w.offset, w.bytes});
  gpu.set_l2_residency(&r);
  EXPECT_GE(gpu.persisting_l2_limit(), plan.setaside_bytes);
  gpu.poison(0xFF);
  inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(static_cast<int>(p.outputs.size()) - 1), want));
  gpu.set_l2_residency(nullptr);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0);

  const L2Measurement m_hot = measure_l2(*inst, &hot, d);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0) << "measure_l2 must remove the config";
  const L2Measurement m_all = measure_l2(*inst, &all, d);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0);
  for (const auto* m : {&m_hot, &m_all}) {
    std::printf("%s: none %.4f ms, config %.4f ms, speedup %.4f, diff %+.4f +- %.4f ms over %d pairs\n",
                m == &m_hot ? "hot buffer" : "whole arena", m->baseline_ms, m->config_ms, m->speedup, m->median_diff_ms,
                m->diff_ci_ms, m->pairs);
    EXPECT_EQ(m->baseline_samples_ms.size(), static_cast<size_t>(m->pairs));
    EXPECT_EQ(m->config_samples_ms.size(), static_cast<size_t>(m->pairs));
    EXPECT_GE(m->granted_setaside_bytes, m->setaside_bytes);
  }
  // The hot buffer saves a sixth of each layer's DRAM traffic (24 of 136 MiB), but the layers are
  // not bound by DRAM alone: measured on the H200, 1.022x +- 0.008 (whole arena: 0.938x). The
  // assertion is the check's "measurably faster": at least 1% and outside the noise.
  EXPECT_GE(m_hot.speedup, 1.01) << "keeping the reused buffer persisting must beat no residency";
  EXPECT_LT(m_hot.median_diff_ms + m_hot.diff_ci_ms, 0.0) << "the gain must exceed the noise";
  EXPECT_LT(m_all.speedup, m_hot.speedup - 0.01) << "72 MiB marked persisting in a 37.5 MiB set-aside must thrash";
}

TEST(GpuL2, RejectsConfigsItCannotApply) {
  ATL_REQUIRE_GPU();
  const l2::L2Device d = l2::h200_l2();
  const CompiledModel mine = compile_chain(kSmall, 1);
  const CompiledModel other = compile_chain(ChainShape{16, 64, 32, 2}, 1);
  auto backend = make_cuda_backend(0);
  std::unique_ptr<Instance> inst = backend->load(mine.program, mine.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  // The limit is the device's, not the instance's: a rejected config leaves whatever was there.
  const int64_t limit_before = gpu.persisting_l2_limit();
  const std::vector<bool> one(static_cast<size_t>(l2::slice_count(other.program.arena_bytes, l2::kDefaultSliceBytes)),
                              true);
  const l2::ResidencyConfig foreign = l2::make_config(other.program, d, one, 0.9);
  EXPECT_EQ(gputest::code_of([&] { measure_l2(*inst, &foreign, d); }), ErrorCode::kInvalidArgument);

  const size_t kernels = mine.program.kernels.size();
  const L2Residency wrong_count = windowless(kernels + 1, 0, 1.0);
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_residency(&wrong_count); }), ErrorCode::kInvalidArgument);
  L2Residency outside = windowless(kernels, 0, 1.0);
  outside.windows[0] = {0, mine.program.arena_bytes + 1};
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_residency(&outside); }), ErrorCode::kInvalidArgument);
  const L2Residency too_big = windowless(kernels, int64_t{1} << 40, 1.0);
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_residency(&too_big); }), ErrorCode::kInvalidArgument);
  const L2Residency bad_ratio = windowless(kernels, 0, 1.5);
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_residency(&bad_ratio); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu.persisting_l2_limit(), limit_before) << "a rejected config must leave nothing applied";

  // A valid one applies and its removal restores the limit; the noise floor (no config) runs too.
  L2Residency ok = windowless(kernels, d.setaside_granularity, 1.0);
  ok.windows[0] = {0, mine.program.arena_bytes};
  gpu.set_l2_residency(&ok);
  EXPECT_GT(gpu.persisting_l2_limit(), 0);
  gpu.set_l2_residency(nullptr);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0);
  L2MeasureOptions quick;
  quick.min_pairs = quick.max_pairs = 4;
  const L2Measurement floor = measure_l2(*inst, nullptr, d, quick);
  EXPECT_EQ(floor.pairs, 4);
  EXPECT_GT(floor.baseline_ms, 0.0);
  EXPECT_GT(floor.config_ms, 0.0);
}

// What `atoll run --l2` does: the config applies through the runtime, the results keep their
// bytes, removal leaves no limit behind, and a config made for another Program is refused.
TEST(GpuL2, AppliedConfigKeepsResultsAndRemovesCleanly) {
  ATL_REQUIRE_GPU();
  const l2::L2Device d = l2::h200_l2();
  const CompiledModel cm = compile_chain(ChainShape{64, 256, 128, 3}, 3);
  const CompiledModel other = compile_chain(ChainShape{16, 64, 32, 2}, 3);
  auto backend = make_cuda_backend(0);
  std::unique_ptr<Instance> inst = backend->load(cm.program, cm.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  const int last = static_cast<int>(cm.program.outputs.size()) - 1;
  inst->run();
  const Tensor want = inst->get_output(last);
  const std::vector<bool> all(static_cast<size_t>(l2::slice_count(cm.program.arena_bytes, l2::kDefaultSliceBytes)),
                              true);
  const l2::ResidencyConfig config = l2::make_config(cm.program, d, all, 0.9);
  EXPECT_GE(apply_l2_config(*inst, &config, d), config.setaside_bytes);
  EXPECT_GE(gpu.persisting_l2_limit(), config.setaside_bytes);
  gpu.poison(0xFF);
  for (int i = 0; i < 3; ++i) inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(last), want));
  EXPECT_EQ(apply_l2_config(*inst, nullptr, d), 0);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0);
  const std::vector<bool> one(static_cast<size_t>(l2::slice_count(other.program.arena_bytes, l2::kDefaultSliceBytes)),
                              true);
  const l2::ResidencyConfig foreign = l2::make_config(other.program, d, one, 0.9);
  EXPECT_EQ(gputest::code_of([&] { apply_l2_config(*inst, &foreign, d); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(gpu.persisting_l2_limit(), 0);
}

// The tuner over measured time: the GPU evaluator answers every config with a time ratio
// against no residency, and the tuner's answer is never slower than none.
TEST(GpuL2, TunerOnTheGpuEvaluatorIsNeverWorseThanNone) {
  ATL_REQUIRE_GPU();
  const l2::L2Device d = l2::h200_l2();
  const CompiledModel cm = compile_chain(kSmall, 1);
  auto backend = make_cuda_backend(0);
  std::unique_ptr<Instance> inst = backend->load(cm.program, cm.weights);
  L2MeasureOptions quick;
  quick.min_pairs = quick.max_pairs = 6;
  CudaL2Evaluator ev(*inst, d, 0.9, quick);
  EXPECT_EQ(ev.slices(), l2::slice_count(cm.program.arena_bytes, l2::kDefaultSliceBytes));
  EXPECT_FALSE(ev.deterministic());
  tune::TuneOptions o;
  o.max_steps = 6;
  const tune::TuneResult r = tune::tune(ev, tune::Optimizer::kRandom, o);
  EXPECT_EQ(r.steps, 6);
  EXPECT_NEAR(r.none_fitness.cost, 1.0, 0.1) << "none against itself is the noise floor";
  EXPECT_GT(r.none_fitness.time_ms, 0.0);
  EXPECT_LE(r.best_fitness.cost, r.none_fitness.cost);
  EXPECT_EQ(gputest::as_cuda(*inst).persisting_l2_limit(), 0) << "evaluations leave no residency behind";
}

// Needs no GPU: the evaluator refuses, with kUnsupported, an instance that is not a CUDA one.
// Persistence (one window over the weights or the arena for every kernel, kept in the graphs):
// results stay bit-exact on every launch path, it and a residency config refuse each other, and
// turning it off leaves the instance as it was.
TEST(GpuL2, PersistenceKeepsResultsOnEveryLaunchPathAndExcludesAResidency) {
  ATL_REQUIRE_GPU();
  const l2::L2Device d = l2::h200_l2();
  const CompiledModel cm = compile_chain(ChainShape{64, 256, 128, 3}, 5);
  auto backend = make_cuda_backend(0);
  std::unique_ptr<Instance> inst = backend->load(cm.program, cm.weights);
  CudaInstance& gpu = gputest::as_cuda(*inst);
  const int last = static_cast<int>(cm.program.outputs.size()) - 1;
  const int kernels = static_cast<int>(cm.program.kernels.size());
  inst->run();
  const Tensor want = inst->get_output(last);
  EXPECT_EQ(gpu.l2_persist_bytes(L2Persist::kOff), 0);
  EXPECT_EQ(gpu.l2_persist_bytes(L2Persist::kWeights), inst->memory().weight_bytes);
  EXPECT_EQ(gpu.l2_persist_bytes(L2Persist::kArena), inst->memory().arena_bytes);
  for (const L2Persist buffer : {L2Persist::kWeights, L2Persist::kArena}) {
    SCOPED_TRACE(l2_persist_name(buffer));
    gpu.set_l2_persistence(buffer, 0.5);
    gpu.poison(0xFF);
    inst->run();  // the graph, re-captured with the window
    EXPECT_TRUE(gputest::same_bytes(inst->get_output(last), want));
    gpu.poison(0xFF);
    inst->run_range(0, kernels);  // kernel by kernel on the instance's stream
    inst->synchronize();
    EXPECT_TRUE(gputest::same_bytes(inst->get_output(last), want));
    gpu.poison(0xFF);
    for (int k = 0; k < kernels; ++k) gpu.launch(k, gpu.stream(), nullptr);  // the scheduler's per-kernel path
    inst->synchronize();
    EXPECT_TRUE(gputest::same_bytes(inst->get_output(last), want));
    const std::vector<bool> all(static_cast<size_t>(l2::slice_count(cm.program.arena_bytes, l2::kDefaultSliceBytes)),
                                true);
    const l2::ResidencyConfig config = l2::make_config(cm.program, d, all, 0.9);
    EXPECT_EQ(gputest::code_of([&] { apply_l2_config(*inst, &config, d); }), ErrorCode::kInvalidArgument);
  }
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_persistence(L2Persist::kWeights, 1.5); }), ErrorCode::kInvalidArgument);
  gpu.set_l2_persistence(L2Persist::kOff, 0.0);
  const std::vector<bool> all(static_cast<size_t>(l2::slice_count(cm.program.arena_bytes, l2::kDefaultSliceBytes)),
                              true);
  const l2::ResidencyConfig config = l2::make_config(cm.program, d, all, 0.9);
  EXPECT_GT(apply_l2_config(*inst, &config, d), 0);
  EXPECT_EQ(gputest::code_of([&] { gpu.set_l2_persistence(L2Persist::kWeights, 1.0); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(apply_l2_config(*inst, nullptr, d), 0);
  gpu.poison(0xFF);
  inst->run();
  EXPECT_TRUE(gputest::same_bytes(inst->get_output(last), want));
}

TEST(GpuL2, MeasuringACpuInstanceIsUnsupported) {
  const CompiledModel cm = compile_chain(kSmall, 1, DType::kF32);
  std::unique_ptr<Instance> inst = make_backend("cpu")->load(cm.program, cm.weights);
  EXPECT_EQ(gputest::code_of([&] { measure_l2(*inst, nullptr, l2::h200_l2()); }), ErrorCode::kUnsupported);
  EXPECT_EQ(gputest::code_of([&] { apply_l2_config(*inst, nullptr, l2::h200_l2()); }), ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace atl
