#pragma once
// Internal to the zoo: terse graph-building helpers and the per-family builders.
// Weight names follow the torchvision / HuggingFace state_dict; node names follow module paths.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "models/zoo.h"

namespace atl::models {

struct ConvSpec {
  int64_t out_channels = 0;
  int64_t kernel_h = 1, kernel_w = 1;
  int64_t stride = 1;  // same on both axes (true of every zoo model)
  int64_t pad_h = 0, pad_w = 0;
  int64_t group = 1;
  bool bias = false;
};

// Square kernel, symmetric padding.
inline ConvSpec conv_spec(int64_t out_channels, int64_t kernel, int64_t stride = 1, int64_t pad = 0, int64_t group = 1,
                          bool bias = false) {
  return ConvSpec{out_channels, kernel, kernel, stride, pad, pad, group, bias};
}

// The last BatchNorm on a residual branch starts with a small gamma so that activations of deep
// residual nets stay within fp16 range under random weights.
enum class BnRole { kPlain, kResidualBranchEnd };

// He uniform for CNN classifiers; normal(0, 0.02) as BERT initializes its linear layers.
enum class LinearInit { kHeUniform, kBert };

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}

  const Shape& shape(ValueId v) const { return g_.value(v).shape; }

  ValueId input(const std::string& name, DType dtype, Shape shape) {
    return g_.add_input(name, dtype, std::move(shape));
  }
  void output(ValueId v) { g_.mark_output(v); }

  // Weights "<module>.weight" [O, I/g, kh, kw] and, with spec.bias, "<module>.bias".
  ValueId conv(ValueId x, const std::string& module, const ConvSpec& spec);
  // Weights "<module>.weight|bias|running_mean|running_var".
  ValueId batch_norm(ValueId x, const std::string& module, double epsilon = 1e-5, BnRole role = BnRole::kPlain);
  // Weights "<module>.weight" [out, in] and "<module>.bias"; node named `node` (default: module).
  ValueId linear(ValueId x, const std::string& module, int64_t out_features, LinearInit init,
                 const std::string& node = "");
  // Weights "<module>.weight|bias" (gamma 1, beta 0); node named `node` (default: module).
  ValueId layer_norm(ValueId x, const std::string& module, double epsilon, const std::string& node = "");
  // Table "<module>.weight" [rows, dim], normal(0, 0.02).
  ValueId embedding_table(const std::string& module, int64_t rows, int64_t dim);

  ValueId relu(ValueId x, const std::string& name) { return g_.add(OpKind::kRelu, name, {x}); }
  ValueId relu6(ValueId x, const std::string& name) { return g_.add(OpKind::kRelu6, name, {x}); }
  ValueId gelu(ValueId x, const std::string& name) { return g_.add(OpKind::kGelu, name, {x}); }
  ValueId tanh(ValueId x, const std::string& name) { return g_.add(OpKind::kTanh, name, {x}); }
  ValueId dropout(ValueId x, const std::string& name) { return g_.add(OpKind::kDropout, name, {x}); }
  ValueId add(ValueId a, ValueId b, const std::string& name) { return g_.add(OpKind::kAdd, name, {a, b}); }
  ValueId concat(std::vector<ValueId> xs, const std::string& name, int64_t axis = 1) {
    return g_.add(OpKind::kConcat, name, std::move(xs), {{"axis", axis}});
  }
  ValueId max_pool(ValueId x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad = 0,
                   bool ceil_mode = false);
  ValueId avg_pool(ValueId x, const std::string& name, int64_t kernel, int64_t stride, int64_t pad,
                   bool count_include_pad);
  ValueId global_avg_pool(ValueId x, const std::string& name) { return g_.add(OpKind::kGlobalAvgPool, name, {x}); }
  ValueId flatten(ValueId x, const std::string& name) {
    return g_.add(OpKind::kFlatten, name, {x}, {{"axis", int64_t{1}}});
  }
  ValueId reshape(ValueId x, const std::string& name, std::vector<int64_t> dims) {
    return g_.add(OpKind::kReshape, name, {x}, {{"shape", std::move(dims)}});
  }
  ValueId transpose(ValueId x, const std::string& name, std::vector<int64_t> perm) {
    return g_.add(OpKind::kTranspose, name, {x}, {{"perm", std::move(perm)}});
  }
  ValueId matmul(ValueId a, ValueId b, const std::string& name, bool trans_b, double alpha) {
    return g_.add(OpKind::kMatMul, name, {a, b}, {{"trans_b", int64_t{trans_b ? 1 : 0}}, {"alpha", alpha}});
  }
  ValueId softmax(ValueId x, const std::string& name) {
    return g_.add(OpKind::kSoftmax, name, {x}, {{"axis", int64_t{-1}}});
  }
  ValueId gather(ValueId table, ValueId indices, const std::string& name) {
    return g_.add(OpKind::kGather, name, {table, indices});
  }
  // x[starts:ends] along the given axes.
  ValueId slice(ValueId x, const std::string& name, std::vector<int64_t> axes, std::vector<int64_t> starts,
                std::vector<int64_t> ends) {
    return g_.add(OpKind::kSlice, name, {x},
                  {{"axes", std::move(axes)}, {"starts", std::move(starts)}, {"ends", std::move(ends)}});
  }

 private:
  Graph& g_;
};

// Family builders: each returns the whole graph, weights declared but not initialized; the zoo names it.
Graph build_resnet(int depth, const ModelOptions& opts);  // 18, 50 or 152
Graph build_vgg19(const ModelOptions& opts);
Graph build_densenet201(const ModelOptions& opts);
Graph build_inception_v3(const ModelOptions& opts);
Graph build_mobilenet_v2(const ModelOptions& opts);

struct BertConfig {
  bool distil = false;  // DistilBERT: no token types, no pooler, its own module names
  int64_t layers = 12;
  int64_t hidden = 768;
  int64_t heads = 12;
  int64_t ffn = 3072;
  int64_t vocab = 30522;
  int64_t max_positions = 512;
  int64_t type_vocab = 2;
  double ln_epsilon = 1e-12;
};
// kInvalidArgument when seq_len exceeds the position table.
Graph build_bert(const BertConfig& cfg, int64_t batch, int64_t seq_len);
Graph build_bert_base(const ModelOptions& opts);
Graph build_distilbert(const ModelOptions& opts);

Graph build_tiny_cnn(const ModelOptions& opts);
Graph build_tiny_vgg(const ModelOptions& opts);
Graph build_tiny_bert(const ModelOptions& opts);

}  // namespace atl::models
