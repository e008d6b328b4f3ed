#pragma once
// Moves request tensors between the runtime's form (f32, logical row-major) and the backend's
// storage (f16, NHWC where the spec says so) on the device. The host then only copies raw bytes:
// converting one 224x224 image element by element on the host took ~0.6 ms, all of it on the
// scheduler's path from an RT request's arrival to its first kernel.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "program/program.h"

namespace atl::cuda {

// An f16 tensor as the conversion kernels see it: `outer` images of `channels` x `pixels`
// elements, stored channel-last when `nhwc` (else in logical order).
struct HalfStorage {
  int64_t outer = 0;
  int64_t channels = 1;
  int64_t pixels = 1;
  bool nhwc = false;
};

HalfStorage half_storage(const TensorSpec& spec);
// f32 logical -> f16 storage. With a flag it is preemptible like launch_sm_copy (leaving `dst_half`
// partial; `src` is untouched, so a rerun converts all of it again).
void launch_f32_to_storage(const float* src, void* dst_half, const HalfStorage& s, cudaStream_t stream,
                           const int* flag = nullptr);
// f16 storage -> f32 logical.
void launch_storage_to_f32(const void* src_half, float* dst, const HalfStorage& s, cudaStream_t stream);
// `bytes` from `src` to `dst` by the SMs, where one side is mapped pinned host memory: a copy
// that must not queue on a copy engine behind other streams' copies (an RT request's input
// behind a BE batch's 19 MB). Both pointers 16-byte aligned. With a flag it is preemptible (it
// stops within a step or two of a raise, leaving `dst` partial); `max_blocks` caps the SMs it
// takes: a PCIe-bound copy needs only enough bytes in flight. `fresh_flag`: each step tests the
// flag read beside its own PCIe read instead of the one read during the step before (UploadCopy);
// without a flag it has nothing to read and is ignored.
void launch_sm_copy(const void* src, void* dst, size_t bytes, cudaStream_t stream, const int* flag = nullptr,
                    int max_blocks = 1024, bool fresh_flag = false);
// Loads this file's kernels now. CUDA loads a kernel's code at its first launch, which a hold
// pending on any stream blocks (stream_gate.h): an instance whose copies move to the SMs, or
// whose uploads become preemptible kernels, after its preload would first launch them there.
void load_io_kernels();

}  // namespace atl::cuda
