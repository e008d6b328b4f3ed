#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "../test_env.h"
#include "bench/results.h"
#include "bench/runner.h"
#include "bench/workload.h"
#include "core/error.h"
#include "disb_checks.h"

namespace atl::bench {
namespace {

using testing::workload_error;

TEST(Workload, ShippedWorkloadsParse) {
  const std::filesystem::path dir = std::filesystem::path(testing::shipped_workloads_dir());
  ASSERT_EQ(shipped_workloads(), (std::vector<std::string>{"A", "B", "C", "D", "E", "F", "G", "REAL"}));
  for (const std::string& name : shipped_workloads()) {
    const Workload w = load_workload((dir / (name + ".json")).string());
    EXPECT_EQ(w.name, name);
    int rt = 0;
    for (const auto& c : w.clients) rt += c.realtime;
    EXPECT_GE(rt, 1) << name;
    for (const auto& c : w.clients) {
      if (c.realtime) {
        EXPECT_TRUE(c.deadline_ms.has_value()) << name << " " << c.name;
      }
    }
  }
}

TEST(Workload, LargeBatchWorkloadsRunBeClientsAtBatch16To64) {
  const std::filesystem::path dir = std::filesystem::path(testing::shipped_workloads_dir());
  const Workload d = load_workload((dir / "D.json").string());
  for (const char* name : {"F", "G"}) {
    const Workload w = load_workload((dir / (std::string(name) + ".json")).string());
    std::vector<std::string> be_models;
    for (const ClientSpec& c : w.clients) {
      if (c.realtime) {
        EXPECT_EQ(c.batch, 1) << name << " " << c.name;
        continue;
      }
      EXPECT_EQ(c.load, LoadType::kClosedLoop) << name << " " << c.name;
      EXPECT_GE(c.batch, 16) << name << " " << c.name;
      EXPECT_LE(c.batch, 64) << name << " " << c.name;
      be_models.push_back(c.model + "@" + std::to_string(c.batch));
    }
    EXPECT_EQ(be_models, (std::vector<std::string>{"vgg19@32", "resnet152@32", "bert_base@16"})) << name;
  }
  const Workload f = load_workload((dir / "F.json").string());
  EXPECT_EQ(f.clients[0].model, "resnet50");
  EXPECT_EQ(f.clients[0].load, LoadType::kPoisson);
  EXPECT_EQ(f.clients[0].rate_hz, 200);
  // G's RT clients are D's.
  const Workload g = load_workload((dir / "G.json").string());
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(g.clients[i].model, d.clients[i].model);
    EXPECT_EQ(g.clients[i].rate_hz, d.clients[i].rate_hz);
    EXPECT_EQ(g.clients[i].load, d.clients[i].load);
    EXPECT_TRUE(g.clients[i].realtime);
  }
}

TEST(Workload, BatchAndSequenceLength) {
  const Workload w = parse_workload(
      R"({"name": "x", "clients": [{"model": "bert_base", "batch": 16, "seq": 64, "priority": "be", "load": {"type": "closed"}},
                                    {"model": "vgg19", "priority": "be", "load": {"type": "closed"}}]})",
      "w.json", ".");
  EXPECT_EQ(w.clients[0].batch, 16);
  EXPECT_EQ(w.clients[0].seq_len, 64);
  EXPECT_EQ(w.clients[1].batch, 1);
  EXPECT_EQ(w.clients[1].seq_len, ModelOptions{}.seq_len);
  for (const char* bad : {R"("batch": 0)", R"("batch": 2.5)", R"("batch": 5000)"}) {
    EXPECT_NE(workload_error(std::string(R"({"name": "x", "clients": [{"model": "m", )") + bad +
                       R"(, "priority": "be", "load": {"type": "closed"}}]})")
                  .find("clients[0].batch"),
              std::string::npos)
        << bad;
  }
  for (const char* bad : {R"("seq": 0)", R"("seq": "long")", R"("seq": 513)"}) {
    EXPECT_NE(workload_error(std::string(R"({"name": "x", "clients": [{"model": "m", )") + bad +
                       R"(, "priority": "be", "load": {"type": "closed"}}]})")
                  .find("clients[0].seq"),
              std::string::npos)
        << bad;
  }
}

