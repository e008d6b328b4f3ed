#pragma once
// Host-side conversions of weights into the CUDA backend's device formats (request tensors are
// converted on the device: io_convert.h).
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "program/program.h"

namespace atl::cuda {

void floats_to_halves(std::span<const float> src, uint16_t* dst);
// A filter stored [O, kh, kw, Cg] -> halves [kh][kw][Cg][O]; `shape` is logical [O, Cg, kh, kw].
void filter_to_taps_major(std::span<const float> src, const Shape& shape, uint16_t* dst);

}  // namespace atl::cuda
