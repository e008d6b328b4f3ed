#pragma once
// IEEE binary16 <-> binary32 on the host, round to nearest even (what CUDA's __float2half does).
#include <cstdint>

namespace atl {

uint16_t float_to_half_bits(float f);
float half_bits_to_float(uint16_t h);
inline float round_to_half(float f) { return half_bits_to_float(float_to_half_bits(f)); }

}  // namespace atl
