// The public Scheduler: clients, submission, and the two ways to drive its steps (the caller's
// thread, deterministic on the simulator, or a thread of its own beside the arrival sentinel).
// The steps themselves are in scheduler.cpp.
#include <spdlog/spdlog.h>

#include <utility>

#include "core/error.h"
#include "sched/scheduler_impl.h"

namespace atl::sched {

Scheduler::Scheduler(ExecDevice& device, SchedulerOptions options)
    : impl_(std::make_unique<Impl>(device, options)), device_(device), options_(options) {}

Scheduler::~Scheduler() {
  stop_requested_ = true;
  if (worker_.joinable()) worker_.join();
  impl_->stop_sentinel();
  impl_->fail_all(
      make_scheduler_error(ErrorCode::kInternal, "the scheduler was destroyed before the request finished"));
  try {
    impl_->disarm();
  } catch (const std::exception& e) {
    spdlog::error("scheduler: releasing held RT work failed: {}", e.what());
  }
}

ClientId Scheduler::add_client(TaskClass task_class, std::string name, InstanceId instance) {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "clients must be added before the scheduler thread starts");
  return impl_->add_client(task_class, std::move(name), instance);
}

std::future<TaskResult> Scheduler::submit(ClientId client, Request request) {
  std::future<TaskResult> future;
  impl_->enqueue(client, std::move(request), nullptr, &future);
  return future;
}

uint64_t Scheduler::submit(ClientId client, Request request, Completion done) {
  ATOLL_CHECK(done != nullptr, kInvalidArgument, "submit needs a completion callback");
  return impl_->enqueue(client, std::move(request), std::move(done), nullptr);
}

void Scheduler::poll() {
  impl_->poll();
}

bool Scheduler::arms_rt() const {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "whether RT tasks are armed is read after stop()");
  return impl_->armed;
}

// An error that ends a run answers every request still waiting with it, then propagates.
template <typename Step>
void Scheduler::drive(Step step) {
  try {
    step();
  } catch (...) {
    impl_->fail_all(std::current_exception());
    throw;
  }
}

void Scheduler::run_until(DeviceTime time) {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "run_until while the scheduler runs on its own thread");
  drive([&] {
    for (;;) {
      impl_->poll();
      if (device_.now() >= time) return;
      device_.wait_until(std::min(time, impl_->next_arrival()));
    }
  });
}

void Scheduler::run_until_idle() {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "run_until_idle while the scheduler runs on its own thread");
  drive([&] {
    for (;;) {
      impl_->poll();
      if (!impl_->has_work()) return;
      const DeviceTime next = impl_->next_arrival();
      ATOLL_CHECK(impl_->in_flight() || next != kNever, kInternal, "scheduler stalled in mode {}: {}",
                  mode_name(options_.mode), impl_->describe_wait());
      device_.wait_until(next);
    }
  });
}

void Scheduler::start() {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "the scheduler thread is already running");
  stop_requested_ = false;
  impl_->start_sentinel();
  worker_ = std::thread([this] {
    try {
      device_.bind_thread();
      while (!stop_requested_) {
        impl_->poll();
        device_.wait_until(std::min(impl_->next_arrival(), device_.now() + options_.idle_poll_ns));
      }
    } catch (...) {
      impl_->thread_error = std::current_exception();
      impl_->fail_all(impl_->thread_error);
    }
  });
}

void Scheduler::stop() {
  stop_requested_ = true;
  if (worker_.joinable()) worker_.join();
  impl_->stop_sentinel();
  if (std::exception_ptr e = std::exchange(impl_->thread_error, nullptr)) std::rethrow_exception(e);
}

SchedulerStats Scheduler::stats() const {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "scheduler statistics are read after stop()");
  return impl_->stats;
}

const std::vector<SchedulerEvent>& Scheduler::events() const {
  ATOLL_CHECK(!worker_.joinable(), kInvalidArgument, "scheduler events are read after stop()");
  return impl_->events;
}

}  // namespace atl::sched
