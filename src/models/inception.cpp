// torchvision Inception-v3 for inference: 299x299 input, no auxiliary classifier, no input
// transform (transform_input=False; callers normalize the image themselves).
#include "models/builder.h"

namespace atl::models {

namespace {

// BasicConv2d: convolution without bias, BatchNorm(eps 0.001), ReLU.
ValueId basic(Builder& b, ValueId x, const std::string& module, const ConvSpec& spec) {
  x = b.conv(x, module + ".conv", spec);
  return b.relu(b.batch_norm(x, module + ".bn", 1e-3), module + ".relu");
}

ValueId basic(Builder& b, ValueId x, const std::string& module, int64_t out, int64_t kernel, int64_t stride = 1,
              int64_t pad = 0) {
  return basic(b, x, module, conv_spec(out, kernel, stride, pad));
}

// 1x7 (or 7x1, 1x3, 3x1) convolution with "same" padding.
ConvSpec rect(int64_t out, int64_t kh, int64_t kw) {
  return ConvSpec{out, kh, kw, 1, kh / 2, kw / 2};
}

ValueId pool_branch(Builder& b, ValueId x, const std::string& m, int64_t out) {
  const ValueId pooled = b.avg_pool(x, m + ".branch_pool.avgpool", 3, 1, 1, /*count_include_pad=*/true);
  return basic(b, pooled, m + ".branch_pool", out, 1);
}

ValueId inception_a(Builder& b, ValueId x, const std::string& m, int64_t pool_features) {
  const ValueId b1 = basic(b, x, m + ".branch1x1", 64, 1);
  ValueId b5 = basic(b, x, m + ".branch5x5_1", 48, 1);
  b5 = basic(b, b5, m + ".branch5x5_2", 64, 5, 1, 2);
  ValueId b3 = basic(b, x, m + ".branch3x3dbl_1", 64, 1);
  b3 = basic(b, b3, m + ".branch3x3dbl_2", 96, 3, 1, 1);
  b3 = basic(b, b3, m + ".branch3x3dbl_3", 96, 3, 1, 1);
  return b.concat({b1, b5, b3, pool_branch(b, x, m, pool_features)}, m);
}

ValueId inception_b(Builder& b, ValueId x, const std::string& m) {
  const ValueId b3 = basic(b, x, m + ".branch3x3", 384, 3, 2);
  ValueId bd = basic(b, x, m + ".branch3x3dbl_1", 64, 1);
  bd = basic(b, bd, m + ".branch3x3dbl_2", 96, 3, 1, 1);
  bd = basic(b, bd, m + ".branch3x3dbl_3", 96, 3, 2);
  const ValueId bp = b.max_pool(x, m + ".branch_pool", 3, 2);
  return b.concat({b3, bd, bp}, m);
}

ValueId inception_c(Builder& b, ValueId x, const std::string& m, int64_t c7) {
  const ValueId b1 = basic(b, x, m + ".branch1x1", 192, 1);
  ValueId b7 = basic(b, x, m + ".branch7x7_1", c7, 1);
  b7 = basic(b, b7, m + ".branch7x7_2", rect(c7, 1, 7));
  b7 = basic(b, b7, m + ".branch7x7_3", rect(192, 7, 1));
  ValueId bd = basic(b, x, m + ".branch7x7dbl_1", c7, 1);
  bd = basic(b, bd, m + ".branch7x7dbl_2", rect(c7, 7, 1));
  bd = basic(b, bd, m + ".branch7x7dbl_3", rect(c7, 1, 7));
  bd = basic(b, bd, m + ".branch7x7dbl_4", rect(c7, 7, 1));
  bd = basic(b, bd, m + ".branch7x7dbl_5", rect(192, 1, 7));
  return b.concat({b1, b7, bd, pool_branch(b, x, m, 192)}, m);
}

ValueId inception_d(Builder& b, ValueId x, const std::string& m) {
  ValueId b3 = basic(b, x, m + ".branch3x3_1", 192, 1);
  b3 = basic(b, b3, m + ".branch3x3_2", 320, 3, 2);
  ValueId b7 = basic(b, x, m + ".branch7x7x3_1", 192, 1);
  b7 = basic(b, b7, m + ".branch7x7x3_2", rect(192, 1, 7));
  b7 = basic(b, b7, m + ".branch7x7x3_3", rect(192, 7, 1));
  b7 = basic(b, b7, m + ".branch7x7x3_4", 192, 3, 2);
  const ValueId bp = b.max_pool(x, m + ".branch_pool", 3, 2);
  return b.concat({b3, b7, bp}, m);
}

ValueId inception_e(Builder& b, ValueId x, const std::string& m) {
  const ValueId b1 = basic(b, x, m + ".branch1x1", 320, 1);
  const ValueId b3 = basic(b, x, m + ".branch3x3_1", 384, 1);
  const ValueId b3_cat =
      b.concat({basic(b, b3, m + ".branch3x3_2a", rect(384, 1, 3)), basic(b, b3, m + ".branch3x3_2b", rect(384, 3, 1))},
               m + ".branch3x3");
  ValueId bd = basic(b, x, m + ".branch3x3dbl_1", 448, 1);
  bd = basic(b, bd, m + ".branch3x3dbl_2", 384, 3, 1, 1);
  const ValueId bd_cat = b.concat(
      {basic(b, bd, m + ".branch3x3dbl_3a", rect(384, 1, 3)), basic(b, bd, m + ".branch3x3dbl_3b", rect(384, 3, 1))},
      m + ".branch3x3dbl");
  return b.concat({b1, b3_cat, bd_cat, pool_branch(b, x, m, 192)}, m);
}

}  // namespace

Graph build_inception_v3(const ModelOptions& opts) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 299, 299});
  x = basic(b, x, "Conv2d_1a_3x3", 32, 3, 2);
  x = basic(b, x, "Conv2d_2a_3x3", 32, 3);
  x = basic(b, x, "Conv2d_2b_3x3", 64, 3, 1, 1);
  x = b.max_pool(x, "maxpool1", 3, 2);
  x = basic(b, x, "Conv2d_3b_1x1", 80, 1);
  x = basic(b, x, "Conv2d_4a_3x3", 192, 3);
  x = b.max_pool(x, "maxpool2", 3, 2);
  x = inception_a(b, x, "Mixed_5b", 32);
  x = inception_a(b, x, "Mixed_5c", 64);
  x = inception_a(b, x, "Mixed_5d", 64);
  x = inception_b(b, x, "Mixed_6a");
  x = inception_c(b, x, "Mixed_6b", 128);
  x = inception_c(b, x, "Mixed_6c", 160);
  x = inception_c(b, x, "Mixed_6d", 160);
  x = inception_c(b, x, "Mixed_6e", 192);
  x = inception_d(b, x, "Mixed_7a");
  x = inception_e(b, x, "Mixed_7b");
  x = inception_e(b, x, "Mixed_7c");
  x = b.flatten(b.dropout(b.global_avg_pool(x, "avgpool"), "dropout"), "flatten");
  b.output(b.linear(x, "fc", 1000, LinearInit::kHeUniform, "logits"));
  return g;
}

}  // namespace atl::models
