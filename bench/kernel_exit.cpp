// atoll_bench_kernel_exit: how fast every kernel of the zoo models leaves once its preemption
// flag rises mid-run, on the device clock (see exit_probe.h), how long one launched with the flag
// already up takes to pass through (a kernel queued on the device when a preemption begins), and
// what the flag checks cost a whole model run and each op family (every kernel run alone with and
// without the flag). Prints a table per model, per op family and per GEMM tile;
// writes one JSON document. With --uploads, kernel 0 carries its input's upload as DISB's
// large-batch BE clients do (an SM copy over mapped host memory and the f16 conversion, each
// under the flag): in F and G on the H200 that launch set the slowest preemptions (session 22).
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/exit_probe.h"
#include "backends/cuda/launch.h"
#include "core/atomic_file.h"
#include "core/env.h"
#include "core/error.h"
#include "core/stats.h"
#include "probe_cli.h"
#include "runtime/session.h"

namespace atl {
namespace {

struct Options {
  std::vector<std::string> models{"resnet50",     "resnet152",    "vgg19",     "densenet201",
                                  "inception_v3", "mobilenet_v2", "bert_base", "distilbert"};
  std::vector<int64_t> batches;  // empty: 1, 8, 32 (1, 8, 16 for the BERTs)
  int trials = 8;
  int cost_iters = 50;
  int worst = 5;
  uint64_t seed = 1;
  bool uploads = false;  // CudaInstance::set_uploads_with_first_kernel
  std::string json_path = "atoll_kernel_exit.json";
};

struct KernelResult {
  std::string name, family;
  std::string choice;  // GEMM-backed kernels: the tile and split tuning chose ("" otherwise)
  double duration_us = 0;
  double no_flag_us = 0;      // the same run with no flag passed: what its checks cost
  double entry_us = 0;        // launched with the flag already raised
  double stale_entry_us = 0;  // the same, raised after another stream's kernel read it through L1
  std::vector<double> exits_us;
  int ran_to_end = 0;
};

bool is_bert(const std::string& model) {
  return model.find("bert") != std::string::npos;
}

// The op, with convolutions split by the kernel that runs them (direct stem, depthwise, GEMM).
std::string family_of(const Kernel& k) {
  std::string f(op_name(k.op));
  if (k.op == OpKind::kConv2d) {
    f += cuda::is_small_channel_conv(k) ? "/stem" : (cuda::is_depthwise_conv(k) ? "/depthwise" : "/gemm");
  }
  return f;
}

nlohmann::json summary(const std::vector<const KernelResult*>& ks, int worst) {
  std::vector<double> all;
  for (const KernelResult* k : ks) all.insert(all.end(), k->exits_us.begin(), k->exits_us.end());
  std::vector<const KernelResult*> order = ks;
  auto kmax = [](const KernelResult* k) {
    return k->exits_us.empty() ? 0.0 : *std::max_element(k->exits_us.begin(), k->exits_us.end());
  };
  std::sort(order.begin(), order.end(), [&](auto* a, auto* b) { return kmax(a) > kmax(b); });
  auto w = nlohmann::json::array();
  for (size_t i = 0; i < order.size() && i < static_cast<size_t>(worst); ++i) {
    w.push_back({{"name", order[i]->name},
                 {"choice", order[i]->choice},
                 {"max_us", kmax(order[i])},
                 {"duration_us", order[i]->duration_us}});
  }
  std::vector<double> entry, stale;
  for (const KernelResult* k : ks) {
    entry.push_back(k->entry_us);
    stale.push_back(k->stale_entry_us);
  }
  double with_flag = 0, no_flag = 0;
  for (const KernelResult* k : ks) {
    with_flag += k->duration_us;
    no_flag += k->no_flag_us;
  }
  return {{"kernels", ks.size()},
          {"samples", all.size()},
          {"flag_cost_pct", no_flag > 0 ? 100.0 * (with_flag / no_flag - 1.0) : 0.0},
          {"no_flag_us", no_flag},
          {"p50_us", quantile(all, 0.5)},
          {"p99_us", quantile(all, 0.99)},
          {"max_us", quantile(all, 1.0)},
          {"entry_us", {{"p50", quantile(entry, 0.5)}, {"p99", quantile(entry, 0.99)}, {"max", quantile(entry, 1.0)}}},
          {"stale_entry_us",
           {{"p50", quantile(stale, 0.5)}, {"p99", quantile(stale, 0.99)}, {"max", quantile(stale, 1.0)}}},
          {"worst", w}};
}

// Median of `iters` CUDA-graph replays (ms), timed by events.
double median_run_ms(CudaInstance& gpu, int iters) {
  cuda::Event start = cuda::make_event(true), stop = cuda::make_event(true);
  for (int i = 0; i < 5; ++i) gpu.enqueue_run();
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    ATL_CUDA_CHECK(cudaEventRecord(start.get(), gpu.stream()));
    gpu.enqueue_run();
    ATL_CUDA_CHECK(cudaEventRecord(stop.get(), gpu.stream()));
    ATL_CUDA_CHECK(cudaEventSynchronize(stop.get()));
    float t = 0;
    ATL_CUDA_CHECK(cudaEventElapsedTime(&t, start.get(), stop.get()));
    ms.push_back(t);
  }
  return quantile(ms, 0.5);
}

// Model latency with the flag passed and with none, measured alternately to cancel drift.
nlohmann::json flag_cost(CudaInstance& gpu, int iters) {
  std::vector<double> with, without;
  for (int round = 0; round < 3; ++round) {
    gpu.set_preemptible(true);
    with.push_back(median_run_ms(gpu, iters));
    gpu.set_preemptible(false);
    without.push_back(median_run_ms(gpu, iters));
  }
  gpu.set_preemptible(true);
  const double a = quantile(with, 0.5), b = quantile(without, 0.5);
  return {{"flag_ms", a}, {"no_flag_ms", b}, {"cost_pct", 100.0 * (a / b - 1.0)}};
}

std::vector<KernelResult> probe_kernels(CudaInstance& gpu, const Program& p, bench::ExitProbe& probe, const Options& o,
                                        std::mt19937_64& rng) {
  std::vector<KernelResult> out;
  int* flag = gpu.preempt_flag();
  for (size_t k = 0; k < p.kernels.size(); ++k) {
    const bench::ExitProbe::Victim victim = [&](cudaStream_t s, const int* f) {
      gpu.launch(static_cast<int>(k), s, f);
    };
    KernelResult r;
    r.name = p.kernels[k].name;
    r.family = family_of(p.kernels[k]);
    r.choice = gpu.gemm_choice(static_cast<int>(k));
    r.duration_us = probe.duration_us(victim, flag, 5);
    r.no_flag_us = probe.duration_us(victim, nullptr, 5);
    // Raises land uniformly over the victim's run: it starts about one launch gap after the
    // start stamp.
    const double lo = std::min(probe.gap_us(), r.duration_us / 2), hi = std::max(lo, r.duration_us);
    std::uniform_real_distribution<double> when(lo, hi);
    for (int t = 0; t < o.trials; ++t) {
      const bench::ExitTrial e = probe.trial(victim, flag, when(rng));
      if (e.ran_to_end) {
        ++r.ran_to_end;
      } else {
        r.exits_us.push_back(e.exit_us);
      }
    }
    r.entry_us = probe.entry_us(victim, flag, 3);
    r.stale_entry_us = probe.stale_entry_us(victim, flag, 3);
    probe.duration_us(victim, flag, 1);  // the output whole again for the kernels behind
    out.push_back(std::move(r));
  }
  return out;
}

nlohmann::json bench_model(const std::string& model, int64_t batch, bench::ExitProbe& probe, const Options& o,
                           std::vector<KernelResult>& all) {
  SessionOptions so;
  so.model = model;
  so.device = "cuda";
  so.model_options.batch = batch;
  Session s(so);
  CudaInstance& gpu = dynamic_cast<CudaInstance&>(s.instance());
  gpu.set_uploads_with_first_kernel(o.uploads);
  s.set_inputs(s.random_inputs(o.seed));
  s.instance().run();
  std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(batch));
  std::vector<KernelResult> ks = probe_kernels(gpu, s.program(), probe, o, rng);
  std::vector<const KernelResult*> ptrs;
  for (const KernelResult& k : ks) ptrs.push_back(&k);
  nlohmann::json j = summary(ptrs, o.worst);
  j["model"] = model;
  j["batch"] = batch;
  j["uploads_with_first_kernel"] = o.uploads;
  j["flag"] = flag_cost(gpu, o.cost_iters);
  auto per_kernel = nlohmann::json::array();
  for (KernelResult& k : ks) {
    per_kernel.push_back({{"name", k.name},
                          {"family", k.family},
                          {"choice", k.choice},
                          {"duration_us", k.duration_us},
                          {"no_flag_us", k.no_flag_us},
                          {"entry_us", k.entry_us},
                          {"stale_entry_us", k.stale_entry_us},
                          {"exits_us", k.exits_us},
                          {"ran_to_end", k.ran_to_end}});
    k.name = fmt::format("{} b{} {}", model, batch, k.name);
    all.push_back(std::move(k));
  }
  j["per_kernel"] = std::move(per_kernel);
  return j;
}

