// The run-to-run spread behind single-run intervals (core/tuner/verdict/evidence.h):
// measured from configurations run more than once, blended with the assumed
// spread so that one repeated pair cannot make it vanish, and the assumed one
// alone when nothing ran twice. Without it, two single runs on a loaded machine
// would give fp16 on NVLink "1.6x (95%: 1.21-2.19)" where repeats show no difference.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "core/tuner/verdict/evidence.h"

using commtune::RunToRun;

TEST(RunToRun, NothingRepeatedIsTheAssumedSpreadAndSaysSo) {
  const auto r = RunToRun::from_groups({{"a", {std::log(0.004)}}, {"b", {std::log(0.009)}}});
  EXPECT_DOUBLE_EQ(r.log_sd, RunToRun::kAssumedLogSd);
  EXPECT_TRUE(std::isnan(r.measured_log_sd));
  EXPECT_EQ(r.degrees_of_freedom, 0);
  EXPECT_NE(r.describe().find("assumed"), std::string::npos) << r.describe();
}

TEST(RunToRun, RepeatsMeasureItAndOutweighTheAssumptionAsTheyGrow) {
  // Configuration "a": two runs, 2 ms and 2 ms x e^0.2; "b": three runs at the same time.
  const std::map<std::string, std::vector<double>> groups{
      {"a", {std::log(0.002), std::log(0.002) + 0.2}}, {"b", {1.0, 1.0, 1.0}}, {"c", {5.0}}};
  const auto r = RunToRun::from_groups(groups);
  EXPECT_EQ(r.degrees_of_freedom, 1 + 2);
  EXPECT_EQ(r.repeated_runs, 5);
  const double squares = 2 * 0.1 * 0.1;  // each of "a"'s runs 0.1 from their mean
  EXPECT_NEAR(r.measured_log_sd, std::sqrt(squares / 3), 1e-12);
  EXPECT_NEAR(r.log_sd,
              std::sqrt((squares + RunToRun::kAssumedWeight * RunToRun::kAssumedLogSd * RunToRun::kAssumedLogSd) / 5),
              1e-12);
  // Many quiet repeats bring it near what they measured.
  std::map<std::string, std::vector<double>> quiet;
  for (int g = 0; g < 100; ++g) quiet["g" + std::to_string(g)] = {0.0, 0.02};
  const auto q = RunToRun::from_groups(quiet);
  EXPECT_NEAR(q.measured_log_sd, 0.01 * std::sqrt(2.0), 1e-12);
  EXPECT_LT(q.log_sd, 0.06);
  EXPECT_NE(q.describe().find("measured over 200 repeated runs"), std::string::npos) << q.describe();
}

TEST(RunToRun, TimingReplicatesDifferInSeedAndLearningRateOnly) {
  const nlohmann::json a{{"seed", 1}, {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}}, {"hook", {{"name", "fp16_compress"}}}};
  auto b = a;
  b["seed"] = 2;
  b["optimizer"]["lr"] = 0.05;
  EXPECT_EQ(commtune::timing_key(a), commtune::timing_key(b));
  auto c = a;
  c["hook"]["name"] = "allreduce";
  EXPECT_NE(commtune::timing_key(a), commtune::timing_key(c));
  auto d = a;
  d["optimizer"]["name"] = "adam";
  EXPECT_NE(commtune::timing_key(a), commtune::timing_key(d));
}

// Replicates differ in seed and bookkeeping only; a fair baseline shares
// everything but the hook, wherever the hook sits among the keys.
TEST(IdentityKeys, ReplicatesIgnoreBookkeepingAndBaselinesIgnoreTheHook) {
  const nlohmann::json a{{"seed", 1},
                         {"optimizer", {{"name", "sgd"}, {"lr", 0.1}}},
                         {"weights", {{"init", ""}, {"save_final", "a.pt"}}},
                         {"hook", {{"name", "powersgd"}, {"matrix_approximation_rank", 2}}},
                         {"world_size", 2}};
  auto b = a;
  b["seed"] = 2;
  b["weights"]["save_final"] = "b.pt";
  b["timeout_s"] = 99;
  EXPECT_EQ(commtune::replicate_key(a), commtune::replicate_key(b));
  auto c = a;
  c["weights"]["init"] = "w.pt";
  EXPECT_NE(commtune::replicate_key(a), commtune::replicate_key(c));
  auto allreduce = a;
  allreduce["hook"] = {{"name", "allreduce"}};
  EXPECT_NE(commtune::replicate_key(a), commtune::replicate_key(allreduce));
  EXPECT_EQ(commtune::baseline_key(a), commtune::baseline_key(allreduce));
  auto without_hook = a;
  without_hook.erase("hook");
  EXPECT_EQ(commtune::baseline_key(a), commtune::replicate_key(without_hook));
  // The hook as the first key, as the last, and alone.
  const nlohmann::json last{{"a", 1}, {"hook", {{"name", "fp16_compress"}}}};
  const nlohmann::json first{{"hook", {{"name", "fp16_compress"}}}, {"z", 1}};
  EXPECT_EQ(commtune::baseline_key(first), commtune::replicate_key(nlohmann::json{{"z", 1}}));
  EXPECT_EQ(commtune::baseline_key(last), commtune::replicate_key(nlohmann::json{{"a", 1}}));
  EXPECT_EQ(commtune::baseline_key(nlohmann::json{{"hook", 1}}), commtune::replicate_key(nlohmann::json::object()));
}

// Identity keys are alike exactly when the JSON texts are: an integer parsed
// signed or unsigned is one value; a real is another, even when whole; the
// last bit of a real counts; a string is not the number it spells.
TEST(IdentityKeys, ValuesAreAlikeExactlyWhenTheirTextsAre) {
  const auto key = [](const nlohmann::json& value) { return commtune::replicate_key({{"a", value}}); };
  EXPECT_EQ(key(nlohmann::json::parse("5")), key(std::int64_t{5}));
  EXPECT_EQ(key(nlohmann::json::parse("5")).size(), key(nlohmann::json::parse("-5")).size());
  EXPECT_NE(key(nlohmann::json::parse("5")), key(nlohmann::json::parse("5.0")));
  EXPECT_NE(key(0.1), key(std::nextafter(0.1, 1.0)));
  EXPECT_NE(key(0.0), key(-0.0));
  EXPECT_NE(key("5"), key(5));
  EXPECT_NE(key(nlohmann::json::array({1, 2})), key(nlohmann::json::array({12})));
  EXPECT_NE(key("ab"), key(nlohmann::json::array({"a", "b"})));
  EXPECT_NE(commtune::replicate_key({{"ab", ""}}), commtune::replicate_key({{"a", "b"}}));
  EXPECT_EQ(key(nlohmann::json::parse(R"({"x":[1,{"y":true}]})")), key({{"x", {1, {{"y", true}}}}}));
}
