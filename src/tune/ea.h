#pragma once
// AutoScratch-EA: regularized evolution (Real et al., AAAI'19). A population of configs ages in
// a queue; each step samples a tournament, mutates its best by flipping one random bit, appends
// the child and removes the oldest member, not the worst, so that a config that looked good
// once through measurement noise cannot stay forever.
#include <deque>

#include "tune/tuner.h"

namespace atl::tune {

struct Member {
  Residency config;
  double cost = 0;
};

class RegularizedEvolution {
 public:
  // Fills the population with random configs (one step each), as far as the budget allows.
  explicit RegularizedEvolution(Search& s);
  // One generation: false when the budget is spent or `patience` steps brought nothing better.
  bool step();
  const std::deque<Member>& population() const { return population_; }

 private:
  Search& s_;
  std::deque<Member> population_;  // oldest first
  double best_cost_;
  int64_t since_better_ = 0;
};

}  // namespace atl::tune
