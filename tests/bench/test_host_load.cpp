#include <gtest/gtest.h>

#include <chrono>

#include "bench/host_load.h"

namespace atl::bench {
namespace {

TEST(HostLoad, ParsesTheAggregateLineOfProcStat) {
  // user nice system idle iowait irq softirq steal guest guest_nice
  const auto t = parse_proc_stat("cpu  100 20 30 400 50 6 7 8 9 10\ncpu0 1 2 3 4 5 6 7 8 9 10\nintr 5\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->total, 621u) << "guest time is inside user and nice already";
  EXPECT_EQ(t->busy, 171u) << "idle and iowait are not busy";
  EXPECT_EQ(t->steal, 8u);
  const auto old_kernel = parse_proc_stat("cpu  100 20 30 400 50 6 7\n");
  ASSERT_TRUE(old_kernel.has_value());
  EXPECT_EQ(old_kernel->steal, 0u) << "no steal field: nothing stolen";
}

TEST(HostLoad, RejectsTextWithoutTheAggregateLine) {
  EXPECT_FALSE(parse_proc_stat("").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu  1 2\n").has_value()) << "fewer than four fields";
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4\n").has_value());
  EXPECT_TRUE(parse_proc_stat("intr 5\ncpu  1 2 3 4\n").has_value()) << "the line may come later";
}

TEST(HostLoad, SharesBetweenTwoReadings) {
  const auto load = host_load(CpuTimes{100, 1000, 10}, CpuTimes{600, 2000, 110});
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->busy, 0.5);
  EXPECT_DOUBLE_EQ(load->busy_others, 0.4);
  EXPECT_DOUBLE_EQ(load->steal, 0.0);
  CpuTimes stolen_from{100, 1000, 10, 40};
  CpuTimes stolen_to{600, 2000, 110, 290};
  const auto stolen = host_load(stolen_from, stolen_to);
  ASSERT_TRUE(stolen.has_value());
  EXPECT_DOUBLE_EQ(stolen->steal, 0.25);
  EXPECT_FALSE(host_load(std::nullopt, CpuTimes{1, 2, 0}).has_value());
  EXPECT_FALSE(host_load(CpuTimes{1, 2, 0}, CpuTimes{1, 2, 0}).has_value()) << "no time passed";
}

// This process spinning is busy time, and its own: it must not count as other processes' load.
TEST(HostLoad, OwnSpinIsBusyButNotOthers) {
  const auto before = read_cpu_times();
  if (!before) GTEST_SKIP() << "no /proc/stat on this host";
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  volatile uint64_t spins = 0;
  while (std::chrono::steady_clock::now() < until) spins = spins + 1;
  const auto after = read_cpu_times();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(after->self - before->self, 10u) << "300 ms of spinning is at least 10 clock ticks of this process";
  const auto load = host_load(before, after);
  ASSERT_TRUE(load.has_value());
  EXPECT_GT(load->busy, 0.0);
  EXPECT_LE(load->busy_others, load->busy);
  EXPECT_LE(load->busy, 1.0);
}

}  // namespace
}  // namespace atl::bench
