// atoll_bench_cuda: latency of zoo models on the CUDA backend, measured the way
// bench/torch_models.py measures PyTorch (CUDA-graph replays timed by events, median of many),
// plus the cost of the preemption checks, optional GEMM tuning and the slowest kernels.
// Writes one JSON document; see scripts/gpu/run-on-device.sh.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_check.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "probe_cli.h"
#include "runtime/session.h"

namespace atl {
namespace {

struct Options {
  std::vector<std::string> models{"resnet50",     "resnet152", "vgg19",    "densenet201", "inception_v3",
                                  "mobilenet_v2", "bert_base", "resnet18", "distilbert"};
  std::vector<int64_t> batches{1, 8};
  int iters = 200;
  int warmup = 20;
  int tune_repeats = 3;  // 0 = keep the cost model's choices
  int top_kernels = 8;
  bool wgmma = true;  // offer the Hopper wgmma tiles to the tuner (ATOLL_CUDA_WGMMA)
  std::string json_path = "atoll_cuda.json";
};

// Median and spread of `iters` graph replays, each bracketed by events and waited for.
nlohmann::json time_runs(CudaInstance& gpu, const Options& o) {
  cuda::Event start = cuda::make_event(true), stop = cuda::make_event(true);
  for (int i = 0; i < o.warmup; ++i) gpu.enqueue_run();
  ATL_CUDA_CHECK(cudaStreamSynchronize(gpu.stream()));
  std::vector<double> ms;
  for (int i = 0; i < o.iters; ++i) {
    ATL_CUDA_CHECK(cudaEventRecord(start.get(), gpu.stream()));
    gpu.enqueue_run();
    ATL_CUDA_CHECK(cudaEventRecord(stop.get(), gpu.stream()));
    ATL_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float t = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
    ms.push_back(t);
  }
  const LatencyStats s = latency_stats(ms);
  return {{"median_ms", s.median_ms}, {"min_ms", s.min_ms}, {"p99_ms", s.p99_ms}, {"mean_ms", s.mean_ms}};
}

nlohmann::json bench_model(const std::string& model, int64_t batch, const Options& o) {
  SessionOptions so;
  so.model = model;
  so.device = "cuda";
  so.model_options.batch = batch;
  const auto t0 = std::chrono::steady_clock::now();
  Session s(so);
  const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  CudaInstance& gpu = dynamic_cast<CudaInstance&>(s.instance());
  s.set_inputs(s.random_inputs(1));
  const Program& p = s.program();

  nlohmann::json j;
  j["model"] = model;
  j["batch"] = batch;
  j["kernels"] = p.kernels.size();
  j["gflop"] = p.total_flops() / 1e9;
  j["load_s"] = load_s;
  const MemoryReport m = gpu.memory();
  j["memory_bytes"] = {
      {"weights", m.weight_bytes}, {"arena", m.arena_bytes}, {"workspace", m.workspace_bytes}, {"io", m.io_bytes}};
  // First the cost model's choices (the binary turns load-time autotuning off), then the same
  // instance after timing every alternative, which is what a default load gives.
  j["planner"] = time_runs(gpu, o);
  if (o.tune_repeats > 0) {
    const std::vector<GemmTuneResult> tuned = gpu.tune_gemms(o.tune_repeats);
    double before = 0, after = 0;
    auto changes = nlohmann::json::array();
    for (const GemmTuneResult& r : tuned) {
      before += r.before_ms;
      after += r.after_ms;
      const Kernel& k = p.kernels[static_cast<size_t>(r.kernel)];
      changes.push_back({{"kernel", k.name},
                         {"shapes", {k.inputs[0].shape.dims(), k.inputs[1].shape.dims(), k.outputs[0].shape.dims()}},
                         {"attrs", k.attrs},
                         {"before", r.before},
                         {"after", r.after},
                         {"candidates_ms", r.candidates_ms}});
    }
    j["tuning"] = {{"gemm_ms_before", before}, {"gemm_ms_after", after}, {"kernels", changes}};
  }
  j["graph"] = time_runs(gpu, o);
  gpu.set_preemptible(false);
  j["graph_no_flag"] = time_runs(gpu, o);
  gpu.set_preemptible(true);
  j["flag_overhead"] = j["graph"]["median_ms"].get<double>() / j["graph_no_flag"]["median_ms"].get<double>() - 1.0;

  const std::vector<double> per_kernel = gpu.time_kernels(20);
  std::vector<size_t> order(per_kernel.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return per_kernel[a] > per_kernel[b]; });
  double sum = 0;
  std::map<std::string, double> by_op;
  for (size_t i = 0; i < per_kernel.size(); ++i) {
    sum += per_kernel[i];
    by_op[std::string(op_name(p.kernels[i].op))] += per_kernel[i];
  }
  j["kernel_sum_ms"] = sum;
  j["ms_by_op"] = by_op;
  auto top = nlohmann::json::array();
  for (size_t i = 0; i < std::min<size_t>(order.size(), static_cast<size_t>(o.top_kernels)); ++i) {
    const Kernel& k = p.kernels[order[i]];
    const double gflops = per_kernel[order[i]] > 0 ? k.flops / (per_kernel[order[i]] * 1e6) : 0.0;
    top.push_back({{"name", k.name},
                   {"op", op_name(k.op)},
                   {"ms", per_kernel[order[i]]},
                   {"tflops", gflops / 1e3},
                   {"choice", gpu.gemm_choice(static_cast<int>(order[i]))}});
  }
  j["top_kernels"] = top;
  return j;
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

int run(const Options& o) {
  // Sessions load with the cost model's choices; tune_gemms() then does what autotuning would.
  setenv("ATOLL_CUDA_AUTOTUNE", "0", 1);
  setenv("ATOLL_CUDA_WGMMA", o.wgmma ? "1" : "0", 1);
  ATOLL_CHECK(cuda_device_available(), kUnsupported, "no CUDA device: {}", cuda_unavailable_reason());
  nlohmann::json doc;
  doc["date"] = today();
  doc["device"] = make_cuda_backend()->device_description();
  doc["iters"] = o.iters;
  doc["wgmma"] = o.wgmma;
  doc["results"] = nlohmann::json::array();
  for (const std::string& model : o.models) {
    for (int64_t batch : o.batches) {
      try {
        nlohmann::json r = bench_model(model, batch, o);
        fmt::print("{:<14} b{:<2} {:8.3f} ms (planner {:8.3f}, no flag {:8.3f}, flag {:+.2f}%)\n", model, batch,
                   r["graph"]["median_ms"].get<double>(), r["planner"]["median_ms"].get<double>(),
                   r["graph_no_flag"]["median_ms"].get<double>(), 100 * r["flag_overhead"].get<double>());
        doc["results"].push_back(std::move(r));
      } catch (const Error& e) {
        fmt::print("{:<14} b{:<2} FAILED: {}\n", model, batch, e.message());
        doc["results"].push_back({{"model", model}, {"batch", batch}, {"error", e.message()}});
      }
      std::fflush(stdout);
      // Rewritten after every model, so a time limit loses only the model in progress.
      write_file_atomic(o.json_path, doc.dump(1) + "\n");
    }
  }
  return 0;
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  atl::Options o;
  atl::ProbeCli app{"atoll CUDA latency benchmark (CUDA-graph replays, median)"};
  app.option("--models", o.models, "zoo models");
  app.option("--batches", o.batches, "batch sizes");
  app.option("--iters", o.iters, "timed replays per measurement");
  app.option("--warmup", o.warmup, "untimed replays first");
  app.option("--tune", o.tune_repeats, "time every GEMM tile/split choice this many times and keep the best");
  app.option("--top", o.top_kernels, "slowest kernels listed per model");
  app.option("--wgmma", o.wgmma, "offer the Hopper wgmma GEMM tiles (1) or only mma.sync (0)");
  app.option("--json", o.json_path, "output file");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_cuda", [&] {
    return atl::run(o);
  });
}
