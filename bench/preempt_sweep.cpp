// atoll_bench_preempt: preemption latency against the number of BE kernels already handed to
// CUDA and their duration, for the scheduler's `wait` and `reset` modes, with the mechanism the
// CUDA ExecDevice uses: BE kernels on a low-priority stream that check the device flag at block
// entry and inside their loop (as every atoll kernel does), the flag raised by
// cuStreamWriteValue32 on the high-priority RT stream, the RT kernel launched right behind it.
//
// One trial: launch `count` BE kernels (each a full wave of blocks that spin for `duration`),
// wait until the first one runs plus a random fraction of a duration, then the RT request
// arrives (host clock T0): `reset` raises the flag and launches the RT probe, `wait` launches the
// probe only (its host queue is empty: every BE kernel was already handed to CUDA). The probe's
// single block writes a mapped host word; the host spins on it (T1). T1 - T0 is reported next to
// the same measurement on an idle GPU, so the excess is what the BE work costs the RT request.
// CUDA events on the RT stream around the request give the same interval on the device's clock.
// The measure, arrival to the RT kernel's start, comes from the probe's own %globaltimer
// stamp: before each trial, on an idle GPU, a one-thread kernel echoes host stores with its clock
// (16 round trips); the fastest round trip gives the offset between the host's steady clock and
// the device's, to within half that round trip (reported as clock_rtt_us), which places the
// arrival on the device clock for every mode alike.
// Two faster arrival paths, through cuda::StreamGate (a cuStreamWaitValue32 on a mapped host
// word, opened by one host store): `armed` enqueues the flag write beforehand on a high-priority
// stream of its own, so raising the flag is one host store; the probe is launched after it.
// `armed-all` also enqueues the probe beforehand, so the arrival makes no API call at all: the
// path the scheduler's reset mode takes for RT tasks (SchedulerOptions::armed_rt). Its
// device-clock column stays empty: an event behind the hold would start the clock only once the
// GPU noticed the store. Every kernel here is launched before the first hold: a kernel's first
// (lazy) load synchronizes the context, which pending held work blocks.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/stream_gate.h"
#include "backends/cuda/stream_write.h"
#include "bench/preempt_kernels.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "probe_cli.h"

namespace atl {
namespace {

struct Options {
  std::vector<int> counts{1, 10, 100, 1000};
  std::vector<double> durations_us{10, 100, 1000};
  std::vector<std::string> modes{"wait", "reset", "armed", "armed-all"};
  int trials = 200;
  int threads = 256;
  uint64_t seed = 1;
  std::string json_path = "preempt_sweep.json";
};

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void spin_until(volatile int* word, int value) {
  while (*word != value) {
  }
}

nlohmann::json dist(const Distribution& s) {
  if (s.count == 0) return nullptr;
  return {{"p50", s.p50}, {"p99", s.p99}, {"max", s.max}, {"n", s.count}};
}

// How the RT request reaches the GPU: the probe launched on arrival; the flag raised and the
// probe launched on arrival; the flag write enqueued beforehand, released by a host store, and
// the probe launched on arrival; or both enqueued beforehand.
enum class Arrival { kLaunch, kFlagAndLaunch, kArmedFlag, kArmedAll };

class Sweep {
 public:
  explicit Sweep(const Options& o) : o_(o), rng_(o.seed) {
    be_ = cuda::make_priority_stream(false);
    rt_ = cuda::make_priority_stream(true);
    preempt_ = cuda::make_priority_stream(true);
    control_ = cuda::make_stream();
    cudaDeviceProp prop{};
    ATL_CUDA_CHECK(cudaGetDeviceProperties(&prop, 0));
    device_ = prop.name;
    sms_ = prop.multiProcessorCount;
    be_blocks_ = sms_ * bench::be_spin_blocks_per_sm(o.threads);  // one full wave: every block runs at once
  }
  ~Sweep() {
    gate_.open_all();  // after an error mid-trial: held work would block the synchronization
    cudaDeviceSynchronize();
  }

