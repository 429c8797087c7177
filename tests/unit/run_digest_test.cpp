// A run's digest (core/tuner/store/run_metrics.h): stored when the run ends, read
// instead of its steps while it holds, and never trusted once the run runs
// again or the stored text is not a digest.
#include <gtest/gtest.h>

#include <cmath>

#include "core/tuner/launch/run_end.h"
#include "core/tuner/netmodel/run_samples.h"
#include "core/tuner/store/run_metrics.h"
#include "db/store.h"
#include "tests/support/temp_dir.h"

namespace commtune {
namespace {

class RunDigests : public ::testing::Test {
 protected:

  // A 2-rank run of `steps` steps; rank 0's loss at `nan_step` is NaN.
  std::int64_t stored_run(int steps, int nan_step = -1) {
    db::NewRun run;
    run.config = {{"world_size", 2}, {"steps", steps}};
    run.world_size = 2;
    run.steps_requested = steps;
    const auto id = store_->create_run(run);
    for (int rank = 0; rank < 2; ++rank)
      for (int step = 0; step < steps; ++step) {
        db::StepRow row;
        row.run_id = id;
        row.rank = rank;
        row.step = step;
        row.loss = rank == 0 && step == nan_step ? NAN : 2.0 / (1 + step) + rank;
        row.t_step = 1e-3 * (1 + step % 3 + rank);
        row.wire_bytes = 4000 + 10 * step;
        row.uncompressed_bytes = 16000;
        store_->insert(row);
      }
    return id;
  }

  void end(std::int64_t id, const std::string& status = db::status::kSucceeded) {
    db::RunEnd end;
    end.status = status;
    end.steps_completed = store_->steps_of_every_rank(id);
    finish_run_with_digest(*store_, id, end);
  }

  testing::TempDir dir_{"commtune-digest-test"};  // declared first: outlives the store
  std::unique_ptr<db::Store> store_ = std::make_unique<db::Store>(dir_.file("runs.db"));
};

void expect_same_figure(const std::optional<double>& a, const std::optional<double>& b, const char* what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (!a) return;
  if (std::isnan(*a)) {
    EXPECT_TRUE(std::isnan(*b)) << what;
    return;
  }
  EXPECT_EQ(*a, *b) << what;  // bit for bit: JSON keeps every digit of a double
}

void expect_same(const RunDigest& a, const RunDigest& b) {
  expect_same_figure(a.last_loss, b.last_loss, "last loss");
  expect_same_figure(a.loss, b.loss, "tail loss");
  expect_same_figure(a.step_ms, b.step_ms, "ms/step");
  expect_same_figure(a.wire_mb, b.wire_mb, "MB/step");
  expect_same_figure(a.compression_ratio, b.compression_ratio, "compression ratio");
  EXPECT_EQ(a.steps, b.steps);
}

TEST_F(RunDigests, AnEndedRunsStoredDigestIsItsStepsFigures) {
  const auto finite = stored_run(40);
  const auto diverged = stored_run(12, 11);  // its last loss NaN, its tail loss infinite
  end(finite);
  end(diverged, db::status::kDiverged);
  for (const auto id : {finite, diverged}) {
    const auto run = store_->run(id);
    ASSERT_TRUE(run->digest.is_object()) << id;
    expect_same(digest_run(*store_, *run), digest_curve(store_->curve(id)));
  }
  const auto nan_run = digest_run(*store_, diverged);
  ASSERT_TRUE(nan_run.last_loss && nan_run.loss);
  EXPECT_TRUE(std::isnan(*nan_run.last_loss));
  EXPECT_EQ(*nan_run.loss, INFINITY);
}

TEST_F(RunDigests, TheStoredDigestIsReadInsteadOfTheStepsUntilTheRunStartsAgain) {
  const auto id = stored_run(20);
  end(id);
  const auto before = digest_run(*store_, id);
  // Its steps gone, an ended run still shows what they were...
  store_->connection().exec("DELETE FROM step_metrics WHERE run_id = " + std::to_string(id));
  expect_same(digest_run(*store_, id), before);
  // ...until it runs again (a continued run, a resumed trial): then only its steps count.
  store_->start_run(id);
  EXPECT_TRUE(store_->run(id)->digest.is_null());
  EXPECT_EQ(digest_run(*store_, id).steps, 0);
  EXPECT_FALSE(digest_run(*store_, id).loss);
}

TEST_F(RunDigests, ADamagedDigestIsNoneAndTheStepsAnswer) {
  const auto id = stored_run(10);
  end(id);
  const auto truth = digest_curve(store_->curve(id));
  for (const char* text : {"not json", "[1, 2]", "{\"steps\": -1}", "{\"steps\": 10, \"tail_loss\": \"lots\"}",
                           "{\"last_loss\": 1, \"tail_loss\": 1, \"step_ms\": 1, \"wire_mb_per_step\": 1, "
                           "\"compression_ratio\": 1}"}) {
    auto update = store_->connection().prepare("UPDATE runs SET digest = ? WHERE id = ?");
    update.run(std::string(text), id);
    expect_same(digest_run(*store_, id), truth);
  }
  // A run that is not over is read from its steps whatever its digest says.
  store_->connection().prepare("UPDATE runs SET digest = ?, status = 'running' WHERE id = ?")
      .run(digest_json(RunDigest{1.0, 1.0, 1.0, 1.0, 1.0, 3}).dump(), id);
  expect_same(digest_run(*store_, id), truth);
}

TEST_F(RunDigests, ARunsLinkIsReadFromItsStartWithoutItsSteps) {
  const auto id = stored_run(4);
  const nlohmann::json probe{{"bytes", {65536, 4194304}},
                             {"seconds", {2.3e-4, 2.08e-3}},
                             {"attempts", {{2.3e-4, 2.7e-4}, {2.08e-3, 2.77e-3, 2.95e-3}}}};
  for (const auto& body : {nlohmann::json{{"link_probe", {{"bytes", {1, 2}}}}},
                           nlohmann::json{{"hook_blocking", false}, {"link_probe", probe}}}) {
    db::EventRow start;
    start.run_id = id;
    start.kind = "run_start";
    start.body = body;
    store_->insert(start);
  }
  const auto link = run_link(*store_, *store_->run(id));  // the newest start's
  const auto expected = link_from_probe(probe, 2);
  EXPECT_GT(expected.bytes_per_s, 0);
  EXPECT_EQ(link.bytes_per_s, expected.bytes_per_s);
  EXPECT_EQ(link.slower, expected.slower);
  EXPECT_EQ(link.faster, expected.faster);
  EXPECT_EQ(run_link(*store_, *store_->run(stored_run(4))).bytes_per_s, 0);  // no start stored: not probed

  // Ended, the run keeps its newest start's probe in its digest: the link
  // is read from there, its events no longer needed.
  end(id);
  EXPECT_EQ(store_->run(id)->digest.at("link_probe"), probe);
  store_->connection().exec("DELETE FROM run_events");
  const auto ended = run_link(*store_, *store_->run(id));
  EXPECT_EQ(ended.bytes_per_s, expected.bytes_per_s);
  EXPECT_EQ(ended.slower, expected.slower);
  EXPECT_EQ(ended.faster, expected.faster);
  expect_same(*digest_from_json(store_->run(id)->digest), digest_curve(store_->curve(id)));  // figures as before
}

}  // namespace
}  // namespace commtune
