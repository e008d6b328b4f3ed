#include "backends/cuda/host_convert.h"

#include <cstring>

#include "core/error.h"
#include "core/half.h"

namespace atl::cuda {

namespace {

bool is_nhwc(const TensorSpec& spec) { return spec.layout == Layout::kNHWC && spec.shape.rank() == 4; }

// Visits every element as (logical row-major index, stored index).
template <typename Fn>
void for_each_nhwc(const Shape& s, Fn&& fn) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic)
      for (int64_t ih = 0; ih < h; ++ih)
        for (int64_t iw = 0; iw < w; ++iw) fn(((in * c + ic) * h + ih) * w + iw, ((in * h + ih) * w + iw) * c + ic);
}

}  // namespace

void floats_to_halves(std::span<const float> src, uint16_t* dst) {
  for (size_t i = 0; i < src.size(); ++i) dst[i] = float_to_half_bits(src[i]);
}

void filter_to_taps_major(std::span<const float> src, const Shape& shape, uint16_t* dst) {
  const int64_t o = shape[0], per_filter = shape[1] * shape[2] * shape[3];  // (tap, channel) pairs
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t j = 0; j < per_filter; ++j) dst[j * o + oc] = float_to_half_bits(src[static_cast<size_t>(oc * per_filter + j)]);
}

void host_to_storage(const Tensor& t, const TensorSpec& spec, void* dst) {
  if (spec.dtype == DType::kF16) {
    ATOLL_CHECK(t.dtype() == DType::kF32, kInvalidArgument, "input '{}' must be an f32 tensor, got {}", spec.name,
                dtype_name(t.dtype()));
    const auto src = t.as<float>();
    auto* out = static_cast<uint16_t*>(dst);
    if (is_nhwc(spec)) {
      for_each_nhwc(spec.shape, [&](int64_t logical, int64_t stored) {
        out[stored] = float_to_half_bits(src[static_cast<size_t>(logical)]);
      });
    } else {
      floats_to_halves(src, out);
    }
    return;
  }
  ATOLL_CHECK(t.dtype() == spec.dtype, kInvalidArgument, "input '{}' must be an {} tensor, got {}", spec.name,
              dtype_name(spec.dtype), dtype_name(t.dtype()));
  ATOLL_CHECK(!is_nhwc(spec), kUnsupported, "input '{}': NHWC storage of {} tensors", spec.name,
              dtype_name(spec.dtype));
  std::memcpy(dst, t.raw(), t.nbytes());
}

Tensor storage_to_host(const void* src, const TensorSpec& spec) {
  if (spec.dtype == DType::kF16) {
    Tensor t(DType::kF32, spec.shape);
    auto out = t.as<float>();
    const auto* in = static_cast<const uint16_t*>(src);
    if (is_nhwc(spec)) {
      for_each_nhwc(spec.shape, [&](int64_t logical, int64_t stored) {
        out[static_cast<size_t>(logical)] = half_bits_to_float(in[stored]);
      });
    } else {
      for (size_t i = 0; i < out.size(); ++i) out[i] = half_bits_to_float(in[i]);
    }
    return t;
  }
  ATOLL_CHECK(!is_nhwc(spec), kUnsupported, "output '{}': NHWC storage of {} tensors", spec.name,
              dtype_name(spec.dtype));
  Tensor t(spec.dtype, spec.shape);
  std::memcpy(t.raw(), src, t.nbytes());
  return t;
}

}  // namespace atl::cuda
