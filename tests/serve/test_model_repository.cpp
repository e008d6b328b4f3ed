#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "../error_code_of.h"
#include "serve/model_repository.h"

namespace atl::serve {
namespace {

namespace fs = std::filesystem;

using test::code_of;

TEST(ModelRepository, TextConfigSkipsTritonFieldsAtollDoesNotUse) {
  const ModelSpec spec = parse_model_config(R"(
    name: "cnn"
    platform: "atoll_zoo"
    max_batch_size: 4
    input [ { name: "input" data_type: TYPE_FP32 dims: [ 3, 32, 32 ] } ]
    instance_group [ { kind: KIND_GPU count: 1 } ]
    dynamic_batching { max_queue_delay_microseconds: 100 }
    parameters { key: "zoo_model" value: { string_value: "tiny_cnn" } }
    parameters { key: "default_class" value: { string_value: "rt" } }
    parameters { key: "timeout_policy" value: { string_value: "reject" } }
  )",
                                            "cnn", "cnn/config.pbtxt");
  EXPECT_EQ(spec.zoo_model, "tiny_cnn");
  EXPECT_EQ(spec.max_batch_size, 4);
  EXPECT_EQ(spec.default_class, sched::TaskClass::kRealTime);
  EXPECT_EQ(spec.timeout_policy, TimeoutPolicy::kReject);
  ASSERT_EQ(spec.declared_inputs.size(), 1u);
  EXPECT_EQ(spec.declared_inputs[0].datatype, "FP32");
  EXPECT_EQ(spec.declared_inputs[0].dims, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_TRUE(spec.gpus.empty()) << "an instance group without gpus places the model anywhere";
}

TEST(ModelRepository, InstanceGroupGpusPlaceTheModel) {
  const ModelSpec text = parse_model_config(R"(
    instance_group [ { kind: KIND_GPU count: 1 gpus: [ 1, 2 ] rate_limiter { priority: 1 } },
                     { kind: KIND_GPU gpus: [ 2 ] } ]
    parameters { key: "zoo_model" value: { string_value: "tiny_cnn" } }
  )",
                                            "cnn", "cnn/config.pbtxt");
  EXPECT_EQ(text.gpus, (std::vector<int>{1, 2}));
  const ModelSpec json = parse_model_config(
      R"({"instance_group": [{"kind": "KIND_GPU", "gpus": [0]}], "parameters": {"zoo_model": {"string_value": "tiny_cnn"}}})",
      "cnn", "cnn/config.json");
  EXPECT_EQ(json.gpus, (std::vector<int>{0}));
  EXPECT_EQ(code_of([] { parse_model_config("instance_group [ { gpus: [ -1 ] } ]", "tiny_cnn", "c.pbtxt"); }),
            ErrorCode::kInvalidArgument);
}

TEST(ModelRepository, JsonConfigAndDefaults) {
  const ModelSpec spec = parse_model_config(R"({"backend": "atoll", "max_batch_size": 0,
      "parameters": {"zoo_model": {"string_value": "tiny_vgg"}}, "unknown_field": 3})",
                                            "vgg", "vgg/config.json");
  EXPECT_EQ(spec.zoo_model, "tiny_vgg");
  EXPECT_EQ(spec.max_batch_size, 0);
  EXPECT_EQ(spec.default_class, sched::TaskClass::kBestEffort);
  EXPECT_EQ(spec.timeout_policy, TimeoutPolicy::kReport);
}

TEST(ModelRepository, BadConfigsNameTheProblem) {
  EXPECT_EQ(code_of([] { parse_model_config("max_batch_size: ", "m", "m/config.pbtxt"); }), ErrorCode::kParse);
  EXPECT_EQ(code_of([] { parse_model_config("{", "m", "m/config.json"); }), ErrorCode::kParse);
  EXPECT_EQ(code_of([] { parse_model_config(R"(platform: "tensorflow_savedmodel")", "m", "m/config.pbtxt"); }),
            ErrorCode::kUnsupported);
  EXPECT_EQ(code_of([] { parse_model_config("", "no_such_zoo_model", "x/config.pbtxt"); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([] { parse_model_config("max_batch_size: 1000", "tiny_cnn", "c.pbtxt"); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { parse_model_config(R"(name: "other")", "tiny_cnn", "c.pbtxt"); }),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] {
              parse_model_config(R"(parameters { key: "default_class" value: { string_value: "urgent" } })",
                                 "tiny_cnn", "c.pbtxt");
            }),
            ErrorCode::kInvalidArgument);
}

TEST(ModelRepository, ReadsFoldersAndVersions) {
  const fs::path repo = fs::path(testing::TempDir()) / "atoll_repo_test";
  fs::remove_all(repo);
  fs::create_directories(repo / "cnn" / "3");
  fs::create_directories(repo / "cnn" / "1");
  fs::create_directories(repo / "cnn" / "notes");
  fs::create_directories(repo / "empty");
  std::ofstream(repo / "cnn" / "config.pbtxt") << "parameters { key: \"zoo_model\" value: { string_value: \"tiny_cnn\" } }";
  EXPECT_EQ(list_repository(repo), (std::vector<std::string>{"cnn"}));
  const ModelSpec spec = read_model_config(repo, "cnn");
  EXPECT_EQ(spec.versions, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(code_of([&] { read_model_config(repo, "empty"); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { read_model_config(repo, "absent"); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { list_repository(repo / "absent"); }), ErrorCode::kNotFound);
  fs::remove_all(repo);
}

TEST(ModelRepository, ModelFlags) {
  EXPECT_EQ(model_from_flag("fast=tiny_cnn").zoo_model, "tiny_cnn");
  EXPECT_EQ(model_from_flag("tiny_cnn").name, "tiny_cnn");
  EXPECT_EQ(code_of([] { model_from_flag("=tiny_cnn"); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([] { model_from_flag("m=model.pt"); }), ErrorCode::kUnsupported);
  EXPECT_EQ(code_of([] { model_from_flag("m=resnet51"); }), ErrorCode::kNotFound);
  EXPECT_EQ(default_model_spec().zoo_model, "resnet18");
}

}  // namespace
}  // namespace atl::serve
