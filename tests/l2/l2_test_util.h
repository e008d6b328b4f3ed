#pragma once
// Hand-built Programs, devices and traces for the L2 tests; every number the tests expect is
// derived by hand from the sizes written here.
#include <algorithm>
#include <vector>

#include "l2/slices.h"
#include "l2/trace.h"
#include "program/program.h"

namespace atl::l2::testing {

inline Binding arena_binding(int64_t offset, Shape shape) {
  Binding b;
  b.kind = Binding::Kind::kArena;
  b.offset = offset;
  b.dtype = DType::kF16;
  b.bytes = shape.numel() * 2;
  b.shape = std::move(shape);
  b.layout = Layout::kNHWC;
  return b;
}

inline Binding tensor_binding(Binding::Kind kind, int index, DType dtype, Shape shape) {
  Binding b;
  b.kind = kind;
  b.index = index;
  b.dtype = dtype;
  b.bytes = shape.numel() * static_cast<int64_t>(dtype_size(dtype));
  b.shape = std::move(shape);
  return b;
}

// conv (x -> a0) -> relu (a0 -> a1) -> global pool (a1 -> y), f16 activations:
//   x  input  f16 [1,4,10,10]  800 bytes
//   w0 weight f32 [8,4,3,3]    1152 bytes on the host, 576 on the device (conv weights in f16)
//   w1 weight f32 [8]          32 bytes (bias stays f32)
//   a0 arena [0, 1600), a1 arena [1792, 3392), arena 3392 bytes
//   y  output f16 [1,8]        16 bytes
inline Program tiny_program(int64_t batch = 1) {
  Program p;
  p.model = "tiny";
  p.batch = batch;
  p.act_dtype = DType::kF16;
  p.inputs = {{"x", DType::kF16, Shape{1, 4, 10, 10}, Layout::kRowMajor}};
  p.outputs = {{"y", DType::kF16, Shape{1, 8}, Layout::kRowMajor}};
  p.weights = {{"w0", DType::kF32, Shape{8, 4, 3, 3}, Layout::kNHWC}, {"w1", DType::kF32, Shape{8}, Layout::kRowMajor}};
  Kernel conv;
  conv.name = "conv";
  conv.op = OpKind::kConv2d;
  conv.inputs = {tensor_binding(Binding::Kind::kInput, 0, DType::kF16, Shape{1, 4, 10, 10}),
                 tensor_binding(Binding::Kind::kWeight, 0, DType::kF32, Shape{8, 4, 3, 3}),
                 tensor_binding(Binding::Kind::kWeight, 1, DType::kF32, Shape{8})};
  conv.outputs = {arena_binding(0, Shape{1, 8, 10, 10})};
  Kernel relu;
  relu.name = "relu";
  relu.op = OpKind::kRelu;
  relu.inputs = {arena_binding(0, Shape{1, 8, 10, 10})};
  relu.outputs = {arena_binding(1792, Shape{1, 8, 10, 10})};
  Kernel pool;
  pool.name = "pool";
  pool.op = OpKind::kGlobalAvgPool;
  pool.inputs = {arena_binding(1792, Shape{1, 8, 10, 10})};
  pool.outputs = {tensor_binding(Binding::Kind::kOutput, 0, DType::kF16, Shape{1, 8})};
  p.kernels = {conv, relu, pool};
  p.arena_bytes = 3392;
  p.naive_activation_bytes = 3200;
  p.fingerprint = p.compute_fingerprint();
  verify_program(p);
  return p;
}

// 4 sets x 4 ways of 128-byte lines; set-aside up to 2 ways in steps of one way (512 bytes).
inline L2Device tiny_device(int64_t max_window_bytes = 4096) {
  return {.name = "tiny",
          .l2_bytes = 2048,
          .ways = 4,
          .line_bytes = 128,
          .sector_bytes = 32,
          .setaside_max_bytes = 1024,
          .setaside_granularity = 512,
          .max_window_bytes = max_window_bytes};
}

// One line access of a hand-built trace.
struct LineAccess {
  uint32_t line = 0;
  bool write = false;
  uint32_t kernel = 0;
  bool hinted = false;
  uint32_t signature = 0;
};

// A trace of single-line ranges over lines [0, max line], 128-byte lines.
inline Trace make_trace(const std::vector<LineAccess>& accesses) {
  Trace t;
  t.line_bytes = 128;
  uint32_t max_line = 0, max_kernel = 0;
  for (const LineAccess& a : accesses) {
    max_line = std::max(max_line, a.line);
    max_kernel = std::max(max_kernel, a.kernel);
    t.ranges.push_back({a.line, 1, a.kernel, a.signature, a.write, a.hinted});
  }
  t.address_bytes = (int64_t{max_line} + 1) * 128;
  t.arena_bytes = t.address_bytes;
  t.kernel_count = static_cast<int>(max_kernel) + 1;
  t.regions = {{Binding::Kind::kArena, -1, 0, t.arena_bytes}};
  return t;
}

inline std::vector<LineAccess> reads(std::initializer_list<uint32_t> lines) {
  std::vector<LineAccess> out;
  for (uint32_t l : lines) out.push_back({.line = l});
  return out;
}

}  // namespace atl::l2::testing
