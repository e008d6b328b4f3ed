#pragma once
// What the server counts: Triton's per-model statistics (ModelStatistics, /v2/models/{m}/stats)
// and atoll's per-class counters, rendered together as Prometheus text for /metrics. Durations
// of device work (queue, compute) are on the device's clock: simulated time on cpu and sim.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "sched/task.h"

namespace atl::serve {

struct DurationStat {
  uint64_t count = 0;
  uint64_t ns = 0;
  void add(uint64_t duration_ns) {
    ++count;
    ns += duration_ns;
  }
};

struct ModelStats {
  DurationStat success, fail, queue, compute_input, compute_infer, compute_output;
  uint64_t inference_count = 0;    // items (batch elements) served
  uint64_t execution_count = 0;    // model executions
  uint64_t last_inference_ms = 0;  // since the epoch
  std::map<uint64_t, DurationStat> compute_by_batch;  // request batch -> compute_infer
};

struct ClassStats {
  uint64_t success = 0, failure = 0;
  uint64_t rejected = 0;         // refused because the class's queue was full
  uint64_t preemptions = 0;      // BE: times its tasks were preempted; RT: BE tasks preempted for it
  uint64_t deadline_misses = 0;  // finished after the request's timeout
  DurationStat preemption_latency;  // RT requests that preempted: arrival -> first kernel
};

// One served request's timings, from the scheduler's result and the host.
struct RequestTimings {
  sched::TaskClass task_class = sched::TaskClass::kBestEffort;
  int64_t batch = 1;
  uint64_t wall_ns = 0;            // received -> answered, on the host
  uint64_t compute_input_ns = 0;   // decoding and packing the inputs, on the host
  uint64_t compute_output_ns = 0;  // unpacking the outputs, on the host
  uint64_t queue_ns = 0;           // arrival -> dispatch, device clock
  uint64_t compute_infer_ns = 0;   // dispatch -> finish, device clock
  int preemptions = 0;
  uint64_t preemption_latency_ns = 0;  // with preemptions on an RT request
  bool late = false;
};

// One GPU's readings for /metrics (Triton's nv_gpu_* and nv_energy_consumption, labelled by
// gpu_uuid); a reading the driver did not give is left out.
struct GpuReading {
  std::string uuid;
  std::optional<double> utilization;  // 0..1
  std::optional<uint64_t> memory_used_bytes, memory_total_bytes;
  std::optional<double> power_w;
  std::optional<double> energy_j;
};
std::string gpu_prometheus(const std::vector<GpuReading>& gpus);

class ServerStats {
 public:
  void record_success(const std::string& model, const RequestTimings& t);
  void record_failure(const std::string& model, sched::TaskClass task_class, uint64_t wall_ns, bool late);
  void record_rejection(sched::TaskClass task_class);

  ModelStats model(const std::string& name) const;  // zeros for a model never asked for
  std::map<std::string, ModelStats> models() const;
  ClassStats for_class(sched::TaskClass task_class) const;

  // Prometheus text exposition: Triton's nv_inference_* per model and atoll_* per class, with
  // the queue depth of each class as given.
  std::string prometheus(const std::map<std::string, std::string>& model_versions, uint64_t rt_queued,
                         uint64_t be_queued) const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, ModelStats> models_;
  ClassStats classes_[2];  // indexed by TaskClass
};

}  // namespace atl::serve
