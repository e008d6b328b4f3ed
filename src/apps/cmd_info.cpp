#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/options.h"
#include "compile/compiler.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "runtime/model_source.h"

namespace atl::apps {

namespace {
struct InfoFlags {
  ModelFlags model;
  bool json = false;
  std::string dtype = "f16";
  std::string program_out;
};

void run_info(const InfoFlags& f) {
  const std::string name = model_or_default(f.model);
  ModelOptions mo = f.model.options;
  const Graph g = load_model_graph(name, mo);
  CompileTarget target;
  target.act_dtype = dtype_from_name(f.dtype);
  ATOLL_CHECK(is_float(target.act_dtype), kInvalidArgument, "--dtype must be f16 or f32");
  const CompiledModel cm = compile_graph(g, target);
  const Program& p = cm.program;
  int64_t weight_bytes = 0;
  for (const auto& w : p.weights) weight_bytes += w.shape.numel() * static_cast<int64_t>(dtype_size(target.act_dtype));

  nlohmann::json j;
  j["model"] = name;
  j["batch"] = mo.batch;
  j["layers"] = g.nodes().size();
  j["params"] = model_param_count(g);
  j["flops"] = p.total_flops();
  j["kernels"] = p.kernels.size();
  j["arena_bytes"] = p.arena_bytes;
  j["naive_activation_bytes"] = p.naive_activation_bytes;
  j["weight_bytes"] = weight_bytes;
  j["act_dtype"] = dtype_name(target.act_dtype);
  j["fingerprint"] = p.fingerprint;
  if (!f.program_out.empty()) write_file_atomic(f.program_out, program_to_json_string(p));
  if (f.json) {
    fmt::print("{}\n", j.dump(2));
    return;
  }
  fmt::print("model          {} (batch {})\n", name, mo.batch);
  fmt::print("layers         {} graph nodes -> {} kernels\n", g.nodes().size(), p.kernels.size());
  fmt::print("parameters     {:L}\n", model_param_count(g));
  fmt::print("FLOPs          {:.3f} G (multiply-add = 2)\n", p.total_flops() / 1e9);
  fmt::print("weights        {:.1f} MiB as {}\n", static_cast<double>(weight_bytes) / 1048576.0, f.dtype);
  fmt::print("arena          {:.2f} MiB planned vs {:.2f} MiB naive ({:.1f}x smaller)\n",
             static_cast<double>(p.arena_bytes) / 1048576.0, static_cast<double>(p.naive_activation_bytes) / 1048576.0,
             static_cast<double>(p.naive_activation_bytes) / static_cast<double>(std::max<int64_t>(1, p.arena_bytes)));
  fmt::print("fingerprint    {}\n", p.fingerprint);
}
}  // namespace

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Layers, parameters, FLOPs, kernels and memory of a model");
  auto f = std::make_shared<InfoFlags>();
  add_model_flags(cmd, f->model);
  cmd->add_flag("--json", f->json, "Print JSON");
  cmd->add_option("--dtype", f->dtype, "Activation storage type of the compiled program")
      ->check(CLI::IsMember({"f16", "f32"}));
  cmd->add_option("--program", f->program_out, "Write the compiled Program as JSON to this file");
  cmd->callback([f] { run_info(*f); });
}

}  // namespace atl::apps
