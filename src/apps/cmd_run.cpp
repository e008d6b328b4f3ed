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
#include "core/atomic_file.h"
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

// --input NAME=FILE.npy, each input at most once.
void set_inputs_from_files(Session& session, const std::vector<std::string>& specs) {
  std::set<std::string> given;
  for (const std::string& spec : specs) {
    const auto eq = spec.find('=');
    ATOLL_CHECK(eq != std::string::npos && eq > 0, kInvalidArgument, "--input '{}': expected NAME=FILE.npy", spec);
    const std::string name = spec.substr(0, eq);
    ATOLL_CHECK(given.insert(name).second, kInvalidArgument, "--input '{}': input '{}' is given more than once", spec,
                name);
    session.set_input(name, read_npy(spec.substr(eq + 1)));
  }
}

// Milliseconds per run after `warmup` untimed ones; progress on stderr every 2 s when asked.
std::vector<double> timed_runs(Instance& inst, int warmup, int iters, bool progress) {
  for (int i = 0; i < warmup; ++i) inst.run();
  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  auto last_report = start;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    inst.run();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (progress && t1 - last_report > std::chrono::seconds(2)) {
      fmt::print(stderr, "\ratoll: {}/{} iterations", i + 1, iters);
      last_report = t1;
    }
  }
  if (last_report != start) fmt::print(stderr, "\n");
  return samples;
}

// What one `atoll run` measured and produced.
struct RunResult {
  std::string model;
  int iters = 0;
  std::optional<l2::ResidencyConfig> l2_config;
  int64_t l2_granted = 0;
  LatencyStats latency;
  std::vector<OutputSummary> outputs;
  std::vector<double> kernel_ms;
  MemoryReport memory;
};

void print_json(const RunFlags& f, Session& session, const RunResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["device"] = session.device();
  j["device_description"] = session.backend().device_description();
  j["batch"] = f.model.options.batch;
  j["iters"] = r.iters;
  if (r.l2_config) {
    j["l2"] = {{"config", f.l2_config},
               {"resident_slices", r.l2_config->resident_count()},
               {"slices", r.l2_config->resident.size()},
               {"hit_ratio", r.l2_config->hit_ratio},
               {"setaside_bytes", r.l2_config->setaside_bytes},
               {"granted_setaside_bytes", r.l2_granted}};
  }
  const LatencyStats& st = r.latency;
  j["latency_ms"] = {
      {"min", st.min_ms}, {"median", st.median_ms}, {"p99", st.p99_ms}, {"mean", st.mean_ms}, {"max", st.max_ms}};
  j["memory_bytes"] = {{"weights", r.memory.weight_bytes},
                       {"arena", r.memory.arena_bytes},
                       {"workspace", r.memory.workspace_bytes},
                       {"io", r.memory.io_bytes}};
  for (const auto& s : r.outputs) {
    nlohmann::json o{{"name", s.name},
                     {"shape", s.shape},
                     {"sum", json_number(s.sum)},
                     {"abs_sum", json_number(s.abs_sum)},
                     {"nan_count", s.nan_count},
                     {"inf_count", s.inf_count}};
    for (const auto& [c, v] : s.top5) o["top5"].push_back({{"class", c}, {"score", json_number(v)}});
    j["outputs"].push_back(o);
  }
  for (size_t k = 0; k < r.kernel_ms.size(); ++k) {
    j["kernels"].push_back({{"name", session.program().kernels[k].name},
                            {"op", std::string(op_name(session.program().kernels[k].op))},
                            {"median_ms", r.kernel_ms[k]}});
  }
  fmt::print("{}\n", j.dump(2));
}

