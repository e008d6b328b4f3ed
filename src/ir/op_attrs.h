#pragma once
// Decoded attribute bundles shared by shape inference, the compiler and every backend.
#include <cstdint>

#include "ir/attrs.h"
#include "ir/op.h"

namespace atl {

struct Conv2dParams {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t group = 1;
  Act act = Act::kNone;
  bool has_bias = false;
  bool has_residual = false;
};
Conv2dParams conv2d_params(const Attrs& a);

struct PoolParams {
  int64_t k_h = 1, k_w = 1;
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_t = 0, pad_l = 0, pad_b = 0, pad_r = 0;
  bool ceil_mode = false;
  bool count_include_pad = true;
};
PoolParams pool_params(const Attrs& a);

// Output length of a sliding window (convolution or pooling), PyTorch's ceil_mode rule included.
int64_t pool_out_size(int64_t in, int64_t k, int64_t s, int64_t pad_lo, int64_t pad_hi, int64_t dil, bool ceil_mode);

}  // namespace atl
