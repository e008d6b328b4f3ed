// Which mode wins each pair of the padding benchmark: the most requests served in all among
// the modes whose RT mean latency stays within the budget over rt-only.
#include <gtest/gtest.h>

#include "bench/pairs.h"

namespace atl::bench {
namespace {

PairModeResult run(const std::string& rt, const std::string& be, const std::string& mode, double rt_mean_ms,
                   double rt_per_s, double be_per_s) {
  PairModeResult r;
  r.rt = rt;
  r.be = be;
  r.mode = mode;
  r.rt_latency_ms.mean_ms = rt_mean_ms;
  r.rt_per_s = rt_per_s;
  r.be_per_s = be_per_s;
  return r;
}

TEST(PairWinners, TheMostServedWithinTheRtBudget) {
  const std::vector<PairModeResult> runs{
      run("a", "b", "rt-only", 1.000, 100, 0),   run("a", "b", "reset", 1.004, 100, 0),
      run("a", "b", "streams", 1.300, 80, 200),  run("a", "b", "padding-slices", 1.009, 100, 50),
      run("c", "d", "rt-only", 2.000, 50, 0),    run("c", "d", "reset", 2.010, 50, 0),
      run("c", "d", "streams", 2.500, 40, 100),  run("c", "d", "padding-slices", 2.050, 50, 30),
      run("e", "f", "streams", 1.000, 10, 10),  // no rt-only run: no winner
  };
  const std::vector<PairWinner> w = pair_winners(runs, 1.0);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].rt, "a");
  EXPECT_EQ(w[0].mode, "padding-slices") << "150/s at +0.9%; streams serves more at +30%";
  EXPECT_NEAR(w[0].rt_overhead_pct, 0.9, 1e-9);
  EXPECT_DOUBLE_EQ(w[0].overall_per_s, 150);
  EXPECT_EQ(w[1].mode, "rt-only") << "padding +2.5% and streams +25% are over budget; reset serves no more";
  EXPECT_EQ(pair_winners(runs, 35.0)[0].mode, "streams") << "a looser budget admits streams";
}

TEST(PairWinners, TheJsonCarriesThemAndTheirBudget) {
  PairResults r;
  r.runs = {run("a", "b", "rt-only", 1.0, 100, 0), run("a", "b", "reset", 1.001, 100, 20)};
  r.winners = pair_winners(r.runs, kWinnerRtBudgetPct);
  const std::string json = pairs_to_json(r);
  EXPECT_NE(json.find("\"winners_rt_budget_pct\": 1.0"), std::string::npos) << json;
  EXPECT_NE(json.find("\"mode\": \"reset\""), std::string::npos) << json;
}

}  // namespace
}  // namespace atl::bench
