#include "serve/engine.h"

#include <fmt/core.h>

#include <cstdio>

#include <algorithm>
#include <chrono>
#include <set>

#include "core/error.h"
#include "core/text.h"
#include "l2/slices.h"
#include "runtime/devices.h"
#include "runtime/model_source.h"
#include "runtime/nvml.h"
#include "sched/cuda_exec_device.h"
#include "sched/profiles.h"
#include "sched/sim_exec_device.h"
#include "serve/engine_impl.h"

namespace atl::serve {

namespace {

using Clock = std::chrono::steady_clock;

size_t class_index(sched::TaskClass c) {
  return c == sched::TaskClass::kRealTime ? 0 : 1;
}

uint64_t elapsed_ns(Clock::time_point since) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - since).count());
}

uint64_t device_span(sched::DeviceTime from, sched::DeviceTime to) {
  return to > from ? static_cast<uint64_t>(to - from) : 0;
}

// Batch sizes a model is compiled at: powers of two below its limit, and the limit. A request
// runs at the smallest that holds it, padded with zeros.
std::vector<int64_t> bucket_batches(int64_t max_batch_size) {
  std::vector<int64_t> batches;
  for (int64_t b = 1; b < max_batch_size; b *= 2) batches.push_back(b);
  batches.push_back(std::max<int64_t>(max_batch_size, 1));
  return batches;
}

// The model at every batch it runs at. An ONNX file is imported once per batch (the batch fills
// its symbolic first dimension); its refusal names the file and the node, and this the model.
std::vector<CompiledModel> compile_buckets(const ModelSpec& spec, const CompileTarget& target, int inflight_cap) {
  std::vector<CompiledModel> compiled;
  try {
    for (int64_t batch : bucket_batches(spec.max_batch_size)) {
      compiled.push_back(compile_zoo_model(
          {.name = spec.model_source(), .batch = batch, .seed = spec.seed, .seq_len = spec.seq_len}, target, true,
          inflight_cap));
    }
  } catch (const Error& e) {
    if (!spec.is_onnx()) throw;
    throw Error(e.code(), fmt::format("{}: model '{}' cannot be served: {}", spec.source, spec.name, e.message()),
                e.file(), e.line());
  }
  return compiled;
}

// What atoll l2 config makes configs for: the program with the GPU's f16 activations.
CompileTarget gpu_target() {
  CompileTarget t;
  t.act_dtype = DType::kF16;
  return t;
}

std::string l2_summary(const l2::ResidencyConfig& c) {
  return fmt::format("{} of {} slices persisting, set-aside {:.2f} MiB, hit ratio {}", c.resident_count(),
                     c.resident.size(), static_cast<double>(c.setaside_bytes) / (1 << 20), c.hit_ratio);
}

std::string latest_version(const ModelSpec& spec) {
  return std::to_string(spec.versions.back());
}

}  // namespace

const ServedModel::Bucket& ServedModel::bucket_for(int64_t batch) const {
  for (const Bucket& b : buckets) {
    if (b.batch >= batch) return b;
  }
  ATOLL_THROW(kInternal, "model '{}' has no program for batch {}", spec.name, batch);
}

Engine::Engine(EngineOptions options) : options_(std::move(options)), profiles_(std::move(options_.profiles)) {
  ATOLL_CHECK(options_.max_queue_rt >= 1 && options_.max_queue_be >= 1, kInvalidArgument,
              "queue limits must be at least 1 (got RT {}, BE {})", options_.max_queue_rt, options_.max_queue_be);
  const std::vector<int> ordinals = options_.devices.empty() ? std::vector<int>{0} : options_.devices;
  for (size_t i = 0; i < ordinals.size(); ++i) {
    ATOLL_CHECK(ordinals[i] >= 0, kInvalidArgument, "device {} is negative", ordinals[i]);
    ATOLL_CHECK(std::find(ordinals.begin(), ordinals.begin() + static_cast<long>(i), ordinals[i]) ==
                    ordinals.begin() + static_cast<long>(i),
                kInvalidArgument, "device {} is listed twice", ordinals[i]);
  }
  const std::string resolved = resolve_device(options_.device);
  ATOLL_CHECK(resolved == "cuda" || resolved == "cpu" || resolved == "sim", kInvalidArgument,
              "unknown device '{}' (expected auto, cuda, cpu or sim)", printable(options_.device));
  device_name_ = resolved;
  simulated_ = resolved != "cuda";
  for (int ordinal : ordinals) {
    auto slot = std::make_unique<Slot>();
    slot->ordinal = ordinal;
    if (simulated_) {
      sched::SimExecOptions sim;
      sim.numerics = true;
      slot->device = std::make_unique<sched::SimExecDevice>(sim);
    } else {
      slot->device = sched::make_cuda_exec_device(ordinal);
      slot->nvml = std::make_unique<NvmlDevice>(slot->device->pci_bus_id());
      if (!slot->nvml->available()) {
        fmt::print(stderr, "atoll serve: device {}: no GPU metrics: {}\n", ordinal, slot->nvml->note());
      }
      slot->energy_at_start_mj = slot->nvml->energy_mj();
    }
    slots_.push_back(std::move(slot));
  }
  for (auto& slot : slots_) {
    rebuild_scheduler(*slot);
    start_driver(*slot);
  }
}

