// safetensors reading and writing: round trips, files laid out byte by byte here (independent of
// the writer), malformed files, and loading a file into a graph by name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/half.h"
#include "error_matchers.h"
#include "models/weights_file.h"
#include "models/zoo.h"

namespace atl {
namespace {

using testing::error_message;
namespace fs = std::filesystem;

class WeightsFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / fmt::format("atl_weights_{}_{}", getpid(), info->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& file) const { return (dir_ / file).string(); }

  // Writes a safetensors file from its parts: 8-byte little-endian header length, header, data.
  std::string write_raw(const std::string& file, const std::string& header, const std::vector<uint8_t>& data,
                        uint64_t header_len_field) const {
    std::ofstream f(path(file), std::ios::binary);
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((header_len_field >> (8 * i)) & 0xff));
    f << header;
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    return path(file);
  }
  std::string write_raw(const std::string& file, const std::string& header, const std::vector<uint8_t>& data) const {
    return write_raw(file, header, data, header.size());
  }

  fs::path dir_;
};

// Little-endian bytes of a value.
template <typename T>
void append(std::vector<uint8_t>& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

Tensor random_f32(Shape shape, std::mt19937& rng) {
  Tensor t(DType::kF32, std::move(shape));
  std::uniform_real_distribution<float> dist(-3.0f, 3.0f);
  for (float& x : t.as<float>()) x = dist(rng);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

TEST_F(WeightsFileTest, RoundTripKeepsNamesShapesAndValues) {
  std::mt19937 rng(std::random_device{}());
  WeightStore store;
  store["layer.0.weight"] = random_f32({3, 5, 2}, rng);
  store["scalar"] = random_f32(Shape{}, rng);
  store["empty"] = Tensor(DType::kF32, {0, 4});
  Tensor ids(DType::kI64, {4});
  ids.as<int64_t>()[0] = -1;
  ids.as<int64_t>()[1] = int64_t{1} << 40;
  ids.as<int64_t>()[2] = std::uniform_int_distribution<int64_t>(0, 30521)(rng);
  ids.as<int64_t>()[3] = 0;
  store["position_ids"] = ids;
  Tensor half(DType::kF16, {3});
  const float half_values[] = {1.5f, -0.000061035156f, 65504.0f};
  for (int i = 0; i < 3; ++i) half.as<uint16_t>()[static_cast<size_t>(i)] = float_to_half_bits(half_values[i]);
  store["half"] = half;
  Tensor small_ints(DType::kI32, {2});
  small_ints.as<int32_t>()[0] = -7;
  small_ints.as<int32_t>()[1] = 123456;
  store["small_ints"] = small_ints;

  const std::string file = path("round_trip.safetensors");
  write_safetensors(file, store);
  const WeightStore back = read_safetensors(file);

  ASSERT_EQ(back.size(), store.size());
  EXPECT_TRUE(same_bytes(back.at("layer.0.weight"), store.at("layer.0.weight")));
  EXPECT_TRUE(same_bytes(back.at("scalar"), store.at("scalar")));
  EXPECT_EQ(back.at("empty").shape(), Shape({0, 4}));
  EXPECT_TRUE(same_bytes(back.at("position_ids"), ids));
  // f16 and i32 come back widened to the WeightStore's f32 and i64.
  ASSERT_EQ(back.at("half").dtype(), DType::kF32);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back.at("half").as<float>()[static_cast<size_t>(i)], half_values[i]);
  ASSERT_EQ(back.at("small_ints").dtype(), DType::kI64);
  EXPECT_EQ(back.at("small_ints").as<int64_t>()[0], -7);
  EXPECT_EQ(back.at("small_ints").as<int64_t>()[1], 123456);

  // The data section starts 8-byte aligned, as safetensors writers pad it.
  std::ifstream f(file, std::ios::binary);
  uint64_t header_len = 0;
  f.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ((8 + header_len) % 8, 0u);
}

// A file as PyTorch would write it, every byte laid out here: BF16, F16, F64, I32 and I64 data,
// a metadata block, and tensors stored out of name order.
TEST_F(WeightsFileTest, ReadsEveryDtypeConvertingToStoreTypes) {
  std::vector<uint8_t> data;
  append<uint16_t>(data, 0x3FC0);  // bf16 1.5
  append<uint16_t>(data, 0xC000);  // bf16 -2.0
  append<uint16_t>(data, 0x3C00);  // f16 1.0
  append<uint16_t>(data, 0xC500);  // f16 -5.0
  append<double>(data, 0.1);
  append<double>(data, -1e30);
  append<int32_t>(data, -7);
  append<int32_t>(data, 2147483647);
  append<int64_t>(data, -9000000000LL);
  append<float>(data, 3.25f);
  const std::string header = R"({"__metadata__":{"format":"pt"},)"
                             R"("z.bf16":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]},)"
                             R"("y.f16":{"dtype":"F16","shape":[1,2],"data_offsets":[4,8]},)"
                             R"("x.f64":{"dtype":"F64","shape":[2],"data_offsets":[8,24]},)"
                             R"("w.i32":{"dtype":"I32","shape":[2],"data_offsets":[24,32]},)"
                             R"("v.i64":{"dtype":"I64","shape":[],"data_offsets":[32,40]},)"
                             R"("u.f32":{"dtype":"F32","shape":[1],"data_offsets":[40,44]}})";
  const WeightStore s = read_safetensors(write_raw("dtypes.safetensors", header, data));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s.at("z.bf16").as<float>()[0], 1.5f);
  EXPECT_EQ(s.at("z.bf16").as<float>()[1], -2.0f);
  EXPECT_EQ(s.at("y.f16").shape(), Shape({1, 2}));
  EXPECT_EQ(s.at("y.f16").as<float>()[0], 1.0f);
  EXPECT_EQ(s.at("y.f16").as<float>()[1], -5.0f);
  EXPECT_EQ(s.at("x.f64").as<float>()[0], 0.1f);
  EXPECT_EQ(s.at("x.f64").as<float>()[1], -1e30f);
  EXPECT_EQ(s.at("w.i32").dtype(), DType::kI64);
  EXPECT_EQ(s.at("w.i32").as<int64_t>()[0], -7);
  EXPECT_EQ(s.at("w.i32").as<int64_t>()[1], 2147483647);
  EXPECT_EQ(s.at("v.i64").shape(), Shape{});
  EXPECT_EQ(s.at("v.i64").as<int64_t>()[0], -9000000000LL);
  EXPECT_EQ(s.at("u.f32").as<float>()[0], 3.25f);
}

