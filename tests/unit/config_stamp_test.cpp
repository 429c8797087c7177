// A stored configuration's stamp (db/store.h) under the engine's real check
// (core/config): a configuration the check passed unchanged as it was
// written is read again without checking; the stamp, not the text, decides,
// and a stamp of another check, an edited text or a text the check would
// change is checked as before.
#include <gtest/gtest.h>

#include "core/engine/describe.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/io/build_id.h"
#include "db/store.h"
#include "tests/support/temp_dir.h"

namespace commtune {
namespace {

class StoredConfigurations : public ::testing::Test {
 protected:
  std::int64_t stored(const nlohmann::json& config) {
    db::NewRun run;
    run.config = config;
    run.world_size = 2;
    run.steps_requested = 4;
    return store_->create_run(run);
  }
  std::optional<std::string> stamp_of(std::int64_t id) {
    auto s = store_->connection().prepare("SELECT config_stamp FROM runs WHERE id = ?");
    s.bind_all(id);
    EXPECT_TRUE(s.next());
    return s.is_null(0) ? std::nullopt : std::optional<std::string>(s.text(0));
  }
  // Replaces a run's stored text and stamp, as an editor of the file could.
  void store_text(std::int64_t id, const std::string& text, const std::optional<std::string>& stamp) {
    store_->connection().prepare("UPDATE runs SET config = ?, config_stamp = ? WHERE id = ?").run(text, stamp, id);
  }

  testing::TempDir dir_{"commtune-stamp-test"};  // declared first: outlives the store
  std::unique_ptr<db::Store> store_ = std::make_unique<db::Store>(dir_.file("runs.db"));
};

TEST_F(StoredConfigurations, ACheckedConfigurationIsStampedWithThisBuildAndSchema) {
  const auto checked = RunConfig::parse({{"steps", 4}, {"world_size", 2}}).to_json();
  const auto id = stored(checked);
  const auto stamp = stamp_of(id);
  ASSERT_TRUE(stamp.has_value());
  const auto build = build_id_of(reinterpret_cast<const void*>(&describe_engine));  // the engine checks here
  ASSERT_FALSE(build.empty()) << "the engine library carries no GNU build id: nothing would be stamped";
  EXPECT_EQ(stamp->rfind(build + ":", 0), 0u) << *stamp;
  const auto identity = stamp->substr(0, stamp->rfind(':'));
  EXPECT_EQ(*stamp, db::config_stamp(identity, checked.dump()));
  EXPECT_EQ(store_->run(id)->config, checked);
  EXPECT_EQ(store_->run(id)->config_problem, "");
}

TEST_F(StoredConfigurations, AConfigurationTheCheckWouldChangeIsStoredWithoutAStamp) {
  const auto id = stored({{"steps", 4}});  // the check adds every default
  EXPECT_FALSE(stamp_of(id).has_value());
  const auto read = store_->run(id);
  EXPECT_EQ(read->config.at("world_size"), RunConfig::parse({{"steps", 4}}).to_json().at("world_size"));
  EXPECT_TRUE(read->config.contains("optimizer"));
}

// The stamp decides, not the text: a text stamped under this check is taken
// as it is (here one the check would have completed, to make the skip
// visible); under another check's stamp, or edited since, it is checked.
TEST_F(StoredConfigurations, TheStampDecidesWhetherAStoredTextIsCheckedAgain) {
  const auto checked = RunConfig::parse({{"steps", 4}, {"world_size", 2}}).to_json();
  const auto id = stored(checked);
  const auto stamp = *stamp_of(id);
  const auto identity = stamp.substr(0, stamp.rfind(':'));
  const std::string partial = R"({"steps":4})";

  store_text(id, partial, db::config_stamp(identity, partial));
  EXPECT_EQ(store_->run(id)->config, nlohmann::json::parse(partial));  // trusted as stamped: not completed

  store_text(id, partial, db::config_stamp("another-build:" + identity.substr(identity.find(':') + 1), partial));
  EXPECT_TRUE(store_->run(id)->config.contains("optimizer"));  // another check's stamp: checked and completed

  store_text(id, partial, stamp);  // edited since it was stamped
  EXPECT_TRUE(store_->run(id)->config.contains("optimizer"));

  auto edited = checked;
  edited["world_size"] = -5;
  store_text(id, edited.dump(), stamp);
  const auto bad = store_->runs(std::vector<std::int64_t>{id});
  ASSERT_EQ(bad.size(), 1u);
  EXPECT_NE(bad.front().config_problem.find("world_size"), std::string::npos) << bad.front().config_problem;
}

}  // namespace
}  // namespace commtune
