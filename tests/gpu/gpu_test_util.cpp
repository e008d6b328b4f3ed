#include "gpu_test_util.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "backends/cuda/cuda_check.h"
#include "models/zoo.h"

namespace atl::gputest {

namespace {
// Hermetic loads: every test tunes afresh unless it points the cache somewhere itself.
const bool kNoTuneCache = setenv("ATOLL_TUNE_CACHE", "off", /*overwrite=*/0) == 0;
}  // namespace

std::vector<std::string> zoo_names() {
  std::vector<std::string> names;
  for (const ModelInfo& m : list_models()) names.push_back(m.name);
  return names;
}

uint64_t fresh_seed() {
  if (const char* pinned = std::getenv("ATOLL_TEST_SEED")) return std::strtoull(pinned, nullptr, 10);
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

bool is_imported_op(OpKind op) {
  switch (op) {
    case OpKind::kSub:
    case OpKind::kDiv:
    case OpKind::kPow:
    case OpKind::kSigmoid:
    case OpKind::kHardSigmoid:
    case OpKind::kHardSwish:
    case OpKind::kErf:
    case OpKind::kSqrt:
    case OpKind::kClip:
    case OpKind::kReduceMean:
    case OpKind::kCast: return true;
    default: return false;
  }
}

CudaInstance& as_cuda(Instance& inst) {
  auto* c = dynamic_cast<CudaInstance*>(&inst);
  if (c == nullptr) throw std::logic_error("instance is not a CUDA instance");
  return *c;
}

double rel_l2(const Tensor& got, const Tensor& want) {
  if (!(got.shape() == want.shape()) || got.dtype() != DType::kF32 || want.dtype() != DType::kF32) return INFINITY;
  const auto g = got.as<float>();
  const auto w = want.as<float>();
  double num = 0, den = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(g[i])) return INFINITY;
    const double d = static_cast<double>(g[i]) - w[i];
    num += d * d;
    den += static_cast<double>(w[i]) * w[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

bool all_bytes_are(const std::vector<std::byte>& bytes, uint8_t value) {
  for (std::byte b : bytes) {
    if (b != std::byte{value}) return false;
  }
  return true;
}

void set_flag(int* device_flag, int value) {
  ATL_CUDA_CHECK(cudaMemcpy(device_flag, &value, sizeof(int), cudaMemcpyHostToDevice));
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace atl::gputest
