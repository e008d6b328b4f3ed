#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "compile/compiler.h"
#include "compile/planner.h"
#include "core/error.h"
#include "core/rng.h"

namespace atl {
namespace {

Attrs conv3x3() {
  return Attrs{{"stride", std::vector<int64_t>{1, 1}}, {"pads", std::vector<int64_t>{1, 1, 1, 1}}};
}

// A random DAG over [1, 8, 6, 6] tensors: convolutions, BN, activations, residual adds, concats.
Graph random_graph(uint64_t seed) {
  Rng rng(seed);
  Graph g(fmt::format("random{}", seed));
  std::vector<ValueId> pool{g.add_input("x", DType::kF32, Shape{1, 8, 6, 6})};
  const int nodes = 5 + static_cast<int>(rng.next_u64() % 30);
  auto pick = [&] { return pool[rng.next_u64() % pool.size()]; };
  for (int i = 0; i < nodes; ++i) {
    const std::string name = fmt::format("n{}", i);
    const WeightInit init{WeightInit::Kind::kUniform, -0.3f, 0.3f};
    switch (rng.next_u64() % 6) {
      case 0: {
        ValueId w = g.add_weight(name + ".w", Shape{8, 8, 3, 3}, init);
        pool.push_back(g.add(OpKind::kConv2d, name, {pick(), w}, conv3x3()));
        break;
      }
      case 1: {
        std::vector<ValueId> p;
        for (const char* s : {".g", ".b", ".m", ".v"}) {
          p.push_back(g.add_weight(name + s, Shape{8}, WeightInit{WeightInit::Kind::kUniform, 0.5f, 1.5f}));
        }
        pool.push_back(g.add(OpKind::kBatchNorm, name, {pick(), p[0], p[1], p[2], p[3]}, Attrs{{"epsilon", 1e-5}}));
        break;
      }
      case 2: pool.push_back(g.add(OpKind::kRelu, name, {pick()})); break;
      case 3: pool.push_back(g.add(OpKind::kAdd, name, {pick(), pick()})); break;
      case 4: {
        ValueId cat = g.add(OpKind::kConcat, name + ".cat", {pick(), pick()}, Attrs{{"axis", int64_t{1}}});
        ValueId w = g.add_weight(name + ".w", Shape{8, 16, 1, 1}, init);
        pool.push_back(g.add(OpKind::kConv2d, name, {cat, w}, Attrs{}));
        break;
      }
      default: pool.push_back(g.add(OpKind::kDropout, name, {pick()})); break;
    }
  }
  g.mark_output(g.add(OpKind::kRelu, "out", {pool.back()}));
  if (pool.size() > 3 && rng.next_u64() % 2) g.mark_output(g.add(OpKind::kTanh, "out2", {pool[pool.size() / 2]}));
  g.init_weights(seed);
  return g;
}

// Rebuilds each arena buffer's lifetime from the Program and checks the planner's promises.
void check_planner_invariants(const Program& p) {
  struct Life {
    int first = -1, last = -1;
    int64_t offset = 0, bytes = 0;
  };
  std::map<int, Life> buffers;
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const int kk = static_cast<int>(k);
    for (const Binding& b : p.kernels[k].inputs) {
      if (b.kind != Binding::Kind::kArena) continue;
      ASSERT_TRUE(buffers.count(b.buffer)) << "kernel " << p.kernels[k].name << " reads buffer " << b.buffer
                                           << " before anything wrote it";
      buffers[b.buffer].last = kk;
    }
    for (const Binding& b : p.kernels[k].outputs) {
      if (b.kind != Binding::Kind::kArena) continue;
      ASSERT_FALSE(buffers.count(b.buffer)) << "buffer written twice";
      buffers[b.buffer] = Life{kk, kk, b.offset, b.bytes};
    }
  }
  for (auto i = buffers.begin(); i != buffers.end(); ++i) {
    EXPECT_LE(i->second.offset + i->second.bytes, p.arena_bytes);
    for (auto j = std::next(i); j != buffers.end(); ++j) {
      const Life& a = i->second;
      const Life& b = j->second;
      if (a.first > b.last || b.first > a.last) continue;
      EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset)
          << "buffers " << i->first << " and " << j->first << " are live together and overlap";
    }
  }
  EXPECT_LE(p.arena_bytes, p.naive_activation_bytes);
}

