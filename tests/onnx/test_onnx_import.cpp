// The ONNX importer on models built in memory: folding, the symbolic batch, constant lowering,
// GELU fusion, fp16 and external initializers, typed errors, and robustness to corrupt files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "backends/cpu/cpu_backend.h"
#include "compile/compiler.h"
#include "core/half.h"
#include "onnx/onnx_import.h"
#include "onnx_builder.h"

namespace atl {
namespace {

using onnxtest::ModelBuilder;

std::mt19937_64 fresh_rng() {
  const uint64_t seed = std::random_device{}();
  std::cout << "seed " << seed << "\n";
  return std::mt19937_64(seed);
}

Tensor random_tensor(Shape shape, std::mt19937_64& rng) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (float& v : t.as<float>()) v = u(rng);
  return t;
}

std::vector<Tensor> run_cpu(const Graph& g, const std::vector<Tensor>& inputs) {
  auto backend = make_cpu_backend();
  const CompiledModel cm = compile_graph(g, backend->target());
  auto inst = backend->load(cm.program, cm.weights);
  for (size_t i = 0; i < inputs.size(); ++i) inst->set_input(static_cast<int>(i), inputs[i]);
  inst->run();
  std::vector<Tensor> out;
  for (size_t i = 0; i < cm.program.outputs.size(); ++i) out.push_back(inst->get_output(static_cast<int>(i)));
  return out;
}

Graph import(const ModelBuilder& m, int64_t batch = 1) {
  OnnxImportOptions o;
  o.batch = batch;
  return import_onnx_bytes(m.bytes(), ".", o);
}

int count_ops(const Graph& g, OpKind op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op ? 1 : 0;
  return n;
}

// Conv -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> Softmax with a symbolic batch.
ModelBuilder small_cnn() {
  ModelBuilder m;
  m.input("x", {-1, 2, 5, 5}).output("probs");
  m.initializer("w", {3, 2, 3, 3}, std::vector<float>(54, 0.1f));
  m.initializer("b", {3}, {0.1f, -0.2f, 0.3f});
  m.initializer("fc_w", {4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  m.initializer("fc_b", {4}, {0, 1, 0, -1});
  ModelBuilder::ints_attr(m.node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.node("GlobalAveragePool", {"r"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  ModelBuilder::int_attr(m.node("Gemm", {"f", "fc_w", "fc_b"}, {"logits"}), "transB", 1);
  m.node("Softmax", {"logits"}, {"probs"});
  return m;
}

TEST(OnnxImport, FoldsShapeArithmeticIntoOneReshapeAtTheGivenBatch) {
  ModelBuilder m;
  m.input("x", {-1, 4, 6}).output("y");
  onnx::TensorProto& zero = *m.proto().mutable_graph()->add_initializer();  // a scalar index
  zero.set_name("zero");
  zero.set_data_type(onnx::TensorProto::INT64);
  zero.add_int64_data(0);
  m.int_initializer("axes0", {0}).int_initializer("minus_one", {-1});
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "zero"}, {"batch"});
  m.node("Unsqueeze", {"batch", "axes0"}, {"batch1"});
  ModelBuilder::int_attr(m.node("Concat", {"batch1", "minus_one"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  const Graph g = import(m, 3);
  // One Reshape, and the copy that writes an output which would otherwise be a view of the input.
  ASSERT_EQ(g.nodes().size(), 2u);
  EXPECT_EQ(count_ops(g, OpKind::kReshape), 1);
  EXPECT_EQ(count_ops(g, OpKind::kMul), 1);
  EXPECT_EQ(g.value(g.outputs()[0]).shape, Shape({3, 24}));
  auto rng = fresh_rng();
  const Tensor x = random_tensor(Shape{3, 4, 6}, rng);
  const Tensor y = run_cpu(g, {x})[0];
  ASSERT_EQ(y.shape(), Shape({3, 24}));
  for (int64_t i = 0; i < x.numel(); ++i) EXPECT_EQ(y.as<float>()[i], x.as<float>()[i]);
}

TEST(OnnxImport, ArithmeticWithConstantsMatchesTheDefinition) {
  ModelBuilder m;
  m.input("x", {-1, 5}).output("y");
  m.initializer("c", {5}, {0.5f, -1.0f, 2.0f, 0.0f, 3.0f});
  m.initializer("d", {1}, {4.0f});
  m.initializer("two", {}, {2.0f});
  m.node("Sub", {"x", "c"}, {"s"});       // becomes x + (-c)
  m.node("Div", {"s", "d"}, {"q"});       // becomes s * 0.25
  m.node("Sub", {"d", "q"}, {"r"});       // constant minus computed: a real Sub
  m.node("Pow", {"r", "two"}, {"sq"});    // becomes r * r
  m.node("Div", {"sq", "x"}, {"y"});      // computed / computed
  const Graph g = import(m, 2);
  auto rng = fresh_rng();
  const Tensor x = random_tensor(Shape{2, 5}, rng);
  const Tensor y = run_cpu(g, {x})[0];
  const float c[5] = {0.5f, -1.0f, 2.0f, 0.0f, 3.0f};
  for (int64_t i = 0; i < 10; ++i) {
    const double xv = x.as<float>()[i];
    const double r = 4.0 - (xv - c[i % 5]) / 4.0;
    EXPECT_NEAR(y.as<float>()[i], r * r / xv, 1e-4 * std::abs(r * r / xv)) << i;
  }
}

TEST(OnnxImport, FusesTheExportedErfGeluIntoOneGeluNode) {
  ModelBuilder m;
  m.input("x", {-1, 7}).output("y");
  m.initializer("sqrt2", {}, {1.4142135f});
  m.initializer("one", {}, {1.0f});
  m.initializer("half", {}, {0.5f});
  m.node("Div", {"x", "sqrt2"}, {"scaled"});
  m.node("Erf", {"scaled"}, {"e"});
  m.node("Add", {"e", "one"}, {"e1"});
  m.node("Mul", {"x", "e1"}, {"xe"});
  m.node("Mul", {"xe", "half"}, {"y"});
  const Graph g = import(m, 3);
  EXPECT_EQ(count_ops(g, OpKind::kGelu), 1);
  EXPECT_EQ(count_ops(g, OpKind::kErf), 0);
  EXPECT_EQ(g.nodes().size(), 1u);
  auto rng = fresh_rng();
  const Tensor x = random_tensor(Shape{3, 7}, rng);
  const Tensor y = run_cpu(g, {x})[0];
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.as<float>()[i];
    EXPECT_NEAR(y.as<float>()[i], 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))), 1e-5);
  }
}

TEST(OnnxImport, Fp16InitializersDecodeFromRawDataAndTypedFields) {
  ModelBuilder m;
  m.input("x", {-1, 3}).output("y");
  onnx::TensorProto& raw = m.initializer("a", {3}, {});
  raw.set_data_type(onnx::TensorProto::FLOAT16);
  std::string bytes;
  for (float v : {1.5f, -2.0f, 0.25f}) {
    const uint16_t h = float_to_half_bits(v);
    bytes.append(reinterpret_cast<const char*>(&h), 2);
  }
  raw.set_raw_data(bytes);
  onnx::TensorProto& typed = m.initializer("b", {3}, {});
  typed.set_data_type(onnx::TensorProto::FLOAT16);
  for (float v : {3.0f, 0.5f, -1.0f}) typed.add_int32_data(float_to_half_bits(v));
  m.node("Mul", {"x", "a"}, {"xa"});
  m.node("Add", {"xa", "b"}, {"y"});
  const Graph g = import(m, 1);
  Tensor x(DType::kF32, Shape{1, 3});
  x.as<float>()[0] = 2.0f;
  x.as<float>()[1] = 1.0f;
  x.as<float>()[2] = 4.0f;
  const Tensor y = run_cpu(g, {x})[0];
  EXPECT_FLOAT_EQ(y.as<float>()[0], 2.0f * 1.5f + 3.0f);
  EXPECT_FLOAT_EQ(y.as<float>()[1], 1.0f * -2.0f + 0.5f);
  EXPECT_FLOAT_EQ(y.as<float>()[2], 4.0f * 0.25f - 1.0f);
}

// A Mul by an initializer stored in `file` at `offset` (as written in the model), `length` bytes.
ModelBuilder external_model(const std::string& file, const std::string& offset, int64_t length) {
  ModelBuilder m;
  m.input("x", {-1, 4}).output("y");
  onnx::TensorProto& t = m.initializer("scale", {4}, {});
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [k, v] :
       {std::pair{"location", file}, {"offset", offset}, {"length", std::to_string(length)}}) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
  m.node("Mul", {"x", "scale"}, {"y"});
  return m;
}

TEST(OnnxImport, ExternalDataLoadsRelativeToTheModelWithBoundsChecks) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("atoll_onnx_ext_" + std::to_string(std::random_device{}()));
  std::filesystem::create_directories(dir);
  const float values[6] = {9.0f, 1.0f, 2.0f, 3.0f, 4.0f, 9.0f};
  std::ofstream(dir / "weights.bin", std::ios::binary).write(reinterpret_cast<const char*>(values), sizeof(values));
  const Graph g = import_onnx_bytes(external_model("weights.bin", "4", 16).bytes(), dir.string(), {});
  Tensor x(DType::kF32, Shape{1, 4});
  for (float& v : x.as<float>()) v = 2.0f;
  const Tensor y = run_cpu(g, {x})[0];
  for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.as<float>()[i], 2.0f * values[i + 1]);
  auto expect_parse_error = [&](const ModelBuilder& m, const std::string& why) {
    try {
      import_onnx_bytes(m.bytes(), dir.string(), {});
      ADD_FAILURE() << "imported a model whose external data is bad: " << why;
    } catch (const Error& e) {
      EXPECT_NE(e.message().find(why), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("scale"), std::string::npos) << e.message();
    }
  };
  expect_parse_error(external_model("weights.bin", "12", 16), "beyond the end");
  expect_parse_error(external_model("weights.bin", "0", 12), "needs 16 bytes");
  expect_parse_error(external_model("../weights.bin", "0", 16), "leaves the model's folder");
  expect_parse_error(external_model("missing.bin", "0", 16), "cannot open");
  // Offsets are whole numbers: "4abc" once read as 4.
  for (const char* offset : {"4abc", "", " 4", "4.0", "99999999999999999999"}) {
    expect_parse_error(external_model("weights.bin", offset, 16), "not a whole number");
  }
  std::filesystem::remove_all(dir);
}

