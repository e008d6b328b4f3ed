#include "models/builder.h"

#include <cmath>

namespace atl::models {

namespace {

WeightInit uniform(float bound) {
  return {WeightInit::Kind::kUniform, -bound, bound};
}
WeightInit uniform(float lo, float hi) {
  return {WeightInit::Kind::kUniform, lo, hi};
}
WeightInit constant(float value) {
  return {WeightInit::Kind::kConstant, value, 0.0f};
}
constexpr WeightInit kBertNormal{WeightInit::Kind::kNormal, 0.0f, 0.02f};
constexpr float kBiasBound = 0.05f;

// He uniform: variance 2 / fan_in keeps the activation scale through ReLU layers.
WeightInit he_uniform(int64_t fan_in) {
  return uniform(std::sqrt(6.0f / static_cast<float>(fan_in)));
}

std::string node_or_module(const std::string& node, const std::string& module) {
  return node.empty() ? module : node;
}

}  // namespace

ValueId Builder::conv(ValueId x, const std::string& module, const ConvSpec& spec) {
  const int64_t in_per_group = shape(x)[1] / spec.group;
  const ValueId w =
      g_.add_weight(module + ".weight", Shape{spec.out_channels, in_per_group, spec.kernel_h, spec.kernel_w},
                    he_uniform(in_per_group * spec.kernel_h * spec.kernel_w));
  std::vector<ValueId> inputs{x, w};
  if (spec.bias) inputs.push_back(g_.add_weight(module + ".bias", Shape{spec.out_channels}, uniform(kBiasBound)));
  Attrs attrs{{"stride", std::vector<int64_t>{spec.stride, spec.stride}},
              {"pads", std::vector<int64_t>{spec.pad_h, spec.pad_w, spec.pad_h, spec.pad_w}},
              {"dilation", std::vector<int64_t>{1, 1}},
              {"group", spec.group},
              {"bias", int64_t{spec.bias ? 1 : 0}},
              {"act", std::string("none")}};
  return g_.add(OpKind::kConv2d, module, std::move(inputs), std::move(attrs));
}

ValueId Builder::batch_norm(ValueId x, const std::string& module, double epsilon, BnRole role) {
  const Shape c{shape(x)[1]};
  const WeightInit gamma = role == BnRole::kResidualBranchEnd ? uniform(0.1f, 0.3f) : uniform(0.9f, 1.1f);
  const ValueId w = g_.add_weight(module + ".weight", c, gamma);
  const ValueId b = g_.add_weight(module + ".bias", c, uniform(0.1f));
  const ValueId mean = g_.add_weight(module + ".running_mean", c, uniform(0.1f));
  const ValueId var = g_.add_weight(module + ".running_var", c, uniform(0.9f, 1.1f));
  return g_.add(OpKind::kBatchNorm, module, {x, w, b, mean, var}, {{"epsilon", epsilon}});
}

ValueId Builder::linear(ValueId x, const std::string& module, int64_t out_features, LinearInit init,
                        const std::string& node) {
  const int64_t in_features = shape(x).dim(-1);
  const ValueId w = g_.add_weight(module + ".weight", Shape{out_features, in_features},
                                  init == LinearInit::kBert ? kBertNormal : he_uniform(in_features));
  const ValueId b = g_.add_weight(module + ".bias", Shape{out_features}, uniform(kBiasBound));
  return g_.add(OpKind::kGemm, node_or_module(node, module), {x, w, b},
                {{"bias", int64_t{1}}, {"act", std::string("none")}});
}

ValueId Builder::layer_norm(ValueId x, const std::string& module, double epsilon, const std::string& node) {
  const Shape d{shape(x).dim(-1)};
  const ValueId gamma = g_.add_weight(module + ".weight", d, constant(1.0f));
  const ValueId beta = g_.add_weight(module + ".bias", d, constant(0.0f));
  return g_.add(OpKind::kLayerNorm, node_or_module(node, module), {x, gamma, beta}, {{"epsilon", epsilon}});
}

ValueId Builder::embedding_table(const std::string& module, int64_t rows, int64_t dim) {
  return g_.add_weight(module + ".weight", Shape{rows, dim}, kBertNormal);
}

ValueId Builder::max_pool(ValueId x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad,
                          bool ceil_mode) {
  return g_.add(OpKind::kMaxPool, name, {x},
                {{"kernel", std::vector<int64_t>{kernel, kernel}},
                 {"stride", std::vector<int64_t>{stride, stride}},
                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                 {"ceil_mode", int64_t{ceil_mode ? 1 : 0}}});
}

ValueId Builder::avg_pool(ValueId x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad,
                          bool count_include_pad) {
  return g_.add(OpKind::kAvgPool, name, {x},
                {{"kernel", std::vector<int64_t>{kernel, kernel}},
                 {"stride", std::vector<int64_t>{stride, stride}},
                 {"pads", std::vector<int64_t>{pad, pad, pad, pad}},
                 {"ceil_mode", int64_t{0}},
                 {"count_include_pad", int64_t{count_include_pad ? 1 : 0}}});
}

}  // namespace atl::models
