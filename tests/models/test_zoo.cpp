// The zoo against the reference architectures: parameter counts published by torchvision and
// HuggingFace, state_dict weight names and shapes, model inputs/outputs, options and errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "error_matchers.h"
#include "ir/op_attrs.h"
#include "models/zoo.h"

namespace atl {
namespace {

using testing::error_message;

Graph structure_only(const std::string& name, int64_t batch = 1, int64_t seq_len = 128) {
  ModelOptions o;
  o.batch = batch;
  o.seq_len = seq_len;
  o.init_weights = false;
  return build_model(name, o);
}

const Value& value_named(const Graph& g, const std::string& name) {
  auto id = g.find_value(name);
  if (!id) throw std::runtime_error("no value named " + name + " in " + g.name());
  return g.value(*id);
}

std::vector<const Node*> nodes_of(const Graph& g, OpKind op) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes()) {
    if (n.op == op) out.push_back(&n);
  }
  return out;
}

TEST(Zoo, ListsModelsInZooOrder) {
  std::vector<std::string> names;
  for (const ModelInfo& m : list_models()) {
    names.push_back(m.name);
    EXPECT_FALSE(m.description.empty()) << m.name;
    EXPECT_FALSE(m.input_desc.empty()) << m.name;
  }
  const std::vector<std::string> expected = {"resnet18",    "resnet50",     "resnet152",    "vgg19",
                                             "densenet201", "inception_v3", "mobilenet_v2", "bert_base",
                                             "distilbert",  "tiny_cnn",     "tiny_vgg",     "tiny_bert"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(default_model(), "resnet50");
}

// Counts as torchvision's sum(p.numel() for p in model.parameters()) and HuggingFace's
// model.num_parameters() report them (BatchNorm running statistics are buffers, not parameters).
TEST(Zoo, ParameterCountsMatchReferenceModels) {
  const std::map<std::string, int64_t> expected = {
      {"resnet18", 11'689'512},    {"resnet50", 25'557'032},    {"resnet152", 60'192'808},
      {"vgg19", 143'667'240},      {"densenet201", 20'013'928}, {"inception_v3", 23'834'568},
      {"mobilenet_v2", 3'504'872}, {"bert_base", 109'482'240},  {"distilbert", 66'362'880},
  };
  for (const auto& [name, count] : expected) {
    const Graph g = structure_only(name);
    EXPECT_EQ(model_param_count(g), count) << name;
    EXPECT_TRUE(g.weights().empty()) << name << ": init_weights=false must leave the store empty";
  }
}

TEST(Zoo, RunningStatisticsAreWeightsButNotParameters) {
  const Graph g = structure_only("resnet18");
  int64_t running = 0;
  for (const Value& v : g.values()) {
    if (v.kind != ValueKind::kWeight) continue;
    const bool is_running = v.name.ends_with(".running_mean") || v.name.ends_with(".running_var");
    if (is_running) running += v.shape.numel();
  }
  // 20 BatchNorms in ResNet-18 with 4800 channels in all, two statistics each.
  EXPECT_EQ(running, 2 * 4800);
  EXPECT_EQ(g.param_count() - model_param_count(g), running);
}

// Names and shapes from the reference state_dicts, a few per model, covering every module kind.
TEST(Zoo, WeightNamesFollowReferenceStateDicts) {
  struct Expect {
    const char* model;
    const char* weight;
    Shape shape;
  };
  const std::vector<Expect> cases = {
      {"resnet18", "conv1.weight", {64, 3, 7, 7}},
      {"resnet18", "layer2.0.downsample.0.weight", {128, 64, 1, 1}},
      {"resnet18", "layer4.1.bn2.running_var", {512}},
      {"resnet18", "fc.weight", {1000, 512}},
      {"resnet50", "layer1.0.downsample.1.weight", {256}},
      {"resnet50", "layer2.0.conv2.weight", {128, 128, 3, 3}},
      {"resnet50", "fc.bias", {1000}},
      {"resnet152", "layer3.35.conv3.weight", {1024, 256, 1, 1}},
      {"resnet152", "layer4.2.bn3.running_mean", {2048}},
      {"vgg19", "features.0.weight", {64, 3, 3, 3}},
      {"vgg19", "features.34.bias", {512}},
      {"vgg19", "classifier.0.weight", {4096, 25088}},
      {"vgg19", "classifier.6.weight", {1000, 4096}},
      {"densenet201", "features.conv0.weight", {64, 3, 7, 7}},
      {"densenet201", "features.denseblock1.denselayer1.norm1.weight", {64}},
      {"densenet201", "features.denseblock1.denselayer6.conv1.weight", {128, 224, 1, 1}},
      {"densenet201", "features.denseblock4.denselayer32.conv2.weight", {32, 128, 3, 3}},
      {"densenet201", "features.transition3.conv.weight", {896, 1792, 1, 1}},
      {"densenet201", "features.norm5.running_var", {1920}},
      {"densenet201", "classifier.weight", {1000, 1920}},
      {"inception_v3", "Conv2d_1a_3x3.conv.weight", {32, 3, 3, 3}},
      {"inception_v3", "Mixed_5b.branch1x1.conv.weight", {64, 192, 1, 1}},
      {"inception_v3", "Mixed_5b.branch_pool.conv.weight", {32, 192, 1, 1}},
      {"inception_v3", "Mixed_6b.branch7x7_2.conv.weight", {128, 128, 1, 7}},
      {"inception_v3", "Mixed_6e.branch7x7dbl_4.conv.weight", {192, 192, 7, 1}},
      {"inception_v3", "Mixed_7a.branch3x3_2.conv.weight", {320, 192, 3, 3}},
      {"inception_v3", "Mixed_7c.branch3x3dbl_3b.bn.running_var", {384}},
      {"inception_v3", "fc.weight", {1000, 2048}},
      {"mobilenet_v2", "features.0.0.weight", {32, 3, 3, 3}},
      {"mobilenet_v2", "features.1.conv.0.0.weight", {32, 1, 3, 3}},
      {"mobilenet_v2", "features.1.conv.1.weight", {16, 32, 1, 1}},
      {"mobilenet_v2", "features.2.conv.1.0.weight", {96, 1, 3, 3}},
      {"mobilenet_v2", "features.17.conv.3.running_mean", {320}},
      {"mobilenet_v2", "features.18.0.weight", {1280, 320, 1, 1}},
      {"mobilenet_v2", "classifier.1.weight", {1000, 1280}},
      {"bert_base", "embeddings.word_embeddings.weight", {30522, 768}},
      {"bert_base", "embeddings.position_embeddings.weight", {512, 768}},
      {"bert_base", "embeddings.token_type_embeddings.weight", {2, 768}},
      {"bert_base", "embeddings.LayerNorm.weight", {768}},
      {"bert_base", "encoder.layer.0.attention.self.query.weight", {768, 768}},
      {"bert_base", "encoder.layer.5.attention.output.LayerNorm.bias", {768}},
      {"bert_base", "encoder.layer.11.intermediate.dense.weight", {3072, 768}},
      {"bert_base", "encoder.layer.11.output.dense.weight", {768, 3072}},
      {"bert_base", "pooler.dense.weight", {768, 768}},
      {"distilbert", "embeddings.word_embeddings.weight", {30522, 768}},
      {"distilbert", "transformer.layer.0.attention.q_lin.weight", {768, 768}},
      {"distilbert", "transformer.layer.3.attention.out_lin.bias", {768}},
      {"distilbert", "transformer.layer.5.sa_layer_norm.weight", {768}},
      {"distilbert", "transformer.layer.5.ffn.lin1.weight", {3072, 768}},
      {"distilbert", "transformer.layer.5.output_layer_norm.bias", {768}},
  };
  std::map<std::string, Graph> graphs;
  for (const Expect& c : cases) {
    auto it = graphs.find(c.model);
    if (it == graphs.end()) it = graphs.emplace(c.model, structure_only(c.model)).first;
    const auto id = it->second.find_value(c.weight);
    ASSERT_TRUE(id.has_value()) << c.model << ": no weight " << c.weight;
    const Value& v = it->second.value(*id);
    EXPECT_EQ(v.kind, ValueKind::kWeight) << c.weight;
    EXPECT_EQ(v.shape, c.shape) << c.model << " " << c.weight << " is " << v.shape.str();
  }
  // Nothing outside the reference vocabulary: no token types or pooler in DistilBERT.
  EXPECT_FALSE(graphs.at("distilbert").find_value("embeddings.token_type_embeddings.weight").has_value());
  EXPECT_FALSE(graphs.at("distilbert").find_value("pooler.dense.weight").has_value());
}

TEST(Zoo, ImageModelsTakeInputAndProduceLogits) {
  const std::map<std::string, int64_t> sizes = {{"resnet18", 224},     {"resnet50", 224},    {"resnet152", 224},
                                                {"vgg19", 224},        {"densenet201", 224}, {"inception_v3", 299},
                                                {"mobilenet_v2", 224}, {"tiny_cnn", 32},     {"tiny_vgg", 16}};
  for (const auto& [name, size] : sizes) {
    const Graph g = structure_only(name, /*batch=*/3);
    ASSERT_EQ(g.inputs().size(), 1u) << name;
    const Value& in = g.value(g.inputs()[0]);
    EXPECT_EQ(in.name, "input") << name;
    EXPECT_EQ(in.dtype, DType::kF32) << name;
    EXPECT_EQ(in.shape, Shape({3, 3, size, size})) << name;
    ASSERT_EQ(g.outputs().size(), 1u) << name;
    const Value& out = g.value(g.outputs()[0]);
    EXPECT_EQ(out.name, "logits") << name;
    const int64_t classes = name.starts_with("tiny_") ? 10 : 1000;
    EXPECT_EQ(out.shape, Shape({3, classes})) << name;
  }
}

TEST(Zoo, BertModelsHonourBatchAndSequenceLength) {
  const Graph bert = structure_only("bert_base", /*batch=*/2, /*seq_len=*/37);
  ASSERT_EQ(bert.inputs().size(), 2u);
  EXPECT_EQ(bert.value(bert.inputs()[0]).name, "input_ids");
  EXPECT_EQ(bert.value(bert.inputs()[1]).name, "token_type_ids");
  for (ValueId in : bert.inputs()) {
    EXPECT_EQ(bert.value(in).dtype, DType::kI64);
    EXPECT_EQ(bert.value(in).shape, Shape({2, 37}));
  }
  ASSERT_EQ(bert.outputs().size(), 2u);
  EXPECT_EQ(bert.value(bert.outputs()[0]).name, "last_hidden_state");
  EXPECT_EQ(bert.value(bert.outputs()[0]).shape, Shape({2, 37, 768}));
  EXPECT_EQ(bert.value(bert.outputs()[1]).name, "pooler_output");
  EXPECT_EQ(bert.value(bert.outputs()[1]).shape, Shape({2, 768}));

  const Graph distil = structure_only("distilbert", /*batch=*/4, /*seq_len=*/512);
  ASSERT_EQ(distil.inputs().size(), 1u);
  EXPECT_EQ(distil.value(distil.inputs()[0]).name, "input_ids");
  EXPECT_EQ(distil.value(distil.inputs()[0]).shape, Shape({4, 512}));
  ASSERT_EQ(distil.outputs().size(), 1u);
  EXPECT_EQ(distil.value(distil.outputs()[0]).name, "last_hidden_state");
  EXPECT_EQ(distil.value(distil.outputs()[0]).shape, Shape({4, 512, 768}));

  // Only the first seq_len rows of the position table are used.
  const Node& positions = bert.node(value_named(bert, "embeddings.position_embeddings").producer);
  EXPECT_EQ(positions.op, OpKind::kSlice);
  EXPECT_EQ(positions.attrs.get_ints("ends"), std::vector<int64_t>{37});
}

TEST(Zoo, TinyBertCapsSequenceAtItsPositionTable) {
  const Graph short_seq = structure_only("tiny_bert", /*batch=*/2, /*seq_len=*/20);
  EXPECT_EQ(short_seq.value(short_seq.outputs()[0]).shape, Shape({2, 20, 64}));
  EXPECT_EQ(short_seq.value(short_seq.outputs()[1]).shape, Shape({2, 64}));
  const Graph long_seq = structure_only("tiny_bert", /*batch=*/1, /*seq_len=*/128);
  EXPECT_EQ(long_seq.value(long_seq.inputs()[0]).shape, Shape({1, 64}));
  EXPECT_EQ(long_seq.value(long_seq.outputs()[0]).shape, Shape({1, 64, 64}));
}

TEST(Zoo, RejectsUnknownModelsAndBadOptions) {
  const std::string msg = error_message([] { structure_only("resnet51"); }, ErrorCode::kNotFound);
  EXPECT_NE(msg.find("'resnet51'"), std::string::npos) << msg;
  for (const ModelInfo& m : list_models()) EXPECT_NE(msg.find(m.name), std::string::npos) << msg;

  EXPECT_NE(error_message([] { structure_only("resnet18", /*batch=*/0); }, ErrorCode::kInvalidArgument).find("batch"),
            std::string::npos);
  EXPECT_NE(
      error_message([] { structure_only("bert_base", 1, /*seq_len=*/0); }, ErrorCode::kInvalidArgument).find("seq_len"),
      std::string::npos);
  EXPECT_NE(
      error_message([] { structure_only("bert_base", 1, /*seq_len=*/513); }, ErrorCode::kInvalidArgument).find("513"),
      std::string::npos);
}

TEST(Zoo, EveryGraphRevalidates) {
  for (const ModelInfo& m : list_models()) {
    Graph g = structure_only(m.name, /*batch=*/2, /*seq_len=*/16);
    EXPECT_EQ(g.name(), m.name);
    EXPECT_NO_THROW(g.validate()) << m.name;
  }
}

TEST(Zoo, AttributesFollowTheReferences) {
  const Graph inception = structure_only("inception_v3");
  for (const Node* n : nodes_of(inception, OpKind::kBatchNorm)) {
    EXPECT_DOUBLE_EQ(n->attrs.get_float("epsilon"), 1e-3) << n->name;
  }
  const auto avg_pools = nodes_of(inception, OpKind::kAvgPool);
  ASSERT_EQ(avg_pools.size(), 9u);  // one pool branch in each of Mixed_5b..5d, 6b..6e, 7b, 7c
  for (const Node* n : avg_pools) {
    const PoolParams p = pool_params(n->attrs);
    EXPECT_TRUE(p.count_include_pad) << n->name;
    EXPECT_EQ(p.k_h, 3);
    EXPECT_EQ(p.stride_h, 1);
    EXPECT_EQ(p.pad_t, 1);
  }

  const Graph resnet = structure_only("resnet50");
  for (const Node* n : nodes_of(resnet, OpKind::kBatchNorm)) {
    EXPECT_DOUBLE_EQ(n->attrs.get_float("epsilon"), 1e-5) << n->name;
  }
  const Node& stride_conv = resnet.node(value_named(resnet, "layer2.0.conv2").producer);
  EXPECT_EQ(conv2d_params(stride_conv.attrs).stride_h, 2) << "ResNet v1.5 strides the 3x3 conv";
  for (const Node* n : nodes_of(resnet, OpKind::kConv2d)) EXPECT_FALSE(conv2d_params(n->attrs).has_bias) << n->name;

  const Graph vgg = structure_only("vgg19");
  for (const Node* n : nodes_of(vgg, OpKind::kConv2d)) EXPECT_TRUE(conv2d_params(n->attrs).has_bias) << n->name;

  const Graph mobilenet = structure_only("mobilenet_v2");
  const Node& depthwise = mobilenet.node(value_named(mobilenet, "features.2.conv.1.0").producer);
  EXPECT_EQ(conv2d_params(depthwise.attrs).group, 96);
  EXPECT_EQ(nodes_of(mobilenet, OpKind::kRelu6).size(), 35u);  // 17 blocks: 2 each, 1 in the first; stem; head
  EXPECT_EQ(nodes_of(mobilenet, OpKind::kAdd).size(), 10u);    // blocks with stride 1 and equal channels

  const Graph bert = structure_only("bert_base");
  for (const Node* n : nodes_of(bert, OpKind::kLayerNorm)) {
    EXPECT_DOUBLE_EQ(n->attrs.get_float("epsilon"), 1e-12) << n->name;
  }
  const auto matmuls = nodes_of(bert, OpKind::kMatMul);
  ASSERT_EQ(matmuls.size(), 24u);
  EXPECT_EQ(matmuls[0]->attrs.get_int("trans_b"), 1);
  EXPECT_DOUBLE_EQ(matmuls[0]->attrs.get_float("alpha"), 0.125);  // 1 / sqrt(64)
  EXPECT_EQ(matmuls[1]->attrs.get_int("trans_b"), 0);
  EXPECT_EQ(nodes_of(bert, OpKind::kGelu).size(), 12u);
  EXPECT_EQ(nodes_of(bert, OpKind::kTanh).size(), 1u);
}

TEST(Zoo, TinyModelsCoverTheirOpPatterns) {
  const Graph cnn = structure_only("tiny_cnn");
  bool has_depthwise = false;
  for (const Node* n : nodes_of(cnn, OpKind::kConv2d)) {
    const Conv2dParams p = conv2d_params(n->attrs);
    has_depthwise |= p.group > 1 && p.group == cnn.value(n->inputs[0]).shape[1] && p.has_bias;
  }
  EXPECT_TRUE(has_depthwise);
  for (OpKind op : {OpKind::kBatchNorm, OpKind::kRelu, OpKind::kRelu6, OpKind::kMaxPool, OpKind::kAdd, OpKind::kConcat,
                    OpKind::kAvgPool, OpKind::kGlobalAvgPool, OpKind::kFlatten, OpKind::kGemm}) {
    EXPECT_FALSE(nodes_of(cnn, op).empty()) << op_name(op);
  }
  EXPECT_FALSE(pool_params(nodes_of(cnn, OpKind::kAvgPool)[0]->attrs).count_include_pad);

  // The flatten must see a spatial map, so NHWC storage has to be reordered before the Gemm.
  const Graph vgg = structure_only("tiny_vgg", /*batch=*/2);
  const Node& flatten = *nodes_of(vgg, OpKind::kFlatten).at(0);
  EXPECT_EQ(vgg.value(flatten.inputs[0]).shape, Shape({2, 16, 4, 4}));
  EXPECT_EQ(nodes_of(vgg, OpKind::kDropout).size(), 1u);
}

TEST(Zoo, SameSeedSameWeightsOtherSeedOtherWeights) {
  ModelOptions o;
  o.seed = 7;
  const Graph a = build_model("tiny_cnn", o);
  const Graph b = build_model("tiny_cnn", o);
  o.seed = 8;
  const Graph c = build_model("tiny_cnn", o);
  ASSERT_EQ(a.weights().size(), 27u);
  for (const auto& [name, t] : a.weights()) {
    const auto x = t.as<float>();
    const auto y = b.weights().at(name).as<float>();
    const auto z = c.weights().at(name).as<float>();
    EXPECT_TRUE(std::equal(x.begin(), x.end(), y.begin())) << name;
    EXPECT_FALSE(std::equal(x.begin(), x.end(), z.begin())) << name;
  }
}

struct Range {
  float lo, hi;
};

Range range_of(const Tensor& t) {
  const auto d = t.as<float>();
  const auto [lo, hi] = std::minmax_element(d.begin(), d.end());
  return {*lo, *hi};
}

// Values lie inside [lo, hi] and come within 10% of both ends: with >= 64 uniform draws, a miss
// has probability below 0.2%, and a narrower or shifted distribution misses for sure.
void expect_uniform_over(const Graph& g, const std::string& name, float lo, float hi) {
  const Range r = range_of(g.weights().at(name));
  const float slack = 0.1f * (hi - lo);
  EXPECT_GE(r.lo, lo) << name;
  EXPECT_LE(r.hi, hi) << name;
  EXPECT_LT(r.lo, lo + slack) << name;
  EXPECT_GT(r.hi, hi - slack) << name;
}

TEST(Zoo, InitialWeightsFollowTheirRoles) {
  ModelOptions o;
  o.seed = 3;
  const Graph resnet = build_model("resnet18", o);
  const float conv1_bound = std::sqrt(6.0f / (3 * 7 * 7));
  expect_uniform_over(resnet, "conv1.weight", -conv1_bound, conv1_bound);
  const float fc_bound = std::sqrt(6.0f / 512);
  expect_uniform_over(resnet, "fc.weight", -fc_bound, fc_bound);
  expect_uniform_over(resnet, "fc.bias", -0.05f, 0.05f);
  expect_uniform_over(resnet, "bn1.weight", 0.9f, 1.1f);
  expect_uniform_over(resnet, "bn1.bias", -0.1f, 0.1f);
  expect_uniform_over(resnet, "bn1.running_mean", -0.1f, 0.1f);
  expect_uniform_over(resnet, "bn1.running_var", 0.9f, 1.1f);
  expect_uniform_over(resnet, "layer1.0.bn1.weight", 0.9f, 1.1f);
  expect_uniform_over(resnet, "layer1.0.bn2.weight", 0.1f, 0.3f);  // end of the residual branch
  expect_uniform_over(resnet, "layer2.0.downsample.1.weight", 0.9f, 1.1f);

  const Graph mobilenet = build_model("mobilenet_v2", o);
  expect_uniform_over(mobilenet, "features.3.conv.3.weight", 0.1f, 0.3f);  // residual block
  expect_uniform_over(mobilenet, "features.2.conv.3.weight", 0.9f, 1.1f);  // stride 2: no residual
  const float dw_bound = std::sqrt(6.0f / 9);
  expect_uniform_over(mobilenet, "features.2.conv.1.0.weight", -dw_bound, dw_bound);

  const Graph bert = build_model("tiny_bert", o);
  for (const char* name : {"encoder.layer.0.attention.self.query.weight", "embeddings.word_embeddings.weight"}) {
    const auto d = bert.weights().at(name).as<float>();
    double sum = 0, sq = 0;
    for (float x : d) {
      sum += x;
      sq += static_cast<double>(x) * x;
    }
    const double mean = sum / static_cast<double>(d.size());
    const double stddev = std::sqrt(sq / static_cast<double>(d.size()) - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.002) << name;
    EXPECT_NEAR(stddev, 0.02, 0.002) << name;
  }
  for (float x : bert.weights().at("encoder.layer.1.output.LayerNorm.weight").as<float>()) ASSERT_EQ(x, 1.0f);
  for (float x : bert.weights().at("encoder.layer.1.output.LayerNorm.bias").as<float>()) ASSERT_EQ(x, 0.0f);
}

}  // namespace
}  // namespace atl
