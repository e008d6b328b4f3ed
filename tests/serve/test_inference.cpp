#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <new>

#include "core/error.h"
#include "serve/http_codec.h"
#include "serve/inference.h"

namespace atl::serve {
namespace {

Program two_input_program(int64_t batch) {
  Program p;
  p.model = "m";
  p.batch = batch;
  p.inputs = {{"image", DType::kF32, Shape({batch, 2, 3})}, {"ids", DType::kI64, Shape({batch, 4})}};
  p.outputs = {{"scores", DType::kF32, Shape({batch, 5})}};
  return p;
}

ModelSpec batching_spec() {
  ModelSpec s;
  s.name = "m";
  s.max_batch_size = 4;
  return s;
}

struct RequestBytes {
  std::vector<float> image;
  std::vector<int64_t> ids;
  InferRequest request;
  explicit RequestBytes(int64_t batch) : image(static_cast<size_t>(batch * 6), 1.5f), ids(static_cast<size_t>(batch * 4), 7) {
    request.model = "m";
    request.inputs = {{"image", "FP32", {batch, 2, 3}, std::as_bytes(std::span(image)), nullptr},
                      {"ids", "INT64", {batch, 4}, std::as_bytes(std::span(ids)), nullptr}};
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.message();
    return e.message();
  }
  ADD_FAILURE() << "no error thrown";
  return "";
}

TEST(Inference, AcceptsBatchesWithinTheLimitAndPadsThem) {
  RequestBytes r(3);
  EXPECT_EQ(check_inputs(batching_spec(), two_input_program(1), r.request), 3);
  const std::vector<Tensor> packed = pack_inputs(two_input_program(4), r.request);
  ASSERT_EQ(packed.size(), 2u);
  EXPECT_EQ(packed[0].as<float>()[17], 1.5f);  // last element of item 3
  EXPECT_EQ(packed[0].as<float>()[18], 0.0f);  // padding
  EXPECT_EQ(packed[1].as<int64_t>()[11], 7);
}

// Inputs in kept-alive memory (shared-memory regions) are read in place when they fill the
// tensor and are aligned as tensors are; anything else is copied, a short batch zero-padded.
TEST(Inference, OwnedAlignedInputsAreReadInPlaceOthersCopied) {
  auto owner = std::shared_ptr<std::byte[]>(new (std::align_val_t{64}) std::byte[256], [](std::byte* q) {
    ::operator delete[](q, std::align_val_t{64});
  });
  std::vector<float> image(24, 2.5f);
  std::memcpy(owner.get(), image.data(), 24 * sizeof(float));
  std::vector<int64_t> ids(16, 3);
  InferRequest request;
  request.model = "m";
  request.inputs = {{"image", "FP32", {4, 2, 3}, std::span(owner.get(), 24 * sizeof(float)), owner},
                    {"ids", "INT64", {4, 4}, std::as_bytes(std::span(ids)), nullptr}};
  std::vector<Tensor> packed = pack_inputs(two_input_program(4), request);
  EXPECT_EQ(packed[0].raw(), owner.get());  // in place
  EXPECT_EQ(packed[0].as<float>()[23], 2.5f);
  EXPECT_NE(packed[1].raw(), reinterpret_cast<const std::byte*>(ids.data()));  // no owner: copied
  EXPECT_EQ(packed[1].as<int64_t>()[15], 3);

  request.inputs[0].data = std::span(owner.get() + 4, 24 * sizeof(float));
  packed = pack_inputs(two_input_program(4), request);
  EXPECT_NE(packed[0].raw(), owner.get() + 4);  // misaligned: copied
  request.inputs[0].data = std::span(owner.get(), 18 * sizeof(float));  // three of four items
  packed = pack_inputs(two_input_program(4), request);
  EXPECT_NE(packed[0].raw(), owner.get());
  EXPECT_EQ(packed[0].as<float>()[17], 2.5f);
  EXPECT_EQ(packed[0].as<float>()[18], 0.0f);  // the padded item
}

TEST(Inference, RefusesWhatTheModelDoesNotTake) {
  const ModelSpec spec = batching_spec();
  const Program p = two_input_program(1);
  {
    RequestBytes r(1);
    r.request.inputs[0].datatype = "FP16";
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("datatype FP16, expected FP32"), std::string::npos);
  }
  {
    RequestBytes r(1);
    r.request.inputs[0].shape = {1, 3, 2};
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("expected [-1,2,3]"), std::string::npos);
  }
  {
    RequestBytes r(5);  // over max_batch_size
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("batch of 1..4"), std::string::npos);
  }
  {
    RequestBytes r(1);
    r.request.inputs[1].data = r.request.inputs[1].data.first(8);
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("carries 8 bytes"), std::string::npos);
  }
  {
    RequestBytes r(1);
    r.request.inputs.pop_back();
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("needs input 'ids'"), std::string::npos);
  }
  {
    RequestBytes r(1);
    r.request.inputs.push_back(r.request.inputs[0]);
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("more than once"), std::string::npos);
  }
  {
    RequestBytes r(1);
    r.request.inputs[0].name = "picture";
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("no input 'picture'"), std::string::npos);
  }
  {
    RequestBytes r(1);  // a huge declared shape is a shape error, never an allocation
    r.request.inputs[0].shape = {1, int64_t{1} << 40, int64_t{1} << 40};
    EXPECT_NE(error_of([&] { check_inputs(spec, p, r.request); }).find("has shape"), std::string::npos);
  }
  EXPECT_NE(error_of([&] { check_requested_outputs(p, {"logits"}); }).find("no output 'logits'"), std::string::npos);
}

