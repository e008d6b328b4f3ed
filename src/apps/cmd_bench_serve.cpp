// `atoll bench serve`: the server's cost and RT isolation over the KServe v2 gRPC protocol on
// loopback, as perf_analyzer measures a Triton server. It starts its own server (free ports),
// then (1) sends the RT model's batch-1 request one at a time in-process and over gRPC, so the
// difference is the server's overhead; (2) runs the RT client alone at its rate over gRPC; (3)
// runs it again beside closed-loop BE clients, whose effect on the RT p99 is the ratio.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "apps/commands.h"
#include "apps/options.h"
#include "bench/results.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "runtime/model_source.h"
#include "sched/modes.h"
#include "serve/load_test.h"
#include "serve/server.h"

namespace atl::apps {

namespace {

struct ServeBenchFlags {
  std::string rt = "resnet50:100";    // MODEL[:HZ]
  std::vector<std::string> be;        // MODEL[:CONCURRENCY]
  std::string device = "auto";
  std::string mode = "reset";
  std::string rt_launch = "one";
  bool rt_sm_copies = false;
  double duration_s = 5;
  double warmup_s = 0.5;
  int requests = 500;
  std::string json;
};

// MODEL[:N] with N a positive number (`what` names it in the error).
std::pair<std::string, double> model_and_number(const std::string& spec, const std::string& flag, double fallback,
                                                const char* what) {
  std::string model = spec;
  double n = fallback;
  if (const auto colon = spec.rfind(':'); colon != std::string::npos) {
    const std::optional<double> v = parse_number<double>(spec.substr(colon + 1));
    ATOLL_CHECK(v && *v <= 1e6, kInvalidArgument, "{} '{}': the {} after ':' must be a number in (0, 1e6]", flag,
                spec, what);
    n = *v;
    model.resize(colon);
  }
  try {
    check_model_exists(model);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} '{}': {}", flag, spec, e.message()), e.file(), e.line());
  }
  return {model, n};
}

nlohmann::json dist_json(const Distribution& d) {
  return {{"count", d.count}, {"p50", d.p50}, {"p99", d.p99}, {"p99_ci", {d.p99_low, d.p99_high}}, {"max", d.max}};
}

std::string dist_text(const Distribution& d) {
  return fmt::format("p50 {:8.3f} ms  p99 {:8.3f} ms [{:.3f}, {:.3f}]  ({} requests)", d.p50, d.p99, d.p99_low,
                     d.p99_high, d.count);
}

// Failures are part of the result, but a run in which every request failed measured nothing.
void check_samples(const serve::LoadSamples& s, const std::string& what) {
  if (s.failed > 0) fmt::print(stderr, "warning: {}: {} requests failed, first: {}\n", what, s.failed, s.first_error);
  ATOLL_CHECK(s.failed == 0 || !s.latency_ms.empty(), kUnavailable, "{}: no request succeeded: {}", what,
              s.first_error);
  // A fixed-rate client whose requests take longer than its period falls behind: every request
  // it managed to send may have been due in the warm-up (resnet50 on the simulator, whose
  // numerics run on the CPU, reported an internal error here).
  ATOLL_CHECK(!s.latency_ms.empty(), kInvalidArgument,
              "{}: no request was due in the measured {} s window (the rate leaves none in it, or each request "
              "outlasts the run: raise --duration)",
              what, s.seconds);
}

// The server's own timings of one phase's requests, as per-request means in microseconds: from
// receipt to answer (wall), and of it decoding the inputs, waiting for dispatch, running on the
// device and unpacking the outputs. A client's latency minus `wall` is the protocol's share.
struct ServerSide {
  double wall = 0, input = 0, queue = 0, infer = 0, output = 0;
};

ServerSide server_side(const serve::ModelStats& before, const serve::ModelStats& after) {
  const auto mean_us = [](const serve::DurationStat& b, const serve::DurationStat& a) {
    return a.count > b.count ? static_cast<double>(a.ns - b.ns) / 1e3 / static_cast<double>(a.count - b.count) : 0.0;
  };
  return {mean_us(before.success, after.success), mean_us(before.compute_input, after.compute_input),
          mean_us(before.queue, after.queue), mean_us(before.compute_infer, after.compute_infer),
          mean_us(before.compute_output, after.compute_output)};
}

std::string server_side_text(const ServerSide& s) {
  return fmt::format("server mean {:.1f} us: inputs {:.1f}, queue {:.1f}, device {:.1f}, outputs {:.1f}, rest {:.1f}",
                     s.wall, s.input, s.queue, s.infer, s.output, s.wall - s.input - s.queue - s.infer - s.output);
}

nlohmann::json server_side_json(const ServerSide& s) {
  return {{"wall_us", s.wall}, {"inputs_us", s.input}, {"queue_us", s.queue}, {"device_us", s.infer},
          {"outputs_us", s.output}};
}

// The RT model's batch-1 request one at a time: in-process, over gRPC, over gRPC with shared
// memory, over HTTP, and an empty RPC for gRPC's own floor; printed, and returned as the results'
// "overhead".
nlohmann::json measure_overhead(serve::Server& server, const std::string& target, const std::string& rt_zoo,
                                const ServeBenchFlags& f) {
  const serve::SampleRequest rt_request = serve::sample_request(server.engine(), "rt", true, 1);
  serve::sequential_in_process(server.engine(), rt_request.request, std::max(5, f.requests / 10));  // warm-up
  const serve::ModelStats at_start = server.engine().stats().model("rt");
  const serve::LoadSamples local = serve::sequential_in_process(server.engine(), rt_request.request, f.requests);
  const serve::ModelStats after_local = server.engine().stats().model("rt");
  const serve::LoadSamples remote = serve::sequential_grpc(target, rt_request.request, f.requests);
  const serve::ModelStats after_remote = server.engine().stats().model("rt");
  const serve::LoadSamples remote_shm =
      serve::sequential_grpc_shm(target, server.engine(), rt_request.request, f.requests);
  const ServerSide local_side = server_side(at_start, after_local);
  const ServerSide remote_side = server_side(after_local, after_remote);
  const serve::ModelStats after_shm = server.engine().stats().model("rt");
  const ServerSide shm_side = server_side(after_remote, after_shm);
  const serve::LoadSamples http = serve::sequential_http("127.0.0.1", server.http_port(), rt_request.request, f.requests);
  const ServerSide http_side = server_side(after_shm, server.engine().stats().model("rt"));
  const serve::LoadSamples live = serve::sequential_grpc_live(target, f.requests);
  check_samples(local, "in-process requests");
  check_samples(remote, "gRPC requests");
  check_samples(remote_shm, "gRPC requests with shared memory");
  check_samples(http, "HTTP requests");
  check_samples(live, "ServerLive calls");
  const Distribution dl = distribution(local.latency_ms), dr = distribution(remote.latency_ms);
  const Distribution ds = distribution(remote_shm.latency_ms), dh = distribution(http.latency_ms);
  const Distribution dlive = distribution(live.latency_ms);
  const double overhead_us = (dr.p50 - dl.p50) * 1e3, shm_overhead_us = (ds.p50 - dl.p50) * 1e3;
  const double http_overhead_us = (dh.p50 - dl.p50) * 1e3;
  fmt::print("{} batch 1, one request at a time:\n  in-process  {}\n              {}\n  gRPC        {}\n"
             "              {}\n  gRPC + shm  {}\n              {}\n  HTTP        {}\n              {}\n"
             "  overhead    p50 {:+.1f} us, with shared memory {:+.1f} us, HTTP {:+.1f} us\n"
             "  gRPC floor  {} (ServerLive: no payload, no engine)\n",
             rt_zoo, dist_text(dl), server_side_text(local_side), dist_text(dr), server_side_text(remote_side),
             dist_text(ds), server_side_text(shm_side), dist_text(dh), server_side_text(http_side), overhead_us,
             shm_overhead_us, http_overhead_us, dist_text(dlive));
  return {{"requests", f.requests},
          {"in_process_ms", dist_json(dl)},
          {"grpc_ms", dist_json(dr)},
          {"p50_overhead_us", overhead_us},
          {"in_process_server", server_side_json(local_side)},
          {"grpc_server", server_side_json(remote_side)},
          {"grpc_shm_ms", dist_json(ds)},
          {"grpc_shm_server", server_side_json(shm_side)},
          {"p50_overhead_shm_us", shm_overhead_us},
          {"http_ms", dist_json(dh)},
          {"http_server", server_side_json(http_side)},
          {"p50_overhead_http_us", http_overhead_us},
          {"grpc_live_ms", dist_json(dlive)},
          {"failed", local.failed + remote.failed + remote_shm.failed + http.failed}};
}

void run_serve_bench(const ServeBenchFlags& f) {
  const auto [rt_zoo, rt_hz] = model_and_number(f.rt, "--rt", 100, "rate in Hz");
  if (!f.json.empty()) check_file_writable(f.json);  // before the runs, not after
  serve::ServeOptions so;
  so.engine.device = f.device;
  so.engine.mode = sched::mode_from_name(f.mode);
  so.engine.rt_single_launch = f.rt_launch == "one";
  so.engine.rt_sm_copies = f.rt_sm_copies;
  so.grpc_port = so.http_port = so.metrics_port = 0;
  so.models.push_back("rt=" + rt_zoo);
  std::vector<serve::LoadClient> be_clients;
  for (size_t i = 0; i < f.be.size(); ++i) {
    const auto [zoo, conc] = model_and_number(f.be[i], "--be", 8, "concurrency");
    ATOLL_CHECK(conc == static_cast<double>(static_cast<int>(conc)) && conc <= 1024, kInvalidArgument,
                "--be '{}': the concurrency after ':' must be a whole number in [1, 1024]", f.be[i]);
    const std::string name = fmt::format("be{}", i);
    so.models.push_back(name + "=" + zoo);
    be_clients.push_back({.model = name, .realtime = false, .rate_hz = 0, .concurrency = static_cast<int>(conc)});
  }
  serve::Server server(so);
  const std::string target = fmt::format("127.0.0.1:{}", server.grpc_port());
  fmt::print("atoll bench serve: {} ({}), mode {}, gRPC on {}\n", server.engine().device_name(),
             server.engine().device_description(), f.mode, target);

  const nlohmann::json overhead = measure_overhead(server, target, rt_zoo, f);

  const serve::LoadClient rt_client{.model = "rt", .realtime = true, .rate_hz = rt_hz, .concurrency = 1};
  const serve::LoadSamples alone = serve::run_grpc_load(target, server.engine(), {rt_client}, f.duration_s, f.warmup_s)[0];
  check_samples(alone, "RT alone");
  std::vector<serve::LoadClient> mixed{rt_client};
  mixed.insert(mixed.end(), be_clients.begin(), be_clients.end());
  const std::vector<serve::LoadSamples> together =
      serve::run_grpc_load(target, server.engine(), mixed, f.duration_s, f.warmup_s);
  check_samples(together[0], "RT beside BE");
  const Distribution da = distribution(alone.latency_ms);
  const Distribution dt = distribution(together[0].latency_ms);
  const bench::P99Change change = bench::p99_change(dt, da);
  fmt::print("RT {} at {} Hz over gRPC, {} s:\n  alone       {}\n  beside BE   {}\n  RT p99 {:.3f}x alone [{:.3f}, {:.3f}]\n",
             rt_zoo, rt_hz, f.duration_s, dist_text(da), dist_text(dt), 1 + change.change, 1 + change.low,
             1 + change.high);
  nlohmann::json be_json = nlohmann::json::array();
  for (size_t i = 0; i < be_clients.size(); ++i) {
    const serve::LoadSamples& s = together[i + 1];
    const double per_s = static_cast<double>(s.latency_ms.size()) / s.seconds;
    fmt::print("  BE {} ({}) concurrency {}: {:.1f} requests/s, {} failed\n", be_clients[i].model, f.be[i],
               be_clients[i].concurrency, per_s, s.failed);
    be_json.push_back({{"model", f.be[i]},
                       {"concurrency", be_clients[i].concurrency},
                       {"throughput_per_s", per_s},
                       {"failed", s.failed},
                       {"latency_ms", dist_json(distribution(s.latency_ms))}});
  }
  server.shutdown();
  if (f.json.empty()) return;
  nlohmann::json j;
  j["device"] = server.engine().device_description();
  j["mode"] = f.mode;
  j["rt_launch"] = f.rt_launch;
  j["rt_sm_copies"] = f.rt_sm_copies;
  j["rt_model"] = rt_zoo;
  j["overhead"] = overhead;
  j["rt_rate_hz"] = rt_hz;
  j["duration_s"] = f.duration_s;
  j["rt_alone_ms"] = dist_json(da);
  j["rt_beside_be_ms"] = dist_json(dt);
  j["rt_p99_ratio"] = {{"ratio", 1 + change.change}, {"ci", {1 + change.low, 1 + change.high}}};
  j["be"] = be_json;
  write_file_atomic(f.json, j.dump(1) + "\n");
}

}  // namespace

