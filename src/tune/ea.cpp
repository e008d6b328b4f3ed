#include "tune/ea.h"

#include <numeric>

#include "core/error.h"

namespace atl::tune {

RegularizedEvolution::RegularizedEvolution(Search& s) : s_(s), best_cost_(s.best_cost()) {
  const TuneOptions& o = s.options();
  ATOLL_CHECK(o.population >= 1 && o.sample >= 1 && o.sample <= o.population && o.patience >= 1, kInvalidArgument,
              "EA: need 1 <= sample <= population and patience >= 1 (got sample {}, population {}, patience {})",
              o.sample, o.population, o.patience);
  while (static_cast<int>(population_.size()) < o.population && !s.done()) {
    Residency r = random_residency(s.rng(), s.slices());
    const double cost = s.evaluate(r);
    population_.push_back({std::move(r), cost});
  }
}

bool RegularizedEvolution::step() {
  const TuneOptions& o = s_.options();
  if (s_.done() || since_better_ >= o.patience || static_cast<int>(population_.size()) < o.population) return false;
  // Tournament: `sample` distinct members (a partial Fisher-Yates shuffle of the indices).
  std::vector<size_t> idx(population_.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  size_t parent = idx[0];
  for (int i = 0; i < o.sample; ++i) {
    const auto j = static_cast<size_t>(i + uniform_index(s_.rng(), static_cast<int64_t>(idx.size()) - i));
    std::swap(idx[static_cast<size_t>(i)], idx[j]);
    const size_t m = idx[static_cast<size_t>(i)];
    if (i == 0 || population_[m].cost < population_[parent].cost) parent = m;
  }
  Residency child = population_[parent].config;
  const auto bit = static_cast<size_t>(uniform_index(s_.rng(), s_.slices()));
  child[bit] = !child[bit];
  const double cost = s_.evaluate(child);
  population_.push_back({std::move(child), cost});
  population_.pop_front();
  if (s_.best_cost() < best_cost_) {
    best_cost_ = s_.best_cost();
    since_better_ = 0;
  } else {
    ++since_better_;
  }
  return true;
}

void run_ea(Search& s) {
  RegularizedEvolution ea(s);
  while (ea.step()) {
  }
}

}  // namespace atl::tune
