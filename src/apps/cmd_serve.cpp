// `atoll serve`: the KServe v2 inference server until SIGINT or SIGTERM, which drain it.
#include <fmt/core.h>
#include <fmt/ranges.h>
#include <pthread.h>

#include <csignal>
#include <cstdio>

#include "apps/commands.h"
#include "apps/options.h"
#include "core/error.h"
#include "profile/kernel_profile.h"
#include "sched/modes.h"
#include "serve/server.h"

namespace atl::apps {

namespace {

struct ServeFlags {
  serve::ServeOptions options;
  std::string mode = "reset";
  std::vector<std::string> profiles;  // kernel profile files
};

void serve_until_signal(const ServeFlags& f) {
  serve::ServeOptions o = f.options;
  o.engine.mode = sched::mode_from_name(f.mode);
  for (const std::string& path : f.profiles) o.engine.profiles.push_back(load_profile(path));
  // Blocked before any thread starts, so every thread inherits the mask and sigwait alone sees them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  ATOLL_CHECK(pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr) == 0, kInternal, "cannot block SIGINT and SIGTERM");
  serve::Server server(o);
  fmt::print("atoll serve: device {} ({}), mode {}; gRPC {}:{}, HTTP {}:{}, metrics {}:{}\n",
             server.engine().device_name(), server.engine().device_description(), f.mode, o.host, server.grpc_port(),
             o.host, server.http_port(), o.host, server.metrics_port());
  std::fflush(stdout);
  int signal = 0;
  sigwait(&stop_signals, &signal);
  fmt::print(stderr, "atoll serve: {}: draining in-flight requests\n", signal == SIGINT ? "SIGINT" : "SIGTERM");
  server.shutdown();
  fmt::print(stderr, "atoll serve: stopped\n");
}

}  // namespace

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve models over the KServe v2 / Triton protocol (gRPC and HTTP)");
  auto f = std::make_shared<ServeFlags>();
  serve::ServeOptions& o = f->options;
  cmd->add_option("--model-repository", o.repository, "Triton-layout model repository (<repo>/<model>/config.pbtxt)");
  cmd->add_option("--model", o.models,
                  "NAME[=ZOO_MODEL] or NAME=FILE.onnx: serve a zoo model or an ONNX file under NAME (repeatable)");
  cmd->add_option("--host", o.host, "Address to listen on")->default_str(o.host);
  cmd->add_option("--grpc-port", o.grpc_port, "gRPC port (0: any free port)")->check(CLI::Range(0, 65535))->default_str("8001");
  cmd->add_option("--http-port", o.http_port, "HTTP port (0: any free port)")->check(CLI::Range(0, 65535))->default_str("8000");
  cmd->add_option("--metrics-port", o.metrics_port, "Prometheus /metrics port (0: any free port)")
      ->check(CLI::Range(0, 65535))
      ->default_str("8002");
  cmd->add_option("--device", o.engine.device, "auto, cuda, cpu or sim (cpu and sim: simulated GPU, CPU kernels)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "sim"}))
      ->default_str("auto");
  cmd->add_option("--devices", o.engine.devices,
                  "Device ordinals, one scheduler each (0,1); models go where their instance_group gpus say, "
                  "else to the device with the fewest (default: 0; on cpu and sim, simulated GPUs)")
      ->delimiter(',')
      ->check(CLI::Range(0, 1023));
  std::vector<std::string> modes;
  for (const sched::Mode m : sched::all_modes()) modes.push_back(sched::mode_name(m));
  cmd->add_option("--mode", f->mode, fmt::format("Scheduling mode: {}", fmt::join(modes, ", ")))
      ->check(CLI::IsMember(modes))
      ->default_str("reset");
  cmd->add_option("--profile", f->profiles,
                  "Kernel profiles from `atoll profile` (repeatable): the padding modes plan with them; in those "
                  "modes a model without one is profiled on its device when it loads")
      ->check(CLI::ExistingFile);
  add_padding_budget_flag(cmd, o.engine.padding_rt_budget);
  cmd->add_option_function<std::string>(
         "--rt-launch", [&o](const std::string& v) { o.engine.rt_single_launch = v == "one"; },
         "How an RT request's kernels are launched: one (a single call, a CUDA graph) or per-kernel (one call each)")
      ->check(CLI::IsMember({"per-kernel", "one"}))
      ->default_str("one");
  cmd->add_flag("--rt-sm-copies", o.engine.rt_sm_copies,
                "Move RT requests' inputs and outputs across PCIe with kernels over mapped memory instead of "
                "copy engines, where they queue behind BE requests' copies (CUDA)");
  cmd->add_option("--max-queue-rt", o.engine.max_queue_rt, "RT requests accepted and unanswered before refusing")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_str("64");
  cmd->add_option("--max-queue-be", o.engine.max_queue_be, "BE requests accepted and unanswered before refusing")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_str("256");
  cmd->add_option("--max-request-bytes", o.max_request_bytes, "Largest request body or message")->default_str("67108864");
  cmd->callback([f] { serve_until_signal(*f); });
}

}  // namespace atl::apps
