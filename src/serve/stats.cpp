#include "serve/stats.h"

#include <fmt/format.h>

#include <chrono>

namespace atl::serve {

namespace {

size_t index_of(sched::TaskClass c) {
  return c == sched::TaskClass::kRealTime ? 0 : 1;
}

uint64_t now_ms() {
  using namespace std::chrono;
  return static_cast<uint64_t>(duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count());
}

// Label values are model names from folder names or flags: quotes, backslashes and newlines escaped.
std::string label(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '"' || c == '\\') out += '\\';
    out += c == '\n' ? 'n' : c;
  }
  return out;
}

void family(std::string& out, const char* name, const char* type, const char* help) {
  out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

}  // namespace

void ServerStats::record_success(const std::string& model, const RequestTimings& t) {
  std::lock_guard lock(mutex_);
  ModelStats& m = models_[model];
  m.success.add(t.wall_ns);
  m.queue.add(t.queue_ns);
  m.compute_input.add(t.compute_input_ns);
  m.compute_infer.add(t.compute_infer_ns);
  m.compute_output.add(t.compute_output_ns);
  m.inference_count += static_cast<uint64_t>(t.batch);
  m.execution_count += 1;
  m.last_inference_ms = now_ms();
  m.compute_by_batch[static_cast<uint64_t>(t.batch)].add(t.compute_infer_ns);
  ClassStats& c = classes_[index_of(t.task_class)];
  ++c.success;
  c.preemptions += static_cast<uint64_t>(t.preemptions);
  if (t.late) ++c.deadline_misses;
  if (t.task_class == sched::TaskClass::kRealTime && t.preemptions > 0) c.preemption_latency.add(t.preemption_latency_ns);
}

void ServerStats::record_failure(const std::string& model, sched::TaskClass task_class, uint64_t wall_ns, bool late) {
  std::lock_guard lock(mutex_);
  models_[model].fail.add(wall_ns);
  ClassStats& c = classes_[index_of(task_class)];
  ++c.failure;
  if (late) ++c.deadline_misses;
}

void ServerStats::record_rejection(sched::TaskClass task_class) {
  std::lock_guard lock(mutex_);
  ++classes_[index_of(task_class)].rejected;
}

ModelStats ServerStats::model(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const auto it = models_.find(name);
  return it == models_.end() ? ModelStats{} : it->second;
}

std::map<std::string, ModelStats> ServerStats::models() const {
  std::lock_guard lock(mutex_);
  return models_;
}

ClassStats ServerStats::for_class(sched::TaskClass task_class) const {
  std::lock_guard lock(mutex_);
  return classes_[index_of(task_class)];
}

