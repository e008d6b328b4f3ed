#pragma once
// The arrival sentinel: a thread that opens an idle armed RT lane at the instant its request
// arrives. The scheduler's thread reacts to an arrival between two BE launches, and one BE
// launch holds it for 6-12 us of host time (DISB C on the H200: the reaction's p99 was 20 us,
// the whole of reset's RT p99 gap over rt-only). The sentinel does only what needs no
// scheduler state: it reads the BE streams' completion words (so the scheduler later knows
// which launches ended before the flag went up, as enter_rt_mode does), then raises the lane's
// gate word, which releases the flag write, the upload and the kernels held there. The
// scheduler takes the opening over (close()) at its next look and does the bookkeeping of
// entering RT mode and starting the task.
//
// Two options (SentinelOptions), both unmeasured on a GPU so far. spin_words reads the words
// while it spins towards the arrival, the last reading kept, so at the arrival only the claim and
// the gate store remain: reading them after the claim took 2-2.5 us (DISB C, six streams, H200).
// A launch that ends between the last reading and the gate counts as unfinished, which costs a
// rerun of an idempotent kernel, as any launch ending after the flag does. fifo_priority asks
// for SCHED_FIFO (real-time) priority: at normal priority a thread woken on its core preempts
// the spinning sentinel, which showed as 13-30 us tails in reaching the arrival and in the reads
// (DISB C, the run where other processes used 0.9% of the host).
//
// The handshake is one state word. The scheduler publishes openers (one per RT client) only
// while no RT task is queued or running, moving it from closed to ready; at an expected
// arrival the sentinel moves ready to claimed (back to ready where that client has no opener
// or the request is the scheduler's), reads the words, opens, and stores opened; the
// scheduler moves ready back to closed before it starts an RT task or arms a lane itself, or
// takes an opening (claimed or opened) over. Exactly one of them therefore starts each task.
// Only requests whose inputs already lie in staging memory are expected (opening stages
// nothing), and only ones that arrive after the scheduler's last look at arrivals before
// publishing (earlier ones are its own).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "sched/exec_device.h"

namespace atl::sched {

class ArrivalSentinel {
 public:
  struct Opening {
    uint64_t task = 0;
    int client = -1;
    // Where its reaction (arrival -> at) went: reached - arrival is how late the thread got to the
    // arrival (woken late, or busy with an earlier one), claimed - reached the handshake, and
    // at - claimed the completion-word reads and the gate store.
    DeviceTime reached = 0;       // the sentinel's first clock reading at or past the arrival
    DeviceTime claimed = 0;       // the claim held
    DeviceTime at = 0;            // when the lane was opened
    std::vector<uint32_t> words;  // each watched stream's completion word, read before opening
  };
  using Clock = std::function<DeviceTime()>;
  using ReadWord = std::function<uint32_t(StreamId)>;

  // `watched`: the streams whose completion words an opening records, in the caller's order.
  // `by_deadline`: of requests arriving at the same instant, the earliest deadline goes first.
  // `fifo_priority` above 0: the thread's SCHED_FIFO priority; refused (no CAP_SYS_NICE), it
  // warns once per process and runs at normal priority (realtime() says which). `spin_words`:
  // the words are read while it spins towards an arrival, else after the claim.
  ArrivalSentinel(Clock now, ReadWord read_word, std::vector<StreamId> watched, bool by_deadline,
                  int fifo_priority = 0, bool spin_words = false);
  ~ArrivalSentinel();
  ArrivalSentinel(const ArrivalSentinel&) = delete;
  ArrivalSentinel& operator=(const ArrivalSentinel&) = delete;

  // Any thread: request `task` of `client` arrives at `arrival`.
  void expect(DeviceTime arrival, DeviceTime deadline, uint64_t task, int client);

  // ---- the scheduler's thread ----
  // From closed to ready: the sentinel may open client c's lane with openers[c] for a request
  // arriving after `seen_through`. No-op unless closed.
  void publish(std::vector<std::optional<GateOpener>> openers, DeviceTime seen_through);
  bool closed() const { return state_.load(std::memory_order_seq_cst) == kClosed; }
  // Whether an opening is being made or waits to be taken over.
  bool claimed() const {
    const uint32_t s = state_.load(std::memory_order_seq_cst);
    return s == kClaimed || s == kOpened;
  }
  // Back to closed; the opening made since publish, if any (waits the microsecond it takes).
  std::optional<Opening> close();
  // Ends the thread; an opening it made is still there for close().
  void stop();

  uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }
  // Whether the thread runs at the SCHED_FIFO priority asked for (false until it has started).
  bool realtime() const { return realtime_.load(std::memory_order_relaxed); }

 private:
  enum : uint32_t { kClosed, kReady, kClaimed, kOpened };
  struct Expected {
    DeviceTime arrival, deadline;
    uint64_t task;
    int client;
  };
  bool later(const Expected& a, const Expected& b) const;
  void run();
  void take_priority();
  void read_words();
  void try_open(const Expected& e, DeviceTime reached, bool words_read);

  Clock now_;
  ReadWord read_word_;
  const std::vector<StreamId> watched_;
  const bool by_deadline_;
  const int fifo_priority_;
  const bool spin_words_;
  std::atomic<bool> realtime_{false};
  std::vector<uint32_t> words_;  // the sentinel thread's last reading, one per watched stream

  std::atomic<uint32_t> state_{kClosed};
  // Written by the scheduler while closed, read by the sentinel while ready.
  std::vector<std::optional<GateOpener>> openers_;
  DeviceTime seen_through_ = 0;
  Opening opening_;  // written while claimed, read by close() once opened
  std::atomic<uint64_t> skipped_{0};

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Expected> heap_;  // by later(): the next arrival at the front
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace atl::sched
