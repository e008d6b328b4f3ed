// ONNX models and L2 residency configs in the model repository: what loads, and the one-line
// typed error, naming the file, of everything that does not.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "compile/compiler.h"
#include "core/error.h"
#include "l2/slices.h"
#include "onnx/onnx_import.h"
#include "onnx_models.h"
#include "runtime/model_source.h"
#include "serve/engine.h"
#include "serve/server.h"

namespace atl::serve {
namespace {

using namespace testing_onnx;

struct Caught {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
};

Caught caught(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.message().find('\n'), std::string::npos) << "not one line: " << e.message();
    return {e.code(), e.message()};
  }
  ADD_FAILURE() << "no error thrown";
  return {};
}

bool mentions(const Caught& c, const std::string& text) {
  return c.message.find(text) != std::string::npos;
}

// A repository model: its config and, when given, version 1's model.onnx.
fs::path add_model(const fs::path& repo, const std::string& name, const std::string& config,
                   const std::string& onnx_bytes = "") {
  write_file(repo / name / "config.pbtxt", config);
  fs::create_directories(repo / name / "1");
  if (!onnx_bytes.empty()) write_file(repo / name / "1" / "model.onnx", onnx_bytes);
  return repo / name;
}

constexpr const char* kOnnxPlatform = "platform: \"onnxruntime_onnx\"\n";

TEST(OnnxRepository, MissingOrUnreadableModelFilesAreNamed) {
  const fs::path root = fresh_dir("atoll_onnx_missing");
  const std::string absent = (root / "absent.onnx").string();
  Caught c = caught([&] { model_from_flag("m=" + absent); });
  EXPECT_EQ(c.code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(c, absent)) << c.message;
  EXPECT_EQ(caught([&] { model_from_flag(absent); }).code, ErrorCode::kInvalidArgument);  // no NAME=
  EXPECT_EQ(caught([] { model_from_flag("m=model.pt"); }).code, ErrorCode::kUnsupported);

  const fs::path repo = root / "repo";
  add_model(repo, "folder", kOnnxPlatform);
  fs::create_directories(repo / "folder" / "1" / "model.onnx");  // a folder, not a file
  c = caught([&] { read_model_config(repo, "folder"); });
  EXPECT_EQ(c.code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(c, (repo / "folder" / "1" / "model.onnx").string())) << c.message;

  add_model(repo, "dangling", "");
  fs::create_symlink(root / "nowhere.onnx", repo / "dangling" / "1" / "model.onnx");
  c = caught([&] { read_model_config(repo, "dangling"); });
  EXPECT_EQ(c.code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(c, "dangling")) << c.message;

  if (geteuid() != 0) {  // root reads every file
    auto rng = fresh_rng();
    const fs::path model = add_model(repo, "locked", "", random_cnn(rng).bytes());
    fs::permissions(model / "1" / "model.onnx", fs::perms::none);
    EXPECT_EQ(caught([&] { read_model_config(repo, "locked"); }).code, ErrorCode::kIo);
  }
  fs::remove_all(root);
}

TEST(OnnxRepository, AVersionFolderNeedsAModelOnnxOrAZooModel) {
  auto rng = fresh_rng();
  const fs::path repo = fresh_dir("atoll_onnx_neither");
  add_model(repo, "lost", "max_batch_size: 1\n");  // not a zoo name, no model.onnx
  Caught c = caught([&] { read_model_config(repo, "lost"); });
  EXPECT_EQ(c.code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(c, (repo / "lost" / "1").string() + "' holds no model.onnx")) << c.message;

  add_model(repo, "needs_onnx", kOnnxPlatform);
  c = caught([&] { read_model_config(repo, "needs_onnx"); });
  EXPECT_EQ(c.code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(c, "needs a model.onnx")) << c.message;
  EXPECT_EQ(caught([] { parse_model_config(kOnnxPlatform, "m", "m/config.pbtxt"); }).code, ErrorCode::kNotFound);

  add_model(repo, "both", R"(parameters { key: "zoo_model" value: { string_value: "tiny_cnn" } })",
            random_cnn(rng).bytes());
  EXPECT_EQ(caught([&] { read_model_config(repo, "both"); }).code, ErrorCode::kInvalidArgument);
  add_model(repo, "tf", "platform: \"tensorflow_savedmodel\"\n", random_cnn(rng).bytes());
  EXPECT_EQ(caught([&] { read_model_config(repo, "tf"); }).code, ErrorCode::kUnsupported);

  // Triton's spellings of an ONNX model all name the file; an older version is not served.
  for (const char* config : {kOnnxPlatform, "backend: \"onnxruntime\"\n", ""}) {
    add_model(repo, "ok", config, random_cnn(rng).bytes());
    fs::create_directories(repo / "ok" / "0");
    const ModelSpec spec = read_model_config(repo, "ok");
    EXPECT_EQ(spec.onnx_file, (repo / "ok" / "1" / "model.onnx").string()) << config;
    EXPECT_EQ(spec.versions, std::vector<int64_t>{1});
  }
  fs::remove_all(repo);
}

