#pragma once
// ONNX import: a ModelProto (opset 13 and later) becomes an IR Graph whose WeightStore holds the
// initializers. Shape computations are folded into constants at import, a symbolic first input
// dimension becomes the batch, and anything the IR cannot express fails with one atl::Error
// naming the node, its op and why.
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "ir/graph.h"

namespace atl {

struct OnnxImportOptions {
  int64_t batch = 1;                      // the value of a symbolic first input dimension
  std::map<std::string, int64_t> dims;    // values of other symbolic dimensions, by dim_param name
  // Graph inputs given fixed values at import: they become constants (folded, or weights), as a
  // shape tensor or a weight fed as an input must be for the IR's static shapes.
  std::map<std::string, Tensor> constant_inputs;
};

// Reads `path`; external initializer data resolves relative to the file's folder.
Graph import_onnx_file(const std::string& path, const OnnxImportOptions& options = {});

// Parses an in-memory model (the fuzzer's entry point). External data resolves against `model_dir`.
Graph import_onnx_bytes(std::string_view bytes, const std::string& model_dir, const OnnxImportOptions& options = {});

// True when `model` names an ONNX file (by its .onnx extension) rather than a zoo model.
bool is_onnx_path(std::string_view model);

}  // namespace atl