  nlohmann::json run() {
    nlohmann::json doc;
    doc["device"] = device_;
    doc["sms"] = sms_;
    doc["be_blocks_per_kernel"] = be_blocks_;
    doc["threads_per_block"] = o_.threads;
    doc["trials"] = o_.trials;
    std::vector<double> idle_host, idle_device, idle_armed, idle_start, idle_armed_start;
    for (int i = 0; i < std::max(o_.trials, 50); ++i) {
      const Sample x = trial_idle(Arrival::kLaunch);
      idle_host.push_back(x.host_us);
      idle_device.push_back(*x.device_us);
      idle_start.push_back(x.start_us);
      const Sample a = trial_idle(Arrival::kArmedAll);
      idle_armed.push_back(a.host_us);
      idle_armed_start.push_back(a.start_us);
    }
    const Distribution ih = distribution(idle_host), id = distribution(idle_device), ia = distribution(idle_armed);
    const Distribution is = distribution(idle_start), ias = distribution(idle_armed_start);
    doc["idle_us"] = dist(ih);
    doc["idle_device_us"] = dist(id);
    doc["idle_armed_all_us"] = dist(ia);
    doc["idle_start_us"] = dist(is);
    doc["idle_armed_all_start_us"] = dist(ias);
    fmt::print(
        "idle GPU: arrival -> RT kernel done, host p50 {:.1f} us p99 {:.1f} us; device p50 {:.1f} us p99 {:.1f} us; "
        "armed-all host p50 {:.1f} us p99 {:.1f} us\n",
        ih.p50, ih.p99, id.p50, id.p99, ia.p50, ia.p99);
    fmt::print(
        "idle GPU: arrival -> RT kernel start (device clock), launched p50 {:.1f} us p99 {:.1f} us; armed-all "
        "p50 {:.1f} us p99 {:.1f} us\n",
        is.p50, is.p99, ias.p50, ias.p99);
    fmt::print("{:<9} {:>6} {:>7} | {:>9} {:>9} | {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9}\n", "mode", "count", "dur_us",
               "host_p50", "host_p99", "dev_p50", "dev_p99", "dev_max", "start_p50", "start_p99", "start_max");
    for (const std::string& mode : o_.modes) {
      const Arrival arrival = arrival_for(mode);
      for (double dur : o_.durations_us) {
        for (int count : o_.counts) {
          std::vector<double> host, device, drain, start, rtt;
          const int trials = trials_for(mode, dur);
          for (int t = 0; t < trials; ++t) {
            const Sample x = trial(arrival, count, dur);
            host.push_back(x.host_us);
            if (x.device_us) device.push_back(*x.device_us);
            drain.push_back(x.drain_us);
            start.push_back(x.start_us);
            rtt.push_back(x.clock_rtt_us);
          }
          const Distribution h = distribution(host), d = distribution(device), st = distribution(start);
          fmt::print("{:<9} {:>6} {:>7.0f} | {:>9.1f} {:>9.1f} | {:>9} {:>9} {:>9} | {:>9.1f} {:>9.1f} {:>9.1f}\n",
                     mode, count, dur, h.p50, h.p99, device_column(d, d.p50), device_column(d, d.p99),
                     device_column(d, d.max), st.p50, st.p99, st.max);
          std::fflush(stdout);
          doc["results"].push_back({{"mode", mode},
                                    {"be_kernels", count},
                                    {"be_kernel_us", dur},
                                    {"latency_us", dist(h)},
                                    {"device_latency_us", dist(d)},
                                    {"start_latency_us", dist(st)},
                                    {"clock_rtt_us", dist(distribution(rtt))},
                                    {"be_drain_us", dist(distribution(drain))}});
          write_file_atomic(o_.json_path, doc.dump(1) + "\n");
        }
      }
    }
    return doc;
  }

 private:
  static Arrival arrival_for(const std::string& mode) {
    if (mode == "wait") return Arrival::kLaunch;
    if (mode == "reset") return Arrival::kFlagAndLaunch;
    if (mode == "armed") return Arrival::kArmedFlag;
    ATOLL_CHECK(mode == "armed-all", kInvalidArgument, "--modes: '{}' (expected wait, reset, armed or armed-all)",
                mode);
    return Arrival::kArmedAll;
  }

