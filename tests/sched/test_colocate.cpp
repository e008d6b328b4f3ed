// The co-location driver behind `atoll colocate`, on the simulated GPU with tiny zoo models.
#include <gtest/gtest.h>

#include "core/error.h"
#include "sched/colocate.h"

namespace atl::sched {
namespace {

ColocateOptions tiny(Mode mode) {
  ColocateOptions o;
  o.rt = {{.model = "tiny_vgg", .hz = 1000}};
  o.be = {{.model = "tiny_cnn"}, {.model = "tiny_bert"}};
  o.mode = mode;
  o.duration_s = 0.02;
  return o;
}

TEST(Colocate, ReportsRtLatencyBeThroughputAndPreemptions) {
  ColocateOptions o = tiny(Mode::kReset);
  o.keep_results = true;
  const WorkloadReport r = run_colocate(o);
  EXPECT_EQ(r.device, "sim");
  EXPECT_EQ(r.warmup_s, 0.0) << "simulated kernels have no code to load: no warm-up";
  ASSERT_EQ(r.clients.size(), 3u);
  EXPECT_EQ(r.clients[0].completed, 20);  // 1000 Hz for 20 ms
  EXPECT_EQ(r.rt_latency_ms.samples, 20);
  EXPECT_GT(r.rt_latency_ms.median_ms, 0);
  EXPECT_LE(r.rt_latency_ms.median_ms, r.rt_latency_ms.p99_ms);
  EXPECT_LE(r.rt_latency_ms.p99_ms, r.rt_latency_ms.max_ms);
  EXPECT_GT(r.clients[1].completed, 0);
  EXPECT_GT(r.clients[2].completed, 0);
  EXPECT_GT(r.be_throughput_per_s, 0);
  EXPECT_DOUBLE_EQ(r.be_throughput_per_s, r.clients[1].throughput_per_s + r.clients[2].throughput_per_s);
  EXPECT_GT(r.preemptions, 0);
  EXPECT_GT(r.preemption_latency_us.samples, 0);
  // The breakdown covers every RT request, and its parts add up to each request's latency.
  EXPECT_EQ(r.rt_staging_us.samples, 20);
  EXPECT_EQ(r.rt_service_ms.samples, 20);
  for (const TaskResult& t : r.results) {
    EXPECT_LE(t.arrival, t.admitted);  // every request, BE included
    EXPECT_LE(t.admitted, t.dispatch);
    if (t.task_class != TaskClass::kRealTime) continue;
    EXPECT_LE(t.dispatch, t.start);
    EXPECT_LT(t.start, t.finish);
  }
  EXPECT_GT(r.rt_service_ms.median_ms, 0);
  EXPECT_GE(r.rt_staging_us.median_ms * 1e3, 4000) << "staging includes the simulated input copy (io_call_ns)";
  // Every RT request and every BE request the clients sent is in the results.
  int64_t total = 0;
  for (const auto& c : r.clients) total += c.completed;
  EXPECT_EQ(static_cast<int64_t>(r.results.size()), total);
}

TEST(Colocate, ClientsTakeTheirOwnBatchOrTheDefault) {
  ColocateOptions o = tiny(Mode::kReset);
  o.batch = 2;
  o.be[0].batch = 8;
  const WorkloadReport r = run_colocate(o);
  ASSERT_EQ(r.clients.size(), 3u);
  EXPECT_EQ(r.clients[0].batch, 2);
  EXPECT_EQ(r.clients[1].batch, 8);
  EXPECT_EQ(r.clients[2].batch, 2);
  // A bigger batch is more work per request: fewer of them in the same time. (tiny_cnn's
  // kernels are too small for the batch to show on the simulated GPU; resnet18's are not.)
  ColocateOptions big = tiny(Mode::kReset);
  big.be = {{.model = "resnet18", .batch = 16}};
  ColocateOptions small = big;
  small.be[0].batch = 1;
  EXPECT_LT(run_colocate(big).clients[1].completed, run_colocate(small).clients[1].completed);
  ColocateOptions zero = tiny(Mode::kReset);
  zero.rt[0].batch = 0;
  EXPECT_THROW(run_colocate(zero), Error);
}

TEST(Colocate, RecordsTheRtOrderAndTheStagingShareOfPreemptionLatency) {
  for (const RtOrder order : {RtOrder::kArrival, RtOrder::kDeadline}) {
    ColocateOptions o = tiny(Mode::kReset);
    o.rt_order = order;
    const WorkloadReport r = run_colocate(o);
    EXPECT_EQ(r.rt_order, order);
    ASSERT_GT(r.preemption_latency_us.samples, 0);
    EXPECT_EQ(r.preemption_staging_us.samples, r.preemption_latency_us.samples);
    EXPECT_GT(r.preemption_staging_us.median_ms, 0);
    EXPECT_NEAR(r.staging_share_p50, r.preemption_staging_us.median_ms / r.preemption_latency_us.median_ms, 1e-12);
    EXPECT_NEAR(r.staging_share_p99, r.preemption_staging_us.p99_ms / r.preemption_latency_us.p99_ms, 1e-12);
    EXPECT_LE(r.staging_share_p50, 1.0);
  }
  EXPECT_STREQ(rt_order_name(RtOrder::kArrival), "fifo");
  EXPECT_STREQ(rt_order_name(RtOrder::kDeadline), "edf");
  EXPECT_EQ(rt_order_from_name("edf"), RtOrder::kDeadline);
  EXPECT_EQ(rt_order_from_name("fifo"), RtOrder::kArrival);
  EXPECT_THROW(rt_order_from_name("lifo"), Error);
}

TEST(Colocate, RtOnlyLoadsNoBeModel) {
  const WorkloadReport r = run_colocate(tiny(Mode::kRtOnly));
  ASSERT_EQ(r.clients.size(), 1u);
  EXPECT_EQ(r.clients[0].completed, 20);
  EXPECT_EQ(r.be_throughput_per_s, 0);
  EXPECT_EQ(r.preemptions, 0);
}

TEST(Colocate, CudaWithoutAGpuIsRefusedClearly) {
  ColocateOptions o = tiny(Mode::kReset);
  o.device = "cuda";
  try {
    run_colocate(o);  // runs for real where a GPU exists
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(e.message().find("--device cuda"), std::string::npos) << e.message();
  }
  EXPECT_THROW(make_exec_device("tpu"), Error);
  ColocateOptions no_rt = tiny(Mode::kReset);
  no_rt.rt.clear();
  EXPECT_THROW(run_colocate(no_rt), Error);
  ColocateOptions bad_rate = tiny(Mode::kReset);
  bad_rate.rt[0].hz = 0;
  EXPECT_THROW(run_colocate(bad_rate), Error);
  ColocateOptions bad_warmup = tiny(Mode::kReset);
  bad_warmup.warmup_s = -1;
  EXPECT_THROW(run_colocate(bad_warmup), Error);
}

// A rate's period must be a finite time within the run: 1e-300 Hz (an infinite period in ns)
// used to schedule nothing and 1e-100 Hz one request, both with exit status 0.
TEST(Colocate, RefusesARateWhosePeriodDoesNotFitTheRun) {
  for (const double hz : {1e-300, 1e-100, 1e-10, 0.5, 5e-324}) {
    ColocateOptions o = tiny(Mode::kRtOnly);
    o.duration_s = 1;
    o.rt[0].hz = hz;
    try {
      run_colocate(o);
      ADD_FAILURE() << hz << " Hz accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(e.message().find("longer than the run's 1 s"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("at least 1 Hz"), std::string::npos) << e.message();
      EXPECT_EQ(e.message().find('\n'), std::string::npos) << "one line";
    }
  }
  ColocateOptions one = tiny(Mode::kRtOnly);
  one.duration_s = 1;
  one.rt[0].hz = 1;  // a period as long as the run: one request
  EXPECT_EQ(run_colocate(one).clients[0].completed, 1);
}

// A closed-loop client on a fast model answers ~13,000 requests per simulated second: past
// 65,536 its latencies fold into the sketch's histogram instead of growing with the run, and no
// request's result is kept. Counts stay exact and the latencies within half a bucket (0.05%).
TEST(Colocate, LongRunsFoldBeRequestsInsteadOfKeepingThem) {
  ColocateOptions o;
  o.rt = {{.model = "tiny_cnn", .hz = 1000}};
  o.be = {{.model = "tiny_vgg"}};
  o.duration_s = 6;
  const WorkloadReport folded = run_colocate(o);
  o.keep_results = true;
  const WorkloadReport kept = run_colocate(o);
  EXPECT_TRUE(folded.results.empty());
  const ClientSummary& be = folded.clients[1];
  ASSERT_GT(be.completed, 65'536);
  std::vector<double> be_ms;
  for (const TaskResult& t : kept.results) {
    if (t.task_class == TaskClass::kBestEffort) be_ms.push_back(static_cast<double>(t.latency()) / 1e6);
  }
  const LatencyStats exact = latency_stats(be_ms);
  EXPECT_EQ(be.completed, static_cast<int64_t>(be_ms.size()));
  EXPECT_EQ(be.latency_ms.samples, exact.samples);
  EXPECT_EQ(be.latency_ms.max_ms, exact.max_ms);
  EXPECT_EQ(be.latency_ms.min_ms, exact.min_ms);
  EXPECT_NEAR(be.latency_ms.mean_ms, exact.mean_ms, 1e-9 * exact.mean_ms);
  EXPECT_NEAR(be.latency_ms.median_ms, exact.median_ms, exact.median_ms / 2048);
  EXPECT_NEAR(be.latency_ms.p99_ms, exact.p99_ms, exact.p99_ms / 2048);
  EXPECT_EQ(be.throughput_per_s, kept.clients[1].throughput_per_s);
  // RT requests keep every latency: the same statistics to the last bit.
  EXPECT_EQ(folded.clients[0].completed, 6000);
  EXPECT_EQ(folded.rt_latency_ms.p99_ms, kept.rt_latency_ms.p99_ms);
  EXPECT_EQ(folded.rt_latency_ms.median_ms, kept.rt_latency_ms.median_ms);
  EXPECT_EQ(folded.rt_staging_us.p99_ms, kept.rt_staging_us.p99_ms);
}

TEST(Colocate, RefusesMoreArrivalsThanTheLimit) {
  ColocateOptions o = tiny(Mode::kRtOnly);
  o.rt[0].hz = 1e6;
  o.duration_s = 3600;
  try {
    run_colocate(o);
    FAIL() << "3.6e9 arrivals accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(e.message().find(std::to_string(kMaxArrivalsPerClient)), std::string::npos) << e.message();
  }
  // The limit is on the RT clients together: two at 2,000 Hz over the hour are refused too.
  o.rt = {{.model = "tiny_vgg", .hz = 2000}, {.model = "tiny_cnn", .hz = 2000}};
  try {
    run_colocate(o);
    FAIL() << "1.44e7 RT requests accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("1.44e+07 requests"), std::string::npos) << e.message();
  }
  o.duration_s = kMaxRunSeconds + 1;
  EXPECT_THROW(run_colocate(o), Error) << "longer than the documented maximum";
}

// --be-uploads: auto takes the SM copy for uploads of 4 MiB or more on a device that has it.
TEST(Colocate, BeUploadsAutoMovesOnlyLargeUploadsOntoTheSms) {
  EXPECT_FALSE(be_upload_on_sms(BeUploads::kAuto, 602'112, true)) << "a batch-1 image stays on the copy engine";
  EXPECT_TRUE(be_upload_on_sms(BeUploads::kAuto, 19'267'584, true)) << "a batch-32 one goes to the SMs";
  EXPECT_TRUE(be_upload_on_sms(BeUploads::kAuto, kBeSmUploadBytes, true));
  EXPECT_FALSE(be_upload_on_sms(BeUploads::kAuto, kBeSmUploadBytes - 1, true));
  EXPECT_FALSE(be_upload_on_sms(BeUploads::kAuto, 19'267'584, false)) << "no SM copies on this device";
  EXPECT_TRUE(be_upload_on_sms(BeUploads::kSms, 16, false)) << "asked for: the device reports what it cannot do";
  EXPECT_FALSE(be_upload_on_sms(BeUploads::kCopyEngine, 19'267'584, true));
  for (const BeUploads u : {BeUploads::kCopyEngine, BeUploads::kSms, BeUploads::kAuto}) {
    EXPECT_EQ(be_uploads_from_name(be_uploads_name(u)), u);
  }
  EXPECT_THROW(be_uploads_from_name("dma"), Error);
}

TEST(Colocate, BeUploadsOnTheSmsOfTheSimulatedGpuIsAClearError) {
  ColocateOptions o = tiny(Mode::kReset);
  o.rt_path.be_uploads = BeUploads::kSms;
  try {
    run_colocate(o);
    FAIL() << "the simulated GPU has no SM copies";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("uploads"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace atl::sched
