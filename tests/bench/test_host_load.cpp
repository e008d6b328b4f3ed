#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "bench/host_load.h"

namespace atl::bench {
namespace {

// Aggregate figures only, no per-core lines.
CpuTimes aggregate(uint64_t busy, uint64_t total, uint64_t self, uint64_t steal = 0) {
  CpuTimes t;
  t.busy = busy;
  t.total = total;
  t.self = self;
  t.steal = steal;
  return t;
}

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

TEST(HostLoad, ReadsEachCoreAfterTheAggregateLine) {
  const auto t = parse_proc_stat("cpu  10 0 0 10 0 0 0 4\ncpu0 5 0 0 5 0 0 0 0\ncpu1 5 0 0 5 0 0 0 4\nintr 5\n");
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->core_steal, (std::vector<uint64_t>{0, 4}));
  EXPECT_EQ(t->core_total, (std::vector<uint64_t>{10, 14}));
  const auto bad_core = parse_proc_stat("cpu  10 0 0 10\ncpu0 5 0 0 5\ncpu1 x\n");
  ASSERT_TRUE(bad_core.has_value()) << "the aggregate line still counts";
  EXPECT_TRUE(bad_core->core_total.empty()) << "no per-core figures from a malformed core line";
}

TEST(HostLoad, TheMostStolenCoreStandsOutOfTheAggregate) {
  CpuTimes from{0, 0, 0, 0, {0, 0, 0, 0}, {0, 0, 0, 0}, 3};
  // Four cores of 100 ticks each; the hypervisor took 20 of core 2's, 5% of the whole.
  CpuTimes to{100, 400, 0, 20, {0, 0, 20, 0}, {100, 100, 100, 100}, 10};
  const auto load = host_load(from, to);
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->steal, 0.05);
  EXPECT_DOUBLE_EQ(load->steal_max_core, 0.2);
  EXPECT_EQ(load->involuntary_switches, 7u);
  to.core_total.pop_back();
  to.core_steal.pop_back();
  EXPECT_DOUBLE_EQ(host_load(from, to)->steal_max_core, 0.0) << "cores that changed in number are not compared";
}

TEST(HostLoad, RejectsTextWithoutTheAggregateLine) {
  EXPECT_FALSE(parse_proc_stat("").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu0 1 2 3 4 5 6 7 8\n").has_value());
  EXPECT_FALSE(parse_proc_stat("cpu  1 2\n").has_value()) << "fewer than four fields";
  EXPECT_FALSE(parse_proc_stat("cpu  1 2 x 4\n").has_value());
  EXPECT_TRUE(parse_proc_stat("intr 5\ncpu  1 2 3 4\n").has_value()) << "the line may come later";
}

TEST(HostLoad, SharesBetweenTwoReadings) {
  const auto load = host_load(aggregate(100, 1000, 10), aggregate(600, 2000, 110));
  ASSERT_TRUE(load.has_value());
  EXPECT_DOUBLE_EQ(load->busy, 0.5);
  EXPECT_DOUBLE_EQ(load->busy_others, 0.4);
  EXPECT_DOUBLE_EQ(load->steal, 0.0);
  const CpuTimes stolen_from = aggregate(100, 1000, 10, 40);
  const CpuTimes stolen_to = aggregate(600, 2000, 110, 290);
  const auto stolen = host_load(stolen_from, stolen_to);
  ASSERT_TRUE(stolen.has_value());
  EXPECT_DOUBLE_EQ(stolen->steal, 0.25);
  EXPECT_FALSE(host_load(std::nullopt, aggregate(1, 2, 0)).has_value());
  EXPECT_FALSE(host_load(aggregate(1, 2, 0), aggregate(1, 2, 0)).has_value()) << "no time passed";
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
