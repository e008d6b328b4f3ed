// torchvision ResNet (v1.5: the stride sits on the 3x3 convolution of a bottleneck).
#include <array>

#include "core/error.h"
#include "models/builder.h"

namespace atl::models {

namespace {

ValueId downsample_if_needed(Builder& b, ValueId x, const std::string& block, int64_t out_channels, int64_t stride) {
  if (stride == 1 && b.shape(x)[1] == out_channels) return x;
  const ValueId y = b.conv(x, block + ".downsample.0", conv_spec(out_channels, 1, stride));
  return b.batch_norm(y, block + ".downsample.1");
}

ValueId basic_block(Builder& b, ValueId x, const std::string& block, int64_t planes, int64_t stride) {
  ValueId y = b.conv(x, block + ".conv1", conv_spec(planes, 3, stride, 1));
  y = b.relu(b.batch_norm(y, block + ".bn1"), block + ".relu1");
  y = b.conv(y, block + ".conv2", conv_spec(planes, 3, 1, 1));
  y = b.batch_norm(y, block + ".bn2", 1e-5, BnRole::kResidualBranchEnd);
  const ValueId identity = downsample_if_needed(b, x, block, planes, stride);
  return b.relu(b.add(y, identity, block + ".add"), block + ".relu2");
}

ValueId bottleneck(Builder& b, ValueId x, const std::string& block, int64_t planes, int64_t stride) {
  constexpr int64_t kExpansion = 4;
  ValueId y = b.conv(x, block + ".conv1", conv_spec(planes, 1));
  y = b.relu(b.batch_norm(y, block + ".bn1"), block + ".relu1");
  y = b.conv(y, block + ".conv2", conv_spec(planes, 3, stride, 1));
  y = b.relu(b.batch_norm(y, block + ".bn2"), block + ".relu2");
  y = b.conv(y, block + ".conv3", conv_spec(planes * kExpansion, 1));
  y = b.batch_norm(y, block + ".bn3", 1e-5, BnRole::kResidualBranchEnd);
  const ValueId identity = downsample_if_needed(b, x, block, planes * kExpansion, stride);
  return b.relu(b.add(y, identity, block + ".add"), block + ".relu3");
}

}  // namespace

Graph build_resnet(int depth, const ModelOptions& opts) {
  std::array<int, 4> blocks{};
  bool use_bottleneck = true;
  switch (depth) {
    case 18:
      blocks = {2, 2, 2, 2};
      use_bottleneck = false;
      break;
    case 50:
      blocks = {3, 4, 6, 3};
      break;
    case 152:
      blocks = {3, 8, 36, 3};
      break;
    default:
      ATOLL_THROW(kInvalidArgument, "no ResNet of depth {} in the zoo (18, 50 or 152)", depth);
  }
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 224, 224});
  x = b.conv(x, "conv1", conv_spec(64, 7, 2, 3));
  x = b.relu(b.batch_norm(x, "bn1"), "relu");
  x = b.max_pool(x, "maxpool", 3, 2, 1);
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    for (int i = 0; i < blocks[static_cast<size_t>(stage)]; ++i) {
      const std::string block = fmt::format("layer{}.{}", stage + 1, i);
      const int64_t stride = stage > 0 && i == 0 ? 2 : 1;
      x = use_bottleneck ? bottleneck(b, x, block, planes, stride) : basic_block(b, x, block, planes, stride);
    }
  }
  x = b.flatten(b.global_avg_pool(x, "avgpool"), "flatten");
  b.output(b.linear(x, "fc", 1000, LinearInit::kHeUniform, "logits"));
  return g;
}

}  // namespace atl::models
