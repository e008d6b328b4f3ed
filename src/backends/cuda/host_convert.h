#pragma once
// Host-side conversions between the runtime's tensors (f32 / i64, logical row-major) and what
// the CUDA backend stores (f16, NHWC where the spec says so; weights in their device formats).
#include <cstdint>
#include <span>

#include "core/tensor.h"
#include "program/program.h"

namespace atl::cuda {

void floats_to_halves(std::span<const float> src, uint16_t* dst);
// A filter stored [O, kh, kw, Cg] -> halves [kh][kw][Cg][O]; `shape` is logical [O, Cg, kh, kw].
void filter_to_taps_major(std::span<const float> src, const Shape& shape, uint16_t* dst);
// Writes `t` into `dst` in the spec's dtype and layout; throws kInvalidArgument on a dtype mismatch.
void host_to_storage(const Tensor& t, const TensorSpec& spec, void* dst);
Tensor storage_to_host(const void* src, const TensorSpec& spec);

}  // namespace atl::cuda
