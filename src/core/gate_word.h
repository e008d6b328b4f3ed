#pragma once
// A gate word: a host-mapped counter that device-side waits compare against (wait until the word
// reaches a hold's token). Tokens only grow, so two threads may open the same holds: each raises
// the word to its token and neither can lower it (a stale opener's smaller token is a no-op).
// Comparisons are modulo 2^32, so the word wraps safely while fewer than 2^31 holds are pending.
#include <atomic>
#include <cstdint>

namespace atl {

inline void raise_gate_word(uint32_t* word, uint32_t token) {
  std::atomic_ref<uint32_t> w(*word);
  uint32_t seen = w.load(std::memory_order_relaxed);
  while (static_cast<int32_t>(token - seen) > 0 &&
         !w.compare_exchange_weak(seen, token, std::memory_order_release, std::memory_order_relaxed)) {
  }
  // The store must leave the core now, not when the write buffer drains on its own.
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

// The pause of a thread spinning on such a word (or another host-mapped one): it frees the core's
// pipeline for its sibling hyperthread and costs the spin tens of nanoseconds.
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace atl
