// GateStampWatcher on plain host words standing in for a lane's gate word and the two words the
// device writes: delays from the store to each, on the host's clock.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "core/gate_word.h"
#include "sched/gate_stamps.h"

namespace atl::sched {
namespace {

using namespace std::chrono_literals;

void store(uint32_t& word, uint32_t value) {
  std::atomic_ref<uint32_t>(word).store(value, std::memory_order_release);
}

// Opens up to `token` and waits until the watcher's thread has seen it: on a busy host it may wait
// for a core, and a device word seen in the same pass as its store would read as no delay.
void wait_for_a_full_pass(const GateStampWatcher& w) {
  const uint64_t before = w.passes();
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (w.passes() < before + 2 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

void open_seen(GateStampWatcher& w, uint32_t& gate, uint32_t token) {
  raise_gate_word(&gate, token);
  wait_for_a_full_pass(w);
}

// Takes samples until `passed` and `flag` of them have come, or a generous limit passes.
GateStamps take_at_least(GateStampWatcher& w, size_t passed, size_t flag) {
  GateStamps all;
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until && (all.passed_us.size() < passed || all.flag_us.size() < flag)) {
    GateStamps s = w.take();
    all.passed_us.insert(all.passed_us.end(), s.passed_us.begin(), s.passed_us.end());
    all.flag_us.insert(all.flag_us.end(), s.flag_us.begin(), s.flag_us.end());
    std::this_thread::sleep_for(1ms);
  }
  return all;
}

TEST(GateStamps, DelaysRunFromTheStoreToEachDeviceWord) {
  alignas(64) uint32_t gate = 0, passed = 0, landed = 0;
  GateStampWatcher w;
  w.watch(&gate, &passed, &landed);
  open_seen(w, gate, 1);
  std::this_thread::sleep_for(2ms);
  store(passed, 1);
  std::this_thread::sleep_for(3ms);
  store(landed, 1);
  const GateStamps s = take_at_least(w, 1, 1);
  ASSERT_EQ(s.passed_us.size(), 1u);
  ASSERT_EQ(s.flag_us.size(), 1u);
  // Sleeps last at least as long as asked, and a word is seen at or after its store; how much
  // later is the host's business.
  EXPECT_GE(s.passed_us[0], 2000.0);
  EXPECT_GE(s.flag_us[0], 5000.0);
  EXPECT_TRUE(w.take().passed_us.empty()) << "taken samples are gone";
}

TEST(GateStamps, OneStoreOpeningTwoHoldsTimesBoth) {
  alignas(64) uint32_t gate = 0, passed = 0, landed = 0;
  GateStampWatcher w;
  w.watch(&gate, &passed, &landed);
  open_seen(w, gate, 2);
  std::this_thread::sleep_for(1ms);
  store(passed, 1);
  wait_for_a_full_pass(w);  // a word overwritten before a pass reads it is not seen
  std::this_thread::sleep_for(2ms);
  store(passed, 2);
  const GateStamps s = take_at_least(w, 2, 0);
  ASSERT_EQ(s.passed_us.size(), 2u);
  EXPECT_GE(s.passed_us[1], s.passed_us[0]) << "both measured from the same store";
}

TEST(GateStamps, WordsForTokensNeverSeenOpenedGiveNoSample) {
  alignas(64) uint32_t gate = 5, passed = 5, landed = 5;
  GateStampWatcher w;
  w.watch(&gate, &passed, &landed);  // tokens up to 5 were there before: not counted
  store(passed, 7);                  // a token whose opening the watcher never saw
  store(landed, 4);
  wait_for_a_full_pass(w);
  open_seen(w, gate, 6);
  std::this_thread::sleep_for(1ms);
  store(landed, 6);
  const GateStamps s = take_at_least(w, 0, 1);
  EXPECT_TRUE(s.passed_us.empty());
  ASSERT_EQ(s.flag_us.size(), 1u) << "only token 6's opening was seen";
  EXPECT_GE(s.flag_us[0], 1000.0);
}

TEST(GateStamps, LanesPastTheLimitAreNotWatched) {
  std::vector<uint32_t> words(3 * (GateStampWatcher::kMaxLanes + 1), 0);
  GateStampWatcher w;
  for (size_t i = 0; i <= GateStampWatcher::kMaxLanes; ++i) w.watch(&words[3 * i], &words[3 * i + 1], &words[3 * i + 2]);
  uint32_t* last = &words[3 * GateStampWatcher::kMaxLanes];
  raise_gate_word(last, 1);
  store(last[1], 1);
  uint32_t* first = &words[0];
  open_seen(w, *first, 1);
  store(first[1], 1);
  const GateStamps s = take_at_least(w, 1, 0);
  std::this_thread::sleep_for(20ms);
  EXPECT_EQ(s.passed_us.size() + w.take().passed_us.size(), 1u) << "the first lane only";
}

}  // namespace
}  // namespace atl::sched
