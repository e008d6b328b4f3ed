// The ONNX import driver: parse, check the opsets, declare inputs and initializers, convert nodes
// in order (folding constants on the way), mark outputs, fuse the exported GELU pattern.
#include <google/protobuf/io/coded_stream.h>
#include <onnx/defs/schema.h>

#include <fstream>
#include <sstream>

#include "core/error.h"
#include "onnx/gelu_fusion.h"
#include "onnx/import_context.h"
#include "onnx/onnx_import.h"

namespace atl {

namespace onnx_detail {

const std::map<std::string, OpImporter>& op_importers() {
  static const std::map<std::string, OpImporter> table = [] {
    std::map<std::string, OpImporter> t;
    register_math_importers(t);
    register_nn_importers(t);
    register_shape_importers(t);
    return t;
  }();
  return table;
}

namespace {

constexpr int64_t kMinOpset = 13;
constexpr int64_t kMaxInputElements = int64_t{1} << 31;  // 8 GiB of f32: beyond any request

int64_t default_domain_opset(const ::onnx::ModelProto& model) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import()) {
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  }
  ATOLL_CHECK(opset >= 1 && opset <= 1000, kUnsupported,
              "the model imports no valid version of the default ONNX operator set");
  return opset;
}

// The importer implements each op as defined from opset 13 on. A model of an older opset still
// imports where the definition in effect for it is the one opset 13 has (Relu, Conv, ... have not
// changed since); the ONNX library's schema registry says which definition is in effect.
void check_op_version(const ::onnx::NodeProto& node, int64_t model_opset) {
  if (model_opset >= kMinOpset) return;
  const auto* in_effect = ::onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(model_opset));
  const auto* supported = ::onnx::OpSchemaRegistry::Schema(node.op_type(), static_cast<int>(kMinOpset));
  ATOLL_CHECK(in_effect != nullptr, kUnsupported, "{} is not an op of ONNX opset {}", node.op_type(), model_opset);
  ATOLL_CHECK(supported != nullptr && in_effect->since_version() == supported->since_version(), kUnsupported,
              "the model's opset {} defines {}-{}; atoll imports the definitions of opset {} and later", model_opset,
              node.op_type(), in_effect->since_version(), kMinOpset);
}

// The static shape of a graph input: a symbolic first dimension is the batch, other symbolic
// ones take their value from options.dims.
Shape input_shape(const ::onnx::ValueInfoProto& in, const OnnxImportOptions& options, bool* batch_is_symbolic) {
  ATOLL_CHECK(in.type().has_tensor_type() && in.type().tensor_type().has_shape(), kUnsupported,
              "input '{}' has no tensor shape", in.name());
  std::vector<int64_t> dims;
  const auto& shape = in.type().tensor_type().shape();
  for (int d = 0; d < shape.dim_size(); ++d) {
    const auto& dim = shape.dim(d);
    if (dim.has_dim_value()) {
      const int64_t v = dim.dim_value();
      ATOLL_CHECK(v > 0 && v <= kMaxInputElements, kUnsupported, "input '{}' has dimension {} = {}", in.name(), d, v);
      dims.push_back(v);
      continue;
    }
    if (auto it = options.dims.find(dim.dim_param()); it != options.dims.end() && !dim.dim_param().empty()) {
      dims.push_back(it->second);
    } else if (d == 0) {
      dims.push_back(options.batch);
      *batch_is_symbolic = true;
    } else {
      ATOLL_THROW(kUnsupported,
                  "input '{}' has a dynamic dimension {} ('{}'); only the first (batch) dimension may be dynamic "
                  "unless its value is given",
                  in.name(), d, dim.dim_param());
    }
  }
  checked_numel(dims, fmt::format("input '{}'", in.name()), kMaxInputElements);
  return Shape(dims);
}

void declare_inputs(const ::onnx::GraphProto& graph, const OnnxImportOptions& options, ImportContext& ctx,
                    Graph& g) {
  for (const auto& init : graph.initializer()) {
    ATOLL_CHECK(!ctx.knows(init.name()), kInvalidArgument, "initializer '{}' is defined twice", init.name());
    ctx.define_const(init.name(), tensor_from_proto(init, ctx.model_dir()));
  }
  bool batch_is_symbolic = false;
  for (const auto& in : graph.input()) {
    if (ctx.find_const(in.name())) continue;  // older exporters list initializers as inputs too
    ATOLL_CHECK(!ctx.knows(in.name()), kInvalidArgument, "input '{}' is defined twice", in.name());
    if (auto it = options.constant_inputs.find(in.name()); it != options.constant_inputs.end()) {
      const DType held = is_float(it->second.dtype()) ? DType::kF32 : DType::kI64;
      ctx.define_const(in.name(), it->second.to(held));
      continue;
    }
    const int32_t type = in.type().tensor_type().elem_type();
    const auto dtype = input_dtype(type);
    ATOLL_CHECK(dtype.has_value(), kUnsupported,
                "input '{}' has element type {}; supported: FLOAT, FLOAT16, INT32, INT64", in.name(),
                onnx_type_name(type));
    ctx.define_value(in.name(), g.add_input(in.name(), *dtype, input_shape(in, options, &batch_is_symbolic)));
  }
  ATOLL_CHECK(batch_is_symbolic || options.batch == 1, kUnsupported,
              "no input has a symbolic batch dimension: the model runs only at the batch its shapes fix, not {}",
              options.batch);
}

std::map<std::string, int> count_uses(const ::onnx::GraphProto& graph) {
  std::map<std::string, int> uses;
  for (const auto& node : graph.node()) {
    for (const auto& name : node.input()) ++uses[name];
  }
  for (const auto& out : graph.output()) ++uses[out.name()];
  return uses;
}

