// The engine's devices: each one's scheduler, the thread that drives it, and where models go.
#include <fmt/core.h>

#include <algorithm>

#include "core/error.h"
#include "core/text.h"
#include "serve/engine_impl.h"

namespace atl::serve {

void Engine::start_driver(Slot& slot) {
  if (!simulated_) {
    slot.scheduler->start();
    return;
  }
  {
    std::lock_guard lock(slot.work_mutex);
    slot.driver_stop = false;
  }
  // The simulated clock moves only when driven: run the scheduler while requests are in flight
  // and sleep otherwise, so an idle server takes no CPU.
  slot.driver = std::thread([&slot] {
    for (;;) {
      {
        std::unique_lock lock(slot.work_mutex);
        slot.work_changed.wait(lock, [&] { return slot.driver_stop || slot.in_flight > 0; });
        if (slot.in_flight == 0) return;
      }
      try {
        slot.scheduler->run_until_idle();
      } catch (const std::exception& e) {
        fmt::print(stderr, "atoll serve: the scheduler failed; its requests were answered with the error: {}\n", e.what());
      }
    }
  });
}

void Engine::stop_driver(Slot& slot) {
  if (!simulated_) {
    slot.scheduler->stop();
    return;
  }
  {
    std::lock_guard lock(slot.work_mutex);
    slot.driver_stop = true;
  }
  slot.work_changed.notify_all();
  if (slot.driver.joinable()) slot.driver.join();
}

std::vector<int> Engine::devices() const {
  std::vector<int> ordinals;
  for (const auto& slot : slots_) ordinals.push_back(slot->ordinal);
  return ordinals;
}

void Engine::drain(Slot& slot) {
  std::unique_lock work(slot.work_mutex);
  slot.work_changed.wait(work, [&] { return slot.in_flight == 0; });
}

void Engine::pause(Slot& slot) {
  drain(slot);
  stop_driver(slot);
  // On CUDA the stopped scheduler still holds its RT lanes' next tasks, and held work blocks
  // loading: its destructor releases them.
  slot.scheduler.reset();
}

void Engine::resume(Slot& slot) {
  rebuild_scheduler(slot);
  try {
    apply_l2_residencies(slot, nullptr);
  } catch (const std::exception& e) {
    fmt::print(stderr, "atoll serve: setting L2 residency on device {} failed: {}\n", slot.ordinal, e.what());
  }
  start_driver(slot);
}

// Called with config_mutex_ held exclusively and the slot's driver stopped: the clients of every
// model on the slot on a new scheduler (the old one's destructor releases work it held).
void Engine::rebuild_scheduler(Slot& slot) {
  slot.scheduler.reset();
  sched::SchedulerOptions so;
  so.mode = options_.mode;
  so.inflight_cap = options_.inflight_cap;
  so.rt_single_launch = options_.rt_single_launch;
  so.padding_rt_budget = options_.padding_rt_budget;
  slot.scheduler = std::make_unique<sched::Scheduler>(*slot.device, so);
  const bool admits_be = sched::mode_traits(options_.mode).admits_be;
  for (auto& [name, model] : models_) {
    if (slots_[model->slot].get() != &slot) continue;
    for (ServedModel::Bucket& b : model->buckets) {
      const LoadedPrograms& p = *slot.programs.at(program_key(model->spec, b.batch));
      const std::string client = fmt::format("{}@{}", name, b.batch);
      b.rt_client = slot.scheduler->add_client(sched::TaskClass::kRealTime, client + "/rt", p.rt_instance);
      b.be_client =
          admits_be ? slot.scheduler->add_client(sched::TaskClass::kBestEffort, client + "/be", p.be_instance) : -1;
    }
  }
}

// The device a model runs on: where it runs now if its config still allows it, else the allowed
// device with the fewest models (the first listed on a tie).
size_t Engine::place(const ModelSpec& spec, const ServedModel* previous) const {
  const auto allowed = [&](size_t s) {
    return spec.gpus.empty() || std::find(spec.gpus.begin(), spec.gpus.end(), slots_[s]->ordinal) != spec.gpus.end();
  };
  if (previous != nullptr && allowed(previous->slot)) return previous->slot;
  std::optional<size_t> best;
  size_t best_count = 0;
  for (size_t s = 0; s < slots_.size(); ++s) {
    if (!allowed(s)) continue;
    const size_t count = static_cast<size_t>(std::count_if(models_.begin(), models_.end(), [&](const auto& m) {
      return m.second->slot == s && m.second.get() != previous;
    }));
    if (!best || count < best_count) {
      best = s;
      best_count = count;
    }
  }
  if (!best) {
    std::string asked, served;
    for (int g : spec.gpus) asked += (asked.empty() ? "" : ", ") + std::to_string(g);
    for (int o : devices()) served += (served.empty() ? "" : ", ") + std::to_string(o);
    ATOLL_THROW(kInvalidArgument, "{}: model '{}' is placed on GPUs [{}] (instance_group), but the server runs on "
                "devices [{}] (--devices)", spec.source, printable(spec.name), asked, served);
  }
  return *best;
}

}  // namespace atl::serve