Engine::~Engine() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    fmt::print(stderr, "atoll serve: shutdown failed: {}\n", e.what());
  }
}

std::string Engine::device_description() const {
  if (slots_.size() == 1) return slots_.front()->device->description();
  std::string all;
  for (const auto& slot : slots_) {
    all += fmt::format("{}device {}: {}", all.empty() ? "" : "; ", slot->ordinal, slot->device->description());
  }
  return all;
}

// Checked before the scheduler stops, so that a config for another program costs no pause.
std::string Engine::check_l2(const ModelSpec& spec, const std::vector<CompiledModel>& compiled) const {
  const ModelSpec::L2& l2 = *spec.l2;
  const auto it = std::find_if(compiled.begin(), compiled.end(),
                               [&](const CompiledModel& cm) { return cm.program.batch == l2.config.batch; });
  std::string batches;
  for (const CompiledModel& cm : compiled) batches += (batches.empty() ? "" : ", ") + std::to_string(cm.program.batch);
  ATOLL_CHECK(it != compiled.end(), kInvalidArgument,
              "{}: l2_config '{}' is for batch {}, but model '{}' runs at batches {} (max_batch_size {})", spec.source,
              l2.path, l2.config.batch, spec.name, batches, spec.max_batch_size);
  // The simulated devices compute with f32 activations; a config is made for the GPU's program
  // (atoll l2 config), so that is the program it must match here too.
  const Program checked = simulated_ ? compile_zoo_model({.name = spec.model_source(), .batch = l2.config.batch,
                                                          .seed = spec.seed, .seq_len = spec.seq_len},
                                                         gpu_target(), false, options_.inflight_cap)
                                           .program
                                     : it->program;
  try {
    l2::plan_windows(checked, l2.config, l2.device);  // checks program, batch, slices and device limits
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: l2_config '{}' does not fit model '{}': {}", spec.source, l2.path, spec.name,
                                      e.message()),
                e.file(), e.line());
  }
  if (!simulated_) return "";  // the status says what the device granted once it is applied
  return fmt::format("matches the batch {} GPU program ({}); device {} has no L2 control, so it has no effect here",
                     l2.config.batch, l2_summary(l2.config), device_name_);
}

// Called with the driver stopped and the new scheduler not yet run, so no work is held. The
// set-aside is one limit per device and the last instance to set it wins: instances that lost
// their config are cleared first, and the largest set-aside is applied last.
void Engine::apply_l2_residencies(Slot& slot, ServedModel* loaded) {
  if (simulated_) return;
  std::vector<std::pair<const ServedModel*, LoadedPrograms*>> wanted;
  for (const auto& [name, m] : models_) {
    if (!m->spec.l2 || slots_[m->slot].get() != &slot) continue;
    wanted.emplace_back(m.get(), slot.programs.at(program_key(m->spec, m->spec.l2->config.batch)).get());
  }
  std::set<const LoadedPrograms*> keep;
  for (const auto& w : wanted) keep.insert(w.second);
  sched::ExecDevice& device = *slot.device;
  for (auto& [key, p] : slot.programs) {
    if (!p->l2_applied || keep.contains(p.get())) continue;
    device.set_l2_residency(p->rt_instance, nullptr, *p->l2_applied);
    device.set_l2_residency(p->be_instance, nullptr, *p->l2_applied);
    p->l2_applied.reset();
  }
  std::sort(wanted.begin(), wanted.end(), [](const auto& a, const auto& b) {
    return a.first->spec.l2->config.setaside_bytes < b.first->spec.l2->config.setaside_bytes;
  });
  int64_t granted = 0;
  for (const auto& [model, p] : wanted) {
    const ModelSpec::L2& l2 = *model->spec.l2;
    device.set_l2_residency(p->rt_instance, &l2.config, l2.device);
    granted = device.set_l2_residency(p->be_instance, &l2.config, l2.device);
    p->l2_applied = l2.device;
  }
  if (loaded && loaded->spec.l2) {
    loaded->l2_status = fmt::format("applied to batch {} on {} device {} ({}); the device's persisting limit is {:.2f} MiB",
                                    loaded->spec.l2->config.batch, device_name_, slot.ordinal,
                                    l2_summary(loaded->spec.l2->config), static_cast<double>(granted) / (1 << 20));
  }
}