TEST(OnnxRepository, FilesTheImporterRefusesFailAtLoadNamingTheFile) {
  auto rng = fresh_rng();
  const fs::path repo = fresh_dir("atoll_onnx_refused");
  EngineOptions options;
  options.device = "cpu";
  Engine engine(options);
  const auto load_error = [&](const std::string& name) {
    const ModelSpec spec = read_model_config(repo, name);
    EXPECT_TRUE(spec.is_onnx());
    const Caught c = caught([&] { engine.load(spec); });
    EXPECT_TRUE(mentions(c, spec.onnx_file)) << c.message;
    return c;
  };
  add_model(repo, "garbage", "", "\x08\xff\xff\xff not a model");
  EXPECT_NE(load_error("garbage").code, ErrorCode::kInternal);

  onnxtest::ModelBuilder unknown_op;
  unknown_op.input("x", {-1, 4}).output("y");
  unknown_op.node("AtollNoSuchOp", {"x"}, {"y"});
  add_model(repo, "unknown_op", "", unknown_op.bytes());
  EXPECT_NE(load_error("unknown_op").code, ErrorCode::kInternal);

  onnxtest::ModelBuilder fixed_batch;  // batch 1 fixed in the file: no batch 2 bucket
  fixed_batch.input("x", {1, 4}).output("y");
  fixed_batch.node("Relu", {"x"}, {"y"});
  add_model(repo, "fixed_batch", "max_batch_size: 2\n", fixed_batch.bytes());
  EXPECT_EQ(load_error("fixed_batch").code, ErrorCode::kUnsupported);

  add_model(repo, "declared", R"(max_batch_size: 1
input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 9, 9 ] } ])",
            random_cnn(rng).bytes());
  // The declared shapes are the config's: its error names the config.
  const Caught c = caught([&] { engine.load(read_model_config(repo, "declared")); });
  EXPECT_EQ(c.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(c, "declared/config.pbtxt") && mentions(c, "[3, 8, 8]")) << c.message;
  EXPECT_TRUE(engine.index().empty());  // nothing half-loaded
  fs::remove_all(repo);
}

// The GPU's program at `batch`, as `atoll l2 config` compiles it, and a config for it with random
// resident slices.
l2::ResidencyConfig gpu_config(const std::string& model, int64_t batch, std::mt19937_64& rng) {
  ModelOptions options;
  options.batch = batch;
  CompileTarget target;
  target.act_dtype = DType::kF16;
  const Program p = compile_graph(load_model_graph(model, options), target).program;
  const l2::L2Device device = l2::h200_l2();
  std::vector<bool> resident(static_cast<size_t>(l2::slice_count(p.arena_bytes, l2::kDefaultSliceBytes)));
  for (size_t i = 0; i < resident.size(); ++i) resident[i] = i == 0 || rng() % 2 == 0;
  return l2::make_config(p, device, resident, 0.75);
}

