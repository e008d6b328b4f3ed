#include "sched/arrival_sentinel.h"

#include <algorithm>
#include <chrono>
#include <tuple>

namespace atl::sched {

namespace {

// Sleeping ends tens of microseconds late on Linux; the last stretch before an arrival spins.
constexpr DeviceTime kSpinLead = 150'000;

void cpu_relax() {
#if defined(__x86_64__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

ArrivalSentinel::ArrivalSentinel(Clock now, ReadWord read_word, std::vector<StreamId> watched, bool by_deadline)
    : now_(std::move(now)), read_word_(std::move(read_word)), watched_(std::move(watched)), by_deadline_(by_deadline) {
  thread_ = std::thread([this] { run(); });
}

ArrivalSentinel::~ArrivalSentinel() {
  stop();
}

bool ArrivalSentinel::later(const Expected& a, const Expected& b) const {
  const DeviceTime da = by_deadline_ ? a.deadline : 0, db = by_deadline_ ? b.deadline : 0;
  return std::tie(a.arrival, da, a.task) > std::tie(b.arrival, db, b.task);
}

void ArrivalSentinel::expect(DeviceTime arrival, DeviceTime deadline, uint64_t task, int client) {
  {
    std::lock_guard lock(mutex_);
    heap_.push_back({arrival, deadline, task, client});
    std::push_heap(heap_.begin(), heap_.end(), [this](const Expected& a, const Expected& b) { return later(a, b); });
  }
  wake_.notify_one();
}

void ArrivalSentinel::publish(std::vector<std::optional<GateOpener>> openers, DeviceTime seen_through) {
  if (!closed()) return;
  openers_ = std::move(openers);
  seen_through_ = seen_through;
  state_.store(kReady, std::memory_order_seq_cst);
}

std::optional<ArrivalSentinel::Opening> ArrivalSentinel::close() {
  for (;;) {
    uint32_t s = kReady;
    if (state_.compare_exchange_strong(s, kClosed, std::memory_order_seq_cst) || s == kClosed) return std::nullopt;
    if (s == kOpened) break;
    cpu_relax();  // claimed: opening, or handing the claim back (ready again)
  }
  Opening o = std::move(opening_);
  opening_ = Opening{};
  state_.store(kClosed, std::memory_order_seq_cst);
  return o;
}

void ArrivalSentinel::stop() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ArrivalSentinel::run() {
  const auto cmp = [this](const Expected& a, const Expected& b) { return later(a, b); };
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (heap_.empty()) {
      wake_.wait(lock);
      continue;
    }
    const Expected next = heap_.front();
    const DeviceTime wait = next.arrival - now_();
    if (wait > kSpinLead) {
      // An earlier expectation or stop() wakes it sooner.
      wake_.wait_for(lock, std::chrono::nanoseconds(wait - kSpinLead));
      continue;
    }
    std::pop_heap(heap_.begin(), heap_.end(), cmp);
    heap_.pop_back();
    lock.unlock();
    DeviceTime reached = now_();
    while (reached < next.arrival && !stopping_.load(std::memory_order_relaxed)) {
      cpu_relax();
      reached = now_();
    }
    try_open(next, reached);
    lock.lock();
  }
}

void ArrivalSentinel::try_open(const Expected& e, DeviceTime reached) {
  // Claim first: only a claim keeps the scheduler from closing and publishing new openers_
  // while they are read. One that opens nothing hands the claim back.
  uint32_t s = kReady;
  if (!state_.compare_exchange_strong(s, kClaimed, std::memory_order_seq_cst)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const bool openable = e.arrival > seen_through_ && e.client >= 0 && static_cast<size_t>(e.client) < openers_.size() &&
                        openers_[static_cast<size_t>(e.client)];
  if (!openable) {
    state_.store(kReady, std::memory_order_seq_cst);
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  opening_.claimed = now_();
  opening_.reached = reached;
  opening_.task = e.task;
  opening_.client = e.client;
  opening_.words.resize(watched_.size());
  for (size_t i = 0; i < watched_.size(); ++i) opening_.words[i] = read_word_(watched_[i]);
  openers_[static_cast<size_t>(e.client)]->open();
  opening_.at = now_();
  state_.store(kOpened, std::memory_order_seq_cst);
}

}  // namespace atl::sched