void Engine::load(const ModelSpec& spec) {
  // Compiled and checked before a scheduler stops: requests to other models wait only for the device.
  std::vector<CompiledModel> compiled = compile_buckets(spec, slots_.front()->device->target(), options_.inflight_cap);
  check_spec_against_program(spec, compiled.front().program);
  auto model = std::make_shared<ServedModel>();
  model->spec = spec;
  if (spec.l2) model->l2_status = check_l2(spec, compiled);
  std::unique_lock config(config_mutex_);
  ATOLL_CHECK(!shutting_down_, kUnavailable, "server is shutting down");
  const std::shared_ptr<ServedModel> previous = models_.contains(spec.name) ? models_[spec.name] : nullptr;
  model->slot = place(spec, previous.get());
  model->device = slots_[model->slot]->ordinal;
  Slot& slot = *slots_[model->slot];
  Slot* moved_from = previous && previous->slot != model->slot ? slots_[previous->slot].get() : nullptr;
  pause(slot);
  if (moved_from != nullptr) pause(*moved_from);
  try {
    for (CompiledModel& cm : compiled) {
      const std::string key = program_key(spec, cm.program.batch);
      if (!slot.programs.contains(key)) {
        auto p = std::make_shared<LoadedPrograms>();
        p->rt_instance = slot.device->load(cm.program, cm.weights);
        if (options_.rt_sm_copies) slot.device->set_sm_copies(p->rt_instance, true);
        p->be_instance = slot.device->load(cm.program, cm.weights);
        if (sched::mode_traits(options_.mode).pads_be) {
          for (const sched::InstanceId i : {p->rt_instance, p->be_instance}) {
            sched::attach_profile(*slot.device, i, profiles_, /*measure=*/true);
          }
        }
        p->program = std::move(cm.program);
        slot.programs[key] = p;
      }
      model->buckets.push_back({.batch = slot.programs[key]->program.batch, .program = slot.programs[key]->program});
    }
    models_[spec.name] = model;
    rebuild_scheduler(slot);
    apply_l2_residencies(slot, model.get());
  } catch (...) {
    // The models served before keep being served.
    if (previous) {
      models_[spec.name] = previous;
    } else {
      models_.erase(spec.name);
    }
    resume(slot);
    if (moved_from != nullptr) resume(*moved_from);
    throw;
  }
  unavailable_.erase(spec.name);
  if (spec.l2) {
    fmt::print(stderr, "atoll serve: model '{}': L2 config '{}' {}\n", spec.name, spec.l2->path, model->l2_status);
  }
  start_driver(slot);
  if (moved_from != nullptr) resume(*moved_from);  // without the model, which left it
}

void Engine::unload(const std::string& name) {
  std::unique_lock config(config_mutex_);
  ATOLL_CHECK(models_.contains(name) || unavailable_.contains(name), kNotFound, "unknown model '{}'", printable(name));
  const auto it = models_.find(name);
  if (it == models_.end()) {
    unavailable_[name] = "unloaded";
    return;
  }
  Slot& slot = *slots_[it->second->slot];
  pause(slot);
  models_.erase(it);
  unavailable_[name] = "unloaded";
  resume(slot);  // its set-aside goes with it
}

void Engine::mark_unavailable(const std::string& name, const std::string& reason) {
  std::unique_lock config(config_mutex_);
  if (!models_.contains(name)) unavailable_[name] = reason;
}

