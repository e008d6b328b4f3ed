#pragma once
// The model zoo: reference architectures (torchvision / HuggingFace BERT) built as IR graphs whose
// weight names match the reference state_dicts, so real pretrained weights load by name.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace atl {

struct ModelOptions {
  int64_t batch = 1;
  int64_t seq_len = 128;  // BERT models only; tiny_bert caps it at its 64 positions
  uint64_t seed = 0;
  bool init_weights = true;  // false leaves the WeightStore empty (fast, for structure-only uses)
  std::map<std::string, int64_t> dims;  // imported (ONNX) models: values of symbolic dimensions by name
};

struct ModelInfo {
  std::string name;
  std::string description;
  std::string input_desc;
};

// Zoo order: resnet18 resnet50 resnet152 vgg19 densenet201 inception_v3 mobilenet_v2 bert_base
// distilbert, then the tiny_* test models.
std::vector<ModelInfo> list_models();

// Throws kNotFound (listing the valid names) for an unknown model, kInvalidArgument for
// batch < 1 or seq_len outside 1..512.
Graph build_model(const std::string& name, const ModelOptions& opts);

std::string default_model();  // "resnet50"

// Parameter count as torchvision reports it: every weight except BatchNorm running statistics.
int64_t model_param_count(const Graph& g);

}  // namespace atl
