// The system shared-memory registry: regions map real POSIX shared memory, bounds are checked
// at registration and at every access, and a region stays mapped while a request holds it.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/error.h"
#include "../error_code_of.h"
#include "core/tensor.h"
#include "serve/http_codec.h"
#include "serve/shared_memory.h"

namespace atl::serve {
namespace {

// A shared-memory object of `bytes` holding 0, 1, 2, ... (mod 256), unlinked at the end.
class Object {
 public:
  explicit Object(size_t bytes) : key_("/atoll_test_shm_" + std::to_string(getpid())) {
    const int fd = shm_open(key_.c_str(), O_CREAT | O_RDWR | O_TRUNC, 0600);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    std::string pattern(bytes, '\0');
    for (size_t i = 0; i < bytes; ++i) pattern[i] = static_cast<char>(i % 256);
    EXPECT_EQ(write(fd, pattern.data(), bytes), static_cast<ssize_t>(bytes));
    close(fd);
  }
  ~Object() { shm_unlink(key_.c_str()); }
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

using test::code_of;

TEST(SharedMemory, RegionsReadAndWriteTheObjectAtTheirOffset) {
  Object object(4096);
  SharedMemoryRegistry registry;
  registry.register_region("r", object.key(), 100, 200);
  const auto region = registry.find("r");
  std::span<std::byte> b = region->bytes(10, 4);
  EXPECT_EQ(static_cast<int>(b[0]), 110);
  EXPECT_EQ(static_cast<int>(b[3]), 113);
  b[0] = std::byte{7};
  SharedMemoryRegistry other;  // a second mapping of the same object sees the write
  other.register_region("again", object.key(), 0, 4096);
  EXPECT_EQ(static_cast<int>(other.find("again")->bytes(110, 1)[0]), 7);
}

TEST(SharedMemory, BoundsAreCheckedAtRegistrationAndAccess) {
  Object object(1024);
  SharedMemoryRegistry registry;
  EXPECT_EQ(code_of([&] { registry.register_region("past", object.key(), 1000, 100); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { registry.register_region("none", "/atoll_no_such_key", 0, 8); }), ErrorCode::kNotFound);
  EXPECT_EQ(code_of([&] { registry.register_region("empty", object.key(), 0, 0); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { registry.register_region("wrap", object.key(), UINT64_MAX, 2); }),
            ErrorCode::kInvalidArgument);
  registry.register_region("r", object.key(), 0, 512);
  EXPECT_EQ(code_of([&] { registry.register_region("r", object.key(), 0, 8); }), ErrorCode::kInvalidArgument)
      << "a name is registered once";
  const auto region = registry.find("r");
  EXPECT_EQ(region->bytes(500, 12).size(), 12u);
  EXPECT_EQ(code_of([&] { region->bytes(500, 13); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { region->bytes(UINT64_MAX, 1); }), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code_of([&] { registry.find("nowhere"); }), ErrorCode::kNotFound);
}

TEST(SharedMemory, UnregisterKeepsHeldRegionsMapped) {
  Object object(256);
  SharedMemoryRegistry registry;
  registry.register_region("a", object.key(), 0, 256);
  registry.register_region("b", object.key(), 0, 128);
  EXPECT_EQ(registry.status("").size(), 2u);
  const auto held = registry.find("a");
  registry.unregister("a");
  registry.unregister("not registered");  // as Triton: not an error
  EXPECT_EQ(static_cast<int>(held->bytes(255, 1)[0]), 255) << "a request's region outlives its unregistering";
  registry.unregister("");
  EXPECT_TRUE(registry.status("").empty());
}

// An output placed in a region is written there, and its JSON carries no parameters: Triton's
// C++ client (perf_analyzer's) reads binary_data_size from every output that has them.
TEST(SharedMemory, HttpOutputsInARegionAnswerWithoutParameters) {
  Object object(64);
  SharedMemoryRegistry registry;
  registry.register_region("out", object.key(), 0, 64);
  const std::string body =
      R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1.0]}],)"
      R"("outputs":[{"name":"scores","parameters":{"shared_memory_region":"out","shared_memory_byte_size":20}}]})";
  const HttpInferRequest request = decode_infer_request(body, std::nullopt, "m", "", registry);
  InferResponse response;
  response.model = "m";
  Tensor scores(DType::kF32, Shape({1, 5}));
  for (int i = 0; i < 5; ++i) scores.as<float>()[i] = 0.5f + i;
  response.outputs.push_back({"scores", "FP32", {1, 5}, scores});
  const HttpInferBody answer = encode_infer_response(response, request);
  EXPECT_FALSE(answer.header_length.has_value());
  const auto json = nlohmann::json::parse(answer.body);
  ASSERT_EQ(json.at("outputs").size(), 1u);
  EXPECT_FALSE(json["outputs"][0].contains("parameters")) << answer.body;
  EXPECT_FALSE(json["outputs"][0].contains("data")) << answer.body;
  float written[5];
  std::memcpy(written, registry.find("out")->bytes(0, sizeof(written)).data(), sizeof(written));
  EXPECT_EQ(written[4], 4.5f);
}

}  // namespace
}  // namespace atl::serve
