#include "sched/colocate.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <limits>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "core/error.h"
#include "sched/cuda_exec_device.h"

namespace atl::sched {

const char* be_uploads_name(BeUploads u) {
  switch (u) {
    case BeUploads::kCopyEngine: return "copy-engine";
    case BeUploads::kSms: return "sms";
    case BeUploads::kAuto: return "auto";
  }
  return "?";
}

BeUploads be_uploads_from_name(const std::string& name) {
  for (const BeUploads u : {BeUploads::kCopyEngine, BeUploads::kSms, BeUploads::kAuto}) {
    if (name == be_uploads_name(u)) return u;
  }
  ATOLL_THROW(kInvalidArgument, "BE uploads '{}': expected copy-engine, sms or auto", name);
}

bool be_upload_on_sms(BeUploads how, int64_t bytes, bool device_can) {
  if (how != BeUploads::kAuto) return how == BeUploads::kSms;
  return device_can && bytes >= kBeSmUploadBytes;
}

namespace {

// Open-loop requests are handed to the scheduler this long before their scheduled arrival,
// which it holds them until. A BE launch burst then notices an RT arrival the moment it is due
// (not when the driver next looks), and a real-time driver's sleep jitter cannot delay arrivals.
constexpr DeviceTime kSubmitAhead = 1'000'000;
constexpr DeviceTime kProgressStep = 50'000'000;

class Driver {
 public:
  Driver(ExecDevice& device, const Workload& w) : device_(device), w_(w), scheduler_(device, w.scheduler) {
    ATOLL_CHECK(w.duration > 0, kInvalidArgument, "workload duration must be positive (got {} ns)", w.duration);
    ATOLL_CHECK(w.grace >= 0, kInvalidArgument, "grace period must not be negative (got {} ns)", w.grace);
    for (size_t i = 0; i < w.clients.size(); ++i) {
      const WorkloadClient& c = w.clients[i];
      const ClientId id = scheduler_.add_client(c.task_class, c.name, c.instance);
      ATOLL_CHECK(id == static_cast<ClientId>(i), kInternal, "client '{}' registered as {}, expected {}", c.name, id,
                  i);
      if (c.closed_loop) {
        ATOLL_CHECK(c.concurrency >= 1, kInvalidArgument, "closed-loop client '{}' needs a concurrency of at least 1",
                    c.name);
      }
    }
    streams_.resize(w.clients.size());
    for (size_t i = 0; i < w.clients.size(); ++i) {
      streams_[i].draw = w.clients[i].closed_loop ? ArrivalStream() : w.clients[i].arrivals;
      pull(i);  // the first arrival is checked before the run starts
    }
    for (size_t i = 0; i < w.clients.size(); ++i) inputs_.push_back(request_inputs(i));
    if (w.rt_sm_copies) {
      for (const WorkloadClient& c : w.clients) {
        if (c.task_class == TaskClass::kRealTime) device_.set_sm_copies(c.instance, true);
      }
    }
    for (const WorkloadClient& c : w.clients) {
      if (c.task_class == TaskClass::kBestEffort && uploads_on_sms(w.be_uploads, c)) {
        device_.set_uploads_with_first_kernel(c.instance, true);
      }
    }
  }

  bool uploads_on_sms(BeUploads how, const WorkloadClient& c) const {
    int64_t bytes = 0;
    for (const Tensor& t : c.inputs) bytes += static_cast<int64_t>(t.nbytes());
    return be_upload_on_sms(how, bytes, device_.can_copy_on_sms());
  }

  WorkloadRun run() {
    start_ = device_.now();
    end_ = start_ + w_.duration;
    for (size_t i = 0; i < w_.clients.size(); ++i) {
      if (!w_.clients[i].closed_loop) continue;
      for (int k = 0; k < w_.clients[i].concurrency; ++k) submit(i, start_);
    }
    if (w_.real_time) {
      run_real_time();
    } else {
      run_simulated();
    }
    WorkloadRun out;
    out.start = start_;
    out.end = end_;
    out.stats = scheduler_.stats();
    out.armed_rt = scheduler_.arms_rt();
    out.staged_clients = staged_clients_;
    out.events = scheduler_.events();
    std::lock_guard lock(mutex_);
    out.requests = std::move(outcomes_);
    return out;
  }

 private:
  // An open-loop client's schedule as the run reaches it: the next arrival not handed over.
  struct Stream {
    ArrivalStream draw;  // the driver's own copy: its state advances with the run
    std::optional<DeviceTime> next;
    int64_t drawn = 0;
  };

  // Draws client `client`'s next arrival, checked against the one before it.
  void pull(size_t client) {
    Stream& s = streams_[client];
    const std::optional<DeviceTime> before = s.next;
    s.next = s.draw ? s.draw() : std::nullopt;
    if (!s.next) return;
    const DeviceTime at = *s.next;
    ATOLL_CHECK(at >= 0 && at < w_.duration && (!before || at >= *before), kInvalidArgument,
                "client '{}': arrival {} at {} ns must be ascending and within the run's {} ns",
                w_.clients[client].name, s.drawn, at, w_.duration);
    ++s.drawn;
  }

