// DISB in bounded memory: only RT requests keep a record each; other clients' requests fold into
// a ClientTally as they are answered, which gives the records' results exactly in short runs and
// stops growing in long ones; a run whose RT records would exceed the limit is refused up front.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/runner.h"
#include "core/error.h"
#include "disb_checks.h"

namespace atl::bench {
namespace {

using testing::ScratchDir;

// The audit's workload: a Poisson RT client at 1000/s and a closed-loop BE client, tiny models
// (~13,000 BE requests per simulated second).
Workload rt_and_fast_closed_loop() {
  return parse_workload(
      R"({"name": "W", "clients": [
        {"name": "rt", "model": "tiny_cnn", "priority": "rt", "load": {"type": "poisson", "rate": 1000},
         "deadline_ms": 5},
        {"name": "be", "model": "tiny_vgg", "priority": "be", "load": {"type": "closed"}}]})",
      "w.json", ".");
}

DisbOptions options(std::vector<sched::Mode> modes, double duration_s) {
  DisbOptions o;
  o.modes = std::move(modes);
  o.duration_s = duration_s;
  o.standalone_s = 0.2;
  o.timeline_ms = 10;
  o.seed = 7;
  return o;
}

int64_t rt_requests(const ModeStats& m) {
  int64_t n = 0;
  for (const ClientStats& c : m.clients) n += c.realtime ? c.served + c.dropped + c.failed : 0;
  return n;
}

// Short runs: folding BE requests changes no result (every key of results.json, to the bit).
TEST(DisbMemory, FoldedRequestsGiveTheRecordsResultsInShortRuns) {
  const Workload w = load_disb_workload("C", {testing::shipped_workloads_dir()});
  DisbOptions o = options(sched::all_modes(), 0.3);
  const BenchResults folded = run_disb(w, o);
  o.keep_every_record = true;
  const BenchResults recorded = run_disb(w, o);
  EXPECT_EQ(results_json(folded), results_json(recorded));
  EXPECT_EQ(results_csv(folded), results_csv(recorded));
  EXPECT_EQ(report_html(folded), report_html(recorded));
  for (size_t i = 0; i < folded.runs.size(); ++i) {
    SCOPED_TRACE(folded.runs[i].mode);
    EXPECT_EQ(static_cast<int64_t>(folded.runs[i].requests.size()), rt_requests(folded.stats[i]))
        << "only RT requests keep a record";
    EXPECT_EQ(static_cast<int64_t>(recorded.runs[i].requests.size()), folded.stats[i].requests);
  }
}

// A closed-loop client answered ~100,000 times in 8 simulated seconds: its tally holds a
// histogram of a few hundred KiB where records grew by 32 bytes a request (the 1-hour run of
// this workload reached 3.4 GB). Counts stay exact, latencies within half a bucket (0.05%), and
// the RT client's statistics are the records' own.
TEST(DisbMemory, AClosedLoopClientStaysBoundedOverALongRun) {
  const Workload w = rt_and_fast_closed_loop();
  DisbOptions o = options({sched::Mode::kReset}, 8);
  const BenchResults folded = run_disb(w, o);
  o.keep_every_record = true;
  const BenchResults recorded = run_disb(w, o);
  const ModeRun& run = folded.runs[0];
  const ClientTally& be = run.tallies[1];
  ASSERT_GT(be.served, 65'536);
  EXPECT_FALSE(be.latency_ms.exact());
  EXPECT_LT(be.latency_ms.memory_bytes(), size_t{450} << 10);
  EXPECT_EQ(static_cast<int64_t>(run.requests.size()), rt_requests(folded.stats[0]));
  EXPECT_LT(run.requests.size(), 9'000u) << "1000/s for 8 s: the RT client's records only";

  const ClientStats &got = folded.stats[0].clients[1], &want = recorded.stats[0].clients[1];
  EXPECT_FALSE(got.latency_exact);
  EXPECT_TRUE(want.latency_exact);
  EXPECT_EQ(got.served, want.served);
  EXPECT_EQ(got.dropped, want.dropped);
  EXPECT_EQ(got.throughput_per_s, want.throughput_per_s);
  EXPECT_EQ(got.longest_wait_ms, want.longest_wait_ms);
  EXPECT_EQ(got.latency_ms.count, want.latency_ms.count);
  EXPECT_EQ(got.latency_ms.max, want.latency_ms.max);
  EXPECT_NEAR(got.latency_ms.mean, want.latency_ms.mean, 1e-9 * want.latency_ms.mean);
  for (const auto& [a, b] : {std::pair{got.latency_ms.p50, want.latency_ms.p50},
                             {got.latency_ms.p99, want.latency_ms.p99},
                             {got.latency_ms.p999, want.latency_ms.p999}}) {
    EXPECT_NEAR(a, b, b / 2048);
  }
  const ModeStats &m = folded.stats[0], &r = recorded.stats[0];
  EXPECT_EQ(m.requests, r.requests);
  EXPECT_EQ(m.rt_latency_ms.p99, r.rt_latency_ms.p99);
  EXPECT_EQ(m.rt_latency_ms.p99_high, r.rt_latency_ms.p99_high);
  EXPECT_EQ(m.clients[0].latency_exact, true);
  EXPECT_EQ(results_json(folded)["modes"][0]["clients"][1]["latency_exact"], false);
}

std::string refusal(const Workload& w, const DisbOptions& o) {
  try {
    run_disb(w, o);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    return e.message();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

// 1000 RT requests a second for the hour under every mode would keep ~2 GiB of records and working copies: refused
// before anything compiles, naming the estimate and the limit. The same client under one mode fits.
TEST(DisbMemory, RefusesUpFrontARunWhoseRtRecordsExceedTheLimit) {
  const Workload w = rt_and_fast_closed_loop();
  DisbOptions o = options(sched::all_modes(), sched::kMaxRunSeconds);
  o.device = "no-such-device";  // an accepted run would fail on this, after the checks
  const std::string message = refusal(w, o);
  for (const char* part : {"'W'", "8 mode(s) of 3600 s", "2087 MiB", "limit of 768 MiB", "--modes"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  EXPECT_GT(record_bytes_estimate(w, o), kMaxRecordBytes);
  o.modes = {sched::Mode::kReset};
  EXPECT_LT(record_bytes_estimate(w, o), kMaxRecordBytes);
  EXPECT_NE(refusal(w, o).find("no-such-device"), std::string::npos) << "past the memory check";
  o.duration_s = sched::kMaxRunSeconds + 1;
  EXPECT_NE(refusal(w, o).find("(0, 3600]"), std::string::npos);
}

// `--workload all` checks every workload before the first runs: none may be refused at the
// documented maximum duration under every mode.
TEST(DisbMemory, EveryShippedWorkloadFitsAtTheMaximumDuration) {
  const DisbOptions o = options(sched::all_modes(), sched::kMaxRunSeconds);
  for (const std::string& name : shipped_workloads()) {
    const Workload w = load_disb_workload(name, {testing::shipped_workloads_dir()});
    EXPECT_LT(record_bytes_estimate(w, o), kMaxRecordBytes) << name;
    EXPECT_NO_THROW(check_record_bytes(w, o)) << name;
  }
}

}  // namespace
}  // namespace atl::bench
