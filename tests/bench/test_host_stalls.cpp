#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "bench/host_stalls.h"

namespace atl::bench {
namespace {

using std::chrono::microseconds;

TEST(StallTally, CountsWakesLaterThanTheThresholdAndKeepsTheLatest) {
  StallTally tally(microseconds(500));
  for (int us : {20, 499, 500, 501, 2070, 80}) tally.add(microseconds(us));
  const HostStalls s = tally.summary();
  EXPECT_EQ(s.wakes, 6);
  EXPECT_EQ(s.over_threshold, 2) << "500 us is not over a 500 us threshold";
  EXPECT_DOUBLE_EQ(s.longest_us, 2070.0);
  EXPECT_DOUBLE_EQ(s.threshold_us, 500.0);
}

TEST(StallTally, NothingTalliedIsNoStall) {
  const HostStalls s = StallTally(microseconds(500)).summary();
  EXPECT_EQ(s.wakes, 0);
  EXPECT_EQ(s.over_threshold, 0);
  EXPECT_DOUBLE_EQ(s.longest_us, 0.0);
}

TEST(HostStallWatch, WakesInSmallStepsUntilStopped) {
  HostStallWatch watch(true);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const auto s = watch.stop();
  ASSERT_TRUE(s.has_value());
  // 50 ms of 100 us steps: hundreds of wakes on an idle host, and at least a few on a loaded
  // one, whose wake-ups can be milliseconds late.
  EXPECT_GE(s->wakes, 5);
  EXPECT_LE(s->over_threshold, s->wakes);
  EXPECT_DOUBLE_EQ(s->threshold_us, 500.0);
  EXPECT_FALSE(watch.stop().has_value()) << "stopped once";
}

TEST(HostStallWatch, DisabledWatchesNothing) {
  HostStallWatch watch(false);
  EXPECT_FALSE(watch.stop().has_value());
}

}  // namespace
}  // namespace atl::bench