  // The client whose next arrival comes first (the lowest index among equal times), or SIZE_MAX.
  size_t earliest() const {
    size_t best = SIZE_MAX;
    for (size_t i = 0; i < streams_.size(); ++i) {
      if (streams_[i].next && (best == SIZE_MAX || *streams_[i].next < *streams_[best].next)) best = i;
    }
    return best;
  }

  // What each request of client `client` carries: its inputs, written once into its instance's
  // staging memory when the workload stages inputs and no other client shares the instance
  // (requests of one client all carry the same inputs, so its outstanding requests may share it).
  std::vector<Tensor> request_inputs(size_t client) {
    const WorkloadClient& c = w_.clients[client];
    const auto shared = std::count_if(w_.clients.begin(), w_.clients.end(),
                                      [&](const WorkloadClient& o) { return o.instance == c.instance; });
    if (!w_.staged_inputs || shared > 1) return c.inputs;
    std::vector<Tensor> buffers = device_.request_buffers(c.instance);
    if (buffers.size() != c.inputs.size()) return c.inputs;
    for (size_t i = 0; i < buffers.size(); ++i) {
      // A mismatch is the scheduler's to report, on the inputs as given.
      if (buffers[i].shape() != c.inputs[i].shape() || buffers[i].dtype() != c.inputs[i].dtype()) return c.inputs;
    }
    for (size_t i = 0; i < buffers.size(); ++i) std::memcpy(buffers[i].raw(), c.inputs[i].raw(), c.inputs[i].nbytes());
    ++staged_clients_;
    return buffers;
  }

  // Records the request as outstanding (and dropped until answered); the caller holds mutex_.
  size_t reserve_locked(size_t client, DeviceTime arrival) {
    RequestOutcome o;
    o.result.client = static_cast<ClientId>(client);
    o.result.task_class = w_.clients[client].task_class;
    o.result.arrival = arrival;
    const size_t index = submitted_++;
    if (w_.on_outcome) {
      pending_.emplace(index, std::move(o));
    } else {
      outcomes_.push_back(std::move(o));
    }
    ++outstanding_;
    return index;
  }

  RequestOutcome& outcome_locked(size_t index) { return w_.on_outcome ? pending_.at(index) : outcomes_[index]; }

  // Hands every request still unanswered at the end to on_outcome, in submission order.
  void flush_pending_locked() {
    if (!w_.on_outcome) return;
    std::vector<size_t> left;
    left.reserve(pending_.size());
    for (const auto& entry : pending_) left.push_back(entry.first);
    std::sort(left.begin(), left.end());
    for (size_t index : left) w_.on_outcome(pending_.at(index), start_);
    pending_.clear();
  }

  void hand_over(size_t index, size_t client, DeviceTime arrival) {
    const WorkloadClient& c = w_.clients[client];
    const DeviceTime deadline = c.relative_deadline == kNever ? kNever : arrival + c.relative_deadline;
    scheduler_.submit(static_cast<ClientId>(client), Request{inputs_[client], arrival, deadline},
                      [this, index](std::exception_ptr error, TaskResult r) { answer(index, error, std::move(r)); });
  }

  void submit(size_t client, DeviceTime arrival) {
    size_t index;
    {
      std::lock_guard lock(mutex_);
      index = reserve_locked(client, arrival);
    }
    hand_over(index, client, arrival);
  }

  // On the scheduler's thread. A closed-loop answer reserves the next request in the same
  // critical section, so the outstanding count never reads zero while the client is still live.
  void answer(size_t index, std::exception_ptr error, TaskResult r) {
    size_t next = SIZE_MAX;
    size_t client = 0;
    DeviceTime arrival = 0;
    {
      std::lock_guard lock(mutex_);
      if (closed_) return;  // the run is over: this request stays dropped
      RequestOutcome& o = outcome_locked(index);
      r.outputs.clear();
      o.status = error ? RequestStatus::kFailed : RequestStatus::kServed;
      o.error = error;
      o.result = std::move(r);
      --outstanding_;
      client = static_cast<size_t>(o.result.client);
      arrival = o.result.finish;
      if (w_.on_outcome) {
        w_.on_outcome(o, start_);
        pending_.erase(index);
      }
      // A failing client stops: resubmitting at once would spin without the clock moving.
      if (!error && w_.clients[client].closed_loop && arrival < end_) next = reserve_locked(client, arrival);
    }
    answered_.notify_all();
    if (next != SIZE_MAX) hand_over(next, client, arrival);
  }

  void submit_due(DeviceTime horizon) {
    for (size_t c = earliest(); c != SIZE_MAX && start_ + *streams_[c].next <= horizon; c = earliest()) {
      submit(c, start_ + *streams_[c].next);
      pull(c);
    }
  }

  // When the driver must look again: the next arrival's hand-over, a progress report or the end.
  DeviceTime next_wake(DeviceTime next_report) const {
    DeviceTime wake = std::min(end_, next_report);
    if (const size_t c = earliest(); c != SIZE_MAX) wake = std::min(wake, start_ + *streams_[c].next - kSubmitAhead);
    return wake;
  }

