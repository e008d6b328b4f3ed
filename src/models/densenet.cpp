// torchvision DenseNet-201: growth 32, blocks (6, 12, 48, 32), bn_size 4, 64 initial features.
#include "models/builder.h"

namespace atl::models {

namespace {

constexpr int64_t kGrowth = 32;
constexpr int64_t kBottleneckWidth = 4 * kGrowth;  // bn_size * growth_rate

// Pre-activation layer: BN-ReLU-Conv1x1-BN-ReLU-Conv3x3 on the concatenation of all earlier
// features of the block (torchvision concatenates the list afresh in every layer).
ValueId dense_layer(Builder& b, const std::vector<ValueId>& features, const std::string& layer) {
  ValueId x = features.size() == 1 ? features[0] : b.concat(features, layer + ".cat");
  x = b.relu(b.batch_norm(x, layer + ".norm1"), layer + ".relu1");
  x = b.conv(x, layer + ".conv1", conv_spec(kBottleneckWidth, 1));
  x = b.relu(b.batch_norm(x, layer + ".norm2"), layer + ".relu2");
  return b.conv(x, layer + ".conv2", conv_spec(kGrowth, 3, 1, 1));
}

ValueId transition(Builder& b, ValueId x, const std::string& module) {
  x = b.relu(b.batch_norm(x, module + ".norm"), module + ".relu");
  x = b.conv(x, module + ".conv", conv_spec(b.shape(x)[1] / 2, 1));
  return b.avg_pool(x, module + ".pool", 2, 2, 0, /*count_include_pad=*/true);
}

}  // namespace

Graph build_densenet201(const ModelOptions& opts) {
  constexpr int kBlockLayers[] = {6, 12, 48, 32};
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 224, 224});
  x = b.conv(x, "features.conv0", conv_spec(64, 7, 2, 3));
  x = b.relu(b.batch_norm(x, "features.norm0"), "features.relu0");
  x = b.max_pool(x, "features.pool0", 3, 2, 1);
  for (int block = 1; block <= 4; ++block) {
    const std::string prefix = fmt::format("features.denseblock{}", block);
    std::vector<ValueId> features{x};
    for (int layer = 1; layer <= kBlockLayers[block - 1]; ++layer) {
      features.push_back(dense_layer(b, features, fmt::format("{}.denselayer{}", prefix, layer)));
    }
    x = b.concat(features, prefix);
    if (block < 4) x = transition(b, x, fmt::format("features.transition{}", block));
  }
  x = b.relu(b.batch_norm(x, "features.norm5"), "relu");
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  b.output(b.linear(x, "classifier", 1000, LinearInit::kHeUniform, "logits"));
  return g;
}

}  // namespace atl::models
