// The run query language (core/tuner/store/run_query.h) that `list --search` and
// the Runs page share.
#include <gtest/gtest.h>

#include "core/tuner/store/run_query.h"

namespace commtune {
namespace {

QueryRow byteps_row(const std::string& compressor, double loss) {
  db::RunRecord run;
  run.id = 7;
  run.name = "";
  run.status = "succeeded";
  run.world_size = 2;
  run.steps_completed = 100;
  run.tags = "best, keep";
  run.config = {{"hook",
                 {{"name", "byteps"},
                  {"byteps_compressor_type", compressor},
                  {"byteps_ef_type", "vanilla"},
                  {"byteps_compressor_randomk_rescale", false}}},
                {"optimizer", {{"lr", 0.1 + 0.2}}}};
  RunDigest digest;
  digest.loss = loss;
  digest.last_loss = loss + 0.5;
  digest.step_ms = 12.5;
  return query_row(run, "byteps " + compressor, digest);
}

TEST(RunQuery, ParametersAreTheCheckedConfigurationsLeavesByName) {
  db::RunRecord run;
  run.config = {{"world_size", 2},
                {"optimizer", {{"lr", 0.05}, {"name", "sgd"}}},
                {"data", {{"shuffle", true}}},
                {"hook", {{"name", "x"}, {"sizes", {1, 2}}}}};
  const auto params = run_params(run);
  std::vector<std::string> names;
  for (const auto& [name, value] : params) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"data.shuffle", "hook.name", "hook.sizes", "optimizer.lr",
                                             "optimizer.name", "world_size"}));
  EXPECT_EQ(params[0].second, nlohmann::json(true));     // typed as configured, not the store's 1
  EXPECT_EQ(params[2].second, nlohmann::json("[1,2]"));  // an array whole, as the store's run_params has it
  EXPECT_EQ(run_param(run, "optimizer.lr"), nlohmann::json(0.05));
  EXPECT_TRUE(run_param(run, "optimizer").is_null());  // a section is no parameter
  EXPECT_TRUE(run_param(run, "hook.matrix_approximation_rank").is_null());
}

TEST(RunQuery, FreeTextMatchesValuesNeverParameterNames) {
  const auto q = RunQuery::parse("randomk");
  EXPECT_TRUE(q.matches(byteps_row("randomk", 1.0)));
  EXPECT_FALSE(q.matches(byteps_row("topk", 1.0)));  // its config names byteps_compressor_randomk_rescale
  EXPECT_TRUE(RunQuery::parse("BytePS TopK").matches(byteps_row("topk", 1.0)));  // the hook's label, any case
}

TEST(RunQuery, ConditionsCompareNumbersAsNumbersAndBooleansAsConfigured) {
  const auto row = byteps_row("onebit", 1.05);
  EXPECT_TRUE(RunQuery::parse("tail_loss < 1.1").matches(row));
  EXPECT_FALSE(RunQuery::parse("last_loss < 1.1").matches(row));  // the last step's is another figure
  EXPECT_TRUE(RunQuery::parse("last_loss > 1.1").matches(row));
  EXPECT_FALSE(RunQuery::parse("tail_loss < 1.1, ms > 20").matches(row));
  EXPECT_TRUE(RunQuery::parse("optimizer.lr = 0.3").matches(row));  // 0.30000000000000004
  EXPECT_FALSE(RunQuery::parse("optimizer.lr = 0.3001").matches(row));
  EXPECT_TRUE(RunQuery::parse("hook.byteps_compressor_randomk_rescale = false").matches(row));
  EXPECT_TRUE(RunQuery::parse("tag = BEST").matches(row));
  EXPECT_FALSE(RunQuery::parse("tag = bes").matches(row));
  EXPECT_TRUE(RunQuery::parse("status == succeeded, ranks >= 2").matches(row));
  // A parameter of another hook: the run differs from every value of it.
  EXPECT_FALSE(RunQuery::parse("hook.matrix_approximation_rank = 2").matches(row));
  EXPECT_TRUE(RunQuery::parse("hook.matrix_approximation_rank != 2").matches(row));
}

TEST(RunQuery, NonFiniteLossesAreWords) {
  const auto diverged = byteps_row("onebit", std::numeric_limits<double>::quiet_NaN());
  EXPECT_TRUE(RunQuery::parse("tail_loss = nan").matches(diverged));
  EXPECT_FALSE(RunQuery::parse("tail_loss < 5").matches(diverged));
  EXPECT_FALSE(RunQuery::parse("tail_loss = nan").matches(byteps_row("onebit", 1.0)));
}

TEST(RunQuery, UnknownNamesAndMissingValuesAreRefusedByName) {
  try {
    RunQuery::parse("hook.matrix_aproximation_rank = 2");
    FAIL() << "a misspelt parameter was taken";
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("'hook.matrix_aproximation_rank'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RunQuery::parse("rnk = 2"), QueryError);
  // A bare "loss" is two figures: the error names both, so a filter cannot read one while `list` prints the
  // other.
  try {
    RunQuery::parse("loss < 1.0");
    FAIL() << "a bare loss was taken";
  } catch (const QueryError& e) {
    EXPECT_NE(std::string(e.what()).find("tail_loss"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("last_loss"), std::string::npos) << e.what();
  }
  EXPECT_THROW(RunQuery::parse("tail_loss <"), QueryError);
  EXPECT_NO_THROW(RunQuery::parse("hook.threshold = 2", {"hook.threshold"}));  // a plugin's, seen in the store
  EXPECT_TRUE(RunQuery::parse(" , ").empty());
  EXPECT_THROW(RunQuery::parse("tail_loss < " + std::string(100000, '1')), QueryError);  // refused, not a stack overflow
}

// A mistyped name is answered with the name meant (`los`: 'tail_loss' or 'last_loss'), one answer for
// `list --search` and the Runs page.
TEST(RunQuery, AMistypedNameSuggestsTheNameMeant) {
  const auto refusal = [](const std::string& query, const std::vector<std::string>& known = {}) {
    try {
      RunQuery::parse(query, known);
    } catch (const QueryError& e) {
      return std::string(e.what());
    }
    return std::string("taken");
  };
  const auto los = refusal("los < 1");
  EXPECT_NE(los.find("'los'"), std::string::npos) << los;
  EXPECT_NE(los.find("did you mean 'tail_loss' or 'last_loss'?"), std::string::npos) << los;
  const auto tail = refusal("tail_los < 1");
  EXPECT_NE(tail.find("did you mean 'tail_loss'?"), std::string::npos) << tail;
  const auto rank = refusal("hook.matrix_aproximation_rank = 2");
  EXPECT_NE(rank.find("did you mean 'hook.matrix_approximation_rank'?"), std::string::npos) << rank;
  // A parameter named without its section.
  const auto bare = refusal("matrix_approximation_rank = 2");
  EXPECT_NE(bare.find("did you mean 'hook.matrix_approximation_rank'?"), std::string::npos) << bare;
  const auto lr = refusal("lr = 0.1");  // not 'id', two edits away
  EXPECT_NE(lr.find("did you mean 'optimizer.lr'?"), std::string::npos) << lr;
  // A plugin's parameter seen in the store.
  const auto plugin = refusal("hook.treshold = 2", {"hook.threshold"});
  EXPECT_NE(plugin.find("did you mean 'hook.threshold'?"), std::string::npos) << plugin;
  // Nothing close: no guess.
  const auto far = refusal("zzzzzzzz = 1");
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

}  // namespace
}  // namespace commtune
