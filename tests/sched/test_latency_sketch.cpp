// LatencySketch: exact statistics while it holds every sample, then a histogram whose quantiles
// stay within 0.05% in memory that stops growing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sched/latency_sketch.h"

namespace atl::sched {
namespace {

// Latencies as the devices give them: whole nanoseconds, in ms.
std::vector<double> lognormal_latencies(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> ms(-1.0, 1.2);
  std::vector<double> out(n);
  for (double& v : out) v = std::round(ms(rng) * 1e6) / 1e6;
  return out;
}

TEST(LatencySketch, HoldsEverySampleUpToItsLimit) {
  const std::vector<double> samples = lognormal_latencies(1001, 1);
  LatencySketch sketch(1001);
  for (double v : samples) sketch.add(v);
  ASSERT_TRUE(sketch.exact());
  EXPECT_EQ(sketch.samples(), samples);
  const Distribution got = sketch.distribution(), want = distribution(samples);
  EXPECT_EQ(got.count, want.count);
  EXPECT_EQ(got.mean, want.mean);
  for (const auto& [a, b] : {std::pair{got.p50, want.p50},
                             {got.p99, want.p99},
                             {got.p999, want.p999},
                             {got.max, want.max},
                             {got.p99_low, want.p99_low},
                             {got.p99_high, want.p99_high}}) {
    EXPECT_EQ(a, b);
  }
  const LatencyStats s = sketch.stats(), t = latency_stats(samples);
  EXPECT_EQ(s.median_ms, t.median_ms);
  EXPECT_EQ(s.p99_ms, t.p99_ms);
  EXPECT_EQ(s.min_ms, t.min_ms);
  EXPECT_EQ(s.samples, t.samples);
}

TEST(LatencySketch, PastItsLimitQuantilesStayWithinTheBucketWidth) {
  const std::vector<double> samples = lognormal_latencies(200'000, 2);
  LatencySketch sketch(1000);
  for (double v : samples) sketch.add(v);
  ASSERT_FALSE(sketch.exact());
  EXPECT_TRUE(sketch.samples().empty());
  const Distribution got = sketch.distribution(), want = distribution(samples);
  EXPECT_EQ(got.count, want.count);
  EXPECT_NEAR(got.mean, want.mean, 1e-9 * want.mean);
  EXPECT_EQ(got.max, want.max);
  constexpr double kWithin = 1.0 / 2048;  // half a bucket's width, relative
  for (const auto& [name, a, b] : {std::tuple{"p50", got.p50, want.p50},
                                   {"p90", got.p90, want.p90},
                                   {"p99", got.p99, want.p99},
                                   {"p99.9", got.p999, want.p999},
                                   {"p99 low", got.p99_low, want.p99_low},
                                   {"p99 high", got.p99_high, want.p99_high}}) {
    EXPECT_NEAR(a, b, kWithin * b) << name;
  }
  const LatencyStats s = sketch.stats(), t = latency_stats(samples);
  EXPECT_NEAR(s.median_ms, t.median_ms, kWithin * t.median_ms) << "an even count: the two middle samples' mean";
  EXPECT_EQ(s.min_ms, t.min_ms);
  EXPECT_EQ(s.max_ms, t.max_ms);
}

// Ten million samples from 1 us to 1 s take the same memory as a hundred thousand: a client
// answered for an hour costs what one answered for a minute does.
TEST(LatencySketch, MemoryStopsGrowingOnceItTurnsToTheHistogram) {
  LatencySketch sketch;
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> log_ms(-3.0, 3.0);
  size_t after_100k = 0;
  for (int i = 1; i <= 10'000'000; ++i) {
    sketch.add(std::round(std::pow(10.0, log_ms(rng)) * 1e6) / 1e6);
    if (i == 100'000) after_100k = sketch.memory_bytes();
  }
  EXPECT_EQ(sketch.count(), 10'000'000);
  EXPECT_EQ(sketch.memory_bytes(), after_100k);
  EXPECT_LT(sketch.memory_bytes(), size_t{450} << 10);
  // The layout's end: a latency of 4e18 ns (the clamp) needs no more than the documented bound.
  sketch.add(1e15);
  EXPECT_LT(sketch.memory_bytes(), size_t{450} << 10);
  EXPECT_EQ(sketch.distribution().max, 1e15);
}

}  // namespace
}  // namespace atl::sched
