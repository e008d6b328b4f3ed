// Data movement: strided gathers (Transpose, layout casts, Slice), Concat, embedding Gather.
// Copies move 16-byte units whenever the innermost run allows, else single elements.
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_common.cuh"

namespace atl::cuda {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void strided_copy_kernel(const StridedCopyArgs p, const int* flag) {
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < p.n; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    int rem = i, src = p.offset;
    for (int d = p.rank - 1; d >= 0; --d) {
      src += (rem % p.out_dims[d]) * p.in_strides[d];
      rem /= p.out_dims[d];
    }
    const T v = x[src];
    if (seen_after(stop, v)) return;
    y[i] = v;
  }
}

template <typename T>
__global__ void concat_kernel(const ConcatArgs p, const int* flag) {
  const ConcatArgs::Part& part = p.parts[blockIdx.y];
  const int n = p.rows * part.row;
  const T* x = static_cast<const T*>(part.x);
  T* y = static_cast<T*>(p.y);
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const int stop = checks.next();
    const int r = i / part.row;
    const T v = x[i];
    if (seen_after(stop, v)) return;
    y[r * p.out_row + part.offset + (i - r * part.row)] = v;
  }
}

template <int V>
__global__ void gather_kernel(const GatherArgs p, const int* flag) {
  const int dv = p.d / V;
  const int total = p.rows * dv;
  ItemFlag checks(flag);
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    if (checks.next()) return;
    const int row = i / dv;
    const int col = static_cast<int>(i - row * dv) * V;
    int64_t idx = p.idx[row];
    if (idx < 0 || idx >= p.vocab) {
      if (col == 0) *reinterpret_cast<volatile int*>(p.error_flag) = 1;
      idx = idx < 0 ? 0 : p.vocab - 1;
    }
    const __half* src = p.table + static_cast<int>(idx) * p.d + col;
    __half* dst = p.y + row * p.d + col;
    if constexpr (V == 8) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      *dst = *src;
    }
  }
}

bool aligned(const void* p, int bytes) {
  return (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes)) == 0;
}

template <typename T>
void launch_strided_as(const StridedCopyArgs& p, cudaStream_t s, const int* flag, const char* name) {
  strided_copy_kernel<T><<<blocks_for(p.n, kThreads), kThreads, 0, s>>>(p, flag);
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace

void launch_strided_copy(const StridedCopyArgs& p, cudaStream_t s, const int* flag, const char* name) {
  // Move 16-byte units when the innermost output axis is contiguous in the input and every
  // stride, offset and pointer stays 16-byte aligned (Transposes that keep the last axis).
  const int per16 = 16 / p.elem_size;
  bool wide = p.rank > 0 && p.in_strides[p.rank - 1] == 1 && p.out_dims[p.rank - 1] % per16 == 0 &&
              p.offset % per16 == 0 && aligned(p.x, 16) && aligned(p.y, 16);
  for (int d = 0; wide && d + 1 < p.rank; ++d) wide = p.in_strides[d] % per16 == 0;
  if (wide) {
    StridedCopyArgs w = p;
    w.n /= per16;
    w.out_dims[p.rank - 1] /= per16;
    for (int d = 0; d + 1 < p.rank; ++d) w.in_strides[d] /= per16;
    w.offset /= per16;
    return launch_strided_as<uint4>(w, s, flag, name);
  }
  switch (p.elem_size) {
    case 2:
      return launch_strided_as<uint16_t>(p, s, flag, name);
    case 4:
      return launch_strided_as<uint32_t>(p, s, flag, name);
    default:
      return launch_strided_as<uint64_t>(p, s, flag, name);
  }
}

void launch_concat(const ConcatArgs& p, cudaStream_t s, const int* flag, const char* name) {
  const int per16 = 16 / p.elem_size;
  bool wide = p.out_row % per16 == 0 && aligned(p.y, 16);
  for (int i = 0; wide && i < p.count; ++i) {
    wide = p.parts[i].row % per16 == 0 && p.parts[i].offset % per16 == 0 && aligned(p.parts[i].x, 16);
  }
  if (wide) {
    ConcatArgs w = p;
    w.out_row /= per16;
    w.max_part_elems /= per16;
    for (int i = 0; i < p.count; ++i) {
      w.parts[i].row /= per16;
      w.parts[i].offset /= per16;
    }
    concat_kernel<uint4>
        <<<dim3(blocks_for(w.max_part_elems, kThreads, kThreads, p.count), p.count), kThreads, 0, s>>>(w, flag);
  } else if (p.elem_size == 2) {
    concat_kernel<uint16_t>
        <<<dim3(blocks_for(p.max_part_elems, kThreads, kThreads, p.count), p.count), kThreads, 0, s>>>(p, flag);
  } else if (p.elem_size == 4) {
    concat_kernel<uint32_t>
        <<<dim3(blocks_for(p.max_part_elems, kThreads, kThreads, p.count), p.count), kThreads, 0, s>>>(p, flag);
  } else {
    concat_kernel<uint64_t>
        <<<dim3(blocks_for(p.max_part_elems, kThreads, kThreads, p.count), p.count), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

void launch_gather(const GatherArgs& p, cudaStream_t s, const int* flag, const char* name) {
  if (p.d % 8 == 0 && aligned(p.table, 16) && aligned(p.y, 16)) {
    gather_kernel<8><<<blocks_for(p.rows * (p.d / 8), kThreads), kThreads, 0, s>>>(p, flag);
  } else {
    gather_kernel<1><<<blocks_for(p.rows * p.d, kThreads), kThreads, 0, s>>>(p, flag);
  }
  ATL_CUDA_CHECK_LAUNCH(name);
}

}  // namespace atl::cuda