void print_text(const RunFlags& f, Session& session, const RunResult& r) {
  const LatencyStats& st = r.latency;
  const MemoryReport& mem = r.memory;
  fmt::print("model    {} batch {} on {} ({})\n", r.model, f.model.options.batch, session.device(),
             session.backend().device_description());
  fmt::print("latency  min {:.3f} ms  median {:.3f} ms  p99 {:.3f} ms  ({} iterations)\n", st.min_ms, st.median_ms,
             st.p99_ms, st.samples);
  fmt::print("memory   weights {:.1f} MiB  arena {:.1f} MiB  workspace {:.1f} MiB\n", mem.weight_bytes / 1048576.0,
             mem.arena_bytes / 1048576.0, mem.workspace_bytes / 1048576.0);
  if (r.l2_config) {
    fmt::print("l2       {}: {} of {} slices persisting, hit ratio {}, set-aside {:.2f} MiB (granted {:.2f} MiB)\n",
               f.l2_config, r.l2_config->resident_count(), r.l2_config->resident.size(), r.l2_config->hit_ratio,
               r.l2_config->setaside_bytes / 1048576.0, r.l2_granted / 1048576.0);
  }
  for (const auto& s : r.outputs) {
    fmt::print("output   {} {}  sum {:.6g}  abs-sum {:.6g}", s.name, Shape(s.shape).str(), s.sum, s.abs_sum);
    if (s.nan_count + s.inf_count > 0) fmt::print("  NaN {}  Inf {}", s.nan_count, s.inf_count);
    fmt::print("\n");
    if (!s.top5.empty()) {
      fmt::print("top-5   ");
      for (const auto& [c, v] : s.top5) fmt::print(" {}:{:.4f}", c, v);
      fmt::print("\n");
    }
  }
  if (!r.kernel_ms.empty()) {
    fmt::print("{:>4}  {:<40} {:<14} {:>10}\n", "#", "kernel", "op", "median ms");
    for (size_t k = 0; k < r.kernel_ms.size(); ++k) {
      fmt::print("{:>4}  {:<40} {:<14} {:>10.4f}\n", k, session.program().kernels[k].name,
                 op_name(session.program().kernels[k].op), r.kernel_ms[k]);
    }
  }
}

void run_model(const RunFlags& f) {
  RunResult r;
  // Read (and rejected, when malformed) before the model is built.
  if (!f.l2_config.empty()) r.l2_config = l2::load_config(f.l2_config);
  const l2::L2Device l2_device = l2::l2_device_by_name(f.l2_device);
  if (!f.output_dir.empty()) prepare_output_dir(f.output_dir, "--output");
  SessionOptions so;
  so.model = model_or_default(f.model);
  so.device = f.device;
  so.model_options = f.model.options;
  so.weights_file = f.weights;
  so.weights_options = f.weights_options;
  Session session(so);
  r.model = so.model;
  if (!session.device_note().empty()) fmt::print(stderr, "atoll: {}\n", session.device_note());
  warn_weights(f.weights, session.weights_report());
  const bool gpu = session.device() != "cpu";
  r.iters = f.iters > 0 ? f.iters : (gpu ? 100 : 10);
  const int warmup = f.warmup >= 0 ? f.warmup : (gpu ? 10 : 1);
  session.set_inputs(session.random_inputs(f.model.options.seed));
  set_inputs_from_files(session, f.inputs);

  Instance& inst = session.instance();
  if (r.l2_config) {
    ATOLL_CHECK(gpu, kUnsupported, "--l2 applies on the GPU (--device cuda); '{}' runs on the CPU", so.model);
    r.l2_granted = apply_l2_config(inst, &*r.l2_config, l2_device);
  }
  r.latency = latency_stats(timed_runs(inst, warmup, r.iters, !f.json));
  // Persisting lines and the limit would otherwise outlive the timed runs.
  if (r.l2_config) apply_l2_config(inst, nullptr, l2_device);

  const auto outputs = session.outputs();
  for (size_t i = 0; i < outputs.size(); ++i) r.outputs.push_back(summarize(session.program().outputs[i].name, outputs[i]));
  if (!f.output_dir.empty()) {
    std::vector<std::pair<std::string, std::string>> files;
    for (size_t i = 0; i < outputs.size(); ++i) {
      const auto path = std::filesystem::path(f.output_dir) / (session.program().outputs[i].name + ".npy");
      files.emplace_back(path.string(), encode_npy(outputs[i]));
    }
    write_files_atomic(files);
  }
  if (f.per_kernel) r.kernel_ms = inst.kernel_times_ms(std::max(5, r.iters));
  warn_non_finite(r.outputs);
  r.memory = inst.memory();
  if (f.json) {
    print_json(f, session, r);
  } else {
    print_text(f, session, r);
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
