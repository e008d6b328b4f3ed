#pragma once
// NumPy .npy files (format 1.0/2.0, little-endian, C order): f4, f2, i4, i8.
#include <string>

#include "core/tensor.h"

namespace atl {

Tensor read_npy(const std::string& path);  // kNotFound / kParse naming the file
void write_npy(const std::string& path, const Tensor& t);
std::string encode_npy(const Tensor& t);  // the bytes write_npy writes

}  // namespace atl