void convert_node(const ::onnx::NodeProto& node, int64_t model_opset, ImportContext& ctx) {
  ctx.begin_node(node);
  try {
    ATOLL_CHECK(node.domain().empty() || node.domain() == "ai.onnx", kUnsupported,
                "operator domain '{}' is not supported", node.domain());
    check_op_version(node, model_opset);
    for (int i = 0; i < node.input_size(); ++i) {
      ATOLL_CHECK(node.input(i).empty() || ctx.knows(node.input(i)), kInvalidArgument,
                  "input '{}' is not produced by any earlier node (the graph is not in topological order)",
                  node.input(i));
    }
    const NodeAttrs attrs(node);
    bool all_const = node.input_size() > 0;
    for (int i = 0; i < node.input_size(); ++i) all_const &= !ctx.has_input(i) || ctx.is_const(i);
    if (all_const && fold_constant_node(ctx, attrs)) return;
    const auto& table = op_importers();
    auto it = table.find(node.op_type());
    ATOLL_CHECK(it != table.end(), kUnsupported, "op {} is not supported", node.op_type());
    it->second(ctx, attrs);
    for (int i = 0; i < node.output_size(); ++i) {
      ATOLL_CHECK(node.output(i).empty() || ctx.knows(node.output(i)) || !ctx.output_used(i), kUnsupported,
                  "output {} ('{}') is not supported", i, node.output(i));
    }
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("ONNX node '{}' ({}): {}", node.name(), node.op_type(), e.message()), e.file(),
                e.line());
  }
}

// A graph output must be computed by a kernel: an output that is an input or a weight, or a
// reshape of one, gets a copy (a product with one) so the Program has something to write it.
ValueId computed_output(Graph& g, ValueId v, const std::string& name) {
  ValueId root = v;  // reshapes compile to views of their input: look through them
  while (g.value(root).producer >= 0 && g.node(g.value(root).producer).op == OpKind::kReshape) {
    root = g.node(g.value(root).producer).inputs[0];
  }
  if (g.value(root).kind == ValueKind::kActivation) return v;
  ATOLL_CHECK(is_float(g.value(v).dtype), kUnsupported, "output '{}' is an integer input passed through unchanged",
              name);
  Tensor one(DType::kF32, Shape{1});
  one.as<float>()[0] = 1.0f;
  const ValueId w = g.add_weight(name + "#one", Shape{1}, WeightInit{}, DType::kF32);
  g.weights()[g.value(w).name] = one;
  return g.add(OpKind::kMul, name + "#copy", {v, w});
}

void mark_outputs(const ::onnx::GraphProto& graph, ImportContext& ctx, Graph& g) {
  ATOLL_CHECK(graph.output_size() > 0, kInvalidArgument, "the graph has no outputs");
  for (const auto& out : graph.output()) {
    ATOLL_CHECK(ctx.knows(out.name()), kInvalidArgument, "output '{}' is produced by no node", out.name());
    ATOLL_CHECK(!ctx.find_const(out.name()), kUnsupported,
                "output '{}' is a constant (it folds at import); atoll models compute their outputs", out.name());
    g.mark_output(computed_output(g, ctx.value_of(out.name()), out.name()));
  }
}

}  // namespace

}  // namespace onnx_detail

bool is_onnx_path(std::string_view model) { return model.size() > 5 && model.substr(model.size() - 5) == ".onnx"; }

Graph import_onnx_bytes(std::string_view bytes, const std::string& model_dir, const OnnxImportOptions& options) {
  using namespace onnx_detail;
  ATOLL_CHECK(options.batch >= 1, kInvalidArgument, "batch must be at least 1, is {}", options.batch);
  ::onnx::ModelProto model;
  google::protobuf::io::CodedInputStream stream(reinterpret_cast<const uint8_t*>(bytes.data()),
                                                static_cast<int>(std::min<size_t>(bytes.size(), INT32_MAX)));
  ATOLL_CHECK(bytes.size() <= INT32_MAX && model.ParseFromCodedStream(&stream) && stream.ConsumedEntireMessage(),
              kParse, "not an ONNX model: the protobuf does not parse (truncated or corrupt file)");
  ATOLL_CHECK(model.has_graph(), kParse, "not an ONNX model: it has no graph");
  const int64_t opset = default_domain_opset(model);
  const ::onnx::GraphProto& graph = model.graph();
  Graph g(graph.name().empty() ? std::string("onnx_model") : graph.name());
  ImportContext ctx(g, model_dir, std::max(opset, kMinOpset));  // older opsets pass check_op_version
  ctx.set_used(count_uses(graph));
  declare_inputs(graph, options, ctx, g);
  ATOLL_CHECK(!g.inputs().empty(), kUnsupported, "the graph has no inputs");
  for (const auto& node : graph.node()) convert_node(node, opset, ctx);
  mark_outputs(graph, ctx, g);
  fuse_exported_gelu(g);
  g.validate();
  return g;
}

Graph import_onnx_file(const std::string& path, const OnnxImportOptions& options) {
  std::ifstream in(path, std::ios::binary);
  ATOLL_CHECK(in, kNotFound, "cannot open ONNX model '{}'", path);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  ATOLL_CHECK(in.good() || in.eof(), kIo, "reading '{}' failed", path);
  const std::string dir = std::filesystem::path(path).parent_path().string();
  try {
    return import_onnx_bytes(bytes.str(), dir.empty() ? "." : dir, options);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("'{}': {}", path, e.message()), e.file(), e.line());
  }
}

}  // namespace atl
