// Several RT clients whose requests arrive at the same instant, next to BE work: every request
// is served, and where RT tasks run one at a time they start in the order the RT order names:
// arrival then submission (fifo), or deadline (edf).
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <string>
#include <tuple>

#include "scenario.h"

namespace atl::sched {
namespace {

constexpr int kRtClients = 4;
constexpr int kPerClient = 2;                              // requests each RT client sends in each burst
constexpr DeviceTime kBursts[] = {1'000'000, 15'000'000};  // each burst's RT work is done before the next
constexpr int kBeClients = 2;
constexpr int kBePerClient = 3;

struct Burst {
  std::map<uint64_t, DeviceTime> deadline_of;   // by submission number among the RT requests
  std::vector<std::future<TaskResult>> rt, be;  // answers
};

// Deadlines run against submission order across clients (the last client's are the earliest)
// and with it within a client, whose requests always run in arrival order.
DeviceTime deadline(DeviceTime arrival, int client, int k) {
  return arrival + (kRtClients - client) * 1'000'000 + k * 10'000;
}

Burst submit_bursts(Scheduler& scheduler, const std::vector<ClientId>& rt, const std::vector<ClientId>& be) {
  Burst b;
  const auto rt_inputs = testing::random_inputs(testing::rt_model().program, 1);
  const auto be_inputs = testing::random_inputs(testing::be_model().program, 2);
  for (ClientId c : be) {
    for (int k = 0; k < kBePerClient; ++k) b.be.push_back(scheduler.submit(c, Request{be_inputs, 0, kNever}));
  }
  uint64_t id = 0;
  for (DeviceTime at : kBursts) {
    for (int c = 0; c < kRtClients; ++c) {
      for (int k = 0; k < kPerClient; ++k) {
        const DeviceTime due = deadline(at, c, k);
        b.rt.push_back(scheduler.submit(rt[static_cast<size_t>(c)], Request{rt_inputs, at, due}));
        b.deadline_of[id++] = due;
      }
    }
  }
  return b;
}

// Modes whose RT tasks run one at a time, in the RT order; streams modes run every client on
// its own stream.
bool serializes_rt(Mode m) {
  return m != Mode::kStreams && m != Mode::kStreamsPrio;
}

class RtBurst : public ::testing::TestWithParam<std::tuple<Mode, RtOrder>> {};

TEST_P(RtBurst, EveryRequestServedInTheRtOrder) {
  const auto [mode, order] = GetParam();
  SimExecDevice device;
  SchedulerOptions so;
  so.mode = mode;
  so.rt_order = order;
  Scheduler scheduler(device, so);
  std::vector<ClientId> rt, be;
  for (int c = 0; c < kRtClients; ++c) {
    const auto& m = testing::rt_model();
    rt.push_back(
        scheduler.add_client(TaskClass::kRealTime, "rt" + std::to_string(c), device.load(m.program, m.weights)));
  }
  if (mode != Mode::kRtOnly) {
    for (int c = 0; c < kBeClients; ++c) {
      const auto& m = testing::be_model();
      be.push_back(
          scheduler.add_client(TaskClass::kBestEffort, "be" + std::to_string(c), device.load(m.program, m.weights)));
    }
  }
  Burst b = submit_bursts(scheduler, rt, be);
  scheduler.run_until(40'000'000);  // far beyond the bursts' work: what is pending now stalled

  std::vector<TaskResult> results;
  for (auto& f : b.rt) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "an RT request was never answered";
    results.push_back(f.get());
  }
  for (auto& f : b.be) {
    ASSERT_EQ(f.wait_for(std::chrono::seconds(0)), std::future_status::ready) << "a BE request was never answered";
    EXPECT_NO_THROW(f.get());
  }
  const SchedulerStats stats = scheduler.stats();
  EXPECT_EQ(stats.rt_completed, kRtClients * kPerClient * std::ssize(kBursts));
  EXPECT_EQ(stats.failed, 0);
  for (const TaskResult& r : results) {
    EXPECT_LE(r.arrival, r.start);
    EXPECT_LT(r.start, r.finish);
    if (r.arrival == kBursts[0]) {
      EXPECT_LT(r.finish, kBursts[1]) << "the bursts overlap: their orders would mix";
    }
  }
  if (!serializes_rt(mode)) return;

  // Ids are submission numbers; every request submitted above is an RT one after the BE ones.
  const uint64_t first_rt = results.front().id;
  std::vector<TaskResult> expected = results;
  std::sort(expected.begin(), expected.end(), [&](const TaskResult& x, const TaskResult& y) {
    const auto key = [&](const TaskResult& r) {
      const DeviceTime due = b.deadline_of.at(r.id - first_rt);
      return std::make_tuple(order == RtOrder::kDeadline ? due : r.arrival, r.arrival, r.id);
    };
    return key(x) < key(y);
  });
  std::vector<TaskResult> started = results;
  std::sort(started.begin(), started.end(), [](const TaskResult& x, const TaskResult& y) { return x.start < y.start; });
  for (size_t i = 0; i < started.size(); ++i) {
    EXPECT_EQ(started[i].id, expected[i].id) << "position " << i << " of the RT start order";
  }
}

std::string burst_name(const ::testing::TestParamInfo<std::tuple<Mode, RtOrder>>& info) {
  std::string name = std::string(mode_name(std::get<0>(info.param))) +
                     (std::get<1>(info.param) == RtOrder::kDeadline ? "_edf" : "_fifo");
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

INSTANTIATE_TEST_SUITE_P(Modes, RtBurst,
                         ::testing::Combine(::testing::ValuesIn(all_modes()),
                                            ::testing::Values(RtOrder::kArrival, RtOrder::kDeadline)),
                         burst_name);

}  // namespace
}  // namespace atl::sched