TEST(Inference, UnpacksTheRequestsItemsOnly) {
  Tensor scores(DType::kF32, Shape({4, 5}));
  for (size_t i = 0; i < 20; ++i) scores.as<float>()[i] = static_cast<float>(i);
  std::vector<Tensor> outputs;
  outputs.push_back(scores);
  const auto out = unpack_outputs(batching_spec(), two_input_program(4), outputs, 2, {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(out[0].data.as<float>().back(), 9.0f);
}

TEST(HttpCodec, JsonAndBinaryTensors) {
  const std::vector<float> image(6, 2.0f);
  const std::string header =
      R"({"id":"7","parameters":{"priority":1,"timeout":500,"binary_data_output":true},"inputs":[)"
      R"({"name":"image","datatype":"FP32","shape":[1,2,3],"parameters":{"binary_data_size":24}},)"
      R"({"name":"ids","datatype":"INT64","shape":[1,4],"data":[[1,2,3,4]]}],)"
      R"("outputs":[{"name":"scores","parameters":{"binary_data":false}}]})";
  const std::string body = header + std::string(reinterpret_cast<const char*>(image.data()), 24);
  const HttpInferRequest r = decode_infer_request(body, header.size(), "m", "", SharedMemoryRegistry{});
  EXPECT_EQ(r.request.id, "7");
  EXPECT_EQ(r.request.priority, 1);
  EXPECT_EQ(r.request.timeout_us, 500);
  EXPECT_EQ(check_inputs(batching_spec(), two_input_program(1), r.request), 1);
  EXPECT_EQ(pack_inputs(two_input_program(1), r.request)[1].as<int64_t>()[3], 4);

  InferResponse response;
  response.model = "m";
  response.outputs.push_back({"scores", "FP32", {1, 5}, Tensor(DType::kF32, Shape({1, 5}))});
  const HttpInferBody json_only = encode_infer_response(response, r);
  EXPECT_FALSE(json_only.header_length.has_value());  // binary_data false wins over the default
  EXPECT_NE(json_only.body.find(R"("data":[0.0,0.0,0.0,0.0,0.0])"), std::string::npos) << json_only.body;
}

// A tensor naming a shared-memory region resolves against the registry: an unknown region is
// kNotFound, a region without its byte size kInvalidArgument, before any work.
TEST(HttpCodec, SharedMemoryTensorsNeedARegisteredRegionAndASize) {
  const auto code = [](const std::string& params) {
    const std::string body = R"({"inputs":[{"name":"image","datatype":"FP32","shape":[1,2,3],"parameters":)" + params +
                             "}]}";
    try {
      decode_infer_request(body, std::nullopt, "m", "", SharedMemoryRegistry{});
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code(R"({"shared_memory_region":"r","shared_memory_byte_size":24})"), ErrorCode::kNotFound);
  EXPECT_EQ(code(R"({"shared_memory_region":"r"})"), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"shared_memory_region":7,"shared_memory_byte_size":24})"), ErrorCode::kInvalidArgument);
}

TEST(HttpCodec, MalformedBodiesAreErrorsNotCrashes) {
  const auto code = [](const std::string& body, std::optional<size_t> header) {
    try {
      decode_infer_request(body, header, "m", "", SharedMemoryRegistry{});
    } catch (const Error& e) {
      return e.code();
    }
    return ErrorCode::kInternal;
  };
  EXPECT_EQ(code("\x01\xff garbage", std::nullopt), ErrorCode::kParse);
  EXPECT_EQ(code("{}", 100), ErrorCode::kInvalidArgument);  // header longer than the body
  const std::string truncated =
      R"({"inputs":[{"name":"image","datatype":"FP32","shape":[1,2,3],"parameters":{"binary_data_size":24}}]})";
  EXPECT_EQ(code(truncated + "abc", truncated.size()), ErrorCode::kInvalidArgument);
  const std::string json = R"({"inputs":[{"name":"ids","datatype":"INT64","shape":[1],"data":[1]}]})";
  EXPECT_EQ(code(json + "extra", json.size()), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"inputs":[{"name":"ids","datatype":"INT64","shape":[1],"data":["x"]}]})", std::nullopt),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1e300]}]})", std::nullopt),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":)" + std::string(100, '[') +
                     std::string(100, ']') + "}]}",
                 std::nullopt),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"({"inputs":5})", std::nullopt), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(R"([1,2])", std::nullopt), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace atl::serve