  // "-" where the mode has no device-clock samples.
  static std::string device_column(const Distribution& s, double value) {
    return s.count == 0 ? "-" : fmt::format("{:.1f}", value);
  }

  // `wait` with many long kernels would spend seconds per trial; the distribution settles sooner.
  int trials_for(const std::string& mode, double dur_us) const {
    if (mode != "wait") return o_.trials;
    const double budget_us = 2e6;
    return std::clamp(static_cast<int>(budget_us / (dur_us + 50.0)), 20, o_.trials);
  }

  void reset_words() {
    words()[0] = 0;
    words()[1] = 0;
  }

  // One RT arrival. host_us: host clock from the arrival to the host seeing the probe's write;
  // device_us: CUDA events on the RT stream around the host's API calls for the request and the
  // probe, i.e. from the moment the GPU takes up the request to the RT kernel's end, without the
  // host's API jitter before it.
  struct Sample {
    double host_us = 0, drain_us = 0;
    std::optional<double> device_us;
    double start_us = 0;      // arrival to the probe's first instruction, device clock
    double clock_rtt_us = 0;  // the calibration's best round trip: the offset is good to half of it
  };

  // The device clock minus the host's steady clock, from the fastest of kClockRounds round trips
  // with a one-thread kernel. The GPU must be idle: the kernel has to start at once.
  struct ClockOffset {
    int64_t device_minus_host_ns = 0;
    int64_t rtt_ns = 0;
  };
  static constexpr int kClockRounds = 16;
  static int64_t host_ns(Clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  }
  ClockOffset calibrate() {
    volatile ClockWords* w = clock_words();
    w->ask = 0;
    w->echo = 0;
    bench::launch_clock_echo(&clock_device()->ask, &clock_device()->echo, &clock_device()->device_ns, kClockRounds,
                             control_.get());
    ClockOffset best{0, INT64_MAX};
    for (int r = 1; r <= kClockRounds; ++r) {
      const int64_t h0 = host_ns(Clock::now());
      w->ask = r;
      std::atomic_thread_fence(std::memory_order_seq_cst);  // the store leaves the core at once
      while (w->echo != r) {
      }
      const int64_t h1 = host_ns(Clock::now());
      if (h1 - h0 < best.rtt_ns) {
        best.rtt_ns = h1 - h0;
        best.device_minus_host_ns = static_cast<int64_t>(w->device_ns) - (h0 + (h1 - h0) / 2);
      }
    }
    ATL_CUDA_CHECK(cudaStreamSynchronize(control_.get()));
    return best;
  }

  // Enqueues, off the timed path, what the armed arrivals release: the flag write on its own
  // stream (kArmedFlag), or the flag write and the probe on the RT stream (kArmedAll).
  void arm(Arrival how, bool raise_flag) {
    armed_token_ = ++token_;
    if (how == Arrival::kArmedFlag) {
      gate_.hold(preempt_.get());
      cuda::stream_write_value32(preempt_.get(), flag(), 1);
    } else if (how == Arrival::kArmedAll) {
      gate_.hold(rt_.get());
      if (raise_flag) cuda::stream_write_value32(rt_.get(), flag(), 1);
      bench::launch_rt_probe(words_device_ + 1, armed_token_, &clock_device()->probe_start_ns, rt_.get());
    }
  }

  void release_armed() { gate_.open(); }

