#include "core/rng.h"

#include <cmath>

namespace atl {

uint64_t fnv1a64(std::string_view s, uint64_t h) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Rng::Rng(uint64_t seed, std::string_view name) : state_(fnv1a64(name, seed * 0x9e3779b97f4a7c15ull + 1)) {}

uint64_t Rng::next_u64() {  // SplitMix64
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

float Rng::uniform() { return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f); }

float Rng::uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }

float Rng::normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_normal_;
  }
  const float u1 = std::max(uniform(), 1e-12f);
  const float u2 = uniform();
  const float r = std::sqrt(-2.0f * std::log(u1));
  spare_normal_ = r * std::sin(6.28318530718f * u2);
  has_spare_ = true;
  return r * std::cos(6.28318530718f * u2);
}

}  // namespace atl
