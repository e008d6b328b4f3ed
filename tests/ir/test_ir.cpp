#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "ir/graph.h"

namespace atl {
namespace {

Attrs conv_attrs(int64_t stride, int64_t pad, int64_t group = 1) {
  return Attrs{{"stride", std::vector<int64_t>{stride, stride}},
               {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
               {"group", group}};
}

// Runs `f` and returns the error message, failing the test if nothing was thrown.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidGraph);
    return e.message();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(ShapeInference, ConvPoolGemmChain) {
  Graph g("t");
  ValueId x = g.add_input("x", DType::kF32, Shape{2, 3, 32, 31});
  ValueId w = g.add_weight("w", Shape{8, 3, 3, 3}, {});
  ValueId c = g.add(OpKind::kConv2d, "conv", {x, w}, conv_attrs(2, 1));
  EXPECT_EQ(g.value(c).shape, Shape({2, 8, 16, 16}));
  ValueId p = g.add(OpKind::kMaxPool, "pool",
                    {c}, Attrs{{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}},
                               {"pads", std::vector<int64_t>{0, 0, 0, 0}}, {"ceil_mode", int64_t{1}}});
  EXPECT_EQ(g.value(p).shape, Shape({2, 8, 8, 8}));  // ceil((16-3)/2)+1 = 8
  ValueId f = g.add(OpKind::kFlatten, "flat", {p});
  EXPECT_EQ(g.value(f).shape, Shape({2, 512}));
  ValueId fw = g.add_weight("fc.w", Shape{10, 512}, {});
  ValueId y = g.add(OpKind::kGemm, "fc", {f, fw});
  EXPECT_EQ(g.value(y).shape, Shape({2, 10}));
}

TEST(ShapeInference, BroadcastingMatMulSliceGather) {
  Graph g("t");
  ValueId a = g.add_input("a", DType::kF32, Shape{2, 4, 5, 8});
  ValueId b = g.add_input("b", DType::kF32, Shape{2, 4, 7, 8});
  ValueId s = g.add(OpKind::kMatMul, "mm", {a, b}, Attrs{{"trans_b", int64_t{1}}});
  EXPECT_EQ(g.value(s).shape, Shape({2, 4, 5, 7}));
  ValueId bias = g.add_input("bias", DType::kF32, Shape{5, 1});
  EXPECT_EQ(g.value(g.add(OpKind::kAdd, "add", {s, bias})).shape, Shape({2, 4, 5, 7}));
  ValueId sl = g.add(OpKind::kSlice, "sl", {s},
                     Attrs{{"axes", std::vector<int64_t>{-1}}, {"starts", std::vector<int64_t>{1}},
                           {"ends", std::vector<int64_t>{100}}, {"steps", std::vector<int64_t>{2}}});
  EXPECT_EQ(g.value(sl).shape, Shape({2, 4, 5, 3}));
  ValueId ids = g.add_input("ids", DType::kI64, Shape{2, 9});
  ValueId table = g.add_weight("table", Shape{100, 16}, {});
  EXPECT_EQ(g.value(g.add(OpKind::kGather, "emb", {table, ids})).shape, Shape({2, 9, 16}));
}

TEST(ShapeInference, ErrorsNameTheNode) {
  Graph g("t");
  ValueId x = g.add_input("x", DType::kF32, Shape{1, 3, 8, 8});
  ValueId w = g.add_weight("w", Shape{4, 2, 3, 3}, {});
  EXPECT_NE(error_of([&] { g.add(OpKind::kConv2d, "bad_conv", {x, w}, conv_attrs(1, 1)); }).find("bad_conv"),
            std::string::npos);
  ValueId y = g.add_input("y", DType::kF32, Shape{1, 3, 7, 8});
  EXPECT_NE(error_of([&] { g.add(OpKind::kAdd, "bad_add", {x, y}); }).find("bad_add"), std::string::npos);
  EXPECT_NE(error_of([&] { g.add(OpKind::kConcat, "bad_cat", {x, y}, Attrs{{"axis", int64_t{1}}}); }).find("bad_cat"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              g.add(OpKind::kReshape, "bad_reshape", {x}, Attrs{{"shape", std::vector<int64_t>{5, -1}}});
            }).find("bad_reshape"),
            std::string::npos);
  ValueId ids = g.add_input("f", DType::kF32, Shape{2});
  ValueId table = g.add_weight("table", Shape{10, 4}, {});
  EXPECT_NE(error_of([&] { g.add(OpKind::kGather, "bad_gather", {table, ids}); }).find("integers"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(OpKind::kTranspose, "bad_perm", {x}, Attrs{{"perm", std::vector<int64_t>{0, 0, 1, 2}}}); })
                .find("bad_perm"),
            std::string::npos);
  EXPECT_NE(error_of([&] { g.add(OpKind::kConv2d, "missing", {x}, conv_attrs(1, 1)); }).find("missing"),
            std::string::npos);
}

TEST(Graph, TopologicalOrderAndCycleDetection) {
  Graph g("t");
  ValueId x = g.add_input("x", DType::kF32, Shape{1, 4});
  ValueId a = g.add(OpKind::kRelu, "a", {x});
  ValueId b = g.add(OpKind::kTanh, "b", {a});
  g.add(OpKind::kAdd, "c", {a, b});
  EXPECT_EQ(topological_order(g), (std::vector<NodeId>{0, 1, 2}));
  // Rewire a to read c: a cycle a -> b -> c -> a.
  g.mutable_nodes()[0].inputs = {g.node(2).outputs[0]};
  EXPECT_NE(error_of([&] { topological_order(g); }).find("cycle"), std::string::npos);
}

TEST(Graph, ValidateReinfersShapesAndRejectsUndefinedUse) {
  Graph g("t");
  ValueId x = g.add_input("x", DType::kF32, Shape{2, 6});
  ValueId r = g.add(OpKind::kRelu, "r", {x});
  g.mark_output(r);
  g.value(x).shape = Shape{3, 6};
  g.validate();
  EXPECT_EQ(g.value(r).shape, Shape({3, 6}));
  ValueId orphan = g.new_value("orphan", DType::kF32, Shape{3, 6}, ValueKind::kActivation);
  g.mutable_nodes()[0].inputs = {orphan};
  EXPECT_NE(error_of([&] { g.validate(); }).find("orphan"), std::string::npos);
}

TEST(Graph, WeightsAreDeterministicAndLoadChecksShapes) {
  Graph g("t");
  g.add_weight("w", Shape{4, 4}, WeightInit{WeightInit::Kind::kUniform, -1, 1});
  g.init_weights(5);
  Tensor first = g.weights().at("w").clone();
  g.init_weights(5);
  EXPECT_EQ(0, std::memcmp(first.raw(), g.weights().at("w").raw(), first.nbytes()));
  g.init_weights(6);
  EXPECT_NE(0, std::memcmp(first.raw(), g.weights().at("w").raw(), first.nbytes()));
  WeightStore bad{{"w", Tensor(DType::kF32, Shape{3, 4})}};
  EXPECT_THROW(g.load_weights(bad), Error);
  WeightStore good{{"w", first}, {"unrelated", Tensor(DType::kF32, Shape{1})}};
  EXPECT_EQ(g.load_weights(good), 1);
}

}  // namespace
}  // namespace atl