TEST(Planner, RandomGraphsKeepInvariants) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Graph g = random_graph(seed);
    for (DType dt : {DType::kF32, DType::kF16}) {
      CompileTarget t;
      t.act_dtype = dt;
      SCOPED_TRACE(fmt::format("seed {} dtype {}", seed, dtype_name(dt)));
      const CompiledModel cm = compile_graph(g, t);
      check_planner_invariants(cm.program);
      verify_program(cm.program);
    }
  }
}

TEST(Planner, RandomRequestsNeverOverlapWhileLive) {
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Rng rng(seed);
    std::vector<BufferRequest> reqs(1 + rng.next_u64() % 60);
    for (auto& r : reqs) {
      r.first = static_cast<int>(rng.next_u64() % 50);
      r.last = r.first + static_cast<int>(rng.next_u64() % 10);
      r.bytes = static_cast<int64_t>(1 + rng.next_u64() % 100000);
    }
    const ArenaPlan plan = plan_arena(reqs, 256);
    EXPECT_NO_THROW(check_arena_plan(reqs, plan));
    EXPECT_LE(plan.arena_bytes, plan.naive_bytes);
    for (int64_t off : plan.offsets) EXPECT_EQ(off % 256, 0);
  }
}

TEST(Planner, ReusesMemoryOfDeadBuffers) {
  // A chain: each buffer dies when the next is written, so two slots suffice.
  std::vector<BufferRequest> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back({1000, i, i + 1});
  const ArenaPlan plan = plan_arena(reqs, 256);
  EXPECT_EQ(plan.arena_bytes, 2 * 1024);
  EXPECT_EQ(plan.naive_bytes, 10 * 1024);
}

TEST(Compiler, FoldsBatchNormAndFusesEpilogues) {
  Graph g("block");
  ValueId x = g.add_input("x", DType::kF32, Shape{1, 8, 6, 6});
  ValueId w = g.add_weight("w", Shape{8, 8, 3, 3}, {});
  ValueId c = g.add(OpKind::kConv2d, "conv", {x, w}, conv3x3());
  std::vector<ValueId> p;
  for (const char* s : {"g", "b", "m", "v"}) p.push_back(g.add_weight(s, Shape{8}, {WeightInit::Kind::kConstant, 1}));
  ValueId bn = g.add(OpKind::kBatchNorm, "bn", {c, p[0], p[1], p[2], p[3]}, Attrs{{"epsilon", 1e-5}});
  ValueId add = g.add(OpKind::kAdd, "add", {bn, x});
  ValueId relu = g.add(OpKind::kRelu, "relu", {add});
  ValueId gap = g.add(OpKind::kGlobalAvgPool, "gap", {relu});
  ValueId flat = g.add(OpKind::kFlatten, "flat", {gap});
  g.mark_output(flat);
  g.init_weights(1);
  const CompiledModel cm = compile_graph(g, CompileTarget{});
  std::vector<OpKind> ops;
  for (const Kernel& k : cm.program.kernels) ops.push_back(k.op);
  // Input cast, one fused conv (bias + residual + relu), GAP; flatten of [1,8,1,1] NHWC is a view.
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::kLayoutToNHWC, OpKind::kConv2d, OpKind::kGlobalAvgPool}));
  const Kernel& conv = cm.program.kernels[1];
  EXPECT_EQ(conv.attrs.get_string("act"), "relu");
  EXPECT_EQ(conv.attrs.get_int("bias"), 1);
  EXPECT_EQ(conv.attrs.get_int("residual"), 1);
  EXPECT_EQ(conv.inputs.size(), 4u);
  EXPECT_EQ(conv.inputs[0].layout, Layout::kNHWC);
  EXPECT_EQ(cm.program.outputs[0].shape, Shape({1, 8}));
  EXPECT_EQ(cm.program.kernels.back().outputs[0].kind, Binding::Kind::kOutput);

  CompileOptions plain;
  plain.fold_batchnorm = false;
  plain.fuse_epilogues = false;
  const CompiledModel unfused = compile_graph(g, CompileTarget{}, plain);
  EXPECT_GT(unfused.program.kernels.size(), cm.program.kernels.size());
}