void print_row(const std::string& label, const nlohmann::json& s, const std::string& extra) {
  std::string worst;
  if (!s["worst"].empty()) {
    const nlohmann::json& w = s["worst"][0];
    const std::string choice = w["choice"].get<std::string>();
    worst = w["name"].get<std::string>() + (choice.empty() ? "" : " (" + choice + ")");
  }
  const nlohmann::json& e = s["entry_us"];
  const nlohmann::json& stale = s["stale_entry_us"];
  fmt::print("{:<26} {:>5} {:>8.1f} {:>8.1f} {:>8.1f} {:>6.1f}/{:<6.1f} {:>6.1f}/{:<6.1f} {}{}\n", label,
             s["kernels"].get<size_t>(), s["p50_us"].get<double>(), s["p99_us"].get<double>(),
             s["max_us"].get<double>(), e["p50"].get<double>(), e["max"].get<double>(), stale["p50"].get<double>(),
             stale["max"].get<double>(), extra, worst);
}

// A table of kernel groups (op families, GEMM tiles) headed by `title`, each row a summary and the
// group's flag cost over its standalone time; the summaries, by group, for the JSON.
nlohmann::json print_groups(const std::string& title,
                            const std::map<std::string, std::vector<const KernelResult*>>& groups, int worst) {
  fmt::print("\n{:<26} {:>5} {:>8} {:>8} {:>8} {:>13} {:>13} flag cost (standalone) / worst kernel\n", title, "kern",
             "p50 us", "p99 us", "max us", "entry p50/max", "stale p50/max");
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [group, ks] : groups) {
    const nlohmann::json s = summary(ks, worst);
    print_row(group, s,
              fmt::format("{:+.2f}% of {:.0f} us  ", s["flag_cost_pct"].get<double>(), s["no_flag_us"].get<double>()));
    out[group] = s;
  }
  return out;
}