namespace {

std::shared_ptr<const ServedModel> find_model(const std::map<std::string, std::shared_ptr<ServedModel>>& models,
                                              const std::map<std::string, std::string>& unavailable,
                                              const std::string& name, const std::string& version) {
  const auto it = models.find(name);
  if (it == models.end()) {
    const auto down = unavailable.find(name);
    ATOLL_CHECK(down == unavailable.end(), kUnavailable, "model '{}' is not ready: {}", printable(name),
                down->second);
    std::string known;
    for (const auto& [n, m] : models) known += (known.empty() ? "" : ", ") + n;
    ATOLL_THROW(kNotFound, "unknown model '{}' (models: {})", printable(name), known);
  }
  const std::vector<int64_t>& versions = it->second->spec.versions;
  const bool listed = version.empty() || std::any_of(versions.begin(), versions.end(), [&](int64_t v) {
                        return std::to_string(v) == version;
                      });
  ATOLL_CHECK(listed, kNotFound, "model '{}' has no version '{}' (latest: {})", name, printable(version),
              versions.back());
  return it->second;
}

}  // namespace

std::shared_ptr<const ServedModel> Engine::model(const std::string& name, const std::string& version) const {
  std::shared_lock config(config_mutex_);
  return find_model(models_, unavailable_, name, version);
}

std::vector<ModelIndexEntry> Engine::index() const {
  std::shared_lock config(config_mutex_);
  std::map<std::string, ModelIndexEntry> entries;
  for (const auto& [name, m] : models_) entries[name] = {name, latest_version(m->spec), "READY", ""};
  for (const auto& [name, reason] : unavailable_) entries[name] = {name, "", "UNAVAILABLE", reason};
  std::vector<ModelIndexEntry> out;
  for (auto& [name, e] : entries) out.push_back(std::move(e));
  return out;
}

std::map<std::string, std::string> Engine::ready_models() const {
  std::shared_lock config(config_mutex_);
  std::map<std::string, std::string> out;
  for (const auto& [name, m] : models_) out[name] = latest_version(m->spec);
  return out;
}

bool Engine::ready() const {
  std::shared_lock config(config_mutex_);
  return !shutting_down_;
}

uint64_t Engine::queued(sched::TaskClass task_class) const {
  return static_cast<uint64_t>(queued_[class_index(task_class)].load());
}

std::string Engine::prometheus() const {
  std::vector<GpuReading> gpus;
  for (const auto& slot : slots_) {
    if (!slot->nvml || !slot->nvml->available()) continue;
    std::lock_guard lock(slot->nvml_mutex);
    GpuReading g;
    g.uuid = slot->nvml->uuid();
    g.utilization = slot->nvml->utilization();
    if (const auto m = slot->nvml->memory()) {
      g.memory_used_bytes = m->used;
      g.memory_total_bytes = m->total;
    }
    g.power_w = slot->nvml->power_w();
    if (const auto mj = slot->nvml->energy_mj(); mj && slot->energy_at_start_mj) {
      g.energy_j = (*mj - *slot->energy_at_start_mj) / 1e3;
    }
    gpus.push_back(std::move(g));
  }
  return stats_.prometheus(ready_models(), queued(sched::TaskClass::kRealTime),
                           queued(sched::TaskClass::kBestEffort)) +
         gpu_prometheus(gpus);
}

