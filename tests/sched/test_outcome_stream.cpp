// Workload::on_outcome: a long run's requests stream out as they are answered instead of staying
// in WorkloadRun. The stream must carry exactly what the stored run would: every request once,
// dropped ones included, with the same timings (the simulated GPU is deterministic). Recorded
// scheduler events likewise keep to their window.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>

#include "runtime/model_source.h"
#include "sched/colocate.h"
#include "sched/sim_exec_device.h"

namespace atl::sched {
namespace {

using Key = std::tuple<ClientId, DeviceTime, DeviceTime, RequestStatus>;  // client, arrival, finish, status

Key key_of(const RequestOutcome& o, DeviceTime start) {
  return {o.result.client, o.result.arrival - start, o.result.finish - start, o.status};
}

std::vector<Key> run_and_collect(bool streamed, DeviceTime* stored_left = nullptr) {
  SimExecDevice device;
  Workload w;
  w.duration = 20'000'000;  // 20 ms
  w.grace = 0;              // requests outstanding at the end are dropped: they must stream too
  w.scheduler.mode = Mode::kReset;
  for (const auto& [model, cls] : {std::pair{"tiny_vgg", TaskClass::kRealTime}, {"tiny_cnn", TaskClass::kBestEffort}}) {
    const CompiledModel cm = compile_zoo_model({.name = model}, device.target(), false);
    WorkloadClient c;
    c.name = model;
    c.task_class = cls;
    c.instance = device.load(cm.program, cm.weights);
    c.inputs = seeded_inputs(cm.program, 1);
    if (cls == TaskClass::kRealTime) {
      std::vector<DeviceTime> times;
      for (DeviceTime t = 0; t < w.duration; t += 500'000) times.push_back(t);
      c.arrivals = arrivals_from(std::move(times));
    } else {
      c.closed_loop = true;
      c.concurrency = 2;
    }
    w.clients.push_back(std::move(c));
  }
  std::vector<Key> keys;
  if (streamed) w.on_outcome = [&](const RequestOutcome& o, DeviceTime start) { keys.push_back(key_of(o, start)); };
  const WorkloadRun run = run_workload(device, w);
  if (stored_left != nullptr) *stored_left = static_cast<DeviceTime>(run.requests.size());
  for (const RequestOutcome& o : run.requests) keys.push_back(key_of(o, run.start));
  std::sort(keys.begin(), keys.end());
  return keys;
}

TEST(OutcomeStream, CarriesEveryRequestOnceAsTheStoredRunHasIt) {
  DeviceTime stored_left = -1;
  const std::vector<Key> streamed = run_and_collect(true, &stored_left);
  const std::vector<Key> stored = run_and_collect(false);
  EXPECT_EQ(stored_left, 0) << "with on_outcome the run keeps no requests";
  ASSERT_EQ(streamed.size(), stored.size());
  EXPECT_EQ(streamed, stored);
  EXPECT_GT(std::count_if(stored.begin(), stored.end(), [](const Key& k) { return std::get<1>(k) > 0; }), 40);
  EXPECT_TRUE(std::any_of(stored.begin(), stored.end(),
                          [](const Key& k) { return std::get<3>(k) == RequestStatus::kDropped; }))
      << "grace 0 should leave closed-loop requests unanswered at the end";
}

// The RT-mode events of a 20 ms reset run (an RT request every 0.5 ms beside a closed-loop BE
// client) recorded in [from, until) from its start, with those times made relative to it.
std::vector<SchedulerEvent> events_of(DeviceTime from, DeviceTime until) {
  SimExecDevice device;
  Workload w;
  w.duration = 20'000'000;
  w.scheduler.mode = Mode::kReset;
  w.scheduler.record_events = true;
  for (const auto& [model, cls] : {std::pair{"tiny_vgg", TaskClass::kRealTime}, {"tiny_cnn", TaskClass::kBestEffort}}) {
    const CompiledModel cm = compile_zoo_model({.name = model}, device.target(), false);
    WorkloadClient c;
    c.name = model;
    c.task_class = cls;
    c.instance = device.load(cm.program, cm.weights);
    c.inputs = seeded_inputs(cm.program, 1);
    c.closed_loop = cls == TaskClass::kBestEffort;
    std::vector<DeviceTime> times;
    for (DeviceTime t = 0; t < w.duration; t += 500'000) times.push_back(t);
    if (!c.closed_loop) c.arrivals = arrivals_from(std::move(times));
    w.clients.push_back(std::move(c));
  }
  const DeviceTime start = device.now();  // the run starts on the device's clock as it is
  w.scheduler.events_from = start + from;
  w.scheduler.events_until = until == kNever ? kNever : start + until;
  std::vector<SchedulerEvent> events = run_workload(device, w).events;
  for (SchedulerEvent& e : events) e.at -= start;
  return events;
}

// A trace window's events: those in it, and the last one before it (the state it opens in);
// the rest of a long run's RT-mode entries are not kept.
TEST(OutcomeStream, SchedulerEventsAreKeptForTheirWindowOnly) {
  const std::vector<SchedulerEvent> all = events_of(0, kNever);
  ASSERT_GT(all.size(), 40u);  // an RT-mode entry and exit per RT request
  const DeviceTime from = 5'000'000, until = 10'000'000;
  std::vector<SchedulerEvent> want;
  for (const SchedulerEvent& e : all) {
    if (e.at >= until) break;
    if (e.at < from) want.clear();
    want.push_back(e);
  }
  const std::vector<SchedulerEvent> got = events_of(from, until);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LT(got.size(), all.size() / 2);
  EXPECT_LT(got.front().at, from);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].at, want[i].at) << i;
    EXPECT_EQ(got[i].kind, want[i].kind) << i;
    EXPECT_EQ(got[i].preempted, want[i].preempted) << i;
  }
}

}  // namespace
}  // namespace atl::sched
