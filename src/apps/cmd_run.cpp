#include <fmt/core.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <set>

#include "apps/commands.h"
#include "apps/options.h"
#include "core/error.h"
#include "core/npy.h"
#include "l2/slices.h"
#include "runtime/l2_measure.h"
#include "runtime/session.h"

namespace atl::apps {

namespace {
struct RunFlags {
  ModelFlags model;
  std::string device = "auto";
  int iters = 0;    // 0: 100 on a GPU, 10 on the CPU
  int warmup = -1;  // -1: 10 on a GPU, 1 on the CPU
  bool json = false;
  bool per_kernel = false;
  std::vector<std::string> inputs;  // NAME=FILE.npy
  std::string output_dir;
  std::string weights;
  WeightsFileOptions weights_options;
  std::string l2_config;           // residency config applied on the GPU
  std::string l2_device = "h200";  // L2 preset the config's windows are planned for
};

struct OutputSummary {
  std::string name;
  std::vector<int64_t> shape;
  double sum = 0, abs_sum = 0;
  int64_t nan_count = 0, inf_count = 0;
  std::vector<std::pair<int64_t, float>> top5;  // of batch element 0, for [B, classes] outputs
};

// Top-k order of torch.topk: NaN ranks above every number; ties keep the lower index first.
bool ranks_before(float a, int64_t ia, float b, int64_t ib) {
  const bool nan_a = std::isnan(a), nan_b = std::isnan(b);
  if (nan_a != nan_b) return nan_a;
  if (!nan_a && a != b) return a > b;
  return ia < ib;
}

OutputSummary summarize(const std::string& name, const Tensor& t) {
  OutputSummary s;
  s.name = name;
  s.shape = t.shape().dims();
  auto d = t.as<float>();
  for (float x : d) {
    s.sum += x;
    s.abs_sum += std::fabs(x);
    s.nan_count += std::isnan(x) ? 1 : 0;
    s.inf_count += std::isinf(x) ? 1 : 0;
  }
  if (t.shape().rank() == 2 && t.shape()[1] >= 5) {
    std::vector<int64_t> idx(static_cast<size_t>(t.shape()[1]));
    std::iota(idx.begin(), idx.end(), 0);
    const auto at = [&](int64_t i) { return d[static_cast<size_t>(i)]; };
    std::partial_sort(idx.begin(), idx.begin() + 5, idx.end(),
                      [&](int64_t a, int64_t b) { return ranks_before(at(a), a, at(b), b); });
    for (int i = 0; i < 5; ++i) s.top5.emplace_back(idx[static_cast<size_t>(i)], at(idx[static_cast<size_t>(i)]));
  }
  return s;
}

// JSON has no NaN or infinity (nlohmann writes null): non-finite numbers become the strings
// "NaN", "Infinity" and "-Infinity", the spelling of JavaScript and Python's json module.
nlohmann::json json_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  return v;
}

// On stderr, so it shows beside --json output too: NaN or infinity in an output is almost always
// broken weights or inputs, not a result.
void warn_non_finite(const std::vector<OutputSummary>& summaries) {
  for (const auto& s : summaries) {
    if (s.nan_count + s.inf_count == 0) continue;
    fmt::print(stderr, "atoll: warning: output '{}' is not finite: {} NaN and {} infinite of {} values\n", s.name,
               s.nan_count, s.inf_count, Shape(s.shape).numel());
  }
}

// What --allow-partial-weights / --allow-extra-weights let through, named in full.
void warn_weights(const std::string& file, const WeightsFileReport& r) {
  const auto names = [](const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& n : v) out += (out.empty() ? "" : ", ") + n;
    return out;
  };
  if (!r.left_seeded.empty()) {
    fmt::print(stderr, "atoll: warning: '{}' lacks {} weights, left seeded-random: {}\n", file, r.left_seeded.size(),
               names(r.left_seeded));
  }
  if (!r.unused.empty()) {
    fmt::print(stderr, "atoll: warning: '{}': skipped {} tensors naming no weight: {}\n", file, r.unused.size(),
               names(r.unused));
  }
}