std::string l2_model_config(const std::string& file) {
  return R"(max_batch_size: 1
parameters { key: "l2_config" value: { string_value: ")" +
         file + "\" } }\n";
}

TEST(OnnxRepository, L2ConfigsAreCheckedAgainstTheModelsProgramAtLoad) {
  auto rng = fresh_rng();
  const fs::path repo = fresh_dir("atoll_onnx_l2");
  const fs::path good = add_model(repo, "good", l2_model_config("l2.json"), random_cnn(rng).bytes());
  l2::save_config(gpu_config((good / "1" / "model.onnx").string(), 1, rng), (good / "l2.json").string());
  const fs::path batch2 = add_model(repo, "batch2", l2_model_config("l2_b2.json"), random_cnn(rng).bytes());
  l2::save_config(gpu_config((batch2 / "1" / "model.onnx").string(), 2, rng), (batch2 / "l2_b2.json").string());
  // A config for another architecture: the zoo model's.
  add_model(repo, "other", l2_model_config("../tiny_cnn/zoo.json"), random_cnn(rng).bytes());
  const fs::path zoo = add_model(repo, "tiny_cnn", l2_model_config("zoo.json"));
  l2::save_config(gpu_config("tiny_cnn", 1, rng), (zoo / "zoo.json").string());
  write_file(repo / "malformed" / "config.pbtxt", l2_model_config("bad.json") + "platform: \"atoll_zoo\"\n" +
                                                      R"(parameters { key: "zoo_model" value: { string_value: "tiny_cnn" } })");
  write_file(repo / "malformed" / "bad.json", "{\"format\": 3");

  EngineOptions options;
  options.device = "sim";
  Engine engine(options);
  engine.load(read_model_config(repo, "good"));
  EXPECT_TRUE(engine.model("good", "")->l2_status.find("no effect here") != std::string::npos)
      << engine.model("good", "")->l2_status;
  engine.load(read_model_config(repo, "tiny_cnn"));  // zoo models take one too
  Caught c = caught([&] { engine.load(read_model_config(repo, "batch2")); });
  EXPECT_EQ(c.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(c, "l2_b2.json") && mentions(c, "batch 2")) << c.message;
  c = caught([&] { engine.load(read_model_config(repo, "other")); });
  EXPECT_EQ(c.code, ErrorCode::kInvalidArgument);
  EXPECT_TRUE(mentions(c, "zoo.json") && mentions(c, "does not fit")) << c.message;
  c = caught([&] { read_model_config(repo, "malformed"); });
  EXPECT_EQ(c.code, ErrorCode::kParse);
  EXPECT_TRUE(mentions(c, "bad.json")) << c.message;
  write_file(repo / "good" / "config.pbtxt",
             l2_model_config("l2.json") + R"(parameters { key: "l2_device" value: { string_value: "h100" } })");
  EXPECT_EQ(caught([&] { read_model_config(repo, "good"); }).code, ErrorCode::kNotFound);
  fs::remove_all(repo);
}

// The server keeps serving what loaded, lists the refused model with its reason, and reports
// the config and its effect in the model's config.
TEST(OnnxRepository, ServerReportsTheL2ConfigAndRefusesAMismatch) {
  auto rng = fresh_rng();
  const fs::path repo = fresh_dir("atoll_onnx_l2_server");
  const fs::path good = add_model(repo, "good", l2_model_config("l2.json"), random_cnn(rng).bytes());
  l2::save_config(gpu_config((good / "1" / "model.onnx").string(), 1, rng), (good / "l2.json").string());
  const fs::path other = add_model(repo, "other", l2_model_config("l2.json"), random_cnn(rng).bytes());
  l2::save_config(gpu_config("tiny_cnn", 1, rng), (other / "l2.json").string());
  ServeOptions o;
  o.engine.device = "cpu";
  o.repository = repo.string();
  o.grpc_port = o.http_port = o.metrics_port = 0;
  o.http_threads = 2;
  Server server(o);
  const auto index = server.engine().index();
  ASSERT_EQ(index.size(), 2u);
  EXPECT_EQ(index[0].name, "good");
  EXPECT_EQ(index[0].state, "READY");
  EXPECT_EQ(index[1].state, "UNAVAILABLE");
  EXPECT_NE(index[1].reason.find("does not fit"), std::string::npos) << index[1].reason;
  httplib::Client client("127.0.0.1", server.http_port());
  const auto res = client.Get("/v2/models/good/config");
  ASSERT_TRUE(res);
  const nlohmann::json parameters = nlohmann::json::parse(res->body).at("parameters");
  EXPECT_EQ(parameters.at("l2_config").at("string_value"), "l2.json");
  EXPECT_NE(parameters.at("l2_status").at("string_value").get<std::string>().find("no effect"), std::string::npos);
  server.shutdown();
  fs::remove_all(repo);
}

}  // namespace
}  // namespace atl::serve