  void report(DeviceTime now, DeviceTime& next_report) {
    if (now < next_report) return;
    if (w_.on_progress) w_.on_progress(end_ - now);
    next_report = now + kProgressStep;
  }

  int64_t outstanding() {
    std::lock_guard lock(mutex_);
    return outstanding_;
  }

  void run_simulated() {
    DeviceTime next_report = start_;
    while (device_.now() < end_) {
      report(device_.now(), next_report);
      submit_due(device_.now() + kSubmitAhead);
      scheduler_.run_until(next_wake(next_report));
    }
    submit_due(kNever);
    if (w_.grace == kNever) {
      scheduler_.run_until_idle();
    } else {
      const DeviceTime stop_at = end_ + w_.grace;
      while (outstanding() > 0 && device_.now() < stop_at) {
        scheduler_.run_until(std::min(stop_at, device_.now() + kProgressStep));
      }
    }
    std::lock_guard lock(mutex_);
    closed_ = true;
    flush_pending_locked();
  }

  void run_real_time() {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point host_start = Clock::now();
    const auto host_at = [&](DeviceTime t) { return host_start + std::chrono::nanoseconds(t - start_); };
    const auto device_now = [&] {
      return start_ + std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - host_start).count();
    };
    scheduler_.start();
    DeviceTime next_report = start_;
    for (DeviceTime now = device_now(); now < end_; now = device_now()) {
      report(now, next_report);
      submit_due(now + kSubmitAhead);
      std::this_thread::sleep_until(host_at(next_wake(next_report)));
    }
    submit_due(kNever);
    {
      std::unique_lock lock(mutex_);
      const auto all_answered = [&] { return outstanding_ == 0; };
      if (w_.grace == kNever) {
        answered_.wait(lock, all_answered);
      } else {
        answered_.wait_until(lock, host_at(end_ + w_.grace), all_answered);
      }
      closed_ = true;
      flush_pending_locked();
    }
    scheduler_.stop();
  }

  ExecDevice& device_;
  const Workload& w_;
  std::vector<Stream> streams_;               // per client (closed-loop clients: none)
  std::vector<std::vector<Tensor>> inputs_;  // per client: what its requests carry (request_inputs)
  int staged_clients_ = 0;                   // of which carry staging memory
  DeviceTime start_ = 0, end_ = 0;

  // The scheduler's thread answers while this one submits (real devices).
  std::mutex mutex_;
  std::condition_variable answered_;
  std::vector<RequestOutcome> outcomes_;                // without on_outcome: every request
  std::unordered_map<size_t, RequestOutcome> pending_;  // with on_outcome: the unanswered ones
  size_t submitted_ = 0;
  int64_t outstanding_ = 0;
  bool closed_ = false;

  // Last: destroyed first, its destructor answers leftover requests while the state above lives.
  Scheduler scheduler_;
};

}  // namespace

int64_t persist_rt_clients(ExecDevice& device, const Workload& workload, L2Persist buffer, int64_t budget_bytes) {
  if (buffer == L2Persist::kOff) return 0;
  std::vector<InstanceId> rt;
  for (const WorkloadClient& c : workload.clients) {
    if (c.task_class == TaskClass::kRealTime) rt.push_back(c.instance);
  }
  return device.set_l2_persistence(rt, buffer, budget_bytes > 0 ? budget_bytes : std::numeric_limits<int64_t>::max());
}

WorkloadRun run_workload(ExecDevice& device, const Workload& workload) {
  Driver driver(device, workload);
  return driver.run();
}

ArrivalStream arrivals_from(std::vector<DeviceTime> times) {
  return [times = std::move(times), next = size_t{0}]() mutable -> std::optional<DeviceTime> {
    if (next == times.size()) return std::nullopt;
    return times[next++];
  };
}

bool is_simulated(const ExecDevice& device) { return device.simulated_clock(); }

std::unique_ptr<ExecDevice> make_exec_device(const std::string& name, const SimExecOptions& sim) {
  if (name == "sim") return std::make_unique<SimExecDevice>(sim);
  if (name == "cuda") return make_cuda_exec_device();
  ATOLL_THROW(kInvalidArgument, "unknown scheduler device '{}' (devices: sim, cuda)", name);
}

const char* rt_order_name(RtOrder order) {
  return order == RtOrder::kDeadline ? "edf" : "fifo";
}

RtOrder rt_order_from_name(std::string_view name) {
  if (name == "fifo") return RtOrder::kArrival;
  if (name == "edf") return RtOrder::kDeadline;
  ATOLL_THROW(kInvalidArgument, "unknown RT order '{}' (orders: fifo, edf)", name);
}

void RtPath::apply(Workload& w) const {
  w.scheduler.armed_rt = armed_rt;
  w.scheduler.arrival_sentinel = arrival_sentinel;
  w.scheduler.sentinel = sentinel;
  w.scheduler.rt_single_launch = rt_single_launch;
  w.scheduler.arm_behind_running = arm_behind_running;
  w.staged_inputs = staged_inputs;
  w.rt_sm_copies = rt_sm_copies;
  w.be_uploads = be_uploads;
}

}  // namespace atl::sched
