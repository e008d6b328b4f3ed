#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>

#include "apps/commands.h"
#include "apps/options.h"
#include "compile/compiler.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "l2/l2.h"
#include "runtime/devices.h"
#include "runtime/l2_measure.h"
#include "runtime/model_source.h"
#include "runtime/session.h"
#include "tune/tuner.h"

namespace atl::apps {

namespace {

struct L2Flags {
  ModelFlags model;
  std::string device = "h200";
  std::string policy = "lru";
  std::string config_file;
  std::string slices;  // "0-3,7"
  double hit_ratio = 0.9;
  std::string out;
  bool exact = false;
  bool discard_dead = false;  // sim: what-if, dead activations leave L2 without a write-back
  bool json = false;
  std::string run_device = "cuda";        // measure: where the model runs
  std::vector<std::string> config_files;  // measure: each against no residency, one model load
  L2MeasureOptions measure;
  std::string optimizer = "ea";  // tune
  std::string evaluator = "sim";
  double budget_s = 0;
  int64_t steps = 20000;
  std::string log_file;
};

// The Program the GPU runs: f16 activations, so slices and traces match the device.
Program gpu_program(const ModelFlags& f) {
  const Graph g = load_model_graph(model_or_default(f), f.options);
  CompileTarget t;
  t.act_dtype = DType::kF16;
  return compile_graph(g, t).program;
}

// A slice index: the whole of `text` a non-negative integer.
std::optional<int64_t> parse_index(const std::string& text) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

std::vector<bool> parse_slices(const std::string& spec, int64_t count) {
  std::vector<bool> bits(static_cast<size_t>(count), false);
  if (spec == "all") return std::vector<bool>(static_cast<size_t>(count), true);
  size_t pos = 0;
  while (pos < spec.size()) {
    const size_t end = std::min(spec.find(',', pos), spec.size());
    const std::string part = spec.substr(pos, end - pos);
    const size_t dash = part.find('-');
    const std::optional<int64_t> lo = parse_index(part.substr(0, dash));
    const std::optional<int64_t> hi = dash == std::string::npos ? lo : parse_index(part.substr(dash + 1));
    ATOLL_CHECK(lo && hi, kInvalidArgument, "--slices '{}': '{}' is not a slice index or range", spec, part);
    ATOLL_CHECK(*lo <= *hi, kInvalidArgument, "--slices '{}': range {}-{} runs backwards (write {}-{})", spec, *lo,
                *hi, *hi, *lo);
    ATOLL_CHECK(*hi < count, kInvalidArgument, "--slices '{}': range {}-{} outside 0-{}", spec, *lo, *hi,
                count - 1);
    for (int64_t i = *lo; i <= *hi; ++i) bits[static_cast<size_t>(i)] = true;
    pos = end + 1;
  }
  return bits;
}

void run_info(const L2Flags& f) {
  const l2::L2Info info = l2::l2_info(gpu_program(f.model), l2::l2_device_by_name(f.device));
  nlohmann::json j = info;
  if (f.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("model        {} batch {} (program {})\n", info.model, info.batch, info.fingerprint);
  fmt::print("arena        {:.2f} MiB in {} slices of {} KiB\n", info.arena_bytes / 1048576.0, info.slices,
             info.slice_bytes / 1024);
  fmt::print(
      "device       {}: L2 {:.1f} MiB, set-aside up to {:.2f} MiB in steps of {:.2f} MiB ({} slices), "
      "window up to {} MiB\n",
      info.device.name, info.device.l2_bytes / 1048576.0, info.device.setaside_max_bytes / 1048576.0,
      info.device.setaside_granularity / 1048576.0, info.setaside_max_slices, info.device.max_window_bytes / 1048576);
  fmt::print("traffic      weights {:.1f} MiB, inputs {:.2f} MiB, outputs {:.2f} MiB, {} line accesses/inference\n",
             info.weight_bytes / 1048576.0, info.input_bytes / 1048576.0, info.output_bytes / 1048576.0,
             info.trace_accesses);
}

void run_config(const L2Flags& f) {
  const Program p = gpu_program(f.model);
  const l2::L2Device d = l2::l2_device_by_name(f.device);
  const int64_t slices = (p.arena_bytes + l2::kDefaultSliceBytes - 1) / l2::kDefaultSliceBytes;
  const l2::ResidencyConfig c = l2::make_config(p, d, parse_slices(f.slices, slices), f.hit_ratio);
  ATOLL_CHECK(!f.out.empty(), kInvalidArgument, "--out FILE is required");
  l2::save_config(c, f.out);
  fmt::print("wrote {}: {} of {} slices resident, set-aside {:.2f} MiB, hit ratio {}\n", f.out, c.resident_count(),
             slices, c.setaside_bytes / 1048576.0, c.hit_ratio);
}

void run_simulate(const L2Flags& f) {
  const Program p = gpu_program(f.model);
  const l2::L2Device d = l2::l2_device_by_name(f.device);
  std::optional<l2::ResidencyConfig> config;
  if (!f.config_file.empty()) config = l2::load_config(f.config_file);
  l2::SimOptions opts;
  opts.hints = f.exact ? l2::HintMode::kExactSlices : l2::HintMode::kWindows;
  opts.discard_dead = f.discard_dead;
  const auto t0 = std::chrono::steady_clock::now();
  const l2::SimResult r = l2::simulate(p, d, l2::policy_from_name(f.policy), config ? &*config : nullptr, opts);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (f.json) {
    nlohmann::json j = r;
    j["simulation_ms"] = ms;
    j["discard_dead"] = f.discard_dead;
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("{} batch {} on {} L2, policy {}, {}{}\n", r.model, r.batch, r.device, r.policy,
             config ? fmt::format("{} resident slices, hit ratio {}", config->resident_count(), config->hit_ratio)
                    : std::string("no residency config"),
             f.discard_dead ? "; what-if: dead activations discarded at their last read" : "");
  fmt::print("accesses     {} lines, hit rate {:.2f}%\n", r.accesses, 100.0 * r.hit_rate());
  fmt::print("DRAM         read {:.2f} MiB, write {:.2f} MiB per inference\n", r.dram_read_bytes / 1048576.0,
             r.dram_write_bytes / 1048576.0);
  fmt::print("simulated in {:.0f} ms\n", ms);
}

void print_measurement(const L2Measurement& m, const std::string& config_file,
                       const std::optional<l2::ResidencyConfig>& config, double ms) {
  fmt::print("{}\n",
             config
                 ? fmt::format("config {} ({} resident slices, hit ratio {}, set-aside {:.2f} MiB, granted {:.2f} MiB)",
                               config_file, config->resident_count(), config->hit_ratio, m.setaside_bytes / 1048576.0,
                               m.granted_setaside_bytes / 1048576.0)
                 : std::string("no config: the incumbent against itself (noise floor)"));
  fmt::print("no residency {:.4f} ms   config {:.4f} ms   speedup {:.4f}x   (median of {} interleaved pairs)\n",
             m.baseline_ms, m.config_ms, m.speedup, m.pairs);
  fmt::print("difference   {:+.4f} ms +- {:.4f} ms (95% CI of the median paired difference)\n", m.median_diff_ms,
             m.diff_ci_ms);
  if (m.baseline_energy_mj && m.config_energy_mj) {
    fmt::print("energy       {:.2f} mJ -> {:.2f} mJ per iteration\n", *m.baseline_energy_mj, *m.config_energy_mj);
  } else if (!m.energy_note.empty()) {
    fmt::print("energy       unavailable: {}\n", m.energy_note);
  }
  fmt::print("measured in  {:.0f} ms ({:.1f} ms per interleaved pair)\n", ms, ms / std::max(m.pairs, 1));
}

void run_measure(const L2Flags& f) {
  ATOLL_CHECK(f.run_device == "cuda", kUnsupported, "atoll l2 measure runs on --device cuda, not '{}'", f.run_device);
  // Every config is read (and rejected) before the model loads.
  std::vector<std::optional<l2::ResidencyConfig>> configs;
  for (const std::string& file : f.config_files) configs.emplace_back(l2::load_config(file));
  if (configs.empty()) configs.emplace_back();
  SessionOptions so;
  so.model = model_or_default(f.model);
  so.device = f.run_device;
  so.model_options = f.model.options;
  Session session(so);
  session.set_inputs(session.random_inputs(f.model.options.seed));
  if (!f.json) fmt::print("{} batch {} on {}\n", so.model, f.model.options.batch, session.device());
  const l2::L2Device device = l2::l2_device_by_name(f.device);
  nlohmann::json all = nlohmann::json::array();
  for (size_t i = 0; i < configs.size(); ++i) {
    const std::string file = f.config_files.empty() ? std::string() : f.config_files[i];
    const auto t0 = std::chrono::steady_clock::now();
    const L2Measurement m = measure_l2(session.instance(), configs[i] ? &*configs[i] : nullptr, device, f.measure);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!f.json) {
      print_measurement(m, file, configs[i], ms);
      continue;
    }
    nlohmann::json j = m;
    j["model"] = so.model;
    j["batch"] = f.model.options.batch;
    j["config"] = file;
    j["measurement_ms"] = ms;
    all.push_back(std::move(j));
  }
  if (f.json) fmt::print("{}\n", all.size() == 1 ? all[0].dump(2) : all.dump(2));
}

// At most one progress line every 2 s, and the last one.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(std::string unit) : unit_(std::move(unit)) {}
  void operator()(const tune::Progress& p) {
    if (p.step < p.max_steps && p.step > 1 && p.elapsed_s - last_s_ < 2.0) return;
    last_s_ = p.elapsed_s;
    const double change = p.none_cost != 0 ? 100.0 * (p.best_cost / p.none_cost - 1.0) : 0.0;
    fmt::print(stderr, "step {}/{}  best {:.4g} {} ({:+.2f}% vs none)  {}\n", p.step, p.max_steps, p.best_cost, unit_,
               change, p.left_s >= 0 ? fmt::format("{:.0f} s left", p.left_s) : fmt::format("{:.0f} s", p.elapsed_s));
  }

 private:
  std::string unit_;
  double last_s_ = 0;
};

tune::TuneResult tune_with(l2::Evaluator& ev, const L2Flags& f) {
  tune::TuneOptions o;
  o.max_steps = f.steps;
  o.max_seconds = f.budget_s;
  o.seed = f.model.options.seed;
  o.progress = ProgressPrinter(ev.cost_unit());
  return tune::tune(ev, tune::optimizer_from_name(f.optimizer), o);
}

void report_tune(const tune::TuneResult& r, const l2::ProgramEvaluator& ev, const L2Flags& f) {
  const l2::ResidencyConfig c = ev.config(r.best);
  if (!f.out.empty()) l2::save_config(c, f.out);
  if (!f.log_file.empty()) tune::save_log(r, f.log_file);
  fmt::print("{} batch {}: {} over {} with seed {}: {} steps in {:.1f} s{}\n", ev.program().model, ev.program().batch,
             r.optimizer, r.evaluator, r.seed, r.steps, r.seconds, r.early_stop ? " (stopped early)" : "");
  fmt::print("none         {:.6g} {}\n", r.none_fitness.cost, r.cost_unit);
  fmt::print("best         {:.6g} {} ({:+.2f}%), {} of {} slices resident, set-aside {:.2f} MiB{}\n",
             r.best_fitness.cost, r.cost_unit,
             r.none_fitness.cost != 0 ? 100.0 * (r.best_fitness.cost / r.none_fitness.cost - 1.0) : 0.0,
             c.resident_count(), c.resident.size(), c.setaside_bytes / 1048576.0,
             r.fell_back_to_none ? " (the search's best was not better than none on re-evaluation)" : "");
  if (!f.out.empty()) fmt::print("wrote        {}\n", f.out);
}

void run_tune(const L2Flags& f) {
  const l2::L2Device d = l2::l2_device_by_name(f.device);
  tune::optimizer_from_name(f.optimizer);  // a bad name fails before any model loads
  for (const std::string& path : {f.out, f.log_file}) {
    if (!path.empty()) check_file_writable(path);  // before the search, not after its steps
  }
  if (f.evaluator == "sim") {
    l2::SimOptions so;
    so.hints = f.exact ? l2::HintMode::kExactSlices : l2::HintMode::kWindows;
    so.discard_dead = f.discard_dead;
    l2::SimEvaluator ev(gpu_program(f.model), d, l2::policy_from_name(f.policy), f.hit_ratio, so);
    report_tune(tune_with(ev, f), ev, f);
    return;
  }
#ifdef ATOLL_HAVE_CUDA
  constexpr const char* kNoGpu = "no CUDA device is available";
#else
  constexpr const char* kNoGpu = "this atoll was built without the CUDA backend";
#endif
  ATOLL_CHECK(resolve_device("auto") == "cuda", kUnsupported, "--evaluator cuda needs a CUDA GPU: {}", kNoGpu);
  SessionOptions so;
  so.model = model_or_default(f.model);
  so.device = "cuda";
  so.model_options = f.model.options;
  Session session(so);
  session.set_inputs(session.random_inputs(f.model.options.seed));
  CudaL2Evaluator ev(session.instance(), d, f.hit_ratio, f.measure);
  report_tune(tune_with(ev, f), ev, f);
}

}  // namespace

void add_l2_command(CLI::App& app) {
  auto* l2cmd = app.add_subcommand("l2", "L2 residency: arena slices, configs and cache simulation");
  l2cmd->require_subcommand(1);
  auto add_common = [](CLI::App* c, L2Flags& f) {
    add_model_flags(c, f.model);
    c->add_option("--l2-device", f.device, "L2 preset: h200 or l4")->check(CLI::IsMember({"h200", "l4"}));
    c->add_flag("--json", f.json, "Print JSON");
  };
  {
    auto f = std::make_shared<L2Flags>();
    auto* c = l2cmd->add_subcommand("info", "Arena size, slice count and device limits");
    add_common(c, *f);
    c->callback([f] { run_info(*f); });
  }
  {
    auto f = std::make_shared<L2Flags>();
    auto* c = l2cmd->add_subcommand("config", "Write a residency config marking slices persisting");
    add_common(c, *f);
    c->add_option("--slices", f->slices, "Resident slices: 'all' or a list like 0-3,7")->required();
    c->add_option("--hit-ratio", f->hit_ratio, "Access-policy hit ratio")->check(CLI::Range(0.0, 1.0));
    c->add_option("--out", f->out, "Config file to write")->required();
    c->callback([f] { run_config(*f); });
  }
  {
    auto f = std::make_shared<L2Flags>();
    auto* c = l2cmd->add_subcommand("simulate", "DRAM traffic of one inference under a replacement policy");
    add_common(c, *f);
    c->add_option("--policy", f->policy, "lru, ship, ship-sw or belady")
        ->check(CLI::IsMember({"lru", "ship", "ship-sw", "belady"}));
    c->add_option("--config", f->config_file, "Residency config (JSON) to apply");
    c->add_flag("--exact-slices", f->exact,
                "Hint exactly the resident slices (ideal layout) instead of per-kernel windows");
    c->add_flag("--discard-dead", f->discard_dead,
                "What-if: each activation leaves L2 at its last read without a write-back (discard.global.L2)");
    c->callback([f] { run_simulate(*f); });
  }
  {
    auto f = std::make_shared<L2Flags>();
    auto* c = l2cmd->add_subcommand("measure", "Iteration time on the GPU with a config against no residency");
    add_common(c, *f);
    c->add_option("--config", f->config_files,
                  "Residency config (JSON), repeatable: each is measured against no residency; none: the noise floor");
    c->add_option("--device", f->run_device, "Device to run on (only cuda measures L2)");
    c->add_option("--min-pairs", f->measure.min_pairs, "Interleaved pairs measured at least")
        ->check(CLI::Range(2, 100000));
    c->add_option("--max-pairs", f->measure.max_pairs, "Interleaved pairs measured at most")
        ->check(CLI::Range(2, 100000));
    c->add_option("--target-ci", f->measure.target_ci,
                  "Stop once the 95% CI half-width of the median difference is below this fraction of the time")
        ->check(CLI::Range(1e-6, 1.0));
    c->add_flag("--energy", f->measure.energy, "Energy per iteration from NVML, if it loads");
    c->callback([f] { run_measure(*f); });
  }
  {
    auto f = std::make_shared<L2Flags>();
    auto* c = l2cmd->add_subcommand("tune", "Search for the residency config with the least cost (AutoScratch)");
    add_common(c, *f);
    c->add_option("--optimizer", f->optimizer, "ea, ppo, random or heuristic")
        ->check(CLI::IsMember({"ea", "ppo", "random", "heuristic"}));
    c->add_option("--evaluator", f->evaluator, "sim (simulated DRAM bytes) or cuda (measured time)")
        ->check(CLI::IsMember({"sim", "cuda"}));
    c->add_option("--steps", f->steps, "Evaluations at most, 'none' included")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
    c->add_option("--budget-s", f->budget_s, "Wall-time budget in seconds (0: none)")->check(CLI::Range(0.0, 1e9));
    c->add_option("--out", f->out, "Write the best config here (as `l2 config` does)");
    c->add_option("--log", f->log_file, "Write the search log (cost per step) as JSON");
    c->add_option("--policy", f->policy, "sim: lru, ship, ship-sw or belady")
        ->check(CLI::IsMember({"lru", "ship", "ship-sw", "belady"}));
    c->add_option("--hit-ratio", f->hit_ratio, "Access-policy hit ratio of the configs")->check(CLI::Range(0.0, 1.0));
    c->add_flag("--exact-slices", f->exact, "sim: hint exactly the resident slices instead of per-kernel windows");
    c->add_flag("--discard-dead", f->discard_dead, "sim: what-if, activations leave L2 at their last read unwritten");
    c->callback([f] { run_tune(*f); });
  }
}

}  // namespace atl::apps
