#include "tune/tuner.h"

#include <chrono>
#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"

namespace atl::tune {

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

nlohmann::json fitness_json(const Fitness& f) {
  nlohmann::json j = {{"cost", f.cost}};
  if (f.dram_bytes >= 0) j["dram_bytes"] = f.dram_bytes;
  if (f.time_ms >= 0) j["time_ms"] = f.time_ms;
  return j;
}

}  // namespace

const char* optimizer_name(Optimizer o) {
  switch (o) {
    case Optimizer::kEa:
      return "ea";
    case Optimizer::kPpo:
      return "ppo";
    case Optimizer::kRandom:
      return "random";
    case Optimizer::kHeuristic:
      return "heuristic";
  }
  return "?";
}

Optimizer optimizer_from_name(std::string_view name) {
  for (Optimizer o : {Optimizer::kEa, Optimizer::kPpo, Optimizer::kRandom, Optimizer::kHeuristic}) {
    if (name == optimizer_name(o)) return o;
  }
  ATOLL_THROW(kInvalidArgument, "unknown optimizer '{}'; choose ea, ppo, random or heuristic", name);
}

void to_json(nlohmann::json& j, const TuneResult& r) {
  std::vector<int> best;
  for (size_t i = 0; i < r.best.size(); ++i) {
    if (r.best[i]) best.push_back(static_cast<int>(i));
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const StepRecord& s : r.log) {
    steps.push_back({{"step", s.step}, {"cost", s.cost}, {"best_cost", s.best_cost}, {"elapsed_s", s.elapsed_s}});
  }
  j = {{"optimizer", r.optimizer},
       {"evaluator", r.evaluator},
       {"cost_unit", r.cost_unit},
       {"seed", r.seed},
       {"steps", r.steps},
       {"seconds", r.seconds},
       {"early_stop", r.early_stop},
       {"slices", r.best.size()},
       {"best_slices", best},
       {"best", fitness_json(r.best_fitness)},
       {"none", fitness_json(r.none_fitness)},
       {"searched_best_cost", r.searched_best_cost},
       {"fell_back_to_none", r.fell_back_to_none},
       {"log", steps}};
}

void save_log(const TuneResult& r, const std::string& path) {
  write_file_atomic(path, nlohmann::json(r).dump(1) + "\n");
}

Search::Search(l2::Evaluator& evaluator, const TuneOptions& options)
    : evaluator_(evaluator),
      options_(options),
      slices_(evaluator.slices()),
      rng_(options.seed),
      start_s_(now_s()),
      best_(static_cast<size_t>(slices_), false) {
  ATOLL_CHECK(options.max_steps >= 1 && options.max_seconds >= 0.0, kInvalidArgument,
              "tune budget: need at least one step and a non-negative time (got {} steps, {} s)", options.max_steps,
              options.max_seconds);
  ATOLL_CHECK(slices_ >= 1, kInvalidArgument, "nothing to tune: {} has no arena slices", evaluator.name());
}

double Search::elapsed_s() const {
  return now_s() - start_s_;
}

bool Search::done() const {
  return steps() >= options_.max_steps || (options_.max_seconds > 0 && elapsed_s() >= options_.max_seconds);
}

double Search::evaluate(const Residency& r) {
  const double cost = evaluator_.evaluate(r).cost;
  if (log_.empty() || cost < best_cost_) {
    best_ = r;
    best_cost_ = cost;
  }
  log_.push_back({steps() + 1, cost, best_cost_, elapsed_s()});
  if (options_.progress) {
    const double left = options_.max_seconds > 0 ? std::max(0.0, options_.max_seconds - elapsed_s()) : -1.0;
    options_.progress({steps(), options_.max_steps, best_cost_, none_cost(), elapsed_s(), left});
  }
  return cost;
}

int64_t uniform_index(Rng& rng, int64_t n) {
  return static_cast<int64_t>(rng.next_u64() % static_cast<uint64_t>(n));
}

Residency random_residency(Rng& rng, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  const int64_t k = uniform_index(rng, n + 1);
  Residency r(static_cast<size_t>(n), false);
  for (int64_t i = 0; i < k; ++i) {  // the first k of a Fisher-Yates shuffle
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(i + uniform_index(rng, n - i))]);
    r[static_cast<size_t>(order[static_cast<size_t>(i)])] = true;
  }
  return r;
}

TuneResult tune(l2::Evaluator& evaluator, Optimizer optimizer, const TuneOptions& options) {
  Search s(evaluator, options);
  const Residency none(static_cast<size_t>(s.slices()), false);
  s.evaluate(none);
  switch (optimizer) {
    case Optimizer::kEa:
      run_ea(s);
      break;
    case Optimizer::kPpo:
      run_ppo(s);
      break;
    case Optimizer::kRandom:
      run_random(s);
      break;
    case Optimizer::kHeuristic:
      run_heuristic(s);
      break;
  }
  TuneResult r;
  r.optimizer = optimizer_name(optimizer);
  r.evaluator = evaluator.name();
  r.cost_unit = evaluator.cost_unit();
  r.seed = options.seed;
  r.steps = s.steps();
  r.early_stop = s.steps() < options.max_steps && !(options.max_seconds > 0 && s.elapsed_s() >= options.max_seconds);
  r.searched_best_cost = s.best_cost();
  // A measured best may have been a lucky sample: both sides are evaluated again, after the search.
  r.none_fitness = evaluator.evaluate(none);
  r.best = none;
  r.best_fitness = r.none_fitness;
  if (s.best() != none) {
    const Fitness best = evaluator.evaluate(s.best());
    if (best.cost < r.none_fitness.cost) {
      r.best = s.best();
      r.best_fitness = best;
    }
  }
  r.fell_back_to_none = r.best == none && s.best() != none;
  r.seconds = s.elapsed_s();
  r.log = std::move(s.log());
  return r;
}

}  // namespace atl::tune