TEST_F(WeightsFileTest, MissingFileIsNotFound) {
  const std::string file = path("absent.safetensors");
  EXPECT_NE(error_message([&] { read_safetensors(file); }, ErrorCode::kNotFound).find(file), std::string::npos);
}

TEST_F(WeightsFileTest, UnwritablePathIsIoError) {
  const std::string file = path("no/such/dir/w.safetensors");
  EXPECT_NE(error_message([&] { write_safetensors(file, {}); }, ErrorCode::kIo).find(file), std::string::npos);
}

// Each malformed file must fail with kParse, naming the file and the problem.
TEST_F(WeightsFileTest, MalformedFilesAreParseErrors) {
  const std::vector<uint8_t> sixteen(16, 0);
  const std::string good_entry = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
  struct Case {
    std::string what;
    std::string file;
    std::string expect;
  };
  std::vector<Case> cases;
  {
    const std::string f = path("short.safetensors");
    std::ofstream(f, std::ios::binary) << "abcde";
    cases.push_back({"shorter than the length field", f, "truncated"});
  }
  cases.push_back({"header longer than the file",
                   write_raw("long_header.safetensors", good_entry, sixteen, good_entry.size() + 100), "truncated"});
  cases.push_back(
      {"data cut short", write_raw("short_data.safetensors", good_entry, std::vector<uint8_t>(8, 0)), "out of range"});
  cases.push_back({"bad JSON", write_raw("bad_json.safetensors", R"({"a": {"dtype": )", sixteen), "bad header JSON"});
  cases.push_back({"JSON not an object", write_raw("array.safetensors", "[1, 2]", sixteen), "bad header JSON"});
  cases.push_back(
      {"offsets past the data",
       write_raw("offsets.safetensors", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,24]}})", sixteen),
       "out of range"});
  cases.push_back(
      {"offsets reversed",
       write_raw("reversed.safetensors", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", sixteen),
       "out of range"});
  cases.push_back(
      {"offsets disagree with the shape",
       write_raw("size.safetensors", R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}})", sixteen),
       "needs 16"});
  cases.push_back({"unknown dtype",
                   write_raw("dtype.safetensors", R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,1]}})", sixteen),
                   "unknown dtype 'Q4'"});
  cases.push_back(
      {"negative dimension",
       write_raw("negative.safetensors", R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", sixteen),
       "non-negative"});
  cases.push_back({"huge shape",
                   write_raw("huge.safetensors",
                             R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]}})", sixteen),
                   "larger than the file"});
  cases.push_back({"missing offsets",
                   write_raw("no_offsets.safetensors", R"({"a":{"dtype":"F32","shape":[2]}})", sixteen),
                   "data_offsets"});
  cases.push_back({"a name given twice",
                   write_raw("twice.safetensors",
                             R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             sixteen),
                   "'a' appears twice"});
  cases.push_back({"overlapping tensors",
                   write_raw("overlap.safetensors",
                             R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                             R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                             sixteen),
                   "overlap"});
  for (const Case& c : cases) {
    const std::string msg = error_message([&] { read_safetensors(c.file); }, ErrorCode::kParse);
    EXPECT_NE(msg.find(c.file), std::string::npos) << c.what << ": " << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.what << ": " << msg;
  }
}

