#pragma once
// ONNX protobuf pieces as atoll values: TensorProto -> host Tensor, element types, node attributes.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "core/tensor.h"

namespace atl::onnx_detail {

// Constants the importer computes (folding, ConstantOfShape, Expand) beyond this many elements are
// refused: a corrupt or hostile file must not make it allocate without bound. Initializers are
// bounded by the bytes the file holds instead.
constexpr int64_t kMaxConstantElements = int64_t{1} << 26;

// The element count of `dims`, refusing negative dimensions and counts past `limit`.
int64_t checked_numel(const std::vector<int64_t>& dims, const std::string& what,
                      int64_t limit = kMaxConstantElements);

// How atoll holds ONNX constants: floating point (f32, f16, f64) as f32; integers and bools as i64.
// Throws kUnsupported for other element types.
DType constant_dtype(int32_t onnx_type, const std::string& what);
// The IR dtype of a graph input of this element type (f32, f16, i32, i64), or nullopt.
std::optional<DType> input_dtype(int32_t onnx_type);
std::string onnx_type_name(int32_t onnx_type);

// Decodes raw_data, the typed fields or external data (a file relative to `model_dir`, bounds checked).
Tensor tensor_from_proto(const ::onnx::TensorProto& t, const std::filesystem::path& model_dir);

// Node attributes by name; a present attribute of the wrong type throws kInvalidArgument.
class NodeAttrs {
 public:
  explicit NodeAttrs(const ::onnx::NodeProto& node) : node_(node) {}
  bool has(const std::string& name) const { return find(name) != nullptr; }
  int64_t get_int(const std::string& name, int64_t def) const;
  float get_float(const std::string& name, float def) const;
  std::string get_string(const std::string& name, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> def) const;
  std::vector<float> get_floats(const std::string& name) const;
  const ::onnx::TensorProto* get_tensor(const std::string& name) const;

 private:
  const ::onnx::AttributeProto* find(const std::string& name) const;
  const ::onnx::AttributeProto& typed(const std::string& name, ::onnx::AttributeProto::AttributeType type) const;
  const ::onnx::NodeProto& node_;
};

}  // namespace atl::onnx_detail
