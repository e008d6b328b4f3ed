// Host-side weight conversion into fp16 (no GPU needed): finite values beyond fp16's range
// saturate, so an exported attention mask scaled by float32's lowest value stays finite.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "backends/cuda/host_convert.h"
#include "core/half.h"

namespace atl {
namespace {

TEST(WeightToHalf, FiniteValuesBeyondTheRangeSaturate) {
  const float lowest = std::numeric_limits<float>::lowest();
  EXPECT_EQ(half_bits_to_float(cuda::weight_to_half_bits(lowest)), -65504.0f);
  EXPECT_EQ(half_bits_to_float(cuda::weight_to_half_bits(-lowest)), 65504.0f);
  EXPECT_EQ(half_bits_to_float(cuda::weight_to_half_bits(1e5f)), 65504.0f);
  // The masked-score product that was NaN with -inf weights.
  EXPECT_EQ(0.0f * half_bits_to_float(cuda::weight_to_half_bits(lowest)), 0.0f);
}

TEST(WeightToHalf, InRangeValuesInfinitiesAndNaNKeepIEEERounding) {
  for (float f : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 1e-7f, 3.14159f}) {
    EXPECT_EQ(cuda::weight_to_half_bits(f), float_to_half_bits(f)) << f;
  }
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isinf(half_bits_to_float(cuda::weight_to_half_bits(inf))));
  EXPECT_TRUE(std::isinf(half_bits_to_float(cuda::weight_to_half_bits(-inf))));
  EXPECT_TRUE(std::isnan(half_bits_to_float(cuda::weight_to_half_bits(std::nanf("")))));
}

TEST(WeightToHalf, FiltersAndFlatWeightsSaturateAlike) {
  const std::vector<float> w = {1.0f, -1e30f, 7e4f, -3.0f};
  std::vector<uint16_t> flat(w.size()), taps(w.size());
  cuda::floats_to_halves(w, flat.data());
  cuda::filter_to_taps_major(w, Shape({4, 1, 1, 1}), taps.data());  // 1x1 taps: same order
  EXPECT_EQ(flat, taps);
  EXPECT_EQ(half_bits_to_float(flat[1]), -65504.0f);
  EXPECT_EQ(half_bits_to_float(flat[2]), 65504.0f);
}

// An image stem's filter [O, kh, kw, C] keeps every tap's C values in order, then zeros up to
// the padded channel count, so the implicit GEMM's extra channels multiply zeros.
TEST(StemFilterPadding, KeepsEachTapsChannelsAndZeroFillsTheRest) {
  const int64_t o = 2, c = 3, kh = 2, kw = 1, channels = 8;
  std::vector<float> w(static_cast<size_t>(o * kh * kw * c));
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
  std::vector<uint16_t> padded(static_cast<size_t>(o * kh * kw * channels), 0xFFFF);
  cuda::filter_pad_channels(w, Shape({o, c, kh, kw}), channels, padded.data());
  for (int64_t tap = 0; tap < o * kh * kw; ++tap) {
    for (int64_t ch = 0; ch < channels; ++ch) {
      const float want = ch < c ? w[static_cast<size_t>(tap * c + ch)] : 0.0f;
      EXPECT_EQ(half_bits_to_float(padded[static_cast<size_t>(tap * channels + ch)]), want)
          << "tap " << tap << " channel " << ch;
    }
  }
}

}  // namespace
}  // namespace atl