void expect_error(const ModelBuilder& m, ErrorCode code, const std::vector<std::string>& mentions) {
  try {
    import(m);
    ADD_FAILURE() << "imported a model it should refuse";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.message();
    for (const std::string& s : mentions) EXPECT_NE(e.message().find(s), std::string::npos) << e.message();
  }
}

TEST(OnnxImport, ErrorsNameTheNodeTheOpAndWhy) {
  ModelBuilder unknown;
  unknown.input("x", {-1, 3}).output("y");
  unknown.node("Foo", {"x"}, {"y"}, "my_node");
  expect_error(unknown, ErrorCode::kUnsupported, {"'my_node'", "(Foo)", "not supported"});

  ModelBuilder old_opset(11);  // Softmax changed in opset 13
  old_opset.input("x", {-1, 3}).output("y");
  old_opset.node("Softmax", {"x"}, {"y"}, "sm");
  expect_error(old_opset, ErrorCode::kUnsupported, {"'sm'", "Softmax", "opset 11", "Softmax-11"});

  ModelBuilder dynamic;
  dynamic.input("x", {-1, -1}, onnx::TensorProto::FLOAT, "seq").output("y");
  dynamic.node("Relu", {"x"}, {"y"});
  expect_error(dynamic, ErrorCode::kUnsupported, {"input 'x'", "dynamic dimension 1", "'seq'"});

  ModelBuilder dtype;
  dtype.input("x", {-1, 3}, onnx::TensorProto::DOUBLE).output("y");
  dtype.node("Relu", {"x"}, {"y"});
  expect_error(dtype, ErrorCode::kUnsupported, {"input 'x'", "DOUBLE"});

  ModelBuilder computed_weight;
  computed_weight.input("x", {-1, 2, 5, 5}).input("w", {3, 2, 3, 3}).output("y");
  computed_weight.node("Conv", {"x", "w"}, {"y"}, "conv1");
  expect_error(computed_weight, ErrorCode::kUnsupported, {"'conv1'", "(Conv)", "'w' must be a constant"});
}

