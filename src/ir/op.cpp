#include "ir/op.h"

#include <array>

#include "core/error.h"

namespace atl {

namespace {
constexpr std::array<std::string_view, static_cast<size_t>(OpKind::kCount)> kOpNames = {
    "Conv2d",  "BatchNorm", "Relu",    "Relu6",  "Gelu",      "Tanh",      "Add",     "Mul",
    "MaxPool", "AvgPool",   "GlobalAvgPool", "Concat", "Flatten", "Reshape", "Transpose", "Gemm",
    "MatMul",  "Softmax",   "LayerNorm", "Gather", "Slice",   "Dropout",   "LayoutToNHWC", "LayoutToNCHW", "ScaleShift",
    "Sub",     "Div",       "Pow",     "Sigmoid", "HardSigmoid", "HardSwish", "Erf",   "Sqrt",
    "Clip",    "ReduceMean", "Cast",   "Attention"};
constexpr std::array<std::string_view, 5> kActNames = {"none", "relu", "relu6", "gelu", "tanh"};
}  // namespace

std::string_view op_name(OpKind op) { return kOpNames[static_cast<size_t>(op)]; }

bool is_unary_elementwise(OpKind op) {
  switch (op) {
    case OpKind::kRelu:
    case OpKind::kRelu6:
    case OpKind::kGelu:
    case OpKind::kTanh:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kErf:
    case OpKind::kSqrt:
    case OpKind::kClip: return true;
    default: return false;
  }
}

bool is_binary_elementwise(OpKind op) {
  switch (op) {
    case OpKind::kAdd:
    case OpKind::kSub:
    case OpKind::kMul:
    case OpKind::kDiv:
    case OpKind::kPow: return true;
    default: return false;
  }
}

OpKind op_from_name(std::string_view name) {
  for (size_t i = 0; i < kOpNames.size(); ++i) {
    if (kOpNames[i] == name) return static_cast<OpKind>(i);
  }
  ATOLL_THROW(kParse, "unknown op '{}'", name);
}

std::string_view act_name(Act a) { return kActNames[static_cast<size_t>(a)]; }

Act act_from_name(std::string_view name) {
  for (size_t i = 0; i < kActNames.size(); ++i) {
    if (kActNames[i] == name) return static_cast<Act>(i);
  }
  ATOLL_THROW(kParse, "unknown activation '{}'", name);
}

}  // namespace atl
