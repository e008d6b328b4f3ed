#pragma once
// Host-side conversions of weights into the CUDA backend's device formats (request tensors are
// converted on the device: io_convert.h).
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "program/program.h"

namespace atl::cuda {

// A finite weight beyond fp16's range saturates to +-65504 instead of becoming an infinity (as
// TensorRT and onnxconverter-common convert): exported transformers scale their attention masks
// by float32's lowest value, and 0 * -inf would make every unmasked score NaN. Infinities and
// NaNs stay what they are.
uint16_t weight_to_half_bits(float f);
void floats_to_halves(std::span<const float> src, uint16_t* dst);
// A filter stored [O, kh, kw, Cg] -> halves [kh][kw][Cg][O]; `shape` is logical [O, Cg, kh, kw].
void filter_to_taps_major(std::span<const float> src, const Shape& shape, uint16_t* dst);
// A filter stored [O, kh, kw, C] -> halves [O, kh, kw, channels], zeros past C (channels >= C).
void filter_pad_channels(std::span<const float> src, const Shape& shape, int64_t channels, uint16_t* dst);

}  // namespace atl::cuda
