#pragma once
// The engine's internals shared by its files: what one device holds (engine_devices.cpp runs
// its scheduler) and what the completion of an accepted request needs (engine.cpp).
#include <fmt/core.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "l2/slices.h"
#include "runtime/nvml.h"
#include "serve/engine.h"

namespace atl::serve {

// Scheduler clients own their instances: two models never share one, even of the same zoo model.
inline std::string program_key(const ModelSpec& spec, int64_t batch) {
  return fmt::format("{}|{}|{}|{}|{}", spec.name, spec.model_source(), batch, spec.seed, spec.seq_len);
}

// A model's program at one batch, loaded twice: RT and BE clients each own an instance.
struct Engine::LoadedPrograms {
  Program program;
  sched::InstanceId rt_instance = -1;
  sched::InstanceId be_instance = -1;
  std::optional<l2::L2Device> l2_applied;  // the preset of the residency set on both instances
};

// One device: its scheduler and the programs loaded on it. Its requests in flight are counted
// so that a pause can drain them; the simulated device's driver runs while there are any.
struct Engine::Slot {
  int ordinal = 0;
  std::unique_ptr<sched::ExecDevice> device;
  std::unique_ptr<NvmlDevice> nvml;  // real GPUs, for /metrics
  std::optional<double> energy_at_start_mj;
  std::mutex nvml_mutex;
  std::map<std::string, std::shared_ptr<LoadedPrograms>> programs;  // device instances by program
  std::unique_ptr<sched::Scheduler> scheduler;
  std::mutex work_mutex;
  std::condition_variable work_changed;
  int64_t in_flight = 0;
  bool driver_stop = false;
  std::thread driver;
};

// What the completion of an accepted request needs.
struct Engine::Accepted {
  Engine::Slot* slot = nullptr;
  std::shared_ptr<const ServedModel> model;
  size_t bucket = 0;
  int64_t batch = 1;
  sched::TaskClass task_class = sched::TaskClass::kBestEffort;
  std::optional<int64_t> timeout_us;
  std::vector<std::string> outputs;
  std::string id, version;
  std::chrono::steady_clock::time_point received;
  uint64_t compute_input_ns = 0;
  InferDone done;
};

}  // namespace atl::serve
