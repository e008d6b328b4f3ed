#pragma once
// Synthetic evaluators with a known optimum, for the optimizer tests.
#include <algorithm>
#include <string>
#include <vector>

#include "l2/evaluator.h"

namespace atl::tune::testing {

// cost = 100 - gain x (good slices resident) + penalty x (other slices resident): the optimum is
// exactly the good slices, at 100 - gain x |good|. The good slices are the most reused, so the
// budget heuristic ranks them first; the set-aside holds exactly them.
class ToyEvaluator : public l2::Evaluator {
 public:
  ToyEvaluator(int slices, std::vector<int> good, double gain = 10, double penalty = 3)
      : slices_(slices), good_(std::move(good)), gain_(gain), penalty_(penalty) {}
  std::string name() const override { return "toy"; }
  std::string cost_unit() const override { return "cost"; }
  int64_t slices() const override { return slices_; }
  int64_t setaside_slices() const override { return static_cast<int64_t>(good_.size()); }
  std::vector<l2::SliceUse> slice_uses() const override {
    std::vector<l2::SliceUse> uses(static_cast<size_t>(slices_), l2::SliceUse{0, 1});
    for (int g : good_) uses[static_cast<size_t>(g)] = {g, 3};
    return uses;
  }
  bool deterministic() const override { return true; }
  l2::Fitness evaluate(const l2::Residency& r) override {
    ++evaluations;
    double cost = 100;
    for (int i = 0; i < slices_; ++i) {
      if (r[static_cast<size_t>(i)]) cost += is_good(i) ? -gain_ : penalty_;
    }
    return {.cost = cost};
  }
  bool is_good(int i) const { return std::find(good_.begin(), good_.end(), i) != good_.end(); }
  double optimum() const { return 100 - gain_ * static_cast<double>(good_.size()); }
  l2::Residency optimal() const {
    l2::Residency r(static_cast<size_t>(slices_), false);
    for (int g : good_) r[static_cast<size_t>(g)] = true;
    return r;
  }
  int evaluations = 0;

 private:
  int slices_;
  std::vector<int> good_;
  double gain_, penalty_;
};

}  // namespace atl::tune::testing
