#pragma once
// safetensors files <-> WeightStore, so weights exported from PyTorch / HuggingFace
// (`safetensors.torch.save_file(model.state_dict(), path)`) load by name with Graph::load_weights.
#include <string>
#include <vector>

#include "ir/graph.h"

namespace atl {

// Reads every tensor of a safetensors file. Float tensors (F32, F16, BF16, F64) become f32 and
// integer tensors (I64, I32) become i64, as the WeightStore holds them. Throws kNotFound for a
// missing file and kParse, naming the file and the problem, for a malformed one (including
// tensors that share bytes and a name given twice).
WeightStore read_safetensors(const std::string& path);

// Writes the store as safetensors; each tensor keeps its dtype (f32 F32, f16 F16, i32 I32, i64 I64).
// Throws kIo when the file cannot be written.
void write_safetensors(const std::string& path, const WeightStore& store);

struct WeightsFileOptions {
  bool allow_partial = false;  // model weights the file lacks keep their seeded values
  bool allow_extra = false;    // file tensors that name no model weight are skipped
};

struct WeightsFileReport {
  int loaded = 0;
  std::vector<std::string> left_seeded;  // model weights the file lacks (allow_partial)
  std::vector<std::string> unused;       // file tensors naming no weight (allow_extra)
};

// Replaces the graph's weights with a safetensors file's, which must name every model weight
// exactly once (as `name`, or `prefix.name` as wrapper-module checkpoints write it) with a float
// tensor of its shape. PyTorch buffers without a use at inference (`*.num_batches_tracked`,
// `*.position_ids`) are skipped. Throws kInvalidArgument naming the file and the weights missing,
// named twice or unknown, unless the options allow the first or the last.
WeightsFileReport load_weights_file(Graph& g, const std::string& path, const WeightsFileOptions& options = {});

}  // namespace atl