// Kernel 0 with its input's upload (--uploads): its own line, as the family table mixes it with
// the layout kernels that carry none.
void print_upload_row(const KernelResult& k) {
  fmt::print(
      "  {} with its upload: run {:.1f} us, exit p50 {:.1f} max {:.1f} us over {} raises ({} ran to the end), "
      "entry {:.1f} us\n",
      k.name, k.duration_us, quantile(k.exits_us, 0.5), quantile(k.exits_us, 1.0), k.exits_us.size(), k.ran_to_end,
      k.entry_us);
}

std::string today() {
  const std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", std::gmtime(&t));
  return buf;
}

int run(const Options& o) {
  ATOLL_CHECK(cuda_device_available(), kUnsupported, "no CUDA device: {}", cuda_unavailable_reason());
  bench::ExitProbe probe;
  nlohmann::json doc;
  doc["date"] = today();
  doc["device"] = make_cuda_backend()->device_description();
  doc["trials_per_kernel"] = o.trials;
  doc["engine_switches"] = env_with_prefix("ATOLL_CUDA_");  // e.g. ATOLL_CUDA_GEMM_CHECK_TILES
  doc["launch_gap_us"] = probe.calibrate_gap_us(50);
  fmt::print("launch gap (stamp to stamp) {:.2f} us\n", doc["launch_gap_us"].get<double>());
  fmt::print("{:<26} {:>5} {:>8} {:>8} {:>8} {:>13} {:>13} flag cost / worst kernel\n", "model", "kern", "p50 us",
             "p99 us", "max us", "entry p50/max", "stale p50/max");
  doc["models"] = nlohmann::json::array();
  std::vector<KernelResult> all;
  for (const std::string& model : o.models) {
    const std::vector<int64_t> batches =
        !o.batches.empty() ? o.batches
                           : (is_bert(model) ? std::vector<int64_t>{1, 8, 16} : std::vector<int64_t>{1, 8, 32});
    for (int64_t batch : batches) {
      nlohmann::json j = bench_model(model, batch, probe, o, all);
      print_row(fmt::format("{} b{}", model, batch), j, fmt::format("{:+.2f}%  ", j["flag"]["cost_pct"].get<double>()));
      if (o.uploads) print_upload_row(all[all.size() - j["per_kernel"].size()]);
      std::fflush(stdout);
      doc["models"].push_back(std::move(j));
      // Rewritten after every model, so a time limit loses only the model in progress.
      write_file_atomic(o.json_path, doc.dump(1) + "\n");
    }
  }
  std::map<std::string, std::vector<const KernelResult*>> by_family, by_tile;
  for (const KernelResult& k : all) {
    by_family[k.family].push_back(&k);
    // The GEMM-backed kernels again, by the tile tuning chose (its split aside): a tile's exit and
    // flag cost read apart from the families it serves (the cluster tiles stop from their
    // producers, the TMA tiles from their consumers).
    if (!k.choice.empty()) by_tile[k.choice.substr(0, k.choice.find('/'))].push_back(&k);
  }
  doc["families"] = print_groups("op family", by_family, o.worst);
  doc["gemm_tiles"] = print_groups("GEMM tile", by_tile, o.worst);
  write_file_atomic(o.json_path, doc.dump(1) + "\n");
  return 0;
}

}  // namespace
}  // namespace atl

int main(int argc, char** argv) {
  atl::Options o;
  atl::ProbeCli app{"atoll kernel exit latency: flag raised mid-kernel, device clock"};
  app.option("--models", o.models, "zoo models");
  app.option("--batches", o.batches, "batch sizes (default 1 8 32; 1 8 16 for BERTs)");
  app.option("--trials", o.trials, "mid-kernel raises per kernel");
  app.option("--cost-iters", o.cost_iters, "graph replays per flag-cost measurement");
  app.option("--worst", o.worst, "slowest-exiting kernels listed per row");
  app.option("--seed", o.seed, "inputs and raise times");
  app.flag("--uploads", o.uploads, "kernel 0 carries its input's upload (SM copy and conversion), as BE uploads do");
  app.option("--json", o.json_path, "output file");
  if (auto status = app.parse(argc, argv)) return *status;
  return atl::run_probe("atoll_bench_kernel_exit", [&] {
    return atl::run(o);
  });
}