// Constants the importer computes are bounded by the model's own (64 MiB plus four times their
// bytes), checked before they are allocated: fuzz_onnx found a 473-byte file whose folded Expand
// asked for 42 million integers (fuzz/corpus/onnx/regression-expand-folds-320mib.onnx). An Expand to
// 80 MiB is refused from a one-element initializer and imported from a 16 MiB one.
TEST(OnnxImport, ComputedConstantsAreBoundedByTheModelsOwn) {
  constexpr int64_t kWide = int64_t{1} << 22;  // 16 MiB of f32
  const auto expand_model = [&](int64_t held) {
    ModelBuilder m;
    m.input("x", {-1, 5, kWide}).output("y");
    m.initializer("row", {1, held}, std::vector<float>(static_cast<size_t>(held), 0.5f));
    m.int_initializer("target", {5, kWide});
    m.node("Expand", {"row", "target"}, {"rows"}, "widen");
    m.node("Add", {"x", "rows"}, {"y"});
    return m;
  };
  expect_error(expand_model(1), ErrorCode::kUnsupported,
               {"'widen'", "(Expand)", "would take 80 MiB", "64 MiB left for computed constants"});
  const Graph g = import(expand_model(kWide));
  int expanded = 0;
  for (const auto& [name, w] : g.weights()) {
    if (w.shape() != Shape({5, kWide})) continue;
    ++expanded;
    EXPECT_EQ(w.as<float>()[0], 0.5f);
    EXPECT_EQ(w.as<float>()[static_cast<size_t>(w.numel() - 1)], 0.5f);
  }
  EXPECT_EQ(expanded, 1) << "the folded Expand as one weight";

  // A weight the import makes up from the input's shape alone: LayerNormalization's default scale
  // for 2^25 normalized elements (128 MiB) is refused before it is allocated.
  ModelBuilder wide_norm;
  wide_norm.input("x", {-1, int64_t{1} << 25}).output("y");
  wide_norm.node("LayerNormalization", {"x"}, {"y"}, "norm");
  expect_error(wide_norm, ErrorCode::kUnsupported, {"'norm'", "#scale", "128 MiB", "64 MiB allowed"});
}

