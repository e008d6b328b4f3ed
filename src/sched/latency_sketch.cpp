#include "sched/latency_sketch.h"

#include <algorithm>
#include <bit>
#include <cmath>

namespace atl::sched {

namespace {

// Below 2048 ns one bucket per ns; above, 1024 buckets per power of two, so a bucket spans at
// most 1/1024 of its lower bound (HdrHistogram's layout with 10 bits of precision).
constexpr int kSubBits = 10;
constexpr int64_t kHalf = int64_t{1} << kSubBits;
constexpr int64_t kLinear = 2 * kHalf;
constexpr double kMaxNs = 4.0e18;  // keeps the conversion inside int64 for any input

size_t bucket_of(int64_t ns) {
  if (ns < kLinear) return static_cast<size_t>(ns);
  const int shift = std::bit_width(static_cast<uint64_t>(ns)) - 1 - kSubBits;  // >= 1
  return static_cast<size_t>(kLinear + (shift - 1) * kHalf + ((ns >> shift) - kHalf));
}

// The middle of bucket `b`'s whole nanoseconds, in ms.
double bucket_middle_ms(size_t b) {
  const auto i = static_cast<int64_t>(b);
  if (i < kLinear) return static_cast<double>(i) / 1e6;
  const int64_t k = i - kLinear;
  const int shift = static_cast<int>(k / kHalf) + 1;
  const int64_t low = (k % kHalf + kHalf) << shift, width = int64_t{1} << shift;
  return (static_cast<double>(low) + static_cast<double>(width - 1) / 2.0) / 1e6;
}

}  // namespace

void LatencySketch::add(double ms) {
  min_ = count_ == 0 ? ms : std::min(min_, ms);
  max_ = count_ == 0 ? ms : std::max(max_, ms);
  ++count_;
  sum_ += ms;
  if (buckets_.empty() && samples_.size() < exact_limit_) {
    samples_.push_back(ms);
    return;
  }
  if (buckets_.empty()) {
    for (double s : samples_) bin(s);
    samples_ = std::vector<double>();  // frees them: from here on memory is the histogram's
  }
  bin(ms);
}

void LatencySketch::bin(double ms) {
  const auto ns = static_cast<int64_t>(std::llround(std::clamp(ms * 1e6, 0.0, kMaxNs)));
  const size_t b = bucket_of(ns);
  if (b >= buckets_.size()) {
    // To the end of b's power of two: few reallocations, and none doubling past the layout's end.
    const auto octave = static_cast<size_t>(kHalf);
    const size_t size = (b / octave + 1) * octave;
    buckets_.reserve(size);
    buckets_.resize(size, 0);
  }
  ++buckets_[b];
}

double LatencySketch::at_rank(double rank) const {
  const auto want = static_cast<int64_t>(std::clamp(rank, 1.0, static_cast<double>(count_)));
  int64_t seen = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    seen += buckets_[b];
    if (seen >= want) return std::clamp(bucket_middle_ms(b), min_, max_);
  }
  return max_;
}

Distribution LatencySketch::distribution() const {
  if (exact()) return atl::distribution(samples_);
  const auto n = static_cast<double>(count_);
  const auto nearest = [&](double q) { return at_rank(std::ceil(q * n)); };
  Distribution d;
  d.count = static_cast<int>(count_);
  d.mean = sum_ / n;
  d.p50 = nearest(0.5);
  d.p90 = nearest(0.9);
  d.p99 = nearest(0.99);
  d.p999 = nearest(0.999);
  d.max = max_;
  // The same order statistics as atl::distribution's interval, read from the buckets.
  const double nq = 0.99 * n, half = 1.96 * std::sqrt(nq * 0.01);
  d.p99_low = std::min(d.p99, at_rank(std::floor(nq - half)));
  d.p99_high = std::max(d.p99, at_rank(std::ceil(nq + half)));
  return d;
}

LatencyStats LatencySketch::stats() const {
  if (exact()) return latency_stats(samples_);
  const auto n = static_cast<double>(count_);
  LatencyStats s;
  s.samples = static_cast<int>(count_);
  s.min_ms = min_;
  s.max_ms = max_;
  s.mean_ms = sum_ / n;
  // median(): the middle sample, or the mean of the two middle ones.
  s.median_ms = count_ % 2 == 1 ? at_rank((n + 1) / 2) : 0.5 * (at_rank(n / 2) + at_rank(n / 2 + 1));
  s.p99_ms = at_rank(std::ceil(0.99 * n));
  return s;
}

}  // namespace atl::sched
