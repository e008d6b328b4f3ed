// torchvision MobileNet-v2, width multiplier 1.0. Module paths follow Conv2dNormActivation
// (index 0 conv, 1 BatchNorm, 2 ReLU6) inside each InvertedResidual's "conv" Sequential.
#include "models/builder.h"

namespace atl::models {

namespace {

ValueId conv_bn_relu6(Builder& b, ValueId x, const std::string& module, const ConvSpec& spec) {
  x = b.conv(x, module + ".0", spec);
  return b.relu6(b.batch_norm(x, module + ".1"), module + ".2");
}

ValueId inverted_residual(Builder& b, ValueId x, const std::string& block, int64_t out, int64_t stride,
                          int64_t expand_ratio) {
  const int64_t in = b.shape(x)[1];
  const int64_t hidden = in * expand_ratio;
  const bool residual = stride == 1 && in == out;
  const std::string conv = block + ".conv";
  int index = 0;
  ValueId y = x;
  if (expand_ratio != 1) y = conv_bn_relu6(b, y, fmt::format("{}.{}", conv, index++), conv_spec(hidden, 1));
  y = conv_bn_relu6(b, y, fmt::format("{}.{}", conv, index++), conv_spec(hidden, 3, stride, 1, hidden));
  y = b.conv(y, fmt::format("{}.{}", conv, index++), conv_spec(out, 1));
  y = b.batch_norm(y, fmt::format("{}.{}", conv, index), 1e-5, residual ? BnRole::kResidualBranchEnd : BnRole::kPlain);
  return residual ? b.add(x, y, block + ".add") : y;
}

}  // namespace

Graph build_mobilenet_v2(const ModelOptions& opts) {
  struct Stage {
    int64_t expand_ratio, channels, repeats, stride;
  };
  constexpr Stage kStages[] = {{1, 16, 1, 1}, {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                               {6, 96, 3, 1}, {6, 160, 3, 2}, {6, 320, 1, 1}};
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 224, 224});
  x = conv_bn_relu6(b, x, "features.0", conv_spec(32, 3, 2, 1));
  int index = 1;
  for (const Stage& s : kStages) {
    for (int64_t i = 0; i < s.repeats; ++i) {
      x = inverted_residual(b, x, fmt::format("features.{}", index++), s.channels, i == 0 ? s.stride : 1,
                            s.expand_ratio);
    }
  }
  x = conv_bn_relu6(b, x, fmt::format("features.{}", index), conv_spec(1280, 1));
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  x = b.dropout(x, "classifier.0");
  b.output(b.linear(x, "classifier.1", 1000, LinearInit::kHeUniform, "logits"));
  return g;
}

}  // namespace atl::models