TEST(OnnxImport, SmallCnnRunsAtAnyBatch) {
  auto rng = fresh_rng();
  for (int64_t batch : {1, 4}) {
    const Graph g = import(small_cnn(), batch);
    const Tensor probs = run_cpu(g, {random_tensor(Shape{batch, 2, 5, 5}, rng)})[0];
    ASSERT_EQ(probs.shape(), Shape({batch, 4}));
    for (int64_t b = 0; b < batch; ++b) {
      double sum = 0;
      for (int64_t k = 0; k < 4; ++k) sum += probs.as<float>()[b * 4 + k];
      EXPECT_NEAR(sum, 1.0, 1e-5);
    }
  }
}

// Every outcome of importing damaged bytes is a model or an atl::Error: never a crash or another
// exception (the sanitizer build runs this too).
void import_survives(const std::string& bytes) {
  try {
    import_onnx_bytes(bytes, "/nonexistent", {});
  } catch (const Error&) {
  }
}

TEST(OnnxImport, TruncatedFilesFailWithAClearError) {
  const std::string bytes = small_cnn().bytes();
  for (size_t len = 0; len < bytes.size(); ++len) {
    try {
      import_onnx_bytes(bytes.substr(0, len), ".", {});
      ADD_FAILURE() << "a model truncated to " << len << " of " << bytes.size() << " bytes imported";
    } catch (const Error& e) {
      EXPECT_TRUE(e.code() == ErrorCode::kParse || e.code() == ErrorCode::kInvalidArgument ||
                  e.code() == ErrorCode::kUnsupported)
          << e.message();
    }
  }
}

TEST(OnnxImport, BitFlippedFilesNeverCrash) {
  const std::string bytes = small_cnn().bytes();
  auto rng = fresh_rng();
  for (int trial = 0; trial < 3000; ++trial) {
    std::string damaged = bytes;
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips) {
      damaged[rng() % damaged.size()] ^= static_cast<char>(1u << (rng() % 8));
    }
    import_survives(damaged);
  }
}

}  // namespace
}  // namespace atl
