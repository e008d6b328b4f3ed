#include "models/zoo.h"

#include <fmt/ranges.h>

#include "core/error.h"
#include "models/builder.h"

namespace atl {

namespace {

struct ZooEntry {
  ModelInfo info;
  Graph (*build)(const ModelOptions&);
};

constexpr const char* kImage224 = "input f32 [B,3,224,224]";
constexpr const char* kBertInputs = "input_ids i64 [B,S], token_type_ids i64 [B,S]";

const std::vector<ZooEntry>& registry() {
  static const std::vector<ZooEntry> entries = {
      {{"resnet18", "ResNet-18 (torchvision), 11.7M parameters", kImage224},
       [](const ModelOptions& o) { return models::build_resnet(18, o); }},
      {{"resnet50", "ResNet-50 (torchvision), 25.6M parameters", kImage224},
       [](const ModelOptions& o) { return models::build_resnet(50, o); }},
      {{"resnet152", "ResNet-152 (torchvision), 60.2M parameters", kImage224},
       [](const ModelOptions& o) { return models::build_resnet(152, o); }},
      {{"vgg19", "VGG-19 without BatchNorm (torchvision), 143.7M parameters", kImage224}, models::build_vgg19},
      {{"densenet201", "DenseNet-201 (torchvision), 20.0M parameters", kImage224}, models::build_densenet201},
      {{"inception_v3", "Inception-v3 without auxiliary classifier (torchvision), 23.8M parameters",
        "input f32 [B,3,299,299]"},
       models::build_inception_v3},
      {{"mobilenet_v2", "MobileNet-v2 width 1.0 (torchvision), 3.5M parameters", kImage224},
       models::build_mobilenet_v2},
      {{"bert_base", "BERT-base uncased encoder with pooler (HuggingFace BertModel), 109.5M parameters", kBertInputs},
       models::build_bert_base},
      {{"distilbert", "DistilBERT-base encoder (HuggingFace DistilBertModel), 66.4M parameters", "input_ids i64 [B,S]"},
       models::build_distilbert},
      {{"tiny_cnn", "Test CNN: conv/BN/residual/depthwise/concat/pools, 10 classes", "input f32 [B,3,32,32]"},
       models::build_tiny_cnn},
      {{"tiny_vgg", "Test VGG: two conv stages, flatten of a 4x4 map, 10 classes", "input f32 [B,3,16,16]"},
       models::build_tiny_vgg},
      {{"tiny_bert", "Test BERT: 2 layers, hidden 64, 4 heads, vocabulary 100, with pooler",
        "input_ids i64 [B,S], token_type_ids i64 [B,S]; S capped at 64"},
       models::build_tiny_bert},
  };
  return entries;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<ModelInfo> list_models() {
  std::vector<ModelInfo> out;
  for (const ZooEntry& e : registry()) out.push_back(e.info);
  return out;
}

std::string default_model() {
  return "resnet50";
}

Graph build_model(const std::string& name, const ModelOptions& opts) {
  ATOLL_CHECK(opts.batch >= 1, kInvalidArgument, "batch must be at least 1, got {}", opts.batch);
  ATOLL_CHECK(opts.seq_len >= 1 && opts.seq_len <= 512, kInvalidArgument, "seq_len must be in 1..512, got {}",
              opts.seq_len);
  std::vector<std::string> names;
  for (const ZooEntry& e : registry()) {
    if (e.info.name != name) {
      names.push_back(e.info.name);
      continue;
    }
    Graph g = e.build(opts);
    g.set_name(name);
    if (opts.init_weights) g.init_weights(opts.seed);
    return g;
  }
  ATOLL_THROW(kNotFound, "unknown model '{}'; valid models: {}", name, fmt::join(names, ", "));
}

int64_t model_param_count(const Graph& g) {
  int64_t n = 0;
  for (const Value& v : g.values()) {
    if (v.kind == ValueKind::kWeight && !ends_with(v.name, ".running_mean") && !ends_with(v.name, ".running_var")) {
      n += v.shape.numel();
    }
  }
  return n;
}

}  // namespace atl
