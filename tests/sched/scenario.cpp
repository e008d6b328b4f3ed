#include "scenario.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "backends/cpu/cpu_backend.h"
#include "core/rng.h"
#include "models/zoo.h"

namespace atl::sched::testing {

namespace {

CompiledModel compile_tiny(const std::string& name) {
  Graph g = build_model(name, ModelOptions{});
  g.init_weights(7);
  return compile_graph(g, CompileTarget{});
}

}  // namespace

const CompiledModel& rt_model() {
  static const CompiledModel m = compile_tiny("tiny_vgg");
  return m;
}

const CompiledModel& be_model() {
  static const CompiledModel m = compile_tiny("tiny_cnn");
  return m;
}

std::vector<Tensor> random_inputs(const Program& program, uint64_t seed) {
  std::vector<Tensor> inputs;
  for (const TensorSpec& s : program.inputs) {
    Tensor t(DType::kF32, s.shape);
    Rng rng(seed, s.name);
    for (float& x : t.as<float>()) x = rng.uniform(-1.0f, 1.0f);
    inputs.push_back(std::move(t));
  }
  return inputs;
}

std::vector<TaskResult> ScenarioRun::results(TaskClass c) const {
  std::vector<TaskResult> out;
  for (const auto& [id, list] : answers) {
    for (const Answer& a : list) {
      if (!a.error && a.result.task_class == c) out.push_back(a.result);
    }
  }
  return out;
}

std::vector<sim::SimLaunchRecord> ScenarioRun::launches_of(InstanceId instance) const {
  std::vector<sim::SimLaunchRecord> out;
  for (const auto& r : trace) {
    if (r.tag == instance) out.push_back(r);
  }
  return out;
}

Scenario slices_scenario(Mode mode, DeviceTime arrivals_ns) {
  Scenario s;
  s.mode = mode;
  s.numerics = true;
  s.be_clients = 1;
  s.rt_shape = {16, 20'000};
  s.be_shape = {528, 10'000};
  s.rt_period = 300'000;
  s.rt_jitter = 200'000;
  s.rt_until = arrivals_ns;
  s.be_until = arrivals_ns;
  return s;
}

ScenarioRun run_scenario(const Scenario& s) {
  SimExecOptions options;
  options.gpu = s.gpu;
  options.numerics = s.numerics;
  options.record_trace = true;
  SimExecDevice device(options);
  ScenarioRun run;

  const CompiledModel& rt = rt_model();
  const CompiledModel& be = be_model();
  run.rt_instance = device.load(rt.program, rt.weights);
  device.set_kernel_shapes(run.rt_instance, std::vector(rt.program.kernels.size(), s.rt_shape));
  for (int i = 0; i < s.be_clients; ++i) {
    run.be_instances.push_back(device.load(be.program, be.weights));
    device.set_kernel_shapes(run.be_instances.back(), std::vector(be.program.kernels.size(), s.be_shape));
  }

  if (mode_traits(s.mode).pads_be) {  // the padding modes plan with the shapes just set
    device.set_profile(run.rt_instance, device.measure_profile(run.rt_instance, {}));
    for (InstanceId be_instance : run.be_instances) device.set_profile(be_instance, device.measure_profile(be_instance, {}));
  }
  SchedulerOptions so;
  so.mode = s.mode;
  so.inflight_cap = s.inflight_cap;
  so.be_queue_ns = s.be_queue_ns;
  so.record_events = true;
  so.armed_rt = s.armed_rt;
  so.rt_single_launch = s.rt_single_launch;
  so.arm_behind_running = s.arm_behind_running;
  so.padding_rt_budget = s.padding_rt_budget;
  Scheduler scheduler(device, so);
  const ClientId rt_client = scheduler.add_client(TaskClass::kRealTime, "rt", run.rt_instance);
  std::vector<ClientId> be_clients;
  for (int i = 0; i < s.be_clients; ++i) {
    be_clients.push_back(scheduler.add_client(TaskClass::kBestEffort, "be" + std::to_string(i), run.be_instances[i]));
  }

  uint64_t input_seed = s.seed * 1000003;
  auto record = [&](std::exception_ptr error, TaskResult r) { run.answers[r.id].push_back({error, std::move(r)}); };
  auto submit = [&](ClientId client, const Program& p, DeviceTime arrival, DeviceTime deadline, Completion done) {
    std::vector<Tensor> inputs = random_inputs(p, ++input_seed);
    const uint64_t id = scheduler.submit(client, Request{inputs, arrival, deadline}, std::move(done));
    run.inputs[id] = std::move(inputs);
    run.submitted.push_back(id);
  };

  Rng jitter(s.seed, "rt-jitter");
  for (DeviceTime t = 0; t < s.rt_until; t += s.rt_period) {
    const DeviceTime offset = s.rt_jitter > 0 ? static_cast<DeviceTime>(jitter.next_u64() % s.rt_jitter) : 0;
    submit(rt_client, rt.program, t + offset, t + offset + s.rt_period, record);
  }
  std::function<void(ClientId)> send_be = [&](ClientId client) {
    submit(client, be.program, kArriveOnAdmission, kNever, [&, client](std::exception_ptr error, TaskResult r) {
      record(error, std::move(r));
      if (!error && device.now() < s.be_until) send_be(client);
    });
  };
  for (ClientId c : be_clients) send_be(c);

  scheduler.run_until(std::max(s.rt_until, s.be_until));
  scheduler.run_until_idle();
  run.trace = device.gpu().trace();
  run.stats = scheduler.stats();
  run.events = scheduler.events();
  return run;
}

DeviceTime rt_p50(const ScenarioRun& run) {
  std::vector<DeviceTime> latency;
  for (const TaskResult& r : run.results(TaskClass::kRealTime)) latency.push_back(r.latency());
  if (latency.empty()) return 0;
  std::sort(latency.begin(), latency.end());
  return latency[latency.size() / 2];
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!(a[i].shape() == b[i].shape()) || a[i].dtype() != b[i].dtype()) return false;
    if (std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0) return false;
  }
  return true;
}

void expect_outputs_match_unpreempted(const ScenarioRun& run) {
  auto cpu = make_cpu_backend();
  auto rt_ref = cpu->load(rt_model().program, rt_model().weights);
  auto be_ref = cpu->load(be_model().program, be_model().weights);
  int checked = 0;
  for (const auto& [id, answers] : run.answers) {
    ASSERT_EQ(answers.size(), 1u);
    ASSERT_EQ(answers[0].error, nullptr) << "request " << id;
    const TaskResult& r = answers[0].result;
    Instance& ref = r.task_class == TaskClass::kRealTime ? *rt_ref : *be_ref;
    const auto& inputs = run.inputs.at(id);
    for (size_t i = 0; i < inputs.size(); ++i) ref.set_input(static_cast<int>(i), inputs[i]);
    ref.run();
    std::vector<Tensor> expected;
    for (size_t i = 0; i < ref.program().outputs.size(); ++i) expected.push_back(ref.get_output(static_cast<int>(i)));
    EXPECT_TRUE(same_bits(r.outputs, expected))
        << task_class_name(r.task_class) << " request " << id << " preempted " << r.preemptions << " times";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(run.submitted.size()));
}

}  // namespace atl::sched::testing
