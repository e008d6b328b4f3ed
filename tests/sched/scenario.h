#pragma once
// Shared set-up for the scheduler tests: tiny models on the simulated GPU with chosen launch
// shapes, one periodic RT client and closed-loop BE clients, every answer recorded.
#include <map>
#include <vector>

#include "compile/compiler.h"
#include "sched/scheduler.h"
#include "sched/sim_exec_device.h"

namespace atl::sched::testing {

// tiny_vgg (the RT model) and tiny_cnn (the BE model), compiled for the CPU once.
const CompiledModel& rt_model();
const CompiledModel& be_model();

// Floats uniform in [-1, 1) from `seed`.
std::vector<Tensor> random_inputs(const Program& program, uint64_t seed);

struct Scenario {
  Mode mode = Mode::kReset;
  int inflight_cap = 4;
  DeviceTime be_queue_ns = 0;  // SchedulerOptions::be_queue_ns
  sim::SimGpuConfig gpu;       // H200-like: 264 block slots
  bool numerics = false;
  int be_clients = 2;
  // Every kernel of the RT / BE model gets this shape; the models keep their kernel counts.
  sim::SimKernelShape rt_shape{264, 20'000};
  sim::SimKernelShape be_shape{528, 200'000};
  DeviceTime rt_period = 2'000'000;
  DeviceTime rt_jitter = 0;          // each arrival moves later by a seeded offset in [0, jitter)
  DeviceTime rt_until = 20'000'000;  // no RT arrival from here on
  DeviceTime be_until = 20'000'000;  // BE clients stop re-submitting
  uint64_t seed = 1;
  bool armed_rt = true;  // SchedulerOptions::armed_rt
  bool rt_single_launch = true;  // SchedulerOptions::rt_single_launch
  bool arm_behind_running = true;  // SchedulerOptions::arm_behind_running
  double padding_rt_budget = 0;    // SchedulerOptions::padding_rt_budget
};

struct Answer {
  std::exception_ptr error;
  TaskResult result;
};

struct ScenarioRun {
  std::vector<uint64_t> submitted;                  // request ids in submission order
  std::map<uint64_t, std::vector<Answer>> answers;  // every answer, by request id
  std::map<uint64_t, std::vector<Tensor>> inputs;   // by request id
  std::vector<sim::SimLaunchRecord> trace;
  SchedulerStats stats;
  std::vector<SchedulerEvent> events;
  InstanceId rt_instance = -1;
  std::vector<InstanceId> be_instances;

  // Successful results of one class, by request id.
  std::vector<TaskResult> results(TaskClass c) const;
  // Launch records of one instance's kernels, in completion order.
  std::vector<sim::SimLaunchRecord> launches_of(InstanceId instance) const;
};

ScenarioRun run_scenario(const Scenario& s);

// The padding modes' scenario: RT kernels of 16 blocks x 20 us leave 94% of the slots idle; BE
// kernels of two full waves (528 blocks x 10 us) never fit whole beside them but run in slices.
// RT arrivals every 0.3-0.5 ms until `arrivals_ns` keep RT mode busy; numerics check every answer.
Scenario slices_scenario(Mode mode, DeviceTime arrivals_ns = 6'000'000);

// p50 of RT latency from scheduled arrival, ns.
DeviceTime rt_p50(const ScenarioRun& run);

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b);
// Every answer is one result, bit for bit what the CPU backend gives running the request's
// model straight through on its inputs (a scenario with numerics).
void expect_outputs_match_unpreempted(const ScenarioRun& run);

}  // namespace atl::sched::testing
