#pragma once
// Deterministic pseudo-random numbers: the same seed gives the same stream on every platform.
#include <cstdint>
#include <string_view>

namespace atl {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  // Stream keyed by (seed, name): a weight's values do not depend on creation order.
  Rng(uint64_t seed, std::string_view name);

  uint64_t next_u64();
  float uniform();                  // [0, 1)
  float uniform(float lo, float hi);
  float normal();                   // standard normal (Box-Muller, both values of each pair used)

 private:
  uint64_t state_;
  float spare_normal_ = 0.0f;
  bool has_spare_ = false;
};

uint64_t fnv1a64(std::string_view s, uint64_t h = 1469598103934665603ull);

}  // namespace atl
