#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace atl {

enum class DType : uint8_t { kF32, kF16, kI32, kI64 };

size_t dtype_size(DType t);
const char* dtype_name(DType t);
DType dtype_from_name(std::string_view name);  // throws kInvalidArgument
inline bool is_float(DType t) { return t == DType::kF32 || t == DType::kF16; }

}  // namespace atl