TEST(Workload, ErrorsNameFileFieldAndProblem) {
  EXPECT_NE(workload_error("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(workload_error(R"({"clients": []})").find("'name'"), std::string::npos);
  const std::string bad_rate = workload_error(
      R"({"name": "x", "clients": [{"model": "vgg19", "priority": "rt", "load": {"type": "periodic", "rate": -1}}]})");
  EXPECT_NE(bad_rate.find("w.json"), std::string::npos);
  EXPECT_NE(bad_rate.find("clients[0].load.rate"), std::string::npos);
  // A period of 1000 / 1e-310 ms overflows: such a client used to schedule no request (or NaN).
  EXPECT_NE(workload_error(
                R"({"name": "x", "clients": [{"model": "m", "priority": "rt", "load": {"type": "periodic", "rate": 1e-310}}]})")
                .find("finite period"),
            std::string::npos);
  EXPECT_NE(workload_error(R"({"name": "x", "clients": [{"model": "m", "priority": "urgent", "load": {"type": "closed"}}]})")
                .find("clients[0].priority"),
            std::string::npos);
  EXPECT_NE(workload_error(R"({"name": "x", "clients": [{"model": "m", "priority": "be", "load": {"type": "bursty"}}]})")
                .find("clients[0].load.type"),
            std::string::npos);
  EXPECT_NE(workload_error(R"({"name": "x", "clients": [{"model": "m", "priority": "rt", "load": {"type": "closed"}}]})")
                .find("open-loop"),
            std::string::npos);
  EXPECT_NE(
      workload_error(
          R"({"name": "x", "clients": [{"model": "m", "priority": "rt", "load": {"type": "trace", "file": "nope.trace"}}]})")
          .find("nope.trace"),
      std::string::npos);
}

TEST(Workload, ArrivalsFollowTheLoad) {
  ClientSpec periodic;
  periodic.load = LoadType::kPeriodic;
  periodic.rate_hz = 100;
  const auto p = scheduled_arrivals(periodic, 1000, 1);
  ASSERT_EQ(p.size(), 100u);
  EXPECT_DOUBLE_EQ(p[1] - p[0], 10.0);

  ClientSpec poisson = periodic;
  poisson.load = LoadType::kPoisson;
  poisson.name = "p";
  const auto q = scheduled_arrivals(poisson, 100000, 7);
  EXPECT_NEAR(static_cast<double>(q.size()), 10000.0, 300.0);  // 3 sigma of a Poisson count
  EXPECT_EQ(q, scheduled_arrivals(poisson, 100000, 7));
  EXPECT_NE(q, scheduled_arrivals(poisson, 100000, 8));
  EXPECT_TRUE(std::is_sorted(q.begin(), q.end()));

  ClientSpec trace;
  trace.load = LoadType::kTrace;
  trace.trace_ms = {0, 10, 30};
  const auto t = scheduled_arrivals(trace, 100, 1);
  EXPECT_EQ(t, (std::vector<double>{0, 10, 30, 45, 55, 75, 90}));  // span 30 + mean gap 15
  ClientSpec closed;
  EXPECT_TRUE(scheduled_arrivals(closed, 1000, 1).empty());
}

BenchResults synthetic_results() {
  BenchResults r;
  r.rt_order = "edf";
  r.workload = parse_workload(
      R"({"name": "T", "clients": [{"name": "rt", "model": "m", "priority": "rt", "load": {"type": "periodic", "rate": 100}},
                                    {"name": "be", "model": "m", "priority": "be", "load": {"type": "closed"}}]})",
      "t.json", ".");
  for (const char* mode : {"rt-only", "reset"}) {
    ModeRun run;
    run.mode = mode;
    run.duration_ms = 1000;
    for (int i = 0; i < 100; ++i) {
      const double lat = 1.0 + (i == 99 ? 20.0 : 0.01 * i);  // one request misses its 10 ms deadline
      run.requests.push_back(
          {.arrival_ms = i * 10.0, .start_ms = i * 10.0 + 0.1, .finish_ms = i * 10.0 + lat, .client = 0});
    }
    if (std::string(mode) == "reset") {
      for (int i = 0; i < 50; ++i) {
        run.requests.push_back(
            {.arrival_ms = i * 20.0, .start_ms = i * 20.0 + 1, .finish_ms = i * 20.0 + 15, .client = 1, .preemptions = 1});
      }
      run.requests.push_back({.arrival_ms = 990, .client = 1, .dropped = true});
      for (int i = 0; i < 100; ++i) {
        run.preemption_latency_us.push_back(10 + i * 0.1);
        run.preemption_staging_us.push_back(4 + i * 0.01);
        run.preemption_reaction_us.push_back(1 + i * 0.001);
        run.preemption_by_sentinel.push_back(i % 3 == 0 ? 1 : 0);
        if (i % 3 == 0) {
          run.sentinel_wake_us.push_back(0.5 + i * 0.01);
          run.sentinel_claim_us.push_back(0.1);
          run.sentinel_open_us.push_back(0.4 + i * 0.001);
        }
      }
      run.polls.add({3'000, 1'000, 70'000, 2'000});
      run.timeline.push_back({"rt", "conv1", 0.1, 0.2, true, false});
      run.timeline.push_back({"be0", "conv1", 0.0, 0.15, false, true});
      run.events.push_back({"be0", "preempt", 0.1});
    }
    r.runs.push_back(run);
    r.stats.push_back(summarize(r.workload, run, {0.5, 0}));
  }
  return r;
}