std::string ServerStats::prometheus(const std::map<std::string, std::string>& model_versions, uint64_t rt_queued,
                                    uint64_t be_queued) const {
  const std::map<std::string, ModelStats> models = this->models();
  std::string out;
  struct Counter {
    const char* name;
    const char* help;
    uint64_t (*value)(const ModelStats&);
  };
  const Counter counters[] = {
      {"nv_inference_request_success", "Number of successful inference requests",
       [](const ModelStats& m) { return m.success.count; }},
      {"nv_inference_request_failure", "Number of failed inference requests",
       [](const ModelStats& m) { return m.fail.count; }},
      {"nv_inference_count", "Number of inferences performed (batch elements)",
       [](const ModelStats& m) { return m.inference_count; }},
      {"nv_inference_exec_count", "Number of model executions performed",
       [](const ModelStats& m) { return m.execution_count; }},
      {"nv_inference_request_duration_us", "Cumulative inference request duration in microseconds",
       [](const ModelStats& m) { return (m.success.ns + m.fail.ns) / 1000; }},
      {"nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds",
       [](const ModelStats& m) { return m.queue.ns / 1000; }},
      {"nv_inference_compute_input_duration_us", "Cumulative compute input duration in microseconds",
       [](const ModelStats& m) { return m.compute_input.ns / 1000; }},
      {"nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds",
       [](const ModelStats& m) { return m.compute_infer.ns / 1000; }},
      {"nv_inference_compute_output_duration_us", "Cumulative compute output duration in microseconds",
       [](const ModelStats& m) { return m.compute_output.ns / 1000; }},
  };
  for (const Counter& c : counters) {
    family(out, c.name, "counter", c.help);
    for (const auto& [name, version] : model_versions) {
      const auto it = models.find(name);
      const uint64_t value = it == models.end() ? 0 : c.value(it->second);
      out += fmt::format("{}{{model=\"{}\",version=\"{}\"}} {}\n", c.name, label(name), label(version), value);
    }
  }
  ClassStats classes[2];
  {
    std::lock_guard lock(mutex_);
    classes[0] = classes_[0];
    classes[1] = classes_[1];
  }
  struct ClassCounter {
    const char* name;
    const char* type;
    const char* help;
    uint64_t (*value)(const ClassStats&);
  };
  const ClassCounter class_counters[] = {
      {"atoll_requests_success_total", "counter", "Requests answered with outputs",
       [](const ClassStats& c) { return c.success; }},
      {"atoll_requests_failure_total", "counter", "Accepted requests answered with an error",
       [](const ClassStats& c) { return c.failure; }},
      {"atoll_requests_rejected_total", "counter", "Requests refused because the class's queue was full",
       [](const ClassStats& c) { return c.rejected; }},
      {"atoll_preemptions_total", "counter",
       "BE: times BE tasks were preempted with kernels in flight; RT: BE tasks preempted to start RT requests",
       [](const ClassStats& c) { return c.preemptions; }},
      {"atoll_deadline_misses_total", "counter", "Requests that finished after their timeout parameter",
       [](const ClassStats& c) { return c.deadline_misses; }},
      {"atoll_preemption_latency_us_sum", "counter",
       "RT requests that preempted BE work: arrival to first kernel, microseconds (device clock)",
       [](const ClassStats& c) { return c.preemption_latency.ns / 1000; }},
      {"atoll_preemption_latency_us_count", "counter", "RT requests that preempted BE work",
       [](const ClassStats& c) { return c.preemption_latency.count; }},
  };
  for (const ClassCounter& c : class_counters) {
    family(out, c.name, c.type, c.help);
    out += fmt::format("{}{{class=\"rt\"}} {}\n{}{{class=\"be\"}} {}\n", c.name, c.value(classes[0]), c.name,
                       c.value(classes[1]));
  }
  family(out, "atoll_queue_depth", "gauge", "Requests accepted and not yet answered");
  out += fmt::format("atoll_queue_depth{{class=\"rt\"}} {}\natoll_queue_depth{{class=\"be\"}} {}\n", rt_queued,
                     be_queued);
  return out;
}

std::string gpu_prometheus(const std::vector<GpuReading>& gpus) {
  std::string out;
  const auto series = [&](const char* name, const char* type, const char* help, auto value) {
    bool any = false;
    for (const GpuReading& g : gpus) any |= value(g).has_value();
    if (!any) return;
    family(out, name, type, help);
    for (const GpuReading& g : gpus) {
      if (const auto v = value(g)) out += fmt::format("{}{{gpu_uuid=\"{}\"}} {}\n", name, g.uuid, *v);
    }
  };
  series("nv_gpu_utilization", "gauge", "GPU utilization rate [0.0 - 1.0)", [](const GpuReading& g) { return g.utilization; });
  series("nv_gpu_memory_total_bytes", "gauge", "GPU total memory, in bytes",
         [](const GpuReading& g) { return g.memory_total_bytes; });
  series("nv_gpu_memory_used_bytes", "gauge", "GPU used memory, in bytes",
         [](const GpuReading& g) { return g.memory_used_bytes; });
  series("nv_gpu_power_usage", "gauge", "GPU power usage in watts", [](const GpuReading& g) { return g.power_w; });
  series("nv_energy_consumption", "counter", "GPU energy consumption in joules since the server started",
         [](const GpuReading& g) { return g.energy_j; });
  return out;
}

}  // namespace atl::serve
