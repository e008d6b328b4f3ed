#include "tune/tuner.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "toy_evaluator.h"
#include "tune/ea.h"

namespace atl::tune {
namespace {

using testing::ToyEvaluator;

const std::vector<int> kGood = {2, 5, 11, 17, 23, 29};

TuneOptions budget(int64_t steps, uint64_t seed = 7) {
  TuneOptions o;
  o.max_steps = steps;
  o.seed = seed;
  return o;
}

std::vector<double> costs(const TuneResult& r) {
  std::vector<double> c;
  for (const StepRecord& s : r.log) c.push_back(s.cost);
  return c;
}

TEST(Tune, RandomResidencyIsSeededAndSpansDensities) {
  Rng a(3), b(3);
  int64_t min_count = 64, max_count = 0;
  for (int i = 0; i < 200; ++i) {
    const Residency r = random_residency(a, 64);
    EXPECT_EQ(r, random_residency(b, 64));
    const auto count = std::count(r.begin(), r.end(), true);
    min_count = std::min<int64_t>(min_count, count);
    max_count = std::max<int64_t>(max_count, count);
  }
  EXPECT_LE(min_count, 4);
  EXPECT_GE(max_count, 60);
}

TEST(Tune, NoneIsTheFirstStepAndTheBudgetHolds) {
  ToyEvaluator ev(32, kGood);
  const TuneResult r = tune(ev, Optimizer::kRandom, budget(50));
  ASSERT_EQ(r.log.size(), 50u);
  EXPECT_EQ(r.steps, 50);
  EXPECT_EQ(r.log[0].cost, 100);
  EXPECT_EQ(r.none_fitness.cost, 100);
  EXPECT_LE(r.best_fitness.cost, 100);
  EXPECT_EQ(ev.evaluations, 50 + 2);  // the search, then best and none again
  for (size_t i = 1; i < r.log.size(); ++i) EXPECT_LE(r.log[i].best_cost, r.log[i - 1].best_cost);
  const nlohmann::json j = r;
  EXPECT_EQ(j["optimizer"], "random");
  EXPECT_EQ(j["log"].size(), 50u);
  EXPECT_EQ(j["none"]["cost"], 100);
}

TEST(Tune, OptimizerNames) {
  for (Optimizer o : {Optimizer::kEa, Optimizer::kPpo, Optimizer::kRandom, Optimizer::kHeuristic}) {
    EXPECT_EQ(optimizer_from_name(optimizer_name(o)), o);
  }
  EXPECT_THROW(optimizer_from_name("sgd"), Error);
}

TEST(Tune, EaFindsTheOptimumAndRepeatsForASeed) {
  ToyEvaluator ev(32, kGood);
  const TuneResult r = tune(ev, Optimizer::kEa, budget(4000));
  EXPECT_EQ(r.best_fitness.cost, ev.optimum());
  EXPECT_EQ(r.best, ev.optimal());
  ToyEvaluator again(32, kGood);
  EXPECT_EQ(costs(tune(again, Optimizer::kEa, budget(4000))), costs(r));
}

TEST(Tune, EaKeepsItsPopulationSizeAndKillsTheOldest) {
  ToyEvaluator ev(32, kGood);
  const TuneOptions o = budget(1000);
  Search s(ev, o);
  s.evaluate(Residency(32, false));
  RegularizedEvolution ea(s);
  ASSERT_EQ(ea.population().size(), 100u);
  EXPECT_EQ(s.steps(), 101);
  for (int gen = 0; gen < 20; ++gen) {
    const std::deque<Member> before = ea.population();
    ASSERT_TRUE(ea.step());
    const std::deque<Member>& after = ea.population();
    ASSERT_EQ(after.size(), 100u);
    for (size_t i = 0; i + 1 < after.size(); ++i) EXPECT_EQ(after[i].config, before[i + 1].config);
    // The child is one bit away from a member of the population it came from.
    const Residency& child = after.back().config;
    bool one_flip = false;
    for (const Member& m : before) {
      int diff = 0;
      for (size_t b = 0; b < child.size(); ++b) diff += child[b] != m.config[b];
      one_flip = one_flip || diff == 1;
    }
    EXPECT_TRUE(one_flip);
    EXPECT_EQ(after.back().cost, s.log().back().cost);
  }
}

TEST(Tune, EaStopsEarlyWithoutImprovement) {
  ToyEvaluator flat(16, {}, 0, 0);  // every config costs 100
  TuneOptions o = budget(5000);
  o.patience = 300;
  const TuneResult r = tune(flat, Optimizer::kEa, o);
  EXPECT_EQ(r.steps, 1 + 100 + 300);
  EXPECT_TRUE(r.early_stop);
  EXPECT_EQ(r.best, Residency(16, false));
}

TEST(Tune, HeuristicSweepsTheBudgetOverTheMostReusedSlices) {
  ToyEvaluator ev(32, kGood);
  const TuneResult r = tune(ev, Optimizer::kHeuristic, budget(100));
  EXPECT_EQ(r.best, ev.optimal());  // the whole set-aside holds the most reused slices
  EXPECT_LE(r.steps, 11);
  EXPECT_EQ(r.log[1].cost, 100 - 10);  // one slice: the soonest of the most reused
}

TEST(Tune, PpoLearnsAndBeatsRandomSearchAtEqualBudget) {
  const std::vector<int> good = {1, 4, 9, 14, 20, 27, 33, 38};
  for (uint64_t seed : {2, 3}) {
    ToyEvaluator ppo_ev(40, good), random_ev(40, good);
    const TuneResult ppo = tune(ppo_ev, Optimizer::kPpo, budget(3000, seed));
    const TuneResult random = tune(random_ev, Optimizer::kRandom, budget(3000, seed));
    EXPECT_LE(ppo.best_fitness.cost, ppo_ev.optimum() + 15) << "seed " << seed;
    EXPECT_LE(ppo.best_fitness.cost, random.best_fitness.cost - 20) << "seed " << seed;
  }
}

TEST(Tune, PpoRepeatsForASeed) {
  ToyEvaluator a(24, {3, 8, 13}), b(24, {3, 8, 13});
  EXPECT_EQ(costs(tune(a, Optimizer::kPpo, budget(400))), costs(tune(b, Optimizer::kPpo, budget(400))));
}

TEST(Tune, NeverWorseThanNoneWhenEverythingCostsMore) {
  ToyEvaluator worse(16, {}, 0, 1);
  for (Optimizer o : {Optimizer::kEa, Optimizer::kPpo, Optimizer::kRandom, Optimizer::kHeuristic}) {
    const TuneResult r = tune(worse, o, budget(300));
    EXPECT_EQ(r.best, Residency(16, false)) << optimizer_name(o);
    EXPECT_EQ(r.best_fitness.cost, r.none_fitness.cost);
    EXPECT_FALSE(r.fell_back_to_none);
  }
}

// A measured evaluator whose first sample of slice 0 is lucky: re-evaluated, it is slower than none.
class LuckyOnce : public ToyEvaluator {
 public:
  LuckyOnce() : ToyEvaluator(4, {}, 0, 5) {}
  bool deterministic() const override { return false; }
  int64_t setaside_slices() const override { return 4; }
  l2::Fitness evaluate(const Residency& r) override {
    if (r == Residency{true, false, false, false} && !seen_) {
      seen_ = true;
      return {.cost = 50};
    }
    return ToyEvaluator::evaluate(r);
  }

 private:
  bool seen_ = false;
};

TEST(Tune, ABestThatWasALuckySampleFallsBackToNone) {
  LuckyOnce ev;
  const TuneResult r = tune(ev, Optimizer::kHeuristic, budget(100));  // ranks slice 0 first
  EXPECT_EQ(r.searched_best_cost, 50);
  EXPECT_TRUE(r.fell_back_to_none);
  EXPECT_EQ(r.best, Residency(4, false));
  EXPECT_EQ(r.best_fitness.cost, 100);
}

TEST(Tune, TimeBudgetStopsTheSearch) {
  ToyEvaluator ev(32, kGood);
  TuneOptions o = budget(int64_t{1} << 40);
  o.max_seconds = 0.2;
  const TuneResult r = tune(ev, Optimizer::kRandom, o);
  EXPECT_GT(r.steps, 1);
  EXPECT_LT(r.seconds, 5.0);
  EXPECT_FALSE(r.early_stop);
}

}  // namespace
}  // namespace atl::tune