void run_model(const RunFlags& f) {
  // Read (and rejected, when malformed) before the model is built.
  std::optional<l2::ResidencyConfig> l2_config;
  if (!f.l2_config.empty()) l2_config = l2::load_config(f.l2_config);
  const l2::L2Device l2_device = l2::l2_device_by_name(f.l2_device);
  if (!f.output_dir.empty()) prepare_output_dir(f.output_dir, "--output");
  SessionOptions so;
  so.model = model_or_default(f.model);
  so.device = f.device;
  so.model_options = f.model.options;
  so.weights_file = f.weights;
  so.weights_options = f.weights_options;
  Session session(so);
  if (!session.device_note().empty()) fmt::print(stderr, "atoll: {}\n", session.device_note());
  warn_weights(f.weights, session.weights_report());
  const bool gpu = session.device() != "cpu";
  const int iters = f.iters > 0 ? f.iters : (gpu ? 100 : 10);
  const int warmup = f.warmup >= 0 ? f.warmup : (gpu ? 10 : 1);

  session.set_inputs(session.random_inputs(f.model.options.seed));
  std::set<std::string> given;
  for (const std::string& spec : f.inputs) {
    const auto eq = spec.find('=');
    ATOLL_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument, "--input '{}': expected NAME=FILE.npy", spec);
    const std::string name = spec.substr(0, eq);
    ATOLL_CHECK(given.insert(name).second, kInvalidArgument, "--input '{}': input '{}' is given more than once", spec,
                name);
    session.set_input(name, read_npy(spec.substr(eq + 1)));
  }

  Instance& inst = session.instance();
  int64_t l2_granted = 0;
  if (l2_config) {
    ATOLL_CHECK(gpu, kUnsupported, "--l2 applies on the GPU (--device cuda); '{}' runs on the CPU", so.model);
    l2_granted = apply_l2_config(inst, &*l2_config, l2_device);
  }
  for (int i = 0; i < warmup; ++i) inst.run();
  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    inst.run();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (t1 - last_report > std::chrono::seconds(2) && !f.json) {
      fmt::print(stderr, "\ratoll: {}/{} iterations", i + 1, iters);
      last_report = t1;
    }
  }
  if (last_report != start && !f.json) fmt::print(stderr, "\n");
  const LatencyStats st = latency_stats(samples);
  // Persisting lines and the limit would otherwise outlive the timed runs.
  if (l2_config) apply_l2_config(inst, nullptr, l2_device);

  const auto outputs = session.outputs();
  std::vector<OutputSummary> summaries;
  for (size_t i = 0; i < outputs.size(); ++i)
    summaries.push_back(summarize(session.program().outputs[i].name, outputs[i]));
  if (!f.output_dir.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      write_npy((std::filesystem::path(f.output_dir) / (session.program().outputs[i].name + ".npy")).string(),
                outputs[i]);
    }
  }
  std::vector<double> kernel_ms;
  if (f.per_kernel) kernel_ms = inst.kernel_times_ms(std::max(5, iters));

  warn_non_finite(summaries);
  const MemoryReport mem = inst.memory();
  if (f.json) {
    nlohmann::json j;
    j["model"] = so.model;
    j["device"] = session.device();
    j["device_description"] = session.backend().device_description();
    j["batch"] = f.model.options.batch;
    j["iters"] = iters;
    if (l2_config) {
      j["l2"] = {{"config", f.l2_config},
                 {"resident_slices", l2_config->resident_count()},
                 {"slices", l2_config->resident.size()},
                 {"hit_ratio", l2_config->hit_ratio},
                 {"setaside_bytes", l2_config->setaside_bytes},
                 {"granted_setaside_bytes", l2_granted}};
    }
    j["latency_ms"] = {
        {"min", st.min_ms}, {"median", st.median_ms}, {"p99", st.p99_ms}, {"mean", st.mean_ms}, {"max", st.max_ms}};
    j["memory_bytes"] = {{"weights", mem.weight_bytes},
                         {"arena", mem.arena_bytes},
                         {"workspace", mem.workspace_bytes},
                         {"io", mem.io_bytes}};
    for (const auto& s : summaries) {
      nlohmann::json o{{"name", s.name},
                       {"shape", s.shape},
                       {"sum", json_number(s.sum)},
                       {"abs_sum", json_number(s.abs_sum)},
                       {"nan_count", s.nan_count},
                       {"inf_count", s.inf_count}};
      for (const auto& [c, v] : s.top5) o["top5"].push_back({{"class", c}, {"score", json_number(v)}});
      j["outputs"].push_back(o);
    }
    for (size_t k = 0; k < kernel_ms.size(); ++k) {
      j["kernels"].push_back({{"name", session.program().kernels[k].name},
                              {"op", std::string(op_name(session.program().kernels[k].op))},
                              {"median_ms", kernel_ms[k]}});
    }
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("model    {} batch {} on {} ({})\n", so.model, f.model.options.batch, session.device(),
             session.backend().device_description());
  fmt::print("latency  min {:.3f} ms  median {:.3f} ms  p99 {:.3f} ms  ({} iterations)\n", st.min_ms, st.median_ms,
             st.p99_ms, st.samples);
  fmt::print("memory   weights {:.1f} MiB  arena {:.1f} MiB  workspace {:.1f} MiB\n", mem.weight_bytes / 1048576.0,
             mem.arena_bytes / 1048576.0, mem.workspace_bytes / 1048576.0);
  if (l2_config) {
    fmt::print("l2       {}: {} of {} slices persisting, hit ratio {}, set-aside {:.2f} MiB (granted {:.2f} MiB)\n",
               f.l2_config, l2_config->resident_count(), l2_config->resident.size(), l2_config->hit_ratio,
               l2_config->setaside_bytes / 1048576.0, l2_granted / 1048576.0);
  }
  for (const auto& s : summaries) {
    fmt::print("output   {} {}  sum {:.6g}  abs-sum {:.6g}", s.name, Shape(s.shape).str(), s.sum, s.abs_sum);
    if (s.nan_count + s.inf_count > 0) fmt::print("  NaN {}  Inf {}", s.nan_count, s.inf_count);
    fmt::print("\n");
    if (!s.top5.empty()) {
      fmt::print("top-5   ");
      for (const auto& [c, v] : s.top5) fmt::print(" {}:{:.4f}", c, v);
      fmt::print("\n");
    }
  }
  if (!kernel_ms.empty()) {
    fmt::print("{:>4}  {:<40} {:<14} {:>10}\n", "#", "kernel", "op", "median ms");
    for (size_t k = 0; k < kernel_ms.size(); ++k) {
      fmt::print("{:>4}  {:<40} {:<14} {:>10.4f}\n", k, session.program().kernels[k].name,
                 op_name(session.program().kernels[k].op), kernel_ms[k]);
    }
  }
}
}  // namespace

