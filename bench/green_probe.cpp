// atoll_bench_green: whether green contexts (a context over a subset of the SMs, CUDA 12.4+) let
// BE work fill the SMs an RT task leaves idle without slowing it: issue 14's NVIDIA-native
// alternative (b), measured before a scheduler mode is built on it. An RT model (batch 1) runs
// one task at a time while a BE model (large batch) runs continuously on another stream; each
// arrangement reports the RT task's device time (p50, p99 and the p99 against alone) and the BE
// passes completed per second:
//   alone     the RT task alone
//   shared    BE on a low-priority stream over every SM (the `streams-prio` mode's sharing)
//   be-green  BE on a green context of the SMs left after R for RT; RT on every SM
//   split     RT on a green context of R SMs, BE on one of the others
// for each R of --rt-sms (the driver rounds a group up to its partition granularity). Tasks are
// launched kernel by kernel (the same launches in every arrangement, so the host's pace is common
// to all), with no preemption flag. Work for a green context's stream is launched with that
// context current (cuCtxFromGreenCtx: the primary context over the green context's SMs) and its
// events made there: an event and a stream must share a context.
#include <cuda.h>
#include <fmt/core.h>

#include <array>
#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>
#include <thread>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/stats.h"
#include "probe_cli.h"
#include "runtime/session.h"

namespace atl {
namespace {

// Driver entry points through the runtime, as backends/cuda/stream_write.cpp does: linking libcuda
// would stop the binary from starting where no driver is installed. Asked at the runtime's own
// version: the green-context calls are younger than the 12.0 that stream_write.cpp asks for.
template <typename Fn>
Fn driver(const char* symbol) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult status{};
  ATL_CUDA_CHECK(cudaGetDriverEntryPointByVersion(symbol, &fn, CUDART_VERSION, cudaEnableDefault, &status));
  ATOLL_CHECK(fn != nullptr && status == cudaDriverEntryPointSuccess, kCuda, "the driver has no {}", symbol);
  return reinterpret_cast<Fn>(fn);
}

void check(CUresult r, const char* call) {
  ATOLL_CHECK(r == CUDA_SUCCESS, kCuda, "{} failed with CUresult {}", call, static_cast<int>(r));
}

// A stream and the context to make current for work on it (nullptr: the runtime's primary one).
struct Lane {
  cudaStream_t stream;
  CUcontext context;
};

void make_current(CUcontext context) {
  static const auto set_current = driver<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent");
  if (context == nullptr) {
    ATL_CUDA_CHECK(cudaSetDevice(0));
    static const CUcontext primary = [] {
      CUcontext c{};
      check(driver<decltype(&cuCtxGetCurrent)>("cuCtxGetCurrent")(&c), "cuCtxGetCurrent");
      return c;
    }();
    context = primary;
  }
  check(set_current(context), "cuCtxSetCurrent");
}

// Two green contexts over disjoint SMs of device 0: `rt` with at least `rt_sms`, `be` with the
// rest; a non-blocking stream in each (`rt` at the highest priority).
class GreenSplit {
 public:
  explicit GreenSplit(unsigned rt_sms) {
    CUdevice dev = 0;
    CUdevResource all{}, rest{};
    check(driver<decltype(&cuDeviceGetDevResource)>("cuDeviceGetDevResource")(dev, &all, CU_DEV_RESOURCE_TYPE_SM),
          "cuDeviceGetDevResource");
    unsigned groups = 1;
    check(driver<decltype(&cuDevSmResourceSplitByCount)>("cuDevSmResourceSplitByCount")(&rt_res_, &groups, &all, &rest,
                                                                                        0, rt_sms),
          "cuDevSmResourceSplitByCount");
    ATOLL_CHECK(groups == 1 && rest.sm.smCount > 0, kInvalidArgument, "{} SMs for RT leave none for BE", rt_sms);
    be_res_ = rest;
    rt_ctx_ = make_context(rt_res_);
    be_ctx_ = make_context(be_res_);
    const auto as_context = driver<decltype(&cuCtxFromGreenCtx)>("cuCtxFromGreenCtx");
    check(as_context(&rt_current_, rt_ctx_), "cuCtxFromGreenCtx");
    check(as_context(&be_current_, be_ctx_), "cuCtxFromGreenCtx");
    int low = 0, high = 0;
    ATL_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&low, &high));
    const auto stream_create = driver<decltype(&cuGreenCtxStreamCreate)>("cuGreenCtxStreamCreate");
    check(stream_create(&rt_stream_, rt_ctx_, CU_STREAM_NON_BLOCKING, high), "cuGreenCtxStreamCreate");
    check(stream_create(&be_stream_, be_ctx_, CU_STREAM_NON_BLOCKING, low), "cuGreenCtxStreamCreate");
  }
  ~GreenSplit() {
    const auto destroy_stream = driver<decltype(&cuStreamDestroy)>("cuStreamDestroy");
    const auto destroy_ctx = driver<decltype(&cuGreenCtxDestroy)>("cuGreenCtxDestroy");
    destroy_stream(rt_stream_);
    destroy_stream(be_stream_);
    destroy_ctx(rt_ctx_);
    destroy_ctx(be_ctx_);
  }
  GreenSplit(const GreenSplit&) = delete;
  GreenSplit& operator=(const GreenSplit&) = delete;

  unsigned rt_sms() const { return rt_res_.sm.smCount; }
  unsigned be_sms() const { return be_res_.sm.smCount; }
  Lane rt_lane() const { return {reinterpret_cast<cudaStream_t>(rt_stream_), rt_current_}; }
  Lane be_lane() const { return {reinterpret_cast<cudaStream_t>(be_stream_), be_current_}; }

 private:
  static CUgreenCtx make_context(CUdevResource& res) {
    CUdevResourceDesc desc{};
    check(driver<decltype(&cuDevResourceGenerateDesc)>("cuDevResourceGenerateDesc")(&desc, &res, 1),
          "cuDevResourceGenerateDesc");
    CUgreenCtx ctx{};
    check(driver<decltype(&cuGreenCtxCreate)>("cuGreenCtxCreate")(&ctx, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM),
          "cuGreenCtxCreate");
    return ctx;
  }
  CUdevResource rt_res_{}, be_res_{};
  CUgreenCtx rt_ctx_{}, be_ctx_{};
  CUcontext rt_current_{}, be_current_{};
  CUstream rt_stream_{}, be_stream_{};
};

