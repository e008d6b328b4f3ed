// core/stats: quantiles, medians and their intervals against brute force on fresh samples.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "core/stats.h"

namespace atl {
namespace {

// A fresh seed per test, printed with any failure.
uint64_t fresh_seed() {
  const uint64_t seed = std::random_device{}();
  ::testing::Test::RecordProperty("seed", std::to_string(seed));
  return seed;
}

std::vector<double> fresh_samples(std::mt19937_64& rng, size_t n) {
  std::lognormal_distribution<double> d(0.0, 1.0);  // a long right tail, as latencies have
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

// The value at or above which a share (1 - q) of the samples lie, by counting.
bool is_nearest_rank(const std::vector<double>& v, double q, double x) {
  const auto at_most = std::count_if(v.begin(), v.end(), [&](double s) { return s <= x; });
  const auto below = std::count_if(v.begin(), v.end(), [&](double s) { return s < x; });
  const double need = std::max(1.0, std::ceil(q * static_cast<double>(v.size())));
  return std::find(v.begin(), v.end(), x) != v.end() && static_cast<double>(at_most) >= need &&
         static_cast<double>(below) < need;
}

TEST(Stats, QuantilesAreNearestRanks) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (size_t n : {1u, 2u, 3u, 10u, 99u, 100u, 101u, 1000u}) {
    const std::vector<double> v = fresh_samples(rng, n);
    for (double q : {0.0, 0.01, 0.5, 0.9, 0.99, 0.999, 1.0}) {
      const double x = quantile(v, q);
      EXPECT_TRUE(is_nearest_rank(v, q, x)) << "n " << n << " q " << q << " -> " << x;
    }
    EXPECT_EQ(quantile(v, 0.0), *std::min_element(v.begin(), v.end()));
    EXPECT_EQ(quantile(v, 1.0), *std::max_element(v.begin(), v.end()));
  }
}

TEST(Stats, MedianIsTheMiddleOrTheMeanOfTheTwoMiddles) {
  EXPECT_EQ(median({3, 1, 2}), 2);
  EXPECT_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_EQ(median({7}), 7);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (size_t n : {2u, 5u, 64u, 65u}) {
    std::vector<double> v = fresh_samples(rng, n);
    const double m = median(v);
    std::sort(v.begin(), v.end());
    EXPECT_DOUBLE_EQ(m, n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2])) << n;
  }
}

TEST(Stats, DistributionAgreesWithQuantilesAndBracketsItsP99) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  for (size_t n : {1u, 50u, 100u, 5000u}) {
    const std::vector<double> v = fresh_samples(rng, n);
    const Distribution d = distribution(v);
    EXPECT_EQ(d.count, static_cast<int>(n));
    EXPECT_EQ(d.p50, quantile(v, 0.5));
    EXPECT_EQ(d.p90, quantile(v, 0.9));
    EXPECT_EQ(d.p99, quantile(v, 0.99));
    EXPECT_EQ(d.p999, quantile(v, 0.999));
    EXPECT_EQ(d.max, quantile(v, 1.0));
    EXPECT_LE(d.p99_low, d.p99);
    EXPECT_GE(d.p99_high, d.p99);
    double sum = 0;
    for (double x : v) sum += x;
    EXPECT_NEAR(d.mean, sum / static_cast<double>(n), 1e-12 * sum);
  }
  // With 5000 samples the interval holds ranks 4950 -+ 14: neither end is the p99 itself.
  std::vector<double> ranks(5000);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<double>(i + 1);
  const Distribution d = distribution(ranks);
  EXPECT_EQ(d.p99, 4950);
  EXPECT_EQ(d.p99_low, 4936);
  EXPECT_EQ(d.p99_high, 4964);
}

