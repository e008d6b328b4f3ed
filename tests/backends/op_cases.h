#pragma once
// Backend op cases in the style of ggml's test-backend-ops: each case is one compiled kernel
// (op, attributes, operand shapes and layouts) that builds a one-kernel Program with random
// inputs and weights, plus a naive reference computed on logical (NCHW / row-major) tensors
// with plain loops and double accumulation. Every backend test runs the same cases:
//
//   for (const OpCase& c : all_op_cases()) {
//     OpCaseData d = c.build(backend->target().act_dtype, seed);
//     auto inst = backend->load(d.program, d.weights);
//     for (i) inst->set_input(i, d.inputs[i]);
//     inst->run();
//     compare inst->get_output(i) with c.reference(d)[i] via max_rel_error
//   }
//
// The kernel's inputs bind to Program inputs (activations) or Program weights (parameters),
// its output to the Program's one output. A freshly loaded instance is expected to have poisoned
// (NaN) outputs, so an element the kernel never writes fails the comparison.
#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace atl::opcases {

struct Operand {
  enum class Role { kInput, kWeight };
  std::string name;
  Role role = Role::kInput;
  DType dtype = DType::kF32;          // f32, or i64 for indices (i32: CUDA-only tests; CPU requests carry i64)
  Shape shape;                        // logical
  Layout layout = Layout::kRowMajor;  // storage layout in the Program
  float scale = 1.0f;                 // f32 values are uniform in [-scale, scale)
  bool positive = false;              // f32 values are uniform in [0, scale) instead
  float offset = 0.0f;                // added to f32 values (keeps divisors and bases off zero)
  int64_t index_limit = 0;            // integer values are uniform in [0, index_limit)
};

struct OpCaseData {
  Program program;
  WeightStore weights;           // storage layout, for Backend::load
  std::vector<Tensor> inputs;    // host tensors for set_input, one per Program input
  std::vector<Tensor> operands;  // logical value of every kernel input, in binding order
};

struct OpCase {
  std::string name;
  OpKind op = OpKind::kRelu;
  Attrs attrs;
  std::vector<Operand> operands;  // the kernel's inputs, in binding order
  Layout out_layout = Layout::kRowMajor;

  // Float activations are stored as act_dtype; with f16 the float inputs are rounded to f16
  // first, so the reference sees exactly what the device sees.
  OpCaseData build(DType act_dtype, uint64_t seed) const;
  // Expected value of every Program output, computed from data.operands.
  std::vector<Tensor> reference(const OpCaseData& data) const;
};

std::vector<OpCase> all_op_cases();
// The case called `name`; throws kNotFound for an unknown name.
OpCase find_op_case(const std::string& name);

// Naive reference of one op on logical tensors; out_shape comes from IR shape inference.
Tensor reference_op(OpKind op, const Attrs& attrs, const std::vector<Tensor>& operands, const Shape& out_shape);

// Largest |got - want| / max(|want|, rms(want)) over all elements: relative error per element,
// floored at the output's RMS so values that cancel to ~0 do not blow it up. Infinite when a
// shape differs or `got` has a non-finite value where `want` is finite (a poisoned element).
double max_rel_error(const Tensor& got, const Tensor& want);

// Operands for building cases: an activation input, and a weight (a Program weight binding).
Operand act_input(std::string name, Shape shape, Layout layout = Layout::kRowMajor, float scale = 1.0f);
Operand param(std::string name, Shape shape, Layout layout = Layout::kRowMajor, float scale = 1.0f);

}  // namespace atl::opcases
