#pragma once
// The Program: the one artifact every layer after the compiler reads. Plain data (no pointers,
// no device state): ordered kernels with their bindings, the arena size, and tensor specs.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/dtype.h"
#include "core/shape.h"
#include "ir/attrs.h"
#include "ir/op.h"

namespace atl {

// Physical order of a tensor's elements. Shapes are always logical (NCHW for images);
// kNHWC says a rank-4 tensor is stored as [N, H, W, C].
enum class Layout : uint8_t { kRowMajor, kNHWC };
const char* layout_name(Layout l);

// What the compiler must produce for a backend. Convolutions always run NHWC.
struct CompileTarget {
  DType act_dtype = DType::kF32;  // storage type of float activations
  int64_t alignment = 256;        // arena offset alignment in bytes
  // MatMul kernels read and write rank-4 operands stored [B, S, H, D] as [B, H, S, D] (attrs
  // a_swap12, b_swap12, y_swap12), so the compiler folds attention's heads-first transposes
  // into them instead of running each as a kernel.
  bool matmul_head_views = false;
  // Gemm kernels take attr `groups` (G Gemms of one input in one launch: weights stacked [G * N,
  // K], outputs [G, ..., N]), so the compiler merges Gemms that share their input (attention's
  // Q, K and V projections) and their outputs become views of the stacked one.
  bool gemm_groups = false;
  // Each group's N is a multiple of this (CUDA: its narrowest tile, so every output tile lies in
  // one group's slice and the epilogue resolves the slice once per tile).
  int64_t gemm_group_columns = 1;
  // Attention kernels (OpKind::kAttention) take what a MatMul -> Softmax -> MatMul chain over
  // rank-4 heads computes, so the compiler fuses each such chain into one kernel: no scores
  // tensor in the arena, one launch instead of three. Limits of the target's kernel (0: none):
  // the most keys, the widest head, and what every head size (q, k and v alike) is a multiple of.
  bool fused_attention = false;
  int64_t attention_max_keys = 0;
  int64_t attention_max_head_dim = 0;
  int64_t attention_head_dim_multiple = 1;
};

struct Binding {
  enum class Kind : uint8_t { kArena, kWeight, kInput, kOutput };
  Kind kind = Kind::kArena;
  int index = -1;      // weight / input / output index; -1 for arena
  int64_t offset = 0;  // byte offset into the arena (kArena) or into the tensor (views)
  int64_t bytes = 0;   // bytes this binding covers
  DType dtype = DType::kF32;
  Shape shape;
  Layout layout = Layout::kRowMajor;
  int buffer = -1;  // id of the planned buffer (arena) this binding views; -1 otherwise
};
const char* binding_kind_name(Binding::Kind k);

struct Kernel {
  std::string name;
  OpKind op = OpKind::kRelu;
  Attrs attrs;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  double flops = 0;        // multiply-add = 2 flops
  double bytes_moved = 0;  // minimum bytes read + written
};

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  Shape shape;
  Layout layout = Layout::kRowMajor;
};

struct Program {
  std::string model;
  int64_t batch = 1;
  DType act_dtype = DType::kF32;  // storage type of float activations
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;
  std::vector<TensorSpec> weights;  // index = Binding::index for kWeight; name keys the WeightStore
  std::vector<Kernel> kernels;
  int64_t arena_bytes = 0;
  int64_t naive_activation_bytes = 0;  // sum of every intermediate buffer, no reuse
  int64_t alignment = 256;
  // Kernels that may be in flight together without one clobbering another's inputs (see
  // CompileOptions::inflight_window); a scheduler's in-flight cap must not exceed it.
  int inflight_window = 1;
  std::string fingerprint;  // hash of everything above; configs and profiles are keyed to it

  int64_t param_count() const;
  double total_flops() const;
  // Recomputes the fingerprint from the contents.
  std::string compute_fingerprint() const;
};

void to_json(nlohmann::json& j, const Program& p);
void from_json(const nlohmann::json& j, Program& p);
std::string program_to_json_string(const Program& p, int indent = 1);
// Parses and checks a Program (bindings in range, fingerprint matches); throws kParse.
Program program_from_json_string(const std::string& text);

// Structural checks every consumer may rely on: bindings inside the arena and tensors,
// sizes consistent with shapes, and no kernel whose outputs overlap its inputs (idempotence).
void verify_program(const Program& p);

}  // namespace atl
