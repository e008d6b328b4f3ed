// The loopback load generator behind `atoll bench serve`, against a server on the simulated GPU.
#include <gtest/gtest.h>

#include "core/error.h"
#include "serve/load_test.h"
#include "serve/server.h"

namespace atl::serve {
namespace {

ServeOptions loopback(std::vector<std::string> models) {
  ServeOptions o;
  o.engine.device = "sim";
  o.grpc_port = o.http_port = o.metrics_port = 0;
  o.models = std::move(models);
  return o;
}

TEST(LoadTest, SampleRequestsMatchTheModelsInputs) {
  Server server(loopback({"cnn=tiny_cnn", "bert=tiny_bert"}));
  const SampleRequest cnn = sample_request(server.engine(), "cnn", true, 1);
  ASSERT_EQ(cnn.request.inputs.size(), 1u);
  EXPECT_EQ(cnn.request.priority, 1);
  EXPECT_EQ(cnn.request.inputs[0].datatype, "FP32");
  EXPECT_EQ(cnn.request.inputs[0].shape, (std::vector<int64_t>{1, 3, 32, 32}));
  EXPECT_EQ(cnn.request.inputs[0].data.size(), 3u * 32 * 32 * 4);
  const SampleRequest bert = sample_request(server.engine(), "bert", false, 1);
  EXPECT_FALSE(bert.request.priority.has_value());
  bool has_ids = false;
  for (const InputTensor& t : bert.request.inputs) has_ids |= t.datatype == "INT64";
  EXPECT_TRUE(has_ids);
  try {
    sample_request(server.engine(), "absent", false, 1);
    FAIL() << "a request to an absent model was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(LoadTest, SequentialRequestsInProcessAndOverGrpcAllSucceed) {
  Server server(loopback({"cnn=tiny_cnn"}));
  const std::string target = "127.0.0.1:" + std::to_string(server.grpc_port());
  const SampleRequest r = sample_request(server.engine(), "cnn", true, 2);
  const LoadSamples local = sequential_in_process(server.engine(), r.request, 20);
  const LoadSamples remote = sequential_grpc(target, r.request, 20);
  EXPECT_EQ(local.latency_ms.size(), 20u);
  EXPECT_EQ(remote.latency_ms.size(), 20u);
  EXPECT_EQ(local.failed + remote.failed, 0) << local.first_error << remote.first_error;
  for (double ms : remote.latency_ms) EXPECT_GT(ms, 0);
  // A refused request counts as failed with the server's message, and the run goes on.
  InferRequest wrong = r.request;
  wrong.model = "absent";
  const LoadSamples refused = sequential_grpc(target, wrong, 3);
  EXPECT_EQ(refused.failed, 3);
  EXPECT_NE(refused.first_error.find("absent"), std::string::npos) << refused.first_error;
}

TEST(LoadTest, FixedRateAndClosedLoopClientsRunTogether) {
  Server server(loopback({"rt=tiny_cnn", "be=tiny_vgg"}));
  const std::string target = "127.0.0.1:" + std::to_string(server.grpc_port());
  const std::vector<LoadClient> clients{{.model = "rt", .realtime = true, .rate_hz = 100},
                                        {.model = "be", .concurrency = 2}};
  const std::vector<LoadSamples> s = run_grpc_load(target, server.engine(), clients, 0.4, 0.05);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].failed + s[1].failed, 0) << s[0].first_error << s[1].first_error;
  // 100 Hz for 0.4 s: about 40 requests, fewer only if some answers took longer than a period.
  EXPECT_GE(s[0].latency_ms.size(), 10u);
  EXPECT_LE(s[0].latency_ms.size(), 41u);
  EXPECT_GT(s[1].latency_ms.size(), 0u);
  EXPECT_THROW(run_grpc_load(target, server.engine(), clients, 0, 0), Error);
}

}  // namespace
}  // namespace atl::serve