void add_serve_bench_command(CLI::App& bench) {
  auto* cmd = bench.add_subcommand(
      "serve", "The server over gRPC on loopback: its overhead against in-process requests, and RT p99 beside BE load");
  auto f = std::make_shared<ServeBenchFlags>();
  cmd->add_option("--rt", f->rt, "The RT model and its rate, MODEL[:HZ]")->default_str(f->rt);
  cmd->add_option("--be", f->be, "BE models, closed loop, MODEL[:CONCURRENCY] (default 8), comma-separated")
      ->delimiter(',');
  cmd->add_option("--device", f->device, "auto, cuda, cpu or sim")
      ->check(CLI::IsMember({"auto", "cuda", "cpu", "sim"}))
      ->default_str(f->device);
  cmd->add_option("--mode", f->mode, "Scheduling mode of the server")->default_str(f->mode);
  cmd->add_option("--rt-launch", f->rt_launch,
                  "How the server launches an RT request's kernels: one (a single call, a CUDA graph) or per-kernel")
      ->check(CLI::IsMember({"per-kernel", "one"}))
      ->default_str(f->rt_launch);
  cmd->add_flag("--rt-sm-copies", f->rt_sm_copies, "The server moves RT requests' copies onto the SMs (CUDA)");
  cmd->add_option("--duration", f->duration_s, "Seconds of each load phase")->check(CLI::Range(1e-2, 3600.0));
  cmd->add_option("--warmup", f->warmup_s, "Unmeasured seconds before each load phase")->check(CLI::Range(0.0, 600.0));
  cmd->add_option("--requests", f->requests, "Requests one at a time, in-process and over gRPC")
      ->check(CLI::Range(1, 1000000));
  cmd->add_option("--json", f->json, "Write the results here");
  cmd->callback([f] { run_serve_bench(*f); });
}

}  // namespace atl::apps
