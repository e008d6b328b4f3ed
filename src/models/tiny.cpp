// Tiny models for fast tests: each covers the op patterns of the big models in milliseconds.
#include <algorithm>

#include "models/builder.h"

namespace atl::models {

// [B,3,32,32] -> [B,10]: conv-BN-ReLU stem, padded max-pool, a residual block, a depthwise conv
// with bias and ReLU6, a 1x1 conv, two concatenated branches, a padded average pool that excludes
// the padding, global average pool, flatten, linear.
Graph build_tiny_cnn(const ModelOptions& opts) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 32, 32});
  x = b.conv(x, "stem.conv", conv_spec(16, 3, 1, 1));
  x = b.relu(b.batch_norm(x, "stem.bn"), "stem.relu");
  x = b.max_pool(x, "stem.pool", 3, 2, 1);

  ValueId y = b.conv(x, "block.conv1", conv_spec(16, 3, 1, 1));
  y = b.relu(b.batch_norm(y, "block.bn1"), "block.relu1");
  y = b.conv(y, "block.conv2", conv_spec(16, 3, 1, 1));
  y = b.batch_norm(y, "block.bn2", 1e-5, BnRole::kResidualBranchEnd);
  x = b.relu(b.add(y, x, "block.add"), "block.relu2");

  x = b.relu6(b.conv(x, "depthwise", conv_spec(16, 3, 2, 1, /*group=*/16, /*bias=*/true)), "depthwise.relu6");
  x = b.conv(x, "pointwise", conv_spec(32, 1, 1, 0, 1, /*bias=*/true));

  const ValueId branch_a = b.relu(b.conv(x, "branch_a.conv", conv_spec(16, 1)), "branch_a.relu");
  ValueId branch_b = b.conv(x, "branch_b.conv", conv_spec(16, 3, 1, 1));
  branch_b = b.relu(b.batch_norm(branch_b, "branch_b.bn"), "branch_b.relu");
  x = b.concat({branch_a, branch_b}, "concat");

  x = b.avg_pool(x, "avgpool", 3, 2, 1, /*count_include_pad=*/false);
  x = b.flatten(b.global_avg_pool(x, "gap"), "flatten");
  b.output(b.linear(x, "fc", 10, LinearInit::kHeUniform, "logits"));
  return g;
}

// [B,3,16,16] -> [B,10]: two conv-ReLU-maxpool stages, then a classifier that flattens a
// [B,16,4,4] map, so a backend storing NHWC must reorder before the first linear layer.
Graph build_tiny_vgg(const ModelOptions& opts) {
  Graph g;
  Builder b(g);
  ValueId x = b.input("input", DType::kF32, Shape{opts.batch, 3, 16, 16});
  x = b.relu(b.conv(x, "features.0", conv_spec(8, 3, 1, 1, 1, /*bias=*/true)), "features.1");
  x = b.max_pool(x, "features.2", 2, 2);
  x = b.relu(b.conv(x, "features.3", conv_spec(16, 3, 1, 1, 1, /*bias=*/true)), "features.4");
  x = b.max_pool(x, "features.5", 2, 2);
  x = b.flatten(x, "flatten");
  x = b.relu(b.linear(x, "classifier.0", 32, LinearInit::kHeUniform), "classifier.1");
  x = b.dropout(x, "classifier.2");
  b.output(b.linear(x, "classifier.3", 10, LinearInit::kHeUniform, "logits"));
  return g;
}

// BERT with pooler: 2 layers, hidden 64, 4 heads, FFN 128, vocabulary 100, 64 positions.
// Longer sequences are capped at 64 so the zoo's default seq_len of 128 still builds.
Graph build_tiny_bert(const ModelOptions& opts) {
  BertConfig cfg;
  cfg.layers = 2;
  cfg.hidden = 64;
  cfg.heads = 4;
  cfg.ffn = 128;
  cfg.vocab = 100;
  cfg.max_positions = 64;
  return build_bert(cfg, opts.batch, std::min(opts.seq_len, cfg.max_positions));
}

}  // namespace atl::models