void launch_all(CudaInstance& gpu, cudaStream_t stream) {
  for (int k = 0; k < static_cast<int>(gpu.program().kernels.size()); ++k) gpu.launch(k, stream, nullptr);
}

// One untimed pass: a kernel's first launch in a context may load its code there.
void warm(CudaInstance& gpu, const Lane& lane) {
  make_current(lane.context);
  launch_all(gpu, lane.stream);
  ATL_CUDA_CHECK(cudaStreamSynchronize(lane.stream));
  make_current(nullptr);
}

// The BE model's passes, launched on `stream` by a thread of its own with two in flight, counted
// as they end.
class BeLoad {
 public:
  BeLoad(CudaInstance& gpu, const Lane& lane) : gpu_(gpu), lane_(lane) {
    thread_ = std::thread([this] { loop(); });
  }
  ~BeLoad() { join(); }  // an error it met is dropped here only when another one is on its way
  BeLoad(const BeLoad&) = delete;
  BeLoad& operator=(const BeLoad&) = delete;
  // Passes ended per second since the start, after waiting for the ones in flight; rethrows what
  // stopped the thread.
  double stop() {
    join();
    if (error_) std::rethrow_exception(error_);
    return rate_;
  }

 private:
  void join() {
    if (!thread_.joinable()) return;
    running_ = false;
    thread_.join();
  }
  void loop() {
    try {
      passes();
    } catch (...) {
      error_ = std::current_exception();
    }
  }
  void passes() {
    make_current(lane_.context);
    std::array<cuda::Event, 2> ends{cuda::make_event(), cuda::make_event()};
    const auto t0 = std::chrono::steady_clock::now();
    int64_t passes = 0;
    while (running_) {
      cuda::Event& slot = ends[passes % 2];
      if (passes >= 2) ATL_CUDA_CHECK(cudaEventSynchronize(slot.get()));
      launch_all(gpu_, lane_.stream);
      ATL_CUDA_CHECK(cudaEventRecord(slot.get(), lane_.stream));
      ++passes;
    }
    ATL_CUDA_CHECK(cudaStreamSynchronize(lane_.stream));
    rate_ = static_cast<double>(passes) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  CudaInstance& gpu_;
  Lane lane_;
  std::thread thread_;
  std::atomic<bool> running_{true};
  double rate_ = 0;  // written by the thread, read after join
  std::exception_ptr error_;
};

// RT tasks one at a time on the lane, device time of each in microseconds.
std::vector<double> rt_tasks(CudaInstance& gpu, const Lane& lane, int trials) {
  make_current(lane.context);
  std::vector<double> us;
  {
    cuda::Event start = cuda::make_event(true), end = cuda::make_event(true);
    for (int i = 0; i < trials; ++i) {
      ATL_CUDA_CHECK(cudaEventRecord(start.get(), lane.stream));
      launch_all(gpu, lane.stream);
      ATL_CUDA_CHECK(cudaEventRecord(end.get(), lane.stream));
      ATL_CUDA_CHECK(cudaEventSynchronize(end.get()));
      float ms = 0;
      ATL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), end.get()));
      us.push_back(ms * 1e3);
    }
  }  // the events go while their context is current
  make_current(nullptr);
  return us;
}