TEST(Results, StatisticsFromScheduledArrival) {
  const BenchResults r = synthetic_results();
  const ModeStats& reset = r.stats[1];
  EXPECT_EQ(reset.clients[0].served, 100);
  EXPECT_DOUBLE_EQ(reset.clients[0].deadline_miss_rate, 0.01);
  EXPECT_DOUBLE_EQ(reset.rt_latency_ms.max, 21.0);
  EXPECT_NEAR(reset.rt_latency_ms.p50, 1.49, 1e-9);  // nearest rank: the 50th of 100 sorted samples
  EXPECT_NEAR(reset.clients[0].p50_increase, 1.49 / 0.5 - 1.0, 1e-9);
  EXPECT_DOUBLE_EQ(reset.be_throughput, 50.0);
  EXPECT_EQ(reset.clients[1].dropped, 1);
  EXPECT_EQ(reset.preemptions, 50);
  EXPECT_DOUBLE_EQ(reset.longest_be_wait_ms, 1.0);
  EXPECT_NEAR(reset.preemption_latency_us.p99, 10 + 98 * 0.1, 1e-9);
  // Staging's share: nearest-rank p50s (the 50th samples) and p99s (the 99th) divided.
  EXPECT_NEAR(reset.preemption_staging_us.p50, 4 + 49 * 0.01, 1e-9);
  EXPECT_NEAR(reset.staging_share_p50, (4 + 49 * 0.01) / (10 + 49 * 0.1), 1e-9);
  EXPECT_NEAR(reset.staging_share_p99, (4 + 98 * 0.01) / (10 + 98 * 0.1), 1e-9);
  EXPECT_EQ(r.stats[0].staging_share_p50, 0.0) << "no preemption: no share";
  EXPECT_NEAR(reset.preemption_reaction_us.p99, 1 + 98 * 0.001, 1e-9);
  // The split: samples 0, 3, ..., 99 (34) by the sentinel, the other 66 by the scheduler.
  EXPECT_EQ(reset.preemption_reaction_sentinel_us.count, 34);
  EXPECT_EQ(reset.preemption_reaction_scheduler_us.count, 66);
  EXPECT_NEAR(reset.preemption_reaction_sentinel_us.max, 1 + 99 * 0.001, 1e-9);
  EXPECT_NEAR(reset.preemption_reaction_scheduler_us.max, 1 + 98 * 0.001, 1e-9);
  EXPECT_NEAR(reset.preemption_reaction_scheduler_us.p50, 1 + 49 * 0.001, 1e-9) << "the 33rd of 1, 2, 4, 5, ...";
  // The sentinel's three steps, over its 34 samples only.
  EXPECT_EQ(reset.sentinel_wake_us.count, 34);
  EXPECT_NEAR(reset.sentinel_wake_us.max, 0.5 + 99 * 0.01, 1e-9);
  EXPECT_NEAR(reset.sentinel_claim_us.p99, 0.1, 1e-12);
  EXPECT_NEAR(reset.sentinel_open_us.max, 0.4 + 99 * 0.001, 1e-9);
  EXPECT_EQ(r.stats[0].sentinel_wake_us.count, 0) << "no preemption: no sentinel steps";
}

