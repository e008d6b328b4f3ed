#include "backends/cuda/host_convert.h"

#include <cmath>

#include "core/half.h"

namespace atl::cuda {

uint16_t weight_to_half_bits(float f) {
  constexpr float kHalfMax = 65504.0f;
  if (std::isfinite(f)) f = std::fmin(std::fmax(f, -kHalfMax), kHalfMax);
  return float_to_half_bits(f);
}

void floats_to_halves(std::span<const float> src, uint16_t* dst) {
  for (size_t i = 0; i < src.size(); ++i) dst[i] = weight_to_half_bits(src[i]);
}

void filter_to_taps_major(std::span<const float> src, const Shape& shape, uint16_t* dst) {
  const int64_t o = shape[0], per_filter = shape[1] * shape[2] * shape[3];  // (tap, channel) pairs
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t j = 0; j < per_filter; ++j)
      dst[j * o + oc] = weight_to_half_bits(src[static_cast<size_t>(oc * per_filter + j)]);
}

void filter_pad_channels(std::span<const float> src, const Shape& shape, int64_t channels, uint16_t* dst) {
  const int64_t c = shape[1], taps = shape[0] * shape[2] * shape[3];
  for (int64_t t = 0; t < taps; ++t)
    for (int64_t ch = 0; ch < channels; ++ch)
      dst[t * channels + ch] = ch < c ? weight_to_half_bits(src[static_cast<size_t>(t * c + ch)]) : uint16_t{0};
}

}  // namespace atl::cuda
