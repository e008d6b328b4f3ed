// How a device's L2 set-aside is shared among RT instances' persistence windows
// (persist_hit_ratios): property tests over random window sizes and budgets.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "core/error.h"
#include "sched/exec_device.h"

namespace atl::sched {
namespace {

double covered(const std::vector<int64_t>& windows, const std::vector<double>& ratios) {
  double sum = 0;
  for (size_t i = 0; i < windows.size(); ++i) sum += ratios[i] * static_cast<double>(windows[i]);
  return sum;
}

TEST(PersistShare, NeverExceedsTheSetAsideAndLeavesNoneIdleWhileAWindowIsShort) {
  std::mt19937_64 rng(std::random_device{}());
  const uint64_t seed = rng();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  rng.seed(seed);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int64_t> windows(1 + rng() % 6);
    for (int64_t& w : windows) w = rng() % 4 == 0 ? 0 : static_cast<int64_t>(rng() % (64 << 20));
    const auto setaside = static_cast<int64_t>(rng() % (96 << 20));
    const std::vector<double> r = persist_hit_ratios(windows, setaside);
    ASSERT_EQ(r.size(), windows.size());
    const double total = static_cast<double>(std::accumulate(windows.begin(), windows.end(), int64_t{0}));
    for (size_t i = 0; i < r.size(); ++i) {
      EXPECT_GE(r[i], 0.0);
      EXPECT_LE(r[i], 1.0);
      if (windows[i] == 0) {
        EXPECT_EQ(r[i], 0.0);
      }
    }
    const double c = covered(windows, r);
    EXPECT_LE(c, static_cast<double>(setaside) * (1 + 1e-12) + 1);
    // Every byte is used while some window is not fully covered; all covered when they fit.
    EXPECT_NEAR(c, std::min(total, static_cast<double>(setaside)), 1e-6 * total + 1);
    // Water-filling: a window covered only in part gets at least the bytes of any other window.
    for (size_t i = 0; i < r.size(); ++i) {
      if (windows[i] == 0 || r[i] >= 1.0) continue;
      for (size_t j = 0; j < r.size(); ++j) {
        EXPECT_GE(r[i] * static_cast<double>(windows[i]) + 1, r[j] * static_cast<double>(windows[j]));
      }
    }
  }
}

TEST(PersistShare, EdgeCases) {
  EXPECT_TRUE(persist_hit_ratios({}, 1 << 20).empty());
  const std::vector<int64_t> two{8, 24};
  EXPECT_EQ(persist_hit_ratios(two, 0), (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(persist_hit_ratios(two, 32), (std::vector<double>{1.0, 1.0}));
  EXPECT_EQ(persist_hit_ratios(two, 20), (std::vector<double>{1.0, 0.5}));  // 8 fits, 12 of 24 left
  EXPECT_EQ(persist_hit_ratios(two, 8), (std::vector<double>{0.5, 4.0 / 24.0}));
  const std::vector<int64_t> negative{-1};
  try {
    persist_hit_ratios(negative, 8);
    FAIL() << "accepted a negative window";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace atl::sched