TEST(Compiler, FlattenOfSpatialMapConvertsLayout) {
  Graph g("flat");
  ValueId x = g.add_input("x", DType::kF32, Shape{2, 3, 4, 4});
  ValueId w = g.add_weight("w", Shape{5, 3, 3, 3}, {});
  ValueId c = g.add(OpKind::kConv2d, "conv", {x, w}, conv3x3());
  ValueId f = g.add(OpKind::kFlatten, "flat", {c});
  ValueId fc = g.add_weight("fc.w", Shape{7, 80}, {});
  g.mark_output(g.add(OpKind::kGemm, "fc", {f, fc}));
  g.init_weights(2);
  const Program p = compile_graph(g, CompileTarget{}).program;
  std::vector<OpKind> ops;
  for (const Kernel& k : p.kernels) ops.push_back(k.op);
  EXPECT_EQ(ops, (std::vector<OpKind>{OpKind::kLayoutToNHWC, OpKind::kConv2d, OpKind::kLayoutToNCHW, OpKind::kGemm}));
  EXPECT_EQ(p.kernels[3].inputs[0].shape, Shape({2, 80}));
  EXPECT_EQ(p.kernels[3].inputs[0].offset, p.kernels[2].outputs[0].offset);  // the flatten is a view
}

TEST(Compiler, RejectsGraphWithoutWeights) {
  Graph g("noweights");
  ValueId x = g.add_input("x", DType::kF32, Shape{1, 4});
  ValueId w = g.add_weight("w", Shape{3, 4}, {});
  g.mark_output(g.add(OpKind::kGemm, "fc", {x, w}));
  EXPECT_THROW(compile_graph(g, CompileTarget{}), Error);
}

