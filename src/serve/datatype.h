#pragma once
// KServe v2 tensor datatypes ("FP32", "INT64", ...) as requests spell them.
#include <cstddef>
#include <string>

#include "core/dtype.h"

namespace atl::serve {

// Bytes of one element of a KServe datatype; 0 for types atoll never accepts (BYTES, BOOL, ...).
size_t datatype_size(const std::string& datatype);

// KServe datatype of a program tensor as requests carry it: "FP32" for floats, "INT64" for indices.
std::string kserve_datatype(DType program_dtype);

}  // namespace atl::serve
