#pragma once
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace atl {

// Static tensor shape; dimension 0 is the batch dimension where a tensor has one.
class Shape {
 public:
  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t operator[](int i) const { return dims_[static_cast<size_t>(i)]; }
  int64_t& operator[](int i) { return dims_[static_cast<size_t>(i)]; }
  // Negative index counts from the back, as in NumPy.
  int64_t dim(int i) const { return dims_[static_cast<size_t>(i < 0 ? i + rank() : i)]; }
  int64_t numel() const;
  const std::vector<int64_t>& dims() const { return dims_; }
  std::string str() const;  // "[1, 3, 224, 224]"

  friend bool operator==(const Shape& a, const Shape& b) { return a.dims_ == b.dims_; }

 private:
  std::vector<int64_t> dims_;
};

}  // namespace atl
