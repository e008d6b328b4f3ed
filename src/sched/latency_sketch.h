#pragma once
// Latencies of one client in bounded memory, for clients whose requests a long run folds as they
// are answered (closed-loop and best-effort clients: a fast model answers millions of requests an
// hour). Every sample is kept while there are at most `exact_limit` of them, so a short run's
// statistics are exactly what the samples give (core/stats.h); past that the samples move into a
// histogram of log-spaced buckets at most 1/1024 of their value wide, whose quantiles are within
// 0.05% of the true sample's (count, mean, min and max stay exact).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/stats.h"
#include "runtime/session.h"

namespace atl::sched {

class LatencySketch {
 public:
  // 512 KiB of samples per client: the default DISB and colocate runs (tens of seconds) stay exact.
  static constexpr size_t kExactSamples = size_t{1} << 16;
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

  explicit LatencySketch(size_t exact_limit = kExactSamples) : exact_limit_(exact_limit) {}

  // A latency in ms, resolved to the nanosecond (device times are whole ns); negatives count as 0.
  void add(double ms);

  int64_t count() const { return count_; }
  // Whether the statistics below come from every sample (nearest rank) or from the histogram.
  bool exact() const { return buckets_.empty(); }
  // Every sample, in the order added, while exact(); none after.
  const std::vector<double>& samples() const { return samples_; }
  // Heap bytes held: at most exact_limit samples, or the histogram (under 450 KiB for any latency).
  size_t memory_bytes() const { return samples_.capacity() * sizeof(double) + buckets_.capacity() * sizeof(int64_t); }
  // DISB's form: nearest-rank quantiles and the p99's order-statistic interval.
  Distribution distribution() const;
  // colocate's form (latency_stats): min, median, p99, mean, max.
  LatencyStats stats() const;

 private:
  // The sample at 1-based rank `rank` (clamped to [1, count]): the middle of its bucket, kept
  // within [min, max].
  double at_rank(double rank) const;
  void bin(double ms);

  size_t exact_limit_;
  std::vector<double> samples_;   // while count <= exact_limit_
  std::vector<int64_t> buckets_;  // after: counts by bucket index, grown to the largest in use
  int64_t count_ = 0;
  double sum_ = 0;
  double min_ = 0, max_ = 0;
};

}  // namespace atl::sched
