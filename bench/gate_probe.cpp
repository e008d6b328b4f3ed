// atoll_bench_gate: how long after the GPU can see an opened gate the preemption flag lands, on
// the device clock. In DISB (session 23) BE kernels queued on the device when an RT request
// arrived ran whole for ~15-25 us after the scheduler's preempt event: the RT lane writes the flag
// with a stream memory op behind its StreamGate hold, and the hold is the GPU front-end's wait on
// a mapped host word. Each trial holds a high-priority stream on a gate and opens it from the
// host; two one-thread watcher kernels stamp %globaltimer, one when the gate word (mapped host
// memory, read over PCIe) changes, one when the device flag rises:
//   stream    the flag is the held stream's memory write (what the scheduler does)
//   doorbell  the scheduler's doorbell kernel (backends/cuda/doorbell.h), watching the same word,
//             writes the flag the moment it sees the gate (no stream op)
// Both idle and with the GPU full of BE spin kernels that poll the flag. Reported: the flag's
// landing minus the gate seen (what the front-end adds), over the trials.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <thread>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/doorbell.h"
#include "backends/cuda/stream_gate.h"
#include "backends/cuda/stream_write.h"
#include "bench/preempt_kernels.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "probe_cli.h"

namespace atl {
namespace {

constexpr uint64_t kWatchTimeoutNs = 200'000'000;  // a watcher that never sees its word gives up

// The watchers' mapped words: when each saw its word, and that each has started.
struct Stamps {
  uint64_t gate_seen_ns;
  uint64_t flag_seen_ns;
  int gate_started;
  int flag_started;
};

void wait_started(const volatile int& word, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  while (word == 0) {
    ATOLL_CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5), kInternal, "{} never started", what);
  }
}

class GateProbe {
 public:
  GateProbe() {
    void* alias = nullptr;
    ATL_CUDA_CHECK(cudaHostGetDevicePointer(&alias, gate_.host_word(), 0));
    gate_word_ = static_cast<const volatile unsigned*>(alias);
    ATL_CUDA_CHECK(cudaHostGetDevicePointer(&alias, stamps_buf_.get(), 0));
    stamps_dev_ = static_cast<Stamps*>(alias);
    int sms = 0;
    ATL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    be_blocks_ = bench::be_spin_blocks_per_sm(256) * sms;
  }

  // One trial: the flag's landing minus the gate seen, in us (NaN: a watcher gave up).
  double trial(bool doorbell, bool busy) {
    auto* s = static_cast<Stamps*>(stamps_buf_.get());
    *s = Stamps{};
    auto* flag = static_cast<int*>(flag_.get());
    ATL_CUDA_CHECK(cudaMemset(flag, 0, sizeof(int)));
    ATL_CUDA_CHECK(cudaDeviceSynchronize());
    bench::launch_watch(reinterpret_cast<const volatile unsigned*>(flag), 1, &stamps_dev_->flag_seen_ns,
                        &stamps_dev_->flag_started, kWatchTimeoutNs, flag_watch_.get());
    if (doorbell) {
      cuda::launch_doorbell(gate_.device_word(), gate_.token_after(1), flag, nullptr, doorbell_.get());
    }
    bench::launch_watch(gate_word_, gate_.token_after(1), &stamps_dev_->gate_seen_ns, &stamps_dev_->gate_started,
                        kWatchTimeoutNs, gate_watch_.get());
    wait_started(s->flag_started, "the flag watcher");
    wait_started(s->gate_started, "the gate watcher");
    if (busy) {
      bench::BeSpin k;
      k.blocks = be_blocks_;
      k.flag = flag;
      k.duration_ns = 5'000'000;
      bench::launch_be_spin(k, be_.get());
    }
    gate_.hold(held_.get());
    if (!doorbell) cuda::stream_write_value32(held_.get(), flag, 1);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // the BE blocks take the SMs
    gate_.open();
    ATL_CUDA_CHECK(cudaDeviceSynchronize());
    if (s->gate_seen_ns == 0 || s->flag_seen_ns == 0) return std::nan("");
    return (static_cast<double>(s->flag_seen_ns) - static_cast<double>(s->gate_seen_ns)) / 1e3;
  }

 private:
  cuda::Stream held_ = cuda::make_priority_stream(true);
  cuda::Stream gate_watch_ = cuda::make_stream();
  cuda::Stream doorbell_ = cuda::make_priority_stream(true);
  cuda::Stream flag_watch_ = cuda::make_stream();
  cuda::Stream be_ = cuda::make_priority_stream(false);
  cuda::DeviceBuffer flag_{sizeof(int)};
  cuda::PinnedBuffer stamps_buf_{sizeof(Stamps), /*mapped=*/true};
  cuda::StreamGate gate_;
  const volatile unsigned* gate_word_ = nullptr;
  Stamps* stamps_dev_ = nullptr;
  int be_blocks_ = 0;
};

int run(int argc, char** argv) {
  atl::ProbeCli app{"Flag landing after a gate opens: the held stream's write against a doorbell kernel"};
  int trials = 200;
  std::string json_path;
  app.option("--trials", trials, "Trials per mode and load", atl::ProbeCheck::between(1, 100000));
  app.option("--json", json_path, "Write the results here");
  if (auto status = app.parse(argc, argv)) return *status;
  ATOLL_CHECK(cuda_device_available(), kCuda, "no CUDA device: {}", cuda_unavailable_reason());
  GateProbe probe;
  nlohmann::json out;
  fmt::print("{:<10} {:<5} {:>8} {:>8} {:>8} {:>8}\n", "write", "load", "p50 us", "p99 us", "max us", "missed");
  for (const bool doorbell : {false, true}) {
    for (const bool busy : {false, true}) {
      std::vector<double> us;
      int missed = 0;
      for (int t = 0; t < trials; ++t) {
        const double v = probe.trial(doorbell, busy);
        if (std::isnan(v)) {
          ++missed;
        } else {
          us.push_back(v);
        }
      }
      const char* write = doorbell ? "doorbell" : "stream";
      const char* load = busy ? "busy" : "idle";
      const double p50 = us.empty() ? NAN : quantile(us, 0.5), p99 = us.empty() ? NAN : quantile(us, 0.99);
      const double most = us.empty() ? NAN : *std::max_element(us.begin(), us.end());
      fmt::print("{:<10} {:<5} {:>8.2f} {:>8.2f} {:>8.2f} {:>8}\n", write, load, p50, p99, most, missed);
      out[write][load] = {{"p50_us", p50}, {"p99_us", p99}, {"max_us", most}, {"missed", missed}, {"samples_us", us}};
    }
  }
  if (!json_path.empty()) write_file_atomic(json_path, out.dump(1) + "\n");
  return 0;
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  return atl::run_probe("atoll_bench_gate", [&] {
    return atl::run(argc, argv);
  });
}