// 1..1000: the p99 is 990 and its 95% interval the samples at ranks floor(990 - 6.17) and
// ceil(990 + 6.17); a mode's change against rt-only takes the far ends of both intervals.
TEST(Results, P99ConfidenceIntervalAndChangeAgainstRtOnly) {
  std::vector<double> a, b;
  for (int i = 1; i <= 1000; ++i) {
    a.push_back(i);
    b.push_back(1.1 * i);
  }
  const Distribution da = distribution(a), db = distribution(b);
  EXPECT_DOUBLE_EQ(da.p99, 990);
  EXPECT_DOUBLE_EQ(da.p99_low, 983);
  EXPECT_DOUBLE_EQ(da.p99_high, 997);
  const P99Change c = p99_change(db, da);
  EXPECT_NEAR(c.change, 0.1, 1e-12);
  EXPECT_NEAR(c.low, 1.1 * 983 / 997 - 1, 1e-12);
  EXPECT_NEAR(c.high, 1.1 * 997 / 983 - 1, 1e-12);
  // Few samples: the interval stays within the samples and never excludes the p99 itself.
  const Distribution few = distribution({3.0, 1.0, 2.0});
  EXPECT_LE(few.p99_low, few.p99);
  EXPECT_GE(few.p99_low, 1.0);
  EXPECT_DOUBLE_EQ(few.p99_high, 3.0);
  EXPECT_EQ(p99_change(few, Distribution{}).change, 0.0) << "no rt-only samples: no change";

  std::vector<ModeStats> modes(2);
  modes[0].mode = "rt-only";
  modes[0].rt_latency_ms = da;
  modes[1].mode = "reset";
  modes[1].rt_latency_ms = db;
  EXPECT_EQ(p99_change_text(modes[0], modes), "-");
  EXPECT_EQ(p99_change_text(modes[1], modes), "+10.0% [+8.5, +11.6]");
  modes[0].mode = "streams";
  EXPECT_EQ(p99_change_text(modes[1], modes), "-") << "no rt-only run to compare with";
}

// Two runs of the same arrivals whose RT latencies share a long tail (RT queued behind RT) and
// differ by 1% plus a little jitter: the paired interval is narrow around +1%, the unpaired one
// spans tens of points. Runs whose arrivals differ do not pair.
TEST(Results, RtP99ChangeOverTheSameRequests) {
  BenchResults r = synthetic_results();
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> queued(0.0, 1.0);
  std::uniform_real_distribution<double> jitter(-0.002, 0.002);
  for (ModeRun& run : r.runs) {
    std::erase_if(run.requests, [](const RequestRecord& q) { return q.client == 0; });
  }
  for (int i = 0; i < 3000; ++i) {
    const double arrival = i * 0.333, shared = 0.5 + queued(rng);
    r.runs[0].requests.push_back({.arrival_ms = arrival, .start_ms = arrival, .finish_ms = arrival + shared, .client = 0});
    const double reset = shared * 1.01 * (1 + jitter(rng));
    r.runs[1].requests.push_back({.arrival_ms = arrival, .start_ms = arrival, .finish_ms = arrival + reset, .client = 0});
  }
  for (size_t i = 0; i < r.runs.size(); ++i) r.stats[i] = summarize(r.workload, r.runs[i], {0.5, 0});
  pair_with_rt_only(r);
  EXPECT_FALSE(r.stats[0].rt_p99_paired.has_value()) << "rt-only is the base";
  ASSERT_TRUE(r.stats[1].rt_p99_paired.has_value());
  const QuantileChange& p = *r.stats[1].rt_p99_paired;
  EXPECT_EQ(p.pairs, 3000);
  EXPECT_GE(p.low, 1.01 * 0.998 - 1 - 1e-12);
  EXPECT_LE(p.high, 1.01 * 1.002 - 1 + 1e-12);
  const P99Change unpaired = p99_change(r.stats[1].rt_latency_ms, r.stats[0].rt_latency_ms);
  EXPECT_GT(unpaired.high - unpaired.low, 0.1);
  EXPECT_EQ(p99_change_text(r.stats[1], r.stats),
            fmt::format("{:+.1f}% [{:+.1f}, {:+.1f}] paired", 100 * p.change, 100 * p.low, 100 * p.high));
  const nlohmann::json j = results_json(r);
  EXPECT_EQ(j["modes"][1]["rt_p99_vs_rt_only"]["paired"]["pairs"], 3000);
  EXPECT_TRUE(j["modes"][1]["rt_p99_vs_rt_only"]["ci"].is_array()) << "the unpaired interval stays";

  for (RequestRecord& q : r.runs[1].requests) q.arrival_ms += 0.05;  // another arrival schedule
  EXPECT_FALSE(paired_rt_p99_change(r.workload, r.runs[1], r.runs[0]).has_value());
}

TEST(Results, RecordTheEngineSwitchesSet) {
  const test::ScopedEnv blocks("ATOLL_CUDA_UPLOAD_BLOCKS", "16");
  const test::ScopedEnv odd("ATOLL_CUDA_ODD", "a\xff\nb");  // invalid UTF-8 and a line break
  const nlohmann::json j = results_json(synthetic_results());
  const nlohmann::json& switches = j["settings"]["engine_switches"];
  EXPECT_EQ(switches["ATOLL_CUDA_UPLOAD_BLOCKS"], "16");
  EXPECT_EQ(switches["ATOLL_CUDA_ODD"], "a\\xff\\nb");
  for (const auto& [name, value] : switches.items()) EXPECT_EQ(name.rfind("ATOLL_CUDA_", 0), 0u) << name;
  EXPECT_NO_THROW(static_cast<void>(j.dump())) << "the file must stay valid JSON";
}

