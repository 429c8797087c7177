// Successive halving's bookkeeping: who is promoted at each rung, and how
// failed and diverged trials count in the race.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/tuner/sweep/successive_halving.h"

using commtune::SuccessiveHalving;

namespace {

// Starts every trial's first rung, then reports losses[t] (NaN: it
// diverged; -1: it failed); returns the trials promoted to the second rung.
std::set<std::int64_t> promoted_after_first_rung(const std::vector<double>& losses) {
  SuccessiveHalving halving(static_cast<std::int64_t>(losses.size()), {8, 16}, 2);
  std::vector<SuccessiveHalving::Job> jobs;
  for (std::size_t t = 0; t < losses.size(); ++t) {
    const auto job = halving.next();
    EXPECT_TRUE(job && job->rung == 0);
    if (!job) return {};
    jobs.push_back(*job);
  }
  for (const auto& job : jobs) {
    const double loss = losses[static_cast<std::size_t>(job.trial)];
    if (std::isnan(loss))
      halving.diverged(job.trial, 0);
    else if (loss < 0)
      halving.failed(job.trial);
    else
      halving.report(job.trial, 0, loss);
  }
  std::set<std::int64_t> promoted;
  while (const auto job = halving.next()) {
    EXPECT_EQ(job->rung, 1u);
    promoted.insert(job->trial);
  }
  return promoted;
}

TEST(SuccessiveHalving, PromotesTheBestShareOfARung) {
  EXPECT_EQ(promoted_after_first_rung({2.0, 1.0, 3.0, 1.5}), (std::set<std::int64_t>{1, 3}));
}

TEST(SuccessiveHalving, ADivergedTrialCountsAsTheWorstAndIsNeverPromoted) {
  // Four trials, one diverged: still two promotions, never the diverged one, however bad the others.
  EXPECT_EQ(promoted_after_first_rung({2.0, NAN, 1e30, 1.5}), (std::set<std::int64_t>{0, 3}));
  EXPECT_EQ(promoted_after_first_rung({NAN, NAN, 5.0, NAN}), (std::set<std::int64_t>{2}));
  EXPECT_EQ(promoted_after_first_rung({NAN, NAN}), (std::set<std::int64_t>{}));
}

TEST(SuccessiveHalving, AFailedTrialLeavesTheRace) {
  EXPECT_EQ(promoted_after_first_rung({2.0, -1, 3.0, 1.5}), (std::set<std::int64_t>{3}));
}

}  // namespace
