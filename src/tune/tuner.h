#pragma once
// AutoScratch's residency search: optimizers that drive only the l2::Evaluator interface under a
// budget of evaluations (steps) and wall time, seeded. Whatever the optimizer finds, the answer is
// never worse than no residency: "none" is the first step, and the best config is evaluated again
// against it at the end.
#include <cstdint>
#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/rng.h"
#include "l2/evaluator.h"

namespace atl::tune {

using l2::Fitness;
using l2::Residency;

enum class Optimizer { kEa, kPpo, kRandom, kHeuristic };
const char* optimizer_name(Optimizer o);               // "ea", "ppo", "random", "heuristic"
Optimizer optimizer_from_name(std::string_view name);  // throws kInvalidArgument naming the choices

struct Progress {
  int64_t step = 0;  // evaluations so far
  int64_t max_steps = 0;
  double best_cost = 0;
  double none_cost = 0;
  double elapsed_s = 0;
  double left_s = -1;  // -1 without a time budget
};

struct TuneOptions {
  int64_t max_steps = 20000;  // evaluations, "none" included
  double max_seconds = 0;     // 0: no time limit (then a seed alone fixes the result)
  uint64_t seed = 1;
  // Regularized evolution (AutoScratch-EA).
  int population = 100;
  int sample = 25;
  int64_t patience = 2000;                        // EA stops after this many steps without a better config
  int heuristic_points = 11;                      // budget fractions 0, 0.1, ..., 1
  std::function<void(const Progress&)> progress;  // after every evaluation
};

struct StepRecord {
  int64_t step = 0;
  double cost = 0;
  double best_cost = 0;
  double elapsed_s = 0;
};

struct TuneResult {
  std::string optimizer;
  std::string evaluator;
  std::string cost_unit;
  uint64_t seed = 0;
  int64_t steps = 0;
  double seconds = 0;
  bool early_stop = false;        // the optimizer ended inside the budget (EA patience, the heuristic sweep)
  Residency best;                 // never worse than none on the final re-evaluation
  Fitness best_fitness;           // from the final re-evaluation
  Fitness none_fitness;           // from the final re-evaluation
  double searched_best_cost = 0;  // what the search saw for its best config
  bool fell_back_to_none = false;
  std::vector<StepRecord> log;
};
void to_json(nlohmann::json& j, const TuneResult& r);
void save_log(const TuneResult& r, const std::string& path);  // throws kIo

// The budget, the step log and the best config seen, shared by every optimizer.
class Search {
 public:
  Search(l2::Evaluator& evaluator, const TuneOptions& options);
  bool done() const;  // steps or time spent
  // One step: evaluates and records r. Callers check done() first.
  double evaluate(const Residency& r);
  int64_t slices() const { return slices_; }
  int64_t steps() const { return static_cast<int64_t>(log_.size()); }
  const Residency& best() const { return best_; }
  double best_cost() const { return best_cost_; }
  double none_cost() const { return log_.empty() ? 0.0 : log_.front().cost; }
  double elapsed_s() const;
  Rng& rng() { return rng_; }
  l2::Evaluator& evaluator() { return evaluator_; }
  const TuneOptions& options() const { return options_; }
  std::vector<StepRecord>& log() { return log_; }

 private:
  l2::Evaluator& evaluator_;
  const TuneOptions& options_;
  int64_t slices_;
  Rng rng_;
  double start_s_;
  Residency best_;
  double best_cost_ = 0;
  std::vector<StepRecord> log_;
};

// Uniform in [0, n).
int64_t uniform_index(Rng& rng, int64_t n);
// A random config: a count uniform in [0, n], then that many distinct slices. Uniform bits would
// almost never propose the sparse configs a set-aside of a few slices allows.
Residency random_residency(Rng& rng, int64_t n);

// Runs the optimizer on a Search that starts with "none", then re-evaluates the best config and
// "none" and keeps "none" unless the best is strictly cheaper.
TuneResult tune(l2::Evaluator& evaluator, Optimizer optimizer, const TuneOptions& options);

// The optimizers (one file each); each returns when done() or when it stops early.
void run_random(Search& s);
void run_heuristic(Search& s);
void run_ea(Search& s);
void run_ppo(Search& s);

}  // namespace atl::tune