TEST(Stats, MedianIntervalIsHalfTheOrderStatisticsSpan) {
  std::vector<double> ranks(100);
  for (size_t i = 0; i < ranks.size(); ++i) ranks[i] = static_cast<double>(i);
  // k = floor((100 - 19.6) / 2) = 40: half of samples[59] - samples[40].
  EXPECT_DOUBLE_EQ(median_ci_half_width(ranks), 9.5);
  EXPECT_EQ(median_ci_half_width({5}), 0.0);
}

TEST(PairedQuantileChange, SamePairsChangeNothing) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<double> b = fresh_samples(rng, 500);
  const QuantileChange c = paired_quantile_change(b, b, 0.99, 200);
  EXPECT_EQ(c.pairs, 500);
  EXPECT_EQ(c.change, 0.0);
  EXPECT_EQ(c.low, 0.0);
  EXPECT_EQ(c.high, 0.0);
}

// a[i] = b[i] (1 + shift) (1 + e[i]) with |e[i]| <= jitter bounds every resample's quantile ratio:
// the interval must lie in that band, however wide the unpaired one is.
TEST(PairedQuantileChange, IntervalStaysInsideTheBandThePairsAllow) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<double> b = fresh_samples(rng, 3000);
  constexpr double kShift = 0.02, kJitter = 0.005;
  std::uniform_real_distribution<double> e(-kJitter, kJitter);
  std::vector<double> a(b.size());
  for (size_t i = 0; i < b.size(); ++i) a[i] = b[i] * (1 + kShift) * (1 + e(rng));
  const QuantileChange c = paired_quantile_change(a, b, 0.99, 500, 7);
  const double lo = (1 + kShift) * (1 - kJitter) - 1, hi = (1 + kShift) * (1 + kJitter) - 1;
  EXPECT_GE(c.low, lo - 1e-12);
  EXPECT_LE(c.high, hi + 1e-12);
  EXPECT_LE(c.low, c.change);
  EXPECT_GE(c.high, c.change);
  EXPECT_NEAR(c.change, quantile(a, 0.99) / quantile(b, 0.99) - 1, 1e-12);
  // Two unpaired p99 intervals of a long-tailed sample span tens of points: pairing is what
  // makes a 2% change decidable from 3000 requests.
  const Distribution da = distribution(a), db = distribution(b);
  const double unpaired_width = da.p99_high / db.p99_low - da.p99_low / db.p99_high;
  EXPECT_GT(unpaired_width, 4 * (hi - lo));
}

TEST(PairedQuantileChange, SameSeedSameInterval) {
  std::mt19937_64 rng(fresh_seed());
  const std::vector<double> a = fresh_samples(rng, 400), b = fresh_samples(rng, 400);
  const QuantileChange x = paired_quantile_change(a, b, 0.99, 300, 11), y = paired_quantile_change(a, b, 0.99, 300, 11);
  EXPECT_EQ(x.low, y.low);
  EXPECT_EQ(x.high, y.high);
  EXPECT_LT(x.low, x.high) << "unrelated samples leave room to move";
  const QuantileChange none = paired_quantile_change(a, b, 0.99, 0);
  EXPECT_EQ(none.low, none.change);
  EXPECT_EQ(none.high, none.change);
}

TEST(PairedQuantileChange, UnpairableSamplesGiveZeros) {
  EXPECT_EQ(paired_quantile_change({1, 2}, {1, 2, 3}, 0.99).pairs, 0);
  EXPECT_EQ(paired_quantile_change({}, {}, 0.99).pairs, 0);
  EXPECT_EQ(paired_quantile_change({1, 2}, {0, 0}, 0.99).pairs, 0) << "no base to divide by";
}

TEST(Stats, NoSamplesGiveZeros) {
  EXPECT_EQ(quantile({}, 0.5), 0.0);
  EXPECT_EQ(median({}), 0.0);
  EXPECT_EQ(median_ci_half_width({}), 0.0);
  const Distribution d = distribution({});
  EXPECT_EQ(d.count, 0);
  EXPECT_EQ(d.p99, 0.0);
}

}  // namespace
}  // namespace atl
