#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <new>

#include "core/half.h"
#include "core/npy.h"
#include "core/rng.h"
#include "core/tensor.h"

namespace atl {
namespace {

TEST(Half, RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_bits_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(float_to_half_bits(f), h) << "half bits " << h;
  }
}

TEST(Half, RoundsToNearestEven) {
  EXPECT_EQ(round_to_half(1.0f + 1.0f / 4096.0f), 1.0f);                    // below half an ulp
  EXPECT_EQ(round_to_half(1.0f + 3.0f / 2048.0f), 1.0f + 2.0f / 1024.0f);   // tie to even (up)
  EXPECT_EQ(round_to_half(1.0f + 1.0f / 2048.0f), 1.0f);                    // tie to even (down)
  EXPECT_TRUE(std::isinf(round_to_half(70000.0f)));
  EXPECT_EQ(round_to_half(65504.0f), 65504.0f);
  EXPECT_EQ(round_to_half(1e-8f), 0.0f);
  EXPECT_NEAR(round_to_half(3e-6f), 3e-6f, 6e-8f);  // subnormal keeps its value to within half an ulp
}

TEST(Rng, SameSeedAndNameSameStream) {
  Rng a(7, "conv1.weight"), b(7, "conv1.weight"), c(7, "conv2.weight"), d(8, "conv1.weight");
  const float x = a.uniform();
  EXPECT_EQ(x, b.uniform());
  EXPECT_NE(x, c.uniform());
  EXPECT_NE(x, d.uniform());
}

TEST(Rng, UniformStaysInRangeAndNormalHasUnitVariance) {
  Rng r(3);
  double sum = 0, sq = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float u = r.uniform(-2.0f, 5.0f);
    ASSERT_GE(u, -2.0f);
    ASSERT_LT(u, 5.0f);
    const double z = r.normal();
    sum += z;
    sq += z * z;
  }
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
}

// A tensor over memory owned elsewhere reads and writes that memory, and refuses buffers the
// owned tensors' alignment promise would not hold for.
TEST(Tensor, OverExternalMemorySharesItAndChecksAlignment) {
  auto owner = std::shared_ptr<std::byte[]>(new (std::align_val_t{64}) std::byte[64], [](std::byte* p) {
    ::operator delete[](p, std::align_val_t{64});
  });
  Tensor t = Tensor::over(DType::kF32, Shape{4}, owner);
  t.as<float>()[2] = 5.0f;
  float third = 0;
  std::memcpy(&third, owner.get() + 8, sizeof(float));
  EXPECT_EQ(third, 5.0f);
  EXPECT_EQ(t.raw(), owner.get());
  const std::shared_ptr<std::byte[]> misaligned(owner, owner.get() + 4);
  EXPECT_THROW(Tensor::over(DType::kF32, Shape{4}, misaligned), Error);
  EXPECT_THROW(Tensor::over(DType::kF32, Shape{4}, nullptr), Error);
}

TEST(Tensor, ConvertsBetweenDtypes) {
  Tensor t(DType::kF32, Shape{2, 3});
  auto d = t.as<float>();
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(i) - 2.5f;
  const Tensor h = t.to(DType::kF16).to(DType::kF32);
  for (size_t i = 0; i < d.size(); ++i) EXPECT_EQ(h.as<float>()[i], d[i]);
  const Tensor i64 = t.to(DType::kI64);
  EXPECT_EQ(i64.as<int64_t>()[0], -2);
  EXPECT_THROW(t.reshaped(Shape{4, 2}), Error);
  EXPECT_THROW(t.as<int64_t>(), Error);
}

class NpyTest : public ::testing::TestWithParam<DType> {};

TEST_P(NpyTest, RoundTrip) {
  const auto dir = std::filesystem::temp_directory_path() / "atoll_npy_test";
  std::filesystem::create_directories(dir);
  Tensor t(DType::kF32, Shape{3, 1, 5});
  Rng r(11);
  for (float& x : t.as<float>()) x = std::round(r.uniform(-100, 100));
  const Tensor typed = t.to(GetParam());
  // ctest runs each parameter in its own process at once: one file each.
  const std::string path = (dir / (std::string(dtype_name(GetParam())) + ".npy")).string();
  write_npy(path, typed);
  const Tensor back = read_npy(path);
  EXPECT_EQ(back.dtype(), GetParam());
  EXPECT_EQ(back.shape(), typed.shape());
  EXPECT_EQ(0, std::memcmp(back.raw(), typed.raw(), typed.nbytes()));
}

INSTANTIATE_TEST_SUITE_P(AllDtypes, NpyTest, ::testing::Values(DType::kF32, DType::kF16, DType::kI32, DType::kI64));

TEST(Npy, RejectsMissingAndMalformedFiles) {
  EXPECT_THROW(read_npy("/nonexistent/x.npy"), Error);
  const auto path = (std::filesystem::temp_directory_path() / "atoll_npy_malformed.npy").string();
  {
    std::ofstream f(path);
    f << "not numpy";
  }
  try {
    read_npy(path);
    FAIL() << "malformed file accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kParse);
    EXPECT_NE(e.message().find(path), std::string::npos);
  }
  Tensor t(DType::kF32, Shape{100});
  write_npy(path, t);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  EXPECT_THROW(read_npy(path), Error);
}

}  // namespace
}  // namespace atl
