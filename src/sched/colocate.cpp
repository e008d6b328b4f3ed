#include "sched/colocate.h"

#include <cmath>
#include <functional>

#include "compile/compiler.h"
#include "core/error.h"
#include "core/rng.h"
#include "models/zoo.h"

namespace atl::sched {

std::unique_ptr<ExecDevice> make_exec_device(const std::string& name, const SimExecOptions& sim) {
  if (name == "sim") return std::make_unique<SimExecDevice>(sim);
  if (name == "cuda") {
    ATOLL_THROW(kUnsupported,
                "the scheduler cannot drive CUDA yet: the CUDA ExecDevice (priority streams, completion events, "
                "preemption flag) is not implemented; use --device sim");
  }
  ATOLL_THROW(kInvalidArgument, "unknown scheduler device '{}' (devices: sim, cuda)", name);
}

WorkloadReport run_workload(ExecDevice& device, const Workload& workload) {
  ATOLL_CHECK(workload.duration > 0, kInvalidArgument, "workload duration must be positive (got {} ns)",
              workload.duration);
  Scheduler scheduler(device, workload.scheduler);
  const bool rt_only = workload.scheduler.mode == Mode::kRtOnly;
  std::vector<ClientId> ids;
  for (const WorkloadClient& c : workload.clients) {
    if (c.task_class == TaskClass::kRealTime) {
      ATOLL_CHECK(std::isfinite(c.hz) && c.hz > 0, kInvalidArgument, "RT client '{}' needs a positive rate (got {} Hz)",
                  c.name, c.hz);
    }
    ids.push_back(scheduler.add_client(c.task_class, c.name, c.instance));
  }

  const DeviceTime start = device.now();
  const DeviceTime end = start + workload.duration;
  WorkloadReport report;
  std::exception_ptr first_error;
  auto record = [&](std::exception_ptr error, TaskResult r) {
    if (error) {
      if (!first_error) first_error = error;
      return;
    }
    r.outputs.clear();
    report.results.push_back(std::move(r));
  };
  // Closed loop: each answer sends the client's next request, until the run ends.
  std::function<void(size_t)> send_be = [&](size_t i) {
    scheduler.submit(ids[i], Request{workload.clients[i].inputs, kArriveOnAdmission, kNever},
                     [&, i](std::exception_ptr error, TaskResult r) {
                       record(error, std::move(r));
                       if (!error && device.now() < end) send_be(i);
                     });
  };
  for (size_t i = 0; i < workload.clients.size(); ++i) {
    const WorkloadClient& c = workload.clients[i];
    if (c.task_class == TaskClass::kBestEffort) {
      if (!rt_only) send_be(i);
      continue;
    }
    const double period_ns = 1e9 / c.hz;
    for (int64_t k = 0;; ++k) {
      const DeviceTime arrival = start + static_cast<DeviceTime>(std::llround(static_cast<double>(k) * period_ns));
      if (arrival >= end) break;
      scheduler.submit(ids[i], Request{c.inputs, arrival, arrival + static_cast<DeviceTime>(period_ns)}, record);
    }
  }
  scheduler.run_until(end);
  scheduler.run_until_idle();
  if (first_error) std::rethrow_exception(first_error);

  const SchedulerStats stats = scheduler.stats();
  report.mode = workload.scheduler.mode;
  report.device = device.name();
  report.duration_s = static_cast<double>(workload.duration) / 1e9;
  report.preemptions = stats.preemptions;
  report.relaunched_kernels = stats.relaunched_kernels;
  std::vector<std::vector<double>> latency(workload.clients.size());
  std::vector<double> rt_latency, preemption_us;
  report.clients.resize(workload.clients.size());
  for (const TaskResult& r : report.results) {
    ClientSummary& s = report.clients[static_cast<size_t>(r.client)];
    const double ms = static_cast<double>(r.latency()) / 1e6;
    latency[static_cast<size_t>(r.client)].push_back(ms);
    ++s.completed;
    s.preemptions += r.preemptions;
    if (r.finish <= end) s.throughput_per_s += 1.0 / report.duration_s;
    if (r.task_class == TaskClass::kRealTime) {
      rt_latency.push_back(ms);
      if (r.preempted_tasks > 0) preemption_us.push_back(static_cast<double>(r.start - r.arrival) / 1e3);
    } else if (r.finish <= end) {
      report.be_throughput_per_s += 1.0 / report.duration_s;
    }
  }
  for (size_t i = 0; i < workload.clients.size(); ++i) {
    ClientSummary& s = report.clients[i];
    s.name = workload.clients[i].name;
    s.task_class = workload.clients[i].task_class;
    s.hz = workload.clients[i].hz;
    s.latency_ms = latency_stats(latency[i]);
  }
  report.rt_latency_ms = latency_stats(rt_latency);
  report.preemption_latency_us = latency_stats(preemption_us);
  return report;
}

namespace {

// Timing does not depend on weight values, so a timing-only device gets zeros (cheap for the
// big models); a device that computes gets the zoo's seeded weights.
CompiledModel compile_for(const std::string& model, const ColocateOptions& o, const ExecDevice& device, bool computes) {
  ModelOptions mo;
  mo.batch = o.batch;
  mo.seed = o.seed;
  mo.init_weights = false;
  Graph g = build_model(model, mo);
  if (computes) {
    g.init_weights(o.seed);
  } else {
    for (const Value& v : g.values()) {
      if (v.kind == ValueKind::kWeight) g.weights()[v.name] = Tensor(v.dtype, v.shape);
    }
  }
  return compile_graph(g, device.target());
}

// Floats uniform in [-1, 1); indices 0, valid for every table.
std::vector<Tensor> seeded_inputs(const Program& p, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const TensorSpec& s : p.inputs) {
    if (!is_float(s.dtype)) {
      inputs.emplace_back(DType::kI64, s.shape);
      continue;
    }
    Tensor t(DType::kF32, s.shape);
    Rng rng(seed, s.name);
    for (float& x : t.as<float>()) x = rng.uniform(-1.0f, 1.0f);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

}  // namespace

WorkloadReport run_colocate(const ColocateOptions& o) {
  ATOLL_CHECK(!o.rt.empty(), kInvalidArgument, "colocate needs at least one RT model");
  ATOLL_CHECK(std::isfinite(o.duration_s) && o.duration_s > 0, kInvalidArgument, "duration must be positive (got {} s)",
              o.duration_s);
  SimExecOptions sim;
  sim.gpu = o.sim;
  std::unique_ptr<ExecDevice> device = make_exec_device(o.device, sim);
  const bool computes = o.device != "sim";

  Workload w;
  w.duration = static_cast<DeviceTime>(std::llround(o.duration_s * 1e9));
  w.scheduler.mode = o.mode;
  w.scheduler.inflight_cap = o.inflight_cap;
  auto add = [&](const std::string& model, TaskClass cls, double hz) {
    const CompiledModel cm = compile_for(model, o, *device, computes);
    WorkloadClient c;
    c.name = model;
    c.task_class = cls;
    c.hz = hz;
    c.instance = device->load(cm.program, cm.weights);
    c.inputs = seeded_inputs(cm.program, o.seed);
    w.clients.push_back(std::move(c));
  };
  for (const auto& rt : o.rt) add(rt.model, TaskClass::kRealTime, rt.hz);
  if (o.mode != Mode::kRtOnly) {
    for (const std::string& be : o.be) add(be, TaskClass::kBestEffort, 0);
  }
  return run_workload(*device, w);
}

}  // namespace atl::sched