void Engine::infer(const InferRequest& request, InferDone done) {
  const Clock::time_point received = Clock::now();
  std::shared_lock config(config_mutex_);
  ATOLL_CHECK(!shutting_down_, kUnavailable, "server is shutting down");
  auto a = std::make_shared<Accepted>();
  a->model = find_model(models_, unavailable_, request.model, request.version);
  const ServedModel& model = *a->model;
  ATOLL_CHECK(!request.timeout_us || *request.timeout_us > 0, kInvalidArgument,
              "parameter 'timeout' must be a positive number of microseconds (got {})", request.timeout_us.value_or(0));
  check_requested_outputs(model.batch1(), request.outputs);
  a->batch = check_inputs(model.spec, model.batch1(), request);
  a->task_class = request.priority == 1 ? sched::TaskClass::kRealTime : model.spec.default_class;
  const ServedModel::Bucket& bucket = model.bucket_for(a->batch);
  Slot& slot = *slots_[model.slot];
  a->slot = &slot;
  const bool rt = a->task_class == sched::TaskClass::kRealTime;
  const sched::ClientId client = rt ? bucket.rt_client : bucket.be_client;
  ATOLL_CHECK(client >= 0, kUnsupported, "mode {} serves RT requests only (send parameter priority 1)",
              sched::mode_name(options_.mode));
  std::atomic<int64_t>& queued = queued_[class_index(a->task_class)];
  const int64_t limit = rt ? options_.max_queue_rt : options_.max_queue_be;
  if (queued.fetch_add(1) >= limit) {
    queued.fetch_sub(1);
    stats_.record_rejection(a->task_class);
    ATOLL_THROW(kResourceExhausted, "the {} queue is full ({} requests waiting); retry later",
                sched::task_class_name(a->task_class), limit);
  }
  sched::Request scheduled;
  try {
    scheduled.inputs = pack_inputs(bucket.program, request);
  } catch (...) {
    queued.fetch_sub(1);
    throw;
  }
  a->bucket = static_cast<size_t>(&bucket - model.buckets.data());
  a->timeout_us = request.timeout_us;
  a->outputs = request.outputs;
  a->id = request.id;
  a->version = request.version.empty() ? latest_version(model.spec) : request.version;
  a->received = received;
  a->compute_input_ns = elapsed_ns(received);
  a->done = std::move(done);
  {
    std::lock_guard work(slot.work_mutex);
    ++slot.in_flight;
  }
  slot.work_changed.notify_all();
  slot.scheduler->submit(client, std::move(scheduled),
                     [this, a](std::exception_ptr error, sched::TaskResult result) { complete(*a, error, std::move(result)); });
}

void Engine::complete(const Accepted& a, std::exception_ptr error, sched::TaskResult result) {
  const Clock::time_point unpack_start = Clock::now();
  const ServedModel& model = *a.model;
  InferResponse response;
  response.model = model.spec.name;
  response.version = a.version;
  response.id = a.id;
  response.task_class = a.task_class;
  bool late = false;
  if (!error) {
    late = a.timeout_us && result.latency() > *a.timeout_us * 1000;
    try {
      ATOLL_CHECK(!late || model.spec.timeout_policy != TimeoutPolicy::kReject, kDeadlineExceeded,
                  "request to model '{}' took {} us, past its timeout of {} us", model.spec.name,
                  result.latency() / 1000, a.timeout_us.value_or(0));
      response.late = late;
      response.outputs = unpack_outputs(model.spec, model.buckets[a.bucket].program, std::move(result.outputs), a.batch,
                                        a.outputs);
    } catch (...) {
      error = std::current_exception();
    }
  }
  queued_[class_index(a.task_class)].fetch_sub(1);
  if (error) {
    stats_.record_failure(model.spec.name, a.task_class, elapsed_ns(a.received), late);
  } else {
    RequestTimings t;
    t.task_class = a.task_class;
    t.batch = a.batch;
    t.compute_input_ns = a.compute_input_ns;
    t.compute_output_ns = elapsed_ns(unpack_start);
    t.wall_ns = elapsed_ns(a.received);
    t.queue_ns = device_span(result.arrival, result.dispatch);
    t.compute_infer_ns = device_span(result.dispatch, result.finish);
    t.preemptions = a.task_class == sched::TaskClass::kRealTime ? result.preempted_tasks : result.preemptions;
    t.preemption_latency_ns = device_span(result.arrival, result.start);
    t.late = late;
    stats_.record_success(model.spec.name, t);
  }
  try {
    a.done(error, std::move(response));
  } catch (const std::exception& e) {
    // A protocol that cannot deliver its answer (the client left) must not stop the scheduler.
    fmt::print(stderr, "atoll serve: answering request '{}' failed: {}\n", printable(a.id), e.what());
  }
  finish_one(*a.slot);
}

void Engine::finish_one(Slot& slot) {
  {
    std::lock_guard work(slot.work_mutex);
    --slot.in_flight;
  }
  slot.work_changed.notify_all();
}

void Engine::shutdown() {
  std::unique_lock config(config_mutex_);
  if (shutting_down_) return;
  shutting_down_ = true;
  for (auto& slot : slots_) drain(*slot);
  for (auto& slot : slots_) stop_driver(*slot);
}

}  // namespace atl::serve
