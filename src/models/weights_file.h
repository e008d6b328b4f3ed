#pragma once
// safetensors files <-> WeightStore, so weights exported from PyTorch / HuggingFace
// (`safetensors.torch.save_file(model.state_dict(), path)`) load by name with Graph::load_weights.
#include <string>

#include "ir/graph.h"

namespace atl {

// Reads every tensor of a safetensors file. Float tensors (F32, F16, BF16, F64) become f32 and
// integer tensors (I64, I32) become i64, as the WeightStore holds them. Throws kNotFound for a
// missing file and kParse, naming the file and the problem, for a malformed one.
WeightStore read_safetensors(const std::string& path);

// Writes the store as safetensors; each tensor keeps its dtype (f32 F32, f16 F16, i32 I32, i64 I64).
// Throws kIo when the file cannot be written.
void write_safetensors(const std::string& path, const WeightStore& store);

}  // namespace atl
