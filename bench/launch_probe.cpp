// atoll_bench_launch: the host time of an RT task's graph launch (CudaInstance::enqueue_program,
// the scheduler's launch_range) in the situations the scheduler puts it in. In DISB E on the
// H200 (session 21) 170 of 2049 such calls took over 100 us, the longest 6.4 ms, and kernel
// launches from the same thread up to 4.1 ms; the RT requests the scheduler's thread admitted
// then waited that long. Which situation blocks, and whether a call blocks other threads' calls
// too (a driver lock), is what this measures:
//   idle     the stream and the graph idle
//   behind   the same graph still running on the same stream
//   gated    behind a StreamGate hold, nothing running (arming an idle lane)
//   armed    behind a hold, the same graph still running ahead of it (arming behind a task)
//   second   as `armed`, the task behind launching a second instantiation (set_program_graphs(2))
// During each situation a second thread issues 4-byte cudaMemsetAsync calls on its own stream
// and records the longest: a long one beside a long launch means the launch held a lock.
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/stream_gate.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "probe_cli.h"
#include "runtime/session.h"

namespace atl {
namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

// Another thread's small driver calls, timed one by one while `running` holds.
class SideCalls {
 public:
  // One call first, while nothing is held: a first call may load code, which synchronizes.
  SideCalls() : buffer_(4), stream_(cuda::make_priority_stream(false)) {
    ATL_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, 4, stream_.get()));
    ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
  }
  void start() {
    running_ = true;
    longest_us_ = 0;
    thread_ = std::thread([this] { loop(); });
  }
  double stop() {
    running_ = false;
    thread_.join();
    ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    return longest_us_;
  }

 private:
  void loop() {
    while (running_) {
      const auto t0 = Clock::now();
      ATL_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, 4, stream_.get()));
      longest_us_ = std::max(longest_us_, us_since(t0));
      ATL_CUDA_CHECK(cudaStreamSynchronize(stream_.get()));
    }
  }
  cuda::DeviceBuffer buffer_;
  cuda::Stream stream_;
  std::thread thread_;
  std::atomic<bool> running_{false};
  double longest_us_ = 0;  // written by the thread, read after join
};

struct Situation {
  const char* name;
  bool gate;     // a hold ahead of the timed launch
  bool running;  // the program launched just before, still running
  int graphs;    // instantiations enqueue_program rotates through
};

constexpr Situation kSituations[] = {
    {"idle", false, false, 1}, {"behind", false, true, 1}, {"gated", true, false, 1},
    {"armed", true, true, 1},  {"second", true, true, 2},
};

nlohmann::json probe_situation(CudaInstance& gpu, const Situation& s, int trials, SideCalls& side) {
  cuda::Stream stream = cuda::make_priority_stream(true);
  cuda::StreamGate gate;
  gpu.set_program_graphs(s.graphs);
  gpu.enqueue_program(stream.get());  // captures the instantiations, untimed
  ATL_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  std::vector<double> launch_us;
  side.start();
  for (int i = 0; i < trials; ++i) {
    if (s.running) gpu.enqueue_program(stream.get());
    if (s.gate) gate.hold(stream.get());
    const auto t0 = Clock::now();
    gpu.enqueue_program(stream.get());
    launch_us.push_back(us_since(t0));
    if (s.gate) gate.open();
    ATL_CUDA_CHECK(cudaStreamSynchronize(stream.get()));
  }
  const double side_longest = side.stop();
  const Distribution d = distribution(launch_us);
  fmt::print("  {:<8} launch p50 {:8.1f}  p99 {:8.1f}  max {:8.1f} us   other thread's longest call {:8.1f} us\n",
             s.name, d.p50, d.p99, d.max, side_longest);
  return {{"situation", s.name}, {"launch_us", distribution_json(d)}, {"side_call_longest_us", side_longest}};
}

nlohmann::json probe_model(const std::string& model, int64_t batch, int trials, SideCalls& side) {
  SessionOptions so;
  so.model = model;
  so.device = "cuda";
  so.model_options.batch = batch;
  Session session(so);
  auto& gpu = dynamic_cast<CudaInstance&>(session.instance());
  gpu.preload(gpu.stream());
  // Task time on the device, for reading the waits against.
  std::vector<double> run_us;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    gpu.enqueue_program(gpu.stream());
    ATL_CUDA_CHECK(cudaStreamSynchronize(gpu.stream()));
    run_us.push_back(us_since(t0));
  }
  const double task_us = distribution(run_us).p50;
  fmt::print("{} b{}: {} kernels, task {:.1f} us (launch to synchronize, p50)\n", model, batch,
             gpu.program().kernels.size(), task_us);
  auto rows = nlohmann::json::array();
  for (const Situation& s : kSituations) rows.push_back(probe_situation(gpu, s, trials, side));
  return {{"model", model},
          {"batch", batch},
          {"kernels", gpu.program().kernels.size()},
          {"task_us", task_us},
          {"situations", rows}};
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  std::vector<std::string> models{"resnet50", "densenet201", "bert_base"};
  int64_t batch = 1;
  int trials = 200;
  std::string json_path = "atoll_launch_probe.json";
  atl::ProbeCli app{"atoll graph-launch host time in the scheduler's situations (idle, behind a running task, gated)"};
  app.option("--models", models, "zoo models");
  app.option("--batch", batch, "batch size", atl::kPositive);
  app.option("--trials", trials, "timed launches per situation", atl::kPositive);
  app.option("--json", json_path, "output file");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_launch", [&] {
    ATOLL_CHECK(atl::cuda_device_available(), kCuda, "no CUDA device: {}", atl::cuda_unavailable_reason());
    atl::SideCalls side;
    auto out = nlohmann::json::array();
    for (const std::string& m : models) out.push_back(atl::probe_model(m, batch, trials, side));
    atl::write_file_atomic(json_path, out.dump(1) + "\n");
    return 0;
  });
}
