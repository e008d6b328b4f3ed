#include "sched/arrival_sentinel.h"

#include <pthread.h>
#include <sched.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <tuple>

#include "core/gate_word.h"

namespace atl::sched {

namespace {

// Sleeping ends tens of microseconds late on Linux; the last stretch before an arrival spins.
constexpr DeviceTime kSpinLead = 150'000;

}  // namespace

ArrivalSentinel::ArrivalSentinel(Clock now, ReadWord read_word, std::vector<StreamId> watched, bool by_deadline,
                                 int fifo_priority, bool spin_words)
    : now_(std::move(now)),
      read_word_(std::move(read_word)),
      watched_(std::move(watched)),
      by_deadline_(by_deadline),
      fifo_priority_(fifo_priority),
      spin_words_(spin_words),
      words_(watched_.size()) {
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

void ArrivalSentinel::take_priority() {
  if (fifo_priority_ <= 0) return;
  sched_param param{};
  param.sched_priority = fifo_priority_;
  const int error = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param);
  realtime_.store(error == 0, std::memory_order_relaxed);
  static std::atomic<bool> warned{false};
  if (error != 0 && !warned.exchange(true)) {
    spdlog::warn("arrival sentinel: SCHED_FIFO priority {} refused ({}); it runs at normal priority, and RT "
                 "requests may start tens of microseconds late when other threads wake on its core",
                 fifo_priority_, std::strerror(error));
  }
}

void ArrivalSentinel::read_words() {
  for (size_t i = 0; i < watched_.size(); ++i) words_[i] = read_word_(watched_[i]);
}

void ArrivalSentinel::run() {
  take_priority();
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
    // spin_words: the words are read again while a reading (as long as the last one took) ends
    // before the arrival; the last stretch only watches the clock, so the arrival is seen at once.
    DeviceTime reached = now_();
    DeviceTime read_cost = 0;
    bool words_read = false;
    while (reached < next.arrival && !stopping_.load(std::memory_order_relaxed)) {
      if (spin_words_ && next.arrival - reached > read_cost) {
        read_words();
        words_read = true;
        const DeviceTime after = now_();
        read_cost = after - reached;
        reached = after;
        continue;
      }
      cpu_relax();
      reached = now_();
    }
    try_open(next, reached, words_read);
    lock.lock();
  }
}

void ArrivalSentinel::try_open(const Expected& e, DeviceTime reached, bool words_read) {
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
  if (!words_read) read_words();  // not spin_words, or reached after the arrival
  openers_[static_cast<size_t>(e.client)]->open();
  opening_.words = words_;  // read before the open; copied after it, off the RT request's path
  opening_.at = now_();
  state_.store(kOpened, std::memory_order_seq_cst);
}

}  // namespace atl::sched
