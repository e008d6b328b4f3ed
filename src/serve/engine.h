#pragma once
// The serving engine: loaded models on one or more devices, each with its own scheduler and the
// thread that drives it, and the bounded per-class queues in front of them. Each model runs on
// one device, placed by its config (instance_group gpus) or on the least loaded one. Both
// protocols call infer(); it checks the request, packs its inputs and hands them to the model's
// scheduler, whose completion answers the request exactly once. Loading or unloading a model
// drains its device's scheduler, rebuilds its clients and starts it again: a scheduler takes
// clients only while stopped; the other devices keep serving.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "compile/compiler.h"
#include "profile/kernel_profile.h"
#include "sched/exec_device.h"
#include "sched/modes.h"
#include "sched/scheduler.h"
#include "serve/inference.h"
#include "serve/model_repository.h"
#include "serve/stats.h"

namespace atl::serve {

struct EngineOptions {
  // auto (cuda when a GPU answers, else cpu), cuda, cpu or sim. cpu and sim both run the
  // scheduler on the simulated GPU with every kernel computed by the CPU backend: outputs are
  // the CPU's, timings (queue, compute) are simulated.
  std::string device = "auto";
  // Device ordinals, one scheduler each (--devices 0,1); empty: device 0. On cpu and sim each is
  // a simulated GPU of its own.
  std::vector<int> devices;
  sched::Mode mode = sched::Mode::kReset;
  int inflight_cap = 4;
  bool rt_single_launch = true;  // sched::SchedulerOptions::rt_single_launch
  bool rt_sm_copies = false;      // RT instances' copies on the SMs (sched::ExecDevice::set_sm_copies; CUDA only)
  // Requests of a class accepted and not yet answered; one more is refused (resource exhausted).
  int64_t max_queue_rt = 64;
  int64_t max_queue_be = 256;
  double padding_rt_budget = 0;  // sched::SchedulerOptions::padding_rt_budget
  // Kernel profiles (atoll profile) for the padding modes: a model whose program one belongs to
  // plans with it; in those modes a model without one is profiled on its device when it loads.
  // The engine takes them over (Engine::options() no longer holds them).
  std::vector<ModelProfile> profiles;
};

// A model's programs at each batch it runs at, and the scheduler clients that run them.
struct ServedModel {
  struct Bucket {
    int64_t batch = 1;
    Program program;
    sched::ClientId rt_client = -1;
    sched::ClientId be_client = -1;  // -1 in rt-only mode
  };
  ModelSpec spec;
  size_t slot = 0;  // which of the engine's devices runs it
  int device = 0;   // that device's ordinal
  std::vector<Bucket> buckets;  // ascending batch; the first runs batch 1
  // What the spec's L2 config does here, for logs and config responses ("" without one).
  std::string l2_status;
  const Program& batch1() const { return buckets.front().program; }
  const Bucket& bucket_for(int64_t batch) const;
};

struct ModelIndexEntry {
  std::string name;
  std::string version;
  std::string state;   // READY, UNAVAILABLE
  std::string reason;  // why not ready
};

class Engine {
 public:
  explicit Engine(EngineOptions options);
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& device_name() const { return device_name_; }
  std::string device_description() const;
  std::vector<int> devices() const;  // the ordinals, in --devices order
  const EngineOptions& options() const { return options_; }

  // Compiles and loads the model (again, if loaded: its new spec replaces the old one). An L2
  // config is checked against the program of its batch as the GPU runs it (kInvalidArgument
  // naming the file when it was made for another program or batch) and applied to that batch's
  // launches on CUDA; the simulated devices have no L2 and only check it.
  void load(const ModelSpec& spec);
  // Stops serving the model; its device memory is kept for a later load of the same programs.
  void unload(const std::string& name);
  // Remembers a model that could not load, for the repository index.
  void mark_unavailable(const std::string& name, const std::string& reason);

  // Throws kNotFound for an unknown model or version, kUnavailable for an unloaded one.
  std::shared_ptr<const ServedModel> model(const std::string& name, const std::string& version) const;
  std::vector<ModelIndexEntry> index() const;
  std::map<std::string, std::string> ready_models() const;  // name -> latest version
  bool ready() const;

  // Checks and accepts the request, or throws (kInvalidArgument, kNotFound, kUnavailable,
  // kResourceExhausted, kUnsupported) having accepted nothing. Once accepted, `done` is called
  // exactly once.
  void infer(const InferRequest& request, InferDone done);

  // Refuses new requests (kUnavailable), answers every accepted one, stops the scheduler.
  void shutdown();

  const ServerStats& stats() const { return stats_; }
  uint64_t queued(sched::TaskClass task_class) const;
  std::string prometheus() const;

 private:
  struct Accepted;
  struct LoadedPrograms;
  struct Slot;
  std::string check_l2(const ModelSpec& spec, const std::vector<CompiledModel>& compiled) const;
  size_t place(const ModelSpec& spec, const ServedModel* previous) const;
  void apply_l2_residencies(Slot& slot, ServedModel* loaded);
  void rebuild_scheduler(Slot& slot);
  void start_driver(Slot& slot);
  void stop_driver(Slot& slot);
  void drain(Slot& slot);   // waits until the slot has no request in flight
  void pause(Slot& slot);   // drains and stops the slot's scheduler; the caller holds config_mutex_
  void resume(Slot& slot);  // rebuilds its clients, applies residencies and starts it again
  void complete(const Accepted& a, std::exception_ptr error, sched::TaskResult result);
  void finish_one(Slot& slot);

  EngineOptions options_;
  std::string device_name_;
  std::vector<std::unique_ptr<Slot>> slots_;
  bool simulated_ = false;

  // Shared by requests while they are accepted; exclusive while models or a scheduler change.
  mutable std::shared_mutex config_mutex_;
  std::map<std::string, std::shared_ptr<ServedModel>> models_;
  std::map<std::string, std::string> unavailable_;  // name -> reason
  std::vector<ModelProfile> profiles_;  // given, then measured at load (config_mutex_ exclusive)
  bool shutting_down_ = false;

  std::atomic<int64_t> queued_[2] = {0, 0};  // per class, indexed as TaskClass
  ServerStats stats_;
};

}  // namespace atl::serve
