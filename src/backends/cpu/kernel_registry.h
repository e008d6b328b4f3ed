#pragma once
// The CPU kernel registry: one {validate, run} entry per op. validate() runs once per kernel at
// load and decodes everything run() needs into a KernelPlan, so run() only dispatches.
#include <any>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/error.h"
#include "program/program.h"

namespace atl::cpu {

// Decoded, validated form of one kernel.
struct KernelPlan {
  std::any params;              // family-specific decoded attributes and shapes
  int64_t workspace_bytes = 0;  // scratch run() needs; the instance sizes one buffer for the largest
};

// Resolved memory of one kernel: one pointer per binding, in binding order, plus shared scratch.
struct KernelArgs {
  std::span<const std::byte* const> in;
  std::span<std::byte* const> out;
  std::byte* workspace = nullptr;  // KernelPlan::workspace_bytes, 64-byte aligned
  int threads = 1;                 // the thread count the plan was made for

  const float* in_f32(size_t i) const { return reinterpret_cast<const float*>(in[i]); }
  float* out_f32(size_t i) const { return reinterpret_cast<float*>(out[i]); }
};

// validate throws (kUnsupported for what this backend cannot run); the caller adds the kernel name.
// `threads` is the instance's OpenMP thread count, which scratch for per-thread work depends on.
using ValidateFn = KernelPlan (*)(const Kernel& k, int threads);
using RunFn = void (*)(const Kernel& k, const KernelPlan& plan, const KernelArgs& args);

struct KernelEntry {
  ValidateFn validate = nullptr;
  RunFn run = nullptr;
};

using KernelRegistry = std::array<KernelEntry, static_cast<size_t>(OpKind::kCount)>;

// The one dispatch table. Throws kUnsupported for an op with no CPU kernel.
const KernelEntry& kernel_entry(OpKind op);

// Each kernel family fills its ops (one file each).
void register_conv_kernels(KernelRegistry& r);
void register_gemm_kernels(KernelRegistry& r);
void register_pool_kernels(KernelRegistry& r);
void register_elementwise_kernels(KernelRegistry& r);
void register_norm_kernels(KernelRegistry& r);
void register_data_kernels(KernelRegistry& r);
void register_math_kernels(KernelRegistry& r);

// --- validation helpers (throw kUnsupported) -------------------------------------------------

void expect_arity(const Kernel& k, size_t inputs, size_t outputs);
void expect_dtype(const Binding& b, DType dtype, const char* role);
void expect_f32(const Kernel& k);  // every binding of the kernel is f32
// Rank-4 tensors must use `layout`; tensors of other ranks are always row-major.
void expect_layout(const Binding& b, Layout layout, const char* role);
void expect_shape(const Binding& b, const Shape& shape, const char* role);

// Dimensions in storage order ([N, H, W, C] for a rank-4 NHWC tensor).
std::vector<int64_t> physical_dims(const Binding& b);
// Storage position of logical axis `axis` (already normalized to 0..rank-1).
int physical_axis(const Binding& b, int axis);
// Normalizes a possibly negative axis; throws kInvalidGraph when out of range.
int normalize_axis(int64_t axis, int rank);
bool is_nhwc(const Binding& b);

}  // namespace atl::cpu
