#include "core/shape.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace atl {

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    // A shape read from a file can claim more elements than int64 holds; wrapping would make
    // it look small.
    ATOLL_CHECK(!__builtin_mul_overflow(n, d, &n), kInvalidArgument, "shape {} has more than 2^63 elements", str());
  }
  return n;
}

std::string Shape::str() const { return fmt::format("[{}]", fmt::join(dims_, ", ")); }

}  // namespace atl