  // The RT request arrives and the host waits for the probe.
  Sample arrive(Arrival how, const ClockOffset& clock) {
    Sample x;
    x.clock_rtt_us = static_cast<double>(clock.rtt_ns) / 1e3;
    const auto start_us = [&](Clock::time_point t0) {
      const auto started = static_cast<int64_t>(clock_words()->probe_start_ns) - clock.device_minus_host_ns;
      return static_cast<double>(started - host_ns(t0)) / 1e3;
    };
    if (how == Arrival::kArmedAll) {
      const auto t0 = Clock::now();
      release_armed();
      spin_until(words() + 1, armed_token_);
      x.host_us = us_since(t0);
      x.start_us = start_us(t0);
      return x;
    }
    const auto t0 = Clock::now();
    if (how == Arrival::kArmedFlag) release_armed();
    const int token = ++token_;
    ATL_CUDA_CHECK(cudaEventRecord(arrive_.get(), rt_.get()));
    if (how == Arrival::kFlagAndLaunch) cuda::stream_write_value32(rt_.get(), flag(), 1);
    bench::launch_rt_probe(words_device_ + 1, token, &clock_device()->probe_start_ns, rt_.get());
    ATL_CUDA_CHECK(cudaEventRecord(done_.get(), rt_.get()));
    spin_until(words() + 1, token);
    x.host_us = us_since(t0);
    x.start_us = start_us(t0);
    ATL_CUDA_CHECK(cudaEventSynchronize(done_.get()));
    float ms = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, arrive_.get(), done_.get()));
    x.device_us = static_cast<double>(ms) * 1e3;
    return x;
  }

  Sample trial_idle(Arrival how) {
    const ClockOffset clock = calibrate();
    reset_words();
    arm(how, false);
    const Sample x = arrive(how, clock);
    ATL_CUDA_CHECK(cudaStreamSynchronize(rt_.get()));
    return x;
  }

  Sample trial(Arrival how, int count, double dur_us) {
    const bool reset = how != Arrival::kLaunch;
    ATL_CUDA_CHECK(cudaMemsetAsync(flag(), 0, sizeof(int), control_.get()));
    ATL_CUDA_CHECK(cudaStreamSynchronize(control_.get()));
    const ClockOffset clock = calibrate();
    reset_words();
    const auto duration_ns = static_cast<uint64_t>(dur_us * 1e3);
    for (int k = 0; k < count; ++k) {
      bench::launch_be_spin({be_blocks_, o_.threads, flag(), duration_ns, k + 1, words_device_}, be_.get());
    }
    // The first BE kernel runs; the request arrives at a random point of a kernel's life.
    spin_until_at_least(words(), 1);
    arm(how, true);
    std::uniform_real_distribution<double> phase(0.0, dur_us);
    const auto wait_until = Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(phase(rng_) * 1e3));
    while (Clock::now() < wait_until) {
    }
    const auto t0 = Clock::now();
    Sample x = arrive(how, clock);
    if (reset) {
      ATL_CUDA_CHECK(cudaStreamSynchronize(be_.get()));
      x.drain_us = us_since(t0);
    } else {
      // Measured; what is left of the BE work is cut short so the next trial starts clean.
      cuda::stream_write_value32(control_.get(), flag(), 1);
      ATL_CUDA_CHECK(cudaStreamSynchronize(be_.get()));
    }
    ATL_CUDA_CHECK(cudaStreamSynchronize(rt_.get()));
    ATL_CUDA_CHECK(cudaStreamSynchronize(preempt_.get()));
    return x;
  }

  int* flag() const { return static_cast<int*>(flag_buffer_.get()); }
  volatile int* words() const { return static_cast<volatile int*>(words_buffer_.get()); }

  static void spin_until_at_least(volatile int* word, int value) {
    while (*word < value) {
    }
  }

  Options o_;
  std::mt19937_64 rng_;
  cuda::Stream be_, rt_, preempt_, control_;
  cuda::Event arrive_ = cuda::make_event(true), done_ = cuda::make_event(true);
  std::string device_;
  int sms_ = 0;
  int be_blocks_ = 0;
  cuda::DeviceBuffer flag_buffer_{sizeof(int)};
  // [0] last BE kernel started, [1] RT token (the probe ran)
  cuda::PinnedBuffer words_buffer_{2 * sizeof(int), /*mapped=*/true};
  cuda::StreamGate gate_;
  struct ClockWords {
    int ask;
    int echo;
    uint64_t device_ns;       // the echo kernel's clock at its latest answer
    uint64_t probe_start_ns;  // the RT probe's clock at its first instruction
  };
  cuda::PinnedBuffer clock_buffer_{sizeof(ClockWords), /*mapped=*/true};
  volatile ClockWords* clock_words() const { return static_cast<volatile ClockWords*>(clock_buffer_.get()); }
  volatile ClockWords* clock_device() const { return clock_device_; }
  volatile ClockWords* clock_device_ = static_cast<volatile ClockWords*>(clock_buffer_.device_alias());
  // Looked up once: the query is an API call, and the arrival path is timed.
  int* words_device_ = static_cast<int*>(words_buffer_.device_alias());
  int token_ = 0;
  int armed_token_ = 0;
};

