#pragma once
// Co-location runs: periodic RT clients and closed-loop BE clients share one device under one
// scheduling mode; the report is what REEF reports: RT latency from scheduled arrival, BE
// throughput, and how often and how fast BE work was preempted.
#include <memory>
#include <string>
#include <vector>

#include "runtime/session.h"
#include "sched/exec_device.h"
#include "sched/scheduler.h"
#include "sched/sim_exec_device.h"

namespace atl::sched {

struct WorkloadClient {
  std::string name;
  TaskClass task_class = TaskClass::kBestEffort;
  InstanceId instance = -1;
  double hz = 0;               // RT: requests per second, the first at the start of the run
  std::vector<Tensor> inputs;  // every request's inputs
};

struct Workload {
  std::vector<WorkloadClient> clients;  // in rt-only mode BE clients send nothing
  DeviceTime duration = 0;              // RT arrivals and BE re-submissions stop here
  SchedulerOptions scheduler;
};

struct ClientSummary {
  std::string name;
  TaskClass task_class = TaskClass::kBestEffort;
  double hz = 0;
  int64_t completed = 0;
  LatencyStats latency_ms;      // from scheduled arrival
  double throughput_per_s = 0;  // requests finished within the run's duration
  int64_t preemptions = 0;
};

struct WorkloadReport {
  Mode mode = Mode::kReset;
  std::string device;
  double duration_s = 0;
  std::vector<ClientSummary> clients;
  LatencyStats rt_latency_ms;  // every RT request
  double be_throughput_per_s = 0;
  int64_t preemptions = 0;  // BE tasks preempted with kernels in flight
  // Scheduled arrival -> first kernel start of the RT requests that preempted BE work.
  LatencyStats preemption_latency_us;
  int64_t relaunched_kernels = 0;
  std::vector<TaskResult> results;  // every request, outputs dropped, in completion order
};

// Runs the workload from the device's current time; every request is answered before it
// returns. A failed request throws its error.
WorkloadReport run_workload(ExecDevice& device, const Workload& workload);

struct ColocateOptions {
  struct Rt {
    std::string model;
    double hz = 100;
  };
  std::vector<Rt> rt;
  std::vector<std::string> be;
  Mode mode = Mode::kReset;
  double duration_s = 1.0;
  int64_t batch = 1;
  uint64_t seed = 0;
  int inflight_cap = 4;
  std::string device = "sim";
  sim::SimGpuConfig sim;
};

// "sim" or "cuda" (kUnsupported until the CUDA ExecDevice exists).
std::unique_ptr<ExecDevice> make_exec_device(const std::string& name, const SimExecOptions& sim = {});

// Builds and compiles the zoo models, loads them (RT only in rt-only mode) and runs them.
WorkloadReport run_colocate(const ColocateOptions& options);

}  // namespace atl::sched