// fold_head_transposes takes a heads-first Transpose into a MatMul only where the MatMul is its
// sole reader, the perm is (0, 2, 1, 3) and the target asks for it; the MatMul's output shape is
// then the stored one.
TEST(Compiler, FoldsOnlyHeadTransposesTheMatMulAloneReads) {
  const Attrs heads{{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
  Graph g("attention");
  ValueId q = g.add_input("q", DType::kF32, Shape{2, 6, 3, 8});
  ValueId k = g.add_input("k", DType::kF32, Shape{2, 7, 3, 8});
  ValueId v = g.add_input("v", DType::kF32, Shape{2, 7, 8, 3});
  ValueId qt = g.add(OpKind::kTranspose, "q.heads", {q}, heads);
  ValueId kt = g.add(OpKind::kTranspose, "k.heads", {k}, heads);
  ValueId vt = g.add(OpKind::kTranspose, "v.heads", {v}, Attrs{{"perm", std::vector<int64_t>{0, 3, 1, 2}}});
  ValueId s = g.add(OpKind::kMatMul, "scores", {qt, kt}, Attrs{{"trans_b", int64_t{1}}});  // [2, 3, 6, 7]
  ValueId ctx = g.add(OpKind::kMatMul, "context", {s, vt});                                // [2, 3, 6, 8]
  ValueId out = g.add(OpKind::kTranspose, "seq_first", {ctx}, heads);                      // [2, 6, 3, 8]
  g.mark_output(out);
  g.mark_output(g.add(OpKind::kRelu, "k.other_reader", {kt}));
  g.init_weights(1);

  CompileTarget target;
  target.matmul_head_views = true;
  const CompiledModel folded = compile_graph(g, target);
  std::vector<std::string> names;
  for (const Kernel& kk : folded.program.kernels) names.push_back(kk.name);
  EXPECT_EQ(names, (std::vector<std::string>{"k.heads", "v.heads", "scores", "context", "k.other_reader"}));
  const Kernel& scores = folded.program.kernels[2];
  EXPECT_EQ(scores.attrs.get_int("a_swap12", 0), 1);
  EXPECT_EQ(scores.attrs.get_int("b_swap12", 0), 0) << "k.heads has another reader";
  EXPECT_EQ(scores.inputs[0].shape, Shape({2, 6, 3, 8}));
  const Kernel& context = folded.program.kernels[3];
  EXPECT_EQ(context.attrs.get_int("b_swap12", 0), 0) << "perm (0, 3, 1, 2) is not a heads swap";
  EXPECT_EQ(context.attrs.get_int("y_swap12", 0), 1);
  EXPECT_EQ(context.outputs[0].shape, Shape({2, 6, 3, 8}));
  EXPECT_EQ(context.outputs[0].kind, Binding::Kind::kOutput);

  target.matmul_head_views = false;
  EXPECT_EQ(compile_graph(g, target).program.kernels.size(), 7u);
}

// fuse_attention takes a scores MatMul -> Softmax(last axis) -> context MatMul chain only where
// nothing else reads the scores or the probabilities, and only within the target's limits; the
// fused kernel sits where the context MatMul was (its v may be computed after the scores).
TEST(Compiler, FusesOnlyAttentionChainsNothingElseReads) {
  const Attrs heads{{"perm", std::vector<int64_t>{0, 2, 1, 3}}};
  Graph g("attention");
  auto input = [&](const std::string& name, int64_t seq) { return g.add_input(name, DType::kF32, Shape{2, seq, 3, 16}); };
  // Chain `tag` over inputs of `keys` keys; `probs_out`: its probabilities are also a graph output.
  auto chain = [&](const std::string& tag, int64_t keys, int64_t axis, bool probs_out) {
    ValueId q = g.add(OpKind::kTranspose, tag + ".q", {input(tag + ".qin", 6)}, heads);
    ValueId k = g.add(OpKind::kTranspose, tag + ".k", {input(tag + ".kin", keys)}, heads);
    ValueId s = g.add(OpKind::kMatMul, tag + ".scores", {q, k}, Attrs{{"trans_b", int64_t{1}}, {"alpha", 0.25}});
    ValueId p = g.add(OpKind::kSoftmax, tag + ".probs", {s}, Attrs{{"axis", axis}});
    ValueId v = g.add(OpKind::kTranspose, tag + ".v", {input(tag + ".vin", keys)}, heads);
    g.mark_output(g.add(OpKind::kTranspose, tag + ".out", {g.add(OpKind::kMatMul, tag + ".context", {p, v})}, heads));
    if (probs_out) g.mark_output(p);
  };
  chain("a", 7, -1, false);
  chain("b", 7, -1, true);
  chain("c", 7, 2, false);
  chain("d", 40, -1, false);
  g.init_weights(1);
  CompileTarget target;
  target.matmul_head_views = true;
  target.fused_attention = true;
  target.attention_max_keys = 32;
  target.attention_max_head_dim = 64;
  target.attention_head_dim_multiple = 16;
  const Program p = compile_graph(g, target).program;
  std::vector<std::string> fused;
  for (const Kernel& k : p.kernels) {
    if (k.op == OpKind::kAttention) fused.push_back(k.name);
  }
  EXPECT_EQ(fused, std::vector<std::string>{"a.context"}) << "b's probabilities are an output, c's softmax is over "
                                                             "queries, d has more keys than the target takes";
  const Kernel& a = *std::find_if(p.kernels.begin(), p.kernels.end(), [](const Kernel& k) { return k.name == "a.context"; });
  EXPECT_EQ(a.attrs.get_float("scale"), 0.25);
  for (const char* attr : {"q_swap12", "k_swap12", "v_swap12", "y_swap12"}) EXPECT_EQ(a.attrs.get_int(attr), 1) << attr;
  ASSERT_EQ(a.inputs.size(), 3u);
  EXPECT_EQ(a.inputs[1].shape, Shape({2, 7, 3, 16}));
  EXPECT_EQ(a.outputs[0].shape, Shape({2, 6, 3, 16}));
  EXPECT_EQ(a.outputs[0].kind, Binding::Kind::kOutput);

  target.attention_head_dim_multiple = 32;  // 16-wide heads no longer fit
  for (const Kernel& k : compile_graph(g, target).program.kernels) EXPECT_NE(k.op, OpKind::kAttention) << k.name;
  target.attention_head_dim_multiple = 16;
  target.fused_attention = false;
  for (const Kernel& k : compile_graph(g, target).program.kernels) EXPECT_NE(k.op, OpKind::kAttention) << k.name;
}

// Gemms of one input with equal attributes and weight shapes become one grouped Gemm (their
// readers multiply, so no residual fusion takes them first); one of
// another activation, one of another input and one whose result is a graph output stay apart.
TEST(Compiler, GroupsOnlyGemmsThatShareInputAttributesAndShapes) {
  const WeightInit init{WeightInit::Kind::kUniform, -0.5f, 0.5f};
  const Attrs plain{{"bias", int64_t{1}}, {"act", std::string("none")}};
  Graph g("projections");
  ValueId x = g.add_input("x", DType::kF32, Shape{4, 16});
  ValueId y = g.add_input("y", DType::kF32, Shape{4, 16});
  auto gemm = [&](const std::string& name, ValueId in, const Attrs& a) {
    return g.add(OpKind::kGemm, name, {in, g.add_weight(name + ".w", Shape{16, 16}, init),
                                       g.add_weight(name + ".b", Shape{16}, init)}, a);
  };
  ValueId q = gemm("attn.query", x, plain);
  ValueId k = gemm("attn.key", x, plain);
  ValueId r = gemm("attn.relu", x, Attrs{{"bias", int64_t{1}}, {"act", std::string("relu")}});
  ValueId o = gemm("other.input", y, plain);
  ValueId v = gemm("attn.value", x, plain);
  ValueId out = gemm("attn.out", x, plain);
  g.mark_output(g.add(OpKind::kAdd, "sum", {g.add(OpKind::kMul, "qk", {q, k}), g.add(OpKind::kMul, "vr", {v, r})}));
  g.mark_output(o);
  g.mark_output(out);
  g.init_weights(3);

  CompileTarget target;
  target.alignment = 64;  // 4 x 16 f32 slices: 256 bytes
  target.gemm_groups = true;
  const CompiledModel grouped = compile_graph(g, target);
  std::vector<std::string> names;
  for (const Kernel& kk : grouped.program.kernels) names.push_back(kk.name);
  EXPECT_EQ(names, (std::vector<std::string>{"attn.query+key+value", "attn.relu", "other.input", "attn.out", "qk",
                                             "vr", "sum"}));
  const Kernel& qkv = grouped.program.kernels[0];
  EXPECT_EQ(qkv.attrs.get_int("groups", 1), 3);
  EXPECT_EQ(qkv.inputs[1].shape, Shape({48, 16}));
  EXPECT_EQ(qkv.outputs[0].shape, Shape({3, 4, 16}));
  // The readers of Q, K and V read the slices 0, 1 and 2 of it.
  const Kernel& qk = grouped.program.kernels[4];
  EXPECT_EQ(qk.inputs[0].offset, qkv.outputs[0].offset);
  EXPECT_EQ(qk.inputs[1].offset, qkv.outputs[0].offset + 256);
  EXPECT_EQ(grouped.program.kernels[5].inputs[0].offset, qkv.outputs[0].offset + 512);
  EXPECT_EQ(qk.inputs[0].bytes, 256);

  target.alignment = 512;  // slices would break the arena's alignment: nothing grouped
  EXPECT_EQ(compile_graph(g, target).program.kernels.size(), 9u);
  target.alignment = 64;
  target.gemm_group_columns = 32;  // 16 columns per Gemm are not a multiple: nothing grouped
  EXPECT_EQ(compile_graph(g, target).program.kernels.size(), 9u);
  target.gemm_group_columns = 16;
  EXPECT_EQ(compile_graph(g, target).program.kernels.size(), 7u);
  target.gemm_groups = false;
  EXPECT_EQ(compile_graph(g, target).program.kernels.size(), 9u);
}

TEST(ProgramJson, RoundTripsExactly) {
  for (uint64_t seed : {3u, 17u, 42u}) {
    const Program p = compile_graph(random_graph(seed), CompileTarget{}).program;
    const std::string text = program_to_json_string(p);
    const Program back = program_from_json_string(text);
    EXPECT_EQ(back.fingerprint, p.fingerprint);
    EXPECT_EQ(program_to_json_string(back), text);
  }
}

TEST(ProgramJson, RejectsEditedOrMalformedFiles) {
  const Program p = compile_graph(random_graph(5), CompileTarget{}).program;
  std::string text = program_to_json_string(p);
  EXPECT_THROW(program_from_json_string("{not json"), Error);
  EXPECT_THROW(program_from_json_string("{\"format\": \"other\"}"), Error);
  const auto pos = text.find("\"arena_bytes\": ");
  ASSERT_NE(pos, std::string::npos);
  text.insert(pos + 15, "1");  // edit a field: the fingerprint no longer matches
  EXPECT_THROW(program_from_json_string(text), Error);
}

TEST(ProgramVerify, RejectsKernelThatReadsWhatItWrites) {
  Program p = compile_graph(random_graph(9), CompileTarget{}).program;
  for (Kernel& k : p.kernels) {
    for (Binding& in : k.inputs) {
      if (in.kind == Binding::Kind::kArena && k.outputs[0].kind == Binding::Kind::kArena) {
        k.outputs[0].offset = in.offset;
        k.outputs[0].bytes = std::min(k.outputs[0].bytes, in.bytes);
        k.outputs[0].shape = Shape{k.outputs[0].bytes / static_cast<int64_t>(dtype_size(k.outputs[0].dtype))};
        try {
          verify_program(p);
          FAIL() << "overlap accepted";
        } catch (const Error& e) {
          EXPECT_NE(e.message().find("idempotent"), std::string::npos) << e.message();
        }
        return;
      }
    }
  }
}

}  // namespace
}  // namespace atl