void add_run_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("run", "Run inference on seeded random (or given) inputs and time it");
  auto f = std::make_shared<RunFlags>();
  add_model_flags(cmd, f->model);
  cmd->add_option("--device", f->device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  cmd->add_option("--iters", f->iters, "Timed iterations (default 100 on a GPU, 10 on the CPU)")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--warmup", f->warmup, "Untimed warm-up iterations (default 10 on a GPU, 1 on the CPU)")
      ->check(CLI::Range(0, 1000000));
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->add_flag("--per-kernel", f->per_kernel, "Print each kernel's median time");
  cmd->add_option("--input", f->inputs, "NAME=FILE.npy: feed a real input (repeatable)");
  cmd->add_option("--output", f->output_dir, "Write every model output to DIR/NAME.npy");
  cmd->add_option("--weights", f->weights, "Load weights from a safetensors file (names as in PyTorch)");
  cmd->add_flag("--allow-partial-weights", f->weights_options.allow_partial,
                "Accept a --weights file lacking some weights; those keep seeded-random values (listed)");
  cmd->add_flag("--allow-extra-weights", f->weights_options.allow_extra,
                "Skip --weights tensors that name no model weight (listed) instead of failing");
  cmd->add_option("--l2", f->l2_config, "Apply an L2 residency config (atoll l2 config) to the timed runs (GPU only)");
  cmd->add_option("--l2-device", f->l2_device, "L2 preset the config's windows are planned for: h200 or l4")
      ->check(CLI::IsMember({"h200", "l4"}));
  cmd->callback([f] { run_model(*f); });
}

}  // namespace atl::apps
