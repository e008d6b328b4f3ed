#pragma once
// The walk the padding GPU tests share: every kernel of every op case CUDA loads, under every
// GEMM choice it offers, launched once in program order (each kernel then reads what the kernels
// before it wrote: a later kernel may reuse the arena under an earlier one's input), each launch
// followed by a check of the caller's against its outputs.
#include <cstdint>
#include <functional>
#include <string>

#include "backends/backend.h"
#include "gpu_test_util.h"

namespace atl::gputest {

// `check(gpu, kernel index, kernel, label)` after each launch; the label names the op case, the
// kernel, its op and its GEMM choice. Op cases CUDA refuses (kUnsupported) are skipped: the op
// suite covers those.
void for_each_launched_kernel(Backend& backend, uint64_t seed,
                              const std::function<void(CudaInstance&, int, const Kernel&, const std::string&)>& check);

}  // namespace atl::gputest