// Whether a cuStreamWaitValue32 left pending on one stream holds back work on others: creates
// `streams` streams (the first, high priority, gets the pending wait; the rest alternate low and
// high), launches one probe on each of the others, and reports which did not run within 200 ms
// before releasing the wait. Run it under different CUDA_DEVICE_MAX_CONNECTIONS values. The probe
// kernel is launched once beforehand: with lazy module loading, the first launch of a kernel
// while a wait is pending hung on the H200 at every stream count (loading synchronizes); with it
// loaded first, no stream was held back at 4, 8, 16 or 40 streams, with 8 or 32 connections.
nlohmann::json stall_probe(int streams) {
  ATOLL_CHECK(streams >= 2, kInvalidArgument, "--stall-probe needs at least 2 streams (got {})", streams);
  std::vector<cuda::Stream> s;
  for (int i = 0; i < streams; ++i) s.push_back(cuda::make_priority_stream(i % 2 == 0));
  cuda::StreamGate gate;
  cuda::PinnedBuffer ran(static_cast<size_t>(streams) * sizeof(int), /*mapped=*/true);
  auto* ran_words = static_cast<volatile int*>(ran.get());
  for (int i = 0; i < streams; ++i) ran_words[i] = 0;
  auto* ran_device = static_cast<volatile int*>(ran.device_alias());
  bench::launch_rt_probe(ran_device, 1, nullptr, s[0].get());  // loads the kernel's module
  ATL_CUDA_CHECK(cudaStreamSynchronize(s[0].get()));
  gate.hold(s[0].get());
  for (int i = 1; i < streams; ++i) {
    bench::launch_rt_probe(ran_device + i, 1, nullptr, s[static_cast<size_t>(i)].get());
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(200);
  while (Clock::now() < deadline) {
  }
  std::vector<int> blocked;
  for (int i = 1; i < streams; ++i) {
    if (ran_words[i] != 1) blocked.push_back(i);
  }
  gate.open();
  ATL_CUDA_CHECK(cudaDeviceSynchronize());
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  fmt::print(
      "stall probe: {} streams, CUDA_DEVICE_MAX_CONNECTIONS={}: {} of {} other streams held back by the "
      "pending wait on stream 0{}\n",
      streams, connections ? connections : "(unset)", blocked.size(), streams - 1,
      blocked.empty() ? "" : fmt::format(" (streams {})", fmt::join(blocked, ", ")));
  std::fflush(stdout);
  return {{"streams", streams}, {"max_connections", connections ? connections : ""}, {"blocked", blocked}};
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  atl::Options o;
  atl::ProbeCli app{"atoll preemption-latency sweep (wait / reset against BE kernel count and duration)"};
  app.option("--counts", o.counts, "BE kernels handed to CUDA before the RT request arrives");
  app.option("--durations-us", o.durations_us, "duration of each BE kernel, microseconds");
  app.option("--modes", o.modes,
             "wait, reset, armed (reset with the flag write enqueued before arrival) and/or armed-all (the probe "
             "too)");
  app.option("--trials", o.trials, "RT arrivals per point (fewer for long `wait` points)");
  app.option("--threads", o.threads, "threads per BE block");
  app.option("--seed", o.seed, "seed of the arrival phases");
  app.option("--json", o.json_path, "output file");
  int stall_streams = 0;
  app.option("--stall-probe", stall_streams,
             "instead of the sweep: with this many streams, which ones a wait pending on the first holds back");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_preempt", [&] {
    if (stall_streams > 0) {
      const nlohmann::json probe = atl::stall_probe(stall_streams);
      atl::write_file_atomic(o.json_path, probe.dump(1) + "\n");
      return 0;
    }
    atl::Sweep(o).run();
    return 0;
  });
}
