// ONNX models served end to end: a repository model.onnx and `--model NAME=FILE.onnx`, over
// HTTP (JSON tensors) and gRPC (raw tensors), against the same file imported and run in-process.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "grpc_service.grpc.pb.h"
#include "onnx_models.h"
#include "runtime/session.h"
#include "serve/server.h"

namespace atl::serve {
namespace {

using namespace testing_onnx;
using nlohmann::json;

// The file imported and run on the CPU backend at `batch`, as `atoll run --device cpu` does.
std::vector<float> run_in_process(const fs::path& onnx, int64_t batch, const std::vector<float>& input) {
  SessionOptions so;
  so.model = onnx.string();
  so.device = "cpu";
  so.model_options.batch = batch;
  Session session(so);
  Tensor x(DType::kF32, Shape({batch, 3, 8, 8}));
  std::memcpy(x.raw(), input.data(), input.size() * sizeof(float));
  session.set_inputs({x});
  session.instance().run();
  const Tensor out = session.outputs().at(0);
  const auto v = out.as<float>();
  return {v.begin(), v.end()};
}

std::vector<float> infer_http(int port, const std::string& model, int64_t batch, const std::vector<float>& input) {
  httplib::Client client("127.0.0.1", port);
  const json body{{"inputs", {{{"name", "x"}, {"datatype", "FP32"}, {"shape", {batch, 3, 8, 8}}, {"data", input}}}}};
  const auto res = client.Post("/v2/models/" + model + "/infer", body.dump(), "application/json");
  EXPECT_TRUE(res) << "no HTTP answer";
  if (!res) return {};
  EXPECT_EQ(res->status, 200) << res->body;
  const json answer = json::parse(res->body);
  const json& out = answer.at("outputs").at(0);
  EXPECT_EQ(out.at("name"), "logits");
  EXPECT_EQ(out.at("shape"), json({batch, 5}));
  return out.at("data").get<std::vector<float>>();
}

std::unique_ptr<inference::GRPCInferenceService::Stub> grpc_stub(int port) {
  return inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

std::vector<float> infer_grpc(int port, const std::string& model, int64_t batch, const std::vector<float>& input) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* in = request.add_inputs();
  in->set_name("x");
  in->set_datatype("FP32");
  for (int64_t d : {batch, int64_t{3}, int64_t{8}, int64_t{8}}) in->add_shape(d);
  request.add_raw_input_contents(reinterpret_cast<const char*>(input.data()), input.size() * sizeof(float));
  inference::ModelInferResponse response;
  grpc::ClientContext context;
  const grpc::Status status = grpc_stub(port)->ModelInfer(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  if (!status.ok() || response.raw_output_contents_size() != 1) return {};
  EXPECT_EQ(response.outputs(0).name(), "logits");
  const std::string& raw = response.raw_output_contents(0);
  std::vector<float> out(raw.size() / sizeof(float));
  std::memcpy(out.data(), raw.data(), out.size() * sizeof(float));
  return out;
}

void expect_near(const std::vector<float>& served, const std::vector<float>& expected, const std::string& what) {
  ASSERT_EQ(served.size(), expected.size()) << what;
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_NEAR(served[i], expected[i], 1e-5f * (1.0f + std::fabs(expected[i]))) << what << " element " << i;
  }
}

ServeOptions local_server(const std::string& repository, std::vector<std::string> models) {
  ServeOptions o;
  o.engine.device = "cpu";
  o.repository = repository;
  o.models = std::move(models);
  o.grpc_port = o.http_port = o.metrics_port = 0;
  o.http_threads = 2;
  return o;
}

// Property: for fresh random weights and inputs, a repository's model.onnx and a --model
// NAME=FILE.onnx answer over both protocols what the imported file computes in-process, at
// every batch a request may carry (padded buckets included).
TEST(ServeOnnx, RepositoryAndFlagModelsAnswerAsTheImportedModel) {
  auto rng = fresh_rng();
  const fs::path root = fresh_dir("atoll_serve_onnx");
  const fs::path repo_file = root / "repo" / "cnn" / "2" / "model.onnx";
  write_file(repo_file, random_cnn(rng).bytes());
  fs::create_directories(root / "repo" / "cnn" / "1");  // older version: not served
  write_file(root / "repo" / "cnn" / "config.pbtxt", R"(platform: "onnxruntime_onnx"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 3, 8, 8 ] } ]
output [ { name: "logits" data_type: TYPE_FP32 dims: [ 5 ] } ])");
  const fs::path flag_file = root / "direct.onnx";
  write_file(flag_file, random_cnn(rng).bytes());

  Server server(local_server((root / "repo").string(), {"direct=" + flag_file.string()}));
  for (int64_t batch : {int64_t{1}, int64_t{3}}) {
    const std::vector<float> input = uniform(static_cast<size_t>(batch * 3 * 8 * 8), rng);
    const std::vector<float> expected = run_in_process(repo_file, batch, input);
    expect_near(infer_http(server.http_port(), "cnn", batch, input), expected, "HTTP, batch " + std::to_string(batch));
    expect_near(infer_grpc(server.grpc_port(), "cnn", batch, input), expected, "gRPC, batch " + std::to_string(batch));
  }
  // --model NAME=FILE.onnx keeps the default max_batch_size of 1.
  const std::vector<float> input = uniform(3 * 8 * 8, rng);
  const std::vector<float> expected = run_in_process(flag_file, 1, input);
  expect_near(infer_http(server.http_port(), "direct", 1, input), expected, "HTTP, --model");
  expect_near(infer_grpc(server.grpc_port(), "direct", 1, input), expected, "gRPC, --model");

  // The latest version folder is the model; clients see an ONNX platform.
  inference::ModelMetadataRequest request;
  request.set_name("cnn");
  inference::ModelMetadataResponse metadata;
  grpc::ClientContext context;
  ASSERT_TRUE(grpc_stub(server.grpc_port())->ModelMetadata(&context, request, &metadata).ok());
  EXPECT_EQ(metadata.platform(), "onnxruntime_onnx");
  ASSERT_EQ(metadata.versions_size(), 1);
  EXPECT_EQ(metadata.versions(0), "2");
  httplib::Client client("127.0.0.1", server.http_port());
  const auto config = client.Get("/v2/models/cnn/config");
  ASSERT_TRUE(config);
  EXPECT_EQ(json::parse(config->body).at("platform"), "onnxruntime_onnx");
  server.shutdown();
  fs::remove_all(root);
}

}  // namespace
}  // namespace atl::serve
