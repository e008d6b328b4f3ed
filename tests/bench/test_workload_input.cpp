// Workload files that are malformed in ways a lenient parser would have read as something else,
// and arrival schedules that would never end or never fit in memory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "bench/results.h"
#include "bench/runner.h"
#include "bench/workload.h"
#include "core/error.h"
#include "disb_checks.h"
#include "sched/colocate.h"

namespace atl::bench {
namespace {

using testing::workload_error;

std::string one_client(const std::string& client, const std::string& name = "x") {
  return R"({"name": ")" + name + R"(", "clients": [)" + client + "]}";
}

const std::string kClosed = R"({"model": "m", "priority": "be", "load": {"type": "closed"}})";

std::string trace_error(const std::string& contents) {
  const auto dir = std::filesystem::temp_directory_path() / "atoll_trace_input";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "t.trace") << contents;
  return workload_error(one_client(R"({"model": "m", "priority": "rt", "load": {"type": "trace", "file": "t.trace"}})"),
                  dir.string());
}

TEST(WorkloadInput, RejectsUnknownKeysNamingTheClosestKnownOne) {
  const std::string typo = workload_error(
      one_client(R"({"model": "m", "priority": "rt", "dealine_ms": 5, "load": {"type": "periodic", "rate": 10}})"));
  EXPECT_NE(typo.find("clients[0].dealine_ms"), std::string::npos) << typo;
  EXPECT_NE(typo.find("did you mean 'deadline_ms'"), std::string::npos) << typo;
  EXPECT_NE(
      workload_error(
          R"({"name": "x", "client": [], "clients": [{"model": "m", "priority": "be", "load": {"type": "closed"}}]})")
          .find("did you mean 'clients'"),
      std::string::npos);
  const std::string in_load =
      workload_error(one_client(R"({"model": "m", "priority": "be", "load": {"type": "closed", "zzz": 1}})"));
  EXPECT_NE(in_load.find("clients[0].load.zzz': unknown key"), std::string::npos) << in_load;
}

TEST(WorkloadInput, RejectsConcurrencyOutsideTheRangeBeforeNarrowing) {
  const std::string e = workload_error(
      one_client(R"({"model": "m", "priority": "be", "load": {"type": "closed", "concurrency": 4294967297}})"));
  EXPECT_NE(e.find("clients[0].load.concurrency"), std::string::npos) << e;
}

TEST(WorkloadInput, RejectsDuplicateAndPathLikeNames) {
  const std::string dup = workload_error(R"({"name": "x", "clients": [
      {"name": "a", "model": "m", "priority": "be", "load": {"type": "closed"}},
      {"name": "a", "model": "m", "priority": "be", "load": {"type": "closed"}}]})");
  EXPECT_NE(dup.find("clients[1].name"), std::string::npos) << dup;
  EXPECT_NE(dup.find("another client"), std::string::npos) << dup;
  EXPECT_NE(workload_error(one_client(kClosed, "../../X")).find("field 'name'"), std::string::npos);
  EXPECT_NE(workload_error(one_client(kClosed, "a\\u0001b")).find("control character"), std::string::npos);
  EXPECT_NE(workload_error(one_client(R"({"name": "a/b", "model": "m", "priority": "be", "load": {"type": "closed"}})"))
                .find("clients[0].name"),
            std::string::npos);
}

TEST(WorkloadInput, ReportsOutOfRangeNumbersAsInvalidJson) {
  const std::string e =
      workload_error(one_client(R"({"model": "m", "priority": "rt", "load": {"type": "periodic", "rate": 1e400}})"));
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  EXPECT_EQ(e.find("[json.exception"), std::string::npos) << e;
  const std::string twice =
      workload_error(one_client(R"({"model": "m", "priority": "rt", "load": {"type": "periodic", "rate": 100, "rate": 200}})"));
  EXPECT_NE(twice.find("'rate' appears twice"), std::string::npos) << twice;
}

TEST(WorkloadInput, TraceLinesHoldExactlyOneTime) {
  for (const char* bad : {"5abc\n", "10 20\n", "nan\n", "-1\n"}) {
    const std::string e = trace_error(bad);
    EXPECT_NE(e.find("line 1"), std::string::npos) << bad << ": " << e;
  }
  EXPECT_NE(trace_error("0\n0\n").find("span no time"), std::string::npos);
  EXPECT_NE(trace_error("0\n").find("span no time"), std::string::npos) << "one arrival at 0";
}

TEST(WorkloadInput, ArrivalSchedulesAreBounded) {
  // 0 then 1e-20 ms repeats every 2e-20 ms: refused from the count, not grown until bad_alloc.
  ClientSpec trace;
  trace.name = "t";
  trace.load = LoadType::kTrace;
  trace.trace_ms = {0, 1e-20};
  EXPECT_THROW(scheduled_arrivals(trace, 1000, 1), Error);
  ClientSpec fast;
  fast.name = "fast";
  fast.load = LoadType::kPoisson;
  fast.rate_hz = 100000;
  try {
    check_arrival_count(fast, 3600.0 * 1000.0);
    FAIL() << "3.6e8 arrivals accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("client 'fast'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find(std::to_string(sched::kMaxArrivalsPerClient)), std::string::npos) << e.message();
  }
  EXPECT_NO_THROW(check_arrival_count(fast, 60.0 * 1000.0));
}

// The model is never looked up: the schedule is refused before anything compiles.
TEST(WorkloadInput, RunDisbRefusesAnOversizedScheduleBeforeRunning) {
  const Workload w = parse_workload(
      R"({"name": "fast", "clients": [{"name": "rt", "model": "not_compiled", "priority": "rt", "load": {"type": "periodic", "rate": 100000}}]})",
      "fast.json", ".");
  DisbOptions o;
  o.duration_s = 3600;
  try {
    run_disb(w, o);
    FAIL() << "3.6e8 arrivals accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("client 'rt'"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("limit"), std::string::npos) << e.message();
  }
}

TEST(WorkloadInput, CsvQuotesNamesWithCommasAndQuotes) {
  BenchResults r;
  r.workload = parse_workload(
      R"({"name": "w,1", "clients": [{"name": "say \"hi\", be", "model": "m", "priority": "be", "load": {"type": "closed"}}]})",
      "t.json", ".");
  ModeRun run;
  run.mode = "seq";
  run.duration_ms = 1000;
  run.requests.push_back({.arrival_ms = 0.0, .start_ms = 0.1, .finish_ms = 1.0});
  r.runs.push_back(run);
  r.stats.push_back(summarize(r.workload, run, {0}));
  const std::string csv = results_csv(r);
  EXPECT_NE(csv.find("\n\"w,1\",seq,\"say \"\"hi\"\", be\",be,"), std::string::npos) << csv;
}

}  // namespace
}  // namespace atl::bench
