#include "core/tensor.h"

#include <sys/mman.h>

#include <cstdint>
#include <cstring>
#include <new>

#include "core/half.h"

namespace atl {

namespace {
// Large buffers come straight from mmap: the kernel hands out zero pages lazily, so a tensor that
// is never written (the zero weights a timing-only compile uses) costs address space, not memory.
constexpr size_t kMapAtBytes = size_t{1} << 20;

std::shared_ptr<std::byte[]> allocate(size_t bytes) {
  if (bytes >= kMapAtBytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    return std::shared_ptr<std::byte[]>(static_cast<std::byte*>(p), [bytes](std::byte* q) { munmap(q, bytes); });
  }
  const size_t rounded = (bytes + 63) / 64 * 64;
  auto* p = static_cast<std::byte*>(::operator new[](rounded == 0 ? 64 : rounded, std::align_val_t{64}));
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  return std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{64}); });
}

double load(const std::byte* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return reinterpret_cast<const float*>(p)[i];
    case DType::kF16: return half_bits_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::kI32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::kI64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
  }
  return 0;
}

void store(std::byte* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::kF32: reinterpret_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF16: reinterpret_cast<uint16_t*>(p)[i] = float_to_half_bits(static_cast<float>(v)); break;
    case DType::kI32: reinterpret_cast<int32_t*>(p)[i] = static_cast<int32_t>(v); break;
    case DType::kI64: reinterpret_cast<int64_t*>(p)[i] = static_cast<int64_t>(v); break;
  }
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  ATOLL_CHECK(shape_.numel() >= 0, kInvalidArgument, "negative dimension in shape {}", shape_.str());
  data_ = allocate(nbytes());
}

Tensor Tensor::over(DType dtype, Shape shape, std::shared_ptr<std::byte[]> data) {
  ATOLL_CHECK(data != nullptr && reinterpret_cast<uintptr_t>(data.get()) % 64 == 0, kInvalidArgument,
              "a tensor over external memory needs a 64-byte aligned buffer");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = std::move(data);
  return t;
}

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes()) std::memcpy(t.raw(), raw(), nbytes());
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  ATOLL_CHECK(shape.numel() == numel(), kInvalidArgument, "cannot reshape {} to {}", shape_.str(), shape.str());
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::to(DType dtype) const {
  if (dtype == dtype_) return clone();
  Tensor t(dtype, shape_);
  for (int64_t i = 0; i < numel(); ++i) store(t.raw(), dtype, i, load(raw(), dtype_, i));
  return t;
}

}  // namespace atl
