// torchvision VGG-19 (configuration "E", no BatchNorm). Node names are the nn.Sequential indices.
#include "core/error.h"
#include "models/builder.h"

namespace atl::models {

Graph build_vgg19(const ModelOptions& opts) {
  constexpr int64_t kPool = 0;  // marks a max-pool in the layer list
  constexpr int64_t kLayers[] = {64,  64,  kPool, 128, 128,   kPool, 256, 256, 256, 256,  kPool,
                                 512, 512, 512,   512, kPool, 512,   512, 512, 512, kPool};
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 224, 224});
  int index = 0;
  for (int64_t channels : kLayers) {
    const std::string module = fmt::format("features.{}", index);
    if (channels == kPool) {
      x = b.max_pool(x, module, 2, 2);
      index += 1;
    } else {
      x = b.conv(x, module, conv_spec(channels, 3, 1, 1, 1, /*bias=*/true));
      x = b.relu(x, fmt::format("features.{}", index + 1));
      index += 2;
    }
  }
  // torchvision's AdaptiveAvgPool2d((7, 7)) is the identity on the 7x7 map a 224 input gives;
  // any other size would need a real adaptive pool, which the IR does not have.
  ATOLL_CHECK(b.shape(x)[2] == 7 && b.shape(x)[3] == 7, kInternal,
              "vgg19: features end at {}, the classifier needs 7x7 (AdaptiveAvgPool2d is not modelled)",
              b.shape(x).str());
  x = b.flatten(x, "flatten");
  x = b.relu(b.linear(x, "classifier.0", 4096, LinearInit::kHeUniform), "classifier.1");
  x = b.dropout(x, "classifier.2");
  x = b.relu(b.linear(x, "classifier.3", 4096, LinearInit::kHeUniform), "classifier.4");
  x = b.dropout(x, "classifier.5");
  b.output(b.linear(x, "classifier.6", 1000, LinearInit::kHeUniform, "logits"));
  return g;
}

}  // namespace atl::models