// The arrangements in turn; the first is `alone` (what p99 is compared with), then `shared`
// (what BE throughput is compared with).
struct Probe {
  Probe(CudaInstance& rt_gpu, CudaInstance& be_gpu, int n) : rt(rt_gpu), be(be_gpu), trials(n) {}
  CudaInstance& rt;
  CudaInstance& be;
  int trials;
  std::optional<double> alone_p99;
  std::optional<double> shared_rate;
  nlohmann::json rows = nlohmann::json::array();

  void arrangement(const char* name, int rt_sms, const Lane& rt_lane, std::optional<Lane> be_lane) {
    warm(rt, rt_lane);
    if (be_lane) warm(be, *be_lane);
    std::optional<BeLoad> load;
    if (be_lane) load.emplace(be, *be_lane);
    const Distribution d = distribution(rt_tasks(rt, rt_lane, trials));
    const double rate = load ? load->stop() : 0.0;
    if (!alone_p99) alone_p99 = d.p99;
    if (std::string_view(name) == "shared") shared_rate = rate;
    const double vs_shared = shared_rate && *shared_rate > 0 ? rate / *shared_rate : 0.0;
    fmt::print("{:<9} {:>6} {:>10.1f} {:>10.1f} {:>+9.1f}% {:>10.1f} {:>9.2f}\n", name, rt_sms, d.p50, d.p99,
               100.0 * (d.p99 / *alone_p99 - 1.0), rate, vs_shared);
    rows.push_back({{"arrangement", name},
                    {"rt_sms", rt_sms},
                    {"rt_us", distribution_json(d)},
                    {"rt_p99_vs_alone", d.p99 / *alone_p99},
                    {"be_passes_per_s", rate},
                    {"be_vs_shared", vs_shared}});
  }
};

std::unique_ptr<Session> load(const std::string& model, int64_t batch) {
  SessionOptions so;
  so.model = model;
  so.device = "cuda";
  so.model_options.batch = batch;
  auto session = std::make_unique<Session>(so);
  session->set_inputs(session->random_inputs(7));
  auto& gpu = dynamic_cast<CudaInstance&>(session->instance());
  gpu.preload(gpu.stream());
  return session;
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  std::string rt_model = "resnet50", be_model = "resnet152", json_path = "atoll_green_probe.json";
  int64_t be_batch = 32;
  int trials = 300;
  std::vector<unsigned> rt_sms{16, 32, 64, 96};
  atl::ProbeCli app{"atoll: RT latency and BE throughput with BE (and RT) on green contexts of disjoint SMs"};
  app.option("--rt", rt_model, "RT zoo model (batch 1)");
  app.option("--be", be_model, "BE zoo model");
  app.option("--be-batch", be_batch, "BE batch", atl::kPositive);
  app.option("--rt-sms", rt_sms, "SMs set aside for RT, one arrangement pair each", atl::kPositive);
  app.option("--trials", trials, "timed RT tasks per arrangement", atl::kPositive);
  app.option("--json", json_path, "output file");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_green", [&] {
    ATOLL_CHECK(atl::cuda_device_available(), kCuda, "no CUDA device: {}", atl::cuda_unavailable_reason());
    const auto rt = atl::load(rt_model, 1), be = atl::load(be_model, be_batch);
    atl::Probe probe(dynamic_cast<atl::CudaInstance&>(rt->instance()), dynamic_cast<atl::CudaInstance&>(be->instance()),
                     trials);
    fmt::print("RT {} b1, BE {} b{}; RT task device time (us), BE passes per second\n", rt_model, be_model, be_batch);
    fmt::print("{:<9} {:>6} {:>10} {:>10} {:>10} {:>10} {:>9}\n", "arrange", "RT SMs", "RT p50", "RT p99", "p99 vs",
               "BE/s", "vs shared");
    atl::cuda::Stream high = atl::cuda::make_priority_stream(true), low = atl::cuda::make_priority_stream(false);
    const atl::Lane rt_all{high.get(), nullptr};
    probe.arrangement("alone", 0, rt_all, std::nullopt);
    probe.arrangement("shared", 0, rt_all, atl::Lane{low.get(), nullptr});
    for (const unsigned r : rt_sms) {
      try {  // whether work runs on a green context is part of what is probed
        const atl::GreenSplit split(r);
        probe.arrangement("be-green", static_cast<int>(split.rt_sms()), rt_all, split.be_lane());
        probe.arrangement("split", static_cast<int>(split.rt_sms()), split.rt_lane(), split.be_lane());
      } catch (const atl::Error& e) {
        fmt::print("green contexts for {} RT SMs failed: {}\n", r, e.message());
        probe.rows.push_back({{"arrangement", "green"}, {"rt_sms", r}, {"error", e.message()}});
      }
    }
    atl::write_file_atomic(
        json_path,
        nlohmann::json{{"rt", rt_model}, {"be", be_model}, {"be_batch", be_batch}, {"arrangements", probe.rows}}.dump(
            1) +
            "\n");
    return 0;
  });
}
