#pragma once
// Host tensor: dtype + shape + owned, 64-byte aligned, contiguous row-major storage.
#include <cstddef>
#include <memory>
#include <span>

#include "core/dtype.h"
#include "core/error.h"
#include "core/shape.h"

namespace atl {

class Tensor {
 public:
  Tensor() = default;
  Tensor(DType dtype, Shape shape);  // zero-filled
  // A tensor over memory owned elsewhere: `data` (at least nbytes(), 64-byte aligned) keeps it
  // alive through its deleter, or holds a no-op deleter and the owner outlives the tensor.
  static Tensor over(DType dtype, Shape shape, std::shared_ptr<std::byte[]> data);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool empty() const { return !data_; }

  std::byte* raw() { return data_.get(); }
  const std::byte* raw() const { return data_.get(); }

  template <typename T>
  std::span<T> as() {
    check_type<T>();
    return {reinterpret_cast<T*>(data_.get()), static_cast<size_t>(numel())};
  }
  template <typename T>
  std::span<const T> as() const {
    check_type<T>();
    return {reinterpret_cast<const T*>(data_.get()), static_cast<size_t>(numel())};
  }

  Tensor clone() const;
  // Same bytes, new shape of equal element count.
  Tensor reshaped(Shape shape) const;
  // Converts between dtypes (f32<->f16 round to nearest even; ints <-> floats by value).
  Tensor to(DType dtype) const;

 private:
  template <typename T>
  void check_type() const {
    ATOLL_CHECK(sizeof(T) == dtype_size(dtype_), kInternal, "tensor of {} viewed as {}-byte type",
                dtype_name(dtype_), sizeof(T));
  }

  DType dtype_ = DType::kF32;
  Shape shape_;
  std::shared_ptr<std::byte[]> data_;
};

}  // namespace atl