TEST(Results, JsonCsvTraceAndReport) {
  const BenchResults r = synthetic_results();
  const nlohmann::json j = results_json(r);
  EXPECT_EQ(j["schema"], "atoll.disb/1");
  EXPECT_EQ(j["modes"].size(), 2u);
  EXPECT_EQ(j["modes"][1]["clients"][1]["dropped"], 1);
  EXPECT_EQ(j["settings"]["rt_order"], "edf");
  EXPECT_DOUBLE_EQ(j["modes"][1]["staging_share"]["p50"].get<double>(), r.stats[1].staging_share_p50);
  EXPECT_EQ(j["modes"][1]["preemption_staging_us"]["count"], 100);
  EXPECT_EQ(j["modes"][1]["preemption_reaction_us"]["count"], 100);
  EXPECT_EQ(j["modes"][1]["preemption_reaction_by"]["sentinel"]["count"], 34);
  EXPECT_EQ(j["modes"][1]["preemption_reaction_by"]["scheduler"]["count"], 66);
  EXPECT_EQ(j["modes"][1]["sentinel_steps_us"]["wake"]["count"], 34);
  EXPECT_EQ(j["modes"][1]["sentinel_steps_us"]["open"]["count"], 34);
  EXPECT_EQ(j["modes"][1]["scheduler_polls"]["over_50us"], 1);
  EXPECT_DOUBLE_EQ(j["modes"][1]["scheduler_polls"]["longest_us"].get<double>(), 76.0);
  EXPECT_EQ(j["modes"][1]["scheduler_polls"]["longest_phase"], "launch");
  EXPECT_EQ(j["modes"][0]["scheduler_polls"]["count"], 0);
  const std::string csv = results_csv(r);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 2 * 2);
  // Every row has the header's columns; the mode's staging share closes the reset rows.
  const size_t header_columns = std::count(csv.begin(), csv.begin() + csv.find('\n'), ',');
  EXPECT_EQ(std::count(csv.begin(), csv.end(), ','), 5 * header_columns);
  EXPECT_NE(csv.find(fmt::format("edf,{:.3f},{:.3f},{:.3f},{:.3f},{:.4f},{:.4f}\n",
                                 r.stats[1].preemption_latency_us.p50, r.stats[1].preemption_latency_us.p99,
                                 r.stats[1].preemption_staging_us.p50, r.stats[1].preemption_staging_us.p99,
                                 r.stats[1].staging_share_p50, r.stats[1].staging_share_p99)),
            std::string::npos)
      << csv;
  const nlohmann::json trace = nlohmann::json::parse(perfetto_trace_json(r.runs[1]));
  int spans = 0;
  for (const auto& e : trace["traceEvents"]) spans += e["ph"] == "X";
  EXPECT_EQ(spans, 2);
  const std::string html = report_html(r);
  EXPECT_NE(html.find("RT order: edf"), std::string::npos);
  EXPECT_NE(html.find(fmt::format("{:.1f} ({:.0f}%)", r.stats[1].preemption_staging_us.p50,
                                  100 * r.stats[1].staging_share_p50)),
            std::string::npos);
  for (const char* id : {"rt-latency-cdf", "throughput", "preemption-latency", "deadline-misses"}) {
    EXPECT_NE(html.find(std::string("id=\"") + id + "\""), std::string::npos) << id;
  }
  EXPECT_EQ(html.find("http"), std::string::npos) << "the report must be self-contained";
}

}  // namespace
}  // namespace atl::bench

namespace atl::bench {
namespace {

// Opens the report in headless Chromium and reads back how many charts were laid out.
TEST(Report, RendersInHeadlessChromium) {
  const auto dir = std::filesystem::temp_directory_path() / "atoll_report_test";
  std::filesystem::create_directories(dir);
  const auto html = dir / "report.html";
  {
    std::ofstream f(html);
    f << report_html(synthetic_results());
  }
  const std::string cmd =
      "chromium --headless --no-sandbox --disable-gpu --dump-dom 'file://" + html.string() + "' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string dom;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, pipe)) dom.append(buf, n);
  ASSERT_EQ(pclose(pipe), 0) << "chromium failed (installed by scripts/install-deps.sh)";
  EXPECT_NE(dom.find("data-charts-rendered=\"4\""), std::string::npos) << dom.substr(0, 300);
}

}  // namespace
}  // namespace atl::bench