TEST_F(WeightsFileTest, LoadWeightsAppliesAFileByName) {
  ModelOptions o;
  o.seed = 11;
  const Graph source = build_model("tiny_bert", o);
  WeightStore exported = source.weights();
  // What a real HuggingFace export also carries: buffers the graph has no use for.
  Tensor position_ids(DType::kI64, {1, 64});
  exported["embeddings.position_ids"] = position_ids;
  const std::string file = path("tiny_bert.safetensors");
  write_safetensors(file, exported);

  o.seed = 12;
  Graph target = build_model("tiny_bert", o);
  ASSERT_FALSE(same_bytes(target.weights().at("pooler.dense.weight"), source.weights().at("pooler.dense.weight")));
  EXPECT_EQ(target.load_weights(read_safetensors(file)), static_cast<int>(source.weights().size()));
  for (const auto& [name, t] : source.weights()) EXPECT_TRUE(same_bytes(target.weights().at(name), t)) << name;
}

TEST_F(WeightsFileTest, LoadWeightsRejectsAShapeMismatch) {
  ModelOptions o;
  Graph g = build_model("tiny_cnn", o);
  WeightStore wrong;
  wrong["fc.weight"] = Tensor(DType::kF32, {10, 31});
  const std::string file = path("wrong.safetensors");
  write_safetensors(file, wrong);
  const std::string msg = error_message([&] { g.load_weights(read_safetensors(file)); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("fc.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[10, 32]"), std::string::npos) << msg;
}

// A weights file must cover the model exactly: every weight once, nothing unknown.
class LoadWeightsFileTest : public WeightsFileTest {
 protected:
  LoadWeightsFileTest() : model_(build_model("tiny_cnn", ModelOptions{})) {}
  std::string write(const WeightStore& store) {
    const std::string file = path("w.safetensors");
    write_safetensors(file, store);
    return file;
  }
  Graph model_;
};

TEST_F(LoadWeightsFileTest, FullExportLoadsSkippingTrainingBuffers) {
  ModelOptions o;
  o.seed = 5;
  WeightStore exported = build_model("tiny_cnn", o).weights();
  exported["block.bn1.num_batches_tracked"] = Tensor(DType::kI64, {});
  const WeightsFileReport r = load_weights_file(model_, write(exported));
  EXPECT_EQ(r.loaded, static_cast<int>(model_.weights().size()));
  EXPECT_TRUE(r.left_seeded.empty());
  EXPECT_TRUE(r.unused.empty());
  EXPECT_TRUE(same_bytes(model_.weights().at("fc.bias"), exported.at("fc.bias")));
}

TEST_F(LoadWeightsFileTest, PartialFileIsRefusedUnlessAllowed) {
  WeightStore only_bias{{"fc.bias", model_.weights().at("fc.bias").clone()}};
  only_bias["fc.bias"].as<float>()[0] = 42.0f;
  const std::string file = write(only_bias);
  const std::string msg = error_message([&] { load_weights_file(model_, file); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find(file), std::string::npos) << msg;
  EXPECT_NE(msg.find("lacks 26 of the model's 27 weights: stem.conv.weight"), std::string::npos) << msg;
  EXPECT_NE(msg.find("--allow-partial-weights"), std::string::npos) << msg;

  const WeightsFileReport r = load_weights_file(model_, file, {.allow_partial = true});
  EXPECT_EQ(r.loaded, 1);
  EXPECT_EQ(r.left_seeded.size() + 1, model_.weights().size());
  EXPECT_NE(std::find(r.left_seeded.begin(), r.left_seeded.end(), "fc.weight"), r.left_seeded.end());
  EXPECT_EQ(model_.weights().at("fc.bias").as<float>()[0], 42.0f);
}

TEST_F(LoadWeightsFileTest, UnknownTensorIsNamedUnlessAllowed) {
  WeightStore store = model_.weights();
  store["head.extra"] = Tensor(DType::kF32, {3});
  const std::string file = write(store);
  const std::string msg = error_message([&] { load_weights_file(model_, file); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("head.extra"), std::string::npos) << msg;
  const WeightsFileReport r = load_weights_file(model_, file, {.allow_extra = true});
  EXPECT_EQ(r.unused, std::vector<std::string>{"head.extra"});
}

TEST_F(LoadWeightsFileTest, WeightNamedTwiceIsRefused) {
  WeightStore store = model_.weights();
  store["model.fc.bias"] = store.at("fc.bias");
  const std::string msg = error_message([&] { load_weights_file(model_, write(store)); }, ErrorCode::kInvalidArgument);
  EXPECT_NE(msg.find("'fc.bias' and 'model.fc.bias' both name weight 'fc.bias'"), std::string::npos) << msg;
}

TEST_F(LoadWeightsFileTest, IntegerTensorForAFloatWeightIsRefused) {
  WeightStore store = model_.weights();
  store["fc.bias"] = Tensor(DType::kI64, store.at("fc.bias").shape());
  const std::string msg = error_message([&] { load_weights_file(model_, write(store)); }, ErrorCode::kInvalidArgument);
  // The file's I32 and I64 are both read widened: the message names the kind, not a width.
  EXPECT_NE(msg.find("'fc.bias' holds integer values but weight 'fc.bias' is f32"), std::string::npos) << msg;
}

}  // namespace
}  // namespace atl
