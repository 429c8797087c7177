// The run store on real SQLite files in a scratch folder: schema creation
// and migration, typed reads and writes, the batched writer, readers beside
// it, and files that are not ours.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <fstream>
#include <memory>
#include <thread>

#include "db/parallel.h"
#include "db/schema.h"
#include "db/store.h"
#include "db/writer.h"
#include "tests/support/temp_dir.h"

using namespace commtune::db;

namespace {

class StoreTest : public ::testing::Test {
 protected:
  std::string file(const std::string& name) const { return dir_.file(name); }

  commtune::testing::TempDir dir_{"commtune-store-test"};
};

// Queues rank 0's steps 0..count-1 of a run.
void queue_steps(Writer& writer, std::int64_t run_id, int count, int first_step = 0) {
  for (int step = first_step; step < first_step + count; ++step) {
    StepRow row;
    row.run_id = run_id;
    row.step = step;
    writer.add(row);
  }
}

NewRun sample_run(std::int64_t rank = 2) {
  NewRun run;
  run.name = "powersgd r" + std::to_string(rank);
  run.config = {{"world_size", 2},
                {"steps", 5},
                {"hook", {{"name", "powersgd"}, {"matrix_approximation_rank", rank}, {"use_error_feedback", true}}},
                {"model", {{"name", "mlp"}, {"hidden", {64, 32}}}}};
  run.world_size = 2;
  run.steps_requested = 5;
  run.fingerprint = "0123456789abcdef";
  return run;
}

// The run_params rows of a run (what --param filters read), typed as SQLite holds them.
std::map<std::string, nlohmann::json> stored_params(Store& store, std::int64_t run_id) {
  auto s = store.connection().prepare("SELECT name, value, typeof(value) FROM run_params WHERE run_id = ?");
  s.bind_all(run_id);
  std::map<std::string, nlohmann::json> out;
  while (s.next()) {
    const auto type = s.text(2);
    out[s.text(0)] = type == "integer" ? nlohmann::json(s.integer(1))
                     : type == "real"  ? nlohmann::json(s.real(1))
                                       : nlohmann::json(s.text(1));
  }
  return out;
}

std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Statements are kept prepared between uses (db/sqlite.h): a reused one
// starts unbound and from its first row, two alive at once of one SQL are
// independent, and one that outlives its connection is still safe to drop.
TEST_F(StoreTest, PreparedStatementsAreReusedWithoutCarryingState) {
  Connection c(file("pool.db"), Connection::Access::ReadWrite);
  c.exec("CREATE TABLE t (x INTEGER); INSERT INTO t VALUES (1), (2), (3)");
  const char* sql = "SELECT x FROM t WHERE x >= coalesce(?, 0) ORDER BY x";
  {
    auto first = c.prepare(sql);
    first.bind_all(2);
    ASSERT_TRUE(first.next());
    EXPECT_EQ(first.integer(0), 2);
    auto second = c.prepare(sql);  // the first is still alive: its own statement
    ASSERT_TRUE(second.next());
    EXPECT_EQ(second.integer(0), 1);
    ASSERT_TRUE(first.next());
    EXPECT_EQ(first.integer(0), 3);
  }
  {
    auto again = c.prepare(sql);  // back from the pool, mid-read before: reset and unbound
    ASSERT_TRUE(again.next());
    EXPECT_EQ(again.integer(0), 1);
  }
  // An idle statement, left mid-read, holds no lock: another connection can write and this one sees it.
  {
    Connection other(file("pool.db"), Connection::Access::ReadWrite);
    other.exec("INSERT INTO t VALUES (0)");
  }
  auto fresh = c.prepare(sql);
  ASSERT_TRUE(fresh.next());
  EXPECT_EQ(fresh.integer(0), 0);
  auto survivor = std::make_unique<Statement>(c.prepare(sql));
  {
    Connection moved(std::move(c));
  }  // the connection closes with a statement alive
  survivor.reset();
}

TEST_F(StoreTest, CreatesTheSchemaAndMarksTheFileAsOurs) {
  Store store(file("runs.db"));
  EXPECT_EQ(store.connection().query_integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(store.connection().query_integer("PRAGMA application_id"), kApplicationId);
  auto mode = store.connection().prepare("PRAGMA journal_mode");
  ASSERT_TRUE(mode.next());
  EXPECT_EQ(mode.text(0), "wal");
}

// Runs read together have their configurations checked on several
// threads: each still gets its own, in order, and one bad row stays its own.
TEST_F(StoreTest, RunsReadTogetherEachKeepTheirOwnConfiguration) {
  Store store(file("runs.db"));
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 700; ++i) {
    auto run = sample_run(1 + i % 5);
    run.name = "run " + std::to_string(i);
    ids.push_back(store.create_run(run));
  }
  store.connection().prepare("UPDATE runs SET config = '[1]' WHERE id = ?").run(ids[400]);
  std::reverse(ids.begin(), ids.end());
  auto with_a_missing_one = ids;
  with_a_missing_one.insert(with_a_missing_one.begin() + 300, 100000);  // no such run: left out
  for (const auto& runs : {store.runs(RunFilter{}), store.runs(with_a_missing_one)}) {
    ASSERT_EQ(runs.size(), 700u);
    for (const auto& r : runs) {
      const int i = std::stoi(r.name.substr(4));
      if (i == 400) {
        EXPECT_NE(r.config_problem, "");
        EXPECT_EQ(r.config, nlohmann::json::object());
      } else {
        EXPECT_EQ(r.config_problem, "") << r.name;
        EXPECT_EQ(r.config.at("hook").at("matrix_approximation_rank"), 1 + i % 5) << r.name;
      }
    }
  }
  EXPECT_EQ(store.runs(ids).front().name, "run 699");  // in the order asked for
}

// A reader that shows no figure (`list`) leaves each run's digest unparsed;
// every other read has it.
TEST_F(StoreTest, ADigestIsReadUnlessLeftOut) {
  Store store(file("runs.db"));
  const auto id = store.create_run(sample_run());
  RunEnd end;
  end.status = status::kSucceeded;
  end.digest = {{"steps", 3}, {"tail_loss", 1.5}};
  store.finish_run(id, end);
  RunFilter filter;
  EXPECT_EQ(store.runs(filter).at(0).digest, end.digest);
  EXPECT_EQ(store.run(id)->digest, end.digest);
  EXPECT_EQ(store.runs(std::vector<std::int64_t>{id}).at(0).digest, end.digest);
  filter.with_digest = false;
  EXPECT_TRUE(store.runs(filter).at(0).digest.is_null());
}

// Stamps (db/config_check.h): a configuration the installed check returns
// unchanged is stamped with the check's identity and read again without it
// under that identity; another identity, or none, checks every read.
TEST_F(StoreTest, AConfigurationIsCheckedAgainUnlessItsStampNamesThisCheck) {
  std::array<unsigned char, 16> key{};
  std::string message;
  for (int i = 0; i < 16; ++i) key[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(siphash24(key, message), 0x726fdb47dd0e0e31ull);  // the SipHash paper's test vectors
  for (int i = 0; i < 63; ++i) message += static_cast<char>(i);
  EXPECT_EQ(siphash24(key, message.substr(0, 8)), 0x93f5f5799a932462ull);
  EXPECT_EQ(siphash24(key, message.substr(0, 15)), 0xa129ca6149be45e5ull);
  EXPECT_EQ(siphash24(key, message), 0x958a324ceb064572ull);
  EXPECT_EQ(stamp_secret().size(), 32u);  // this user's, made in the data folder on first use
  EXPECT_EQ(config_stamp("id", "a"), config_stamp("id", "a"));
  EXPECT_NE(config_stamp("id", "a"), config_stamp("id", "b"));
  EXPECT_EQ(config_stamp("id", "a").rfind("id:", 0), 0u);
  int checks = 0;
  std::string identity = "build-1:schema-1";
  install_config_check(
      [&](const nlohmann::json& c) {
        ++checks;
        if (c.value("world_size", 0) < 1) throw std::runtime_error("world_size: at least 1");
        auto out = c;
        if (!out.contains("lr")) out["lr"] = 0.1;  // a default the check fills in
        return out;
      },
      [&] { return identity; });
  Store store(file("runs.db"));
  auto complete = sample_run();
  complete.config["lr"] = 0.2;
  const auto stamped = store.create_run(complete);
  const auto unstamped = store.create_run(sample_run());  // the check adds lr: no stamp
  const auto stamp_of = [&](std::int64_t id) {
    auto s = store.connection().prepare("SELECT config_stamp FROM runs WHERE id = ?");
    s.bind_all(id);
    EXPECT_TRUE(s.next());
    return s.is_null(0) ? std::string("null") : s.text(0);
  };
  EXPECT_EQ(stamp_of(stamped), config_stamp(identity, complete.config.dump()));
  EXPECT_EQ(stamp_of(unstamped), "null");

  checks = 0;
  EXPECT_EQ(store.run(stamped)->config, complete.config);
  EXPECT_EQ(checks, 0);
  EXPECT_EQ(store.run(unstamped)->config.at("lr"), 0.1);
  EXPECT_EQ(checks, 1);
  identity = "build-2:schema-1";  // another build of the check
  EXPECT_EQ(store.runs(std::vector<std::int64_t>{stamped, unstamped}).size(), 2u);
  EXPECT_EQ(checks, 3);
  identity = "build-1:schema-1";
  store.connection().prepare("UPDATE runs SET config = json_set(config, '$.world_size', 0) WHERE id = ?").run(stamped);
  EXPECT_EQ(store.run(stamped)->config_problem, "world_size: at least 1");  // edited since it was stamped
  identity = "";  // a check that names itself with nothing: nothing stamped, nothing trusted
  EXPECT_EQ(stamp_of(store.create_run(complete)), "null");
  install_config_check({});
}

// The work of reading big stores, spread over every core: each index is
// processed once, only after it was produced, and a failure on either side
// ends the whole and is raised, with no thread left behind.
TEST(ParallelWork, EachIndexIsProcessedOnceAfterItIsProduced) {
  constexpr std::size_t kCount = 10000;
  std::vector<char> produced(kCount, 0);
  std::vector<std::atomic<int>> processed(kCount);
  std::atomic<int> early{0};
  produce_and_process(
      kCount, [&](std::size_t i) { produced[i] = 1; },
      [&](std::size_t i) {
        if (!produced[i]) ++early;
        ++processed[i];
      });
  EXPECT_EQ(early, 0);
  EXPECT_TRUE(std::all_of(processed.begin(), processed.end(), [](const auto& n) { return n == 1; }));

  std::atomic<std::size_t> seen{0};
  parallel_for(kCount, [&](std::size_t) { ++seen; });
  EXPECT_EQ(seen, kCount);
  parallel_for(0, [&](std::size_t) { ADD_FAILURE() << "nothing to process"; });

  const auto fail_at = [](std::size_t at) {
    return [at](std::size_t i) {
      if (i == at) throw std::runtime_error("index " + std::to_string(i));
    };
  };
  EXPECT_THROW(produce_and_process(kCount, fail_at(3000), [](std::size_t) {}), std::runtime_error);
  EXPECT_THROW(produce_and_process(
                   kCount, [](std::size_t) {}, fail_at(5000)),
               std::runtime_error);
  try {
    parallel_for(kCount, fail_at(kCount - 1));
    ADD_FAILURE() << "the last index's failure was not raised";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "index 9999");
  }
}

TEST_F(StoreTest, RunsKeepTheirConfigurationAsTypedParameters) {
  Store store(file("runs.db"));
  const auto a = store.create_run(sample_run(1));
  const auto b = store.create_run(sample_run(4));
  const auto by_name = stored_params(store, b);
  EXPECT_EQ(by_name.at("hook.matrix_approximation_rank"), 4);
  EXPECT_EQ(by_name.at("hook.name"), "powersgd");
  EXPECT_EQ(by_name.at("hook.use_error_feedback"), 1);
  EXPECT_EQ(by_name.at("model.hidden"), "[64,32]");

  RunFilter filter;
  filter.params = {{"hook.matrix_approximation_rank", "4"}};
  auto found = store.runs(filter);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, b);
  filter.params = {{"hook.use_error_feedback", "true"}, {"hook.name", "powersgd"}};
  EXPECT_EQ(store.runs(filter).size(), 2u);
  filter = {};
  filter.params = {{"hook.matrix_approximation_rank", "1"}};
  found = store.runs(filter);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].id, a);
  EXPECT_EQ(found[0].status, status::kRunning);
  EXPECT_EQ(found[0].config["hook"]["matrix_approximation_rank"], 1);
}

TEST_F(StoreTest, RunsTakeTagsNotesAndNamesAndDeleteWithTheirMetrics) {
  Store store(file("runs.db"));
  const auto sweep = store.create_sweep("", nlohmann::json::object());
  auto planned = sample_run(1);
  planned.sweep_id = sweep;
  planned.trial = 0;
  const auto trial = store.create_run(planned, status::kSucceeded);
  const auto single = store.create_run(sample_run(4), status::kSucceeded);
  const auto running = store.create_run(sample_run(2));  // owned by this live process
  for (const auto id : {trial, single, running}) {
    StepRow row;
    row.run_id = id;
    store.insert(row);
    store.insert(EventRow{id, 0, 0.0, "log", nlohmann::json::object()});
  }
  const auto before = store.runs_signature();
  store.annotate_run(single, " baseline,,  keep ,", "rank 4 looks best");
  EXPECT_NE(store.runs_signature(), before);
  EXPECT_EQ(store.run(single)->tags, "baseline, keep");
  EXPECT_EQ(store.run(single)->notes, "rank 4 looks best");
  store.rename_run(single, "rank four");
  store.rename_sweep(sweep, "powersgd grid");
  EXPECT_EQ(store.run(single)->name, "rank four");
  EXPECT_EQ(store.sweep(sweep)->name, "powersgd grid");
  EXPECT_NE(message_of([&] { store.annotate_run(999, "", ""); }).find("no run 999"), std::string::npos);

  EXPECT_NE(message_of([&] { store.delete_run(running); }).find("is running"), std::string::npos);
  store.delete_run(single);
  EXPECT_FALSE(store.run(single));
  EXPECT_EQ(store.count_steps(single), 0);
  EXPECT_TRUE(store.events(single).empty());
  EXPECT_TRUE(stored_params(store, single).empty());
  EXPECT_EQ(store.count_steps(running), 1);  // the others keep theirs

  EXPECT_NE(message_of([&] { store.delete_sweep(sweep); }).find("is running"), std::string::npos);
  store.set_sweep_status(sweep, status::kCancelled);
  store.delete_sweep(sweep);
  EXPECT_FALSE(store.sweep(sweep));
  EXPECT_FALSE(store.run(trial));
  EXPECT_EQ(store.count_steps(trial), 0);
  EXPECT_EQ(store.runs().size(), 1u);
}

TEST_F(StoreTest, LatestBucketStatsTakeEachStatisticsNewestStep) {
  Store store(file("runs.db"));
  const auto run = store.create_run(sample_run());
  const auto rate = store.stat_id("compression_rate"), norm = store.stat_id("error_norm");
  for (std::int64_t step = 0; step < 5; ++step)
    for (std::int32_t bucket = 0; bucket < 2; ++bucket)
      for (std::int32_t rank = 0; rank < 2; ++rank) {
        store.insert(StatRow{run, rate, bucket, rank, step, 10.0 * step + bucket + 100.0 * rank});
        if (step < 3) store.insert(StatRow{run, norm, bucket, rank, step, -1.0 * step});
      }
  store.insert(StatRow{run, rate, kWholeStep, 0, 9, 1e9});  // whole-step values are not per bucket
  std::map<std::pair<std::string, std::int32_t>, std::pair<std::int64_t, double>> got;
  for (const auto& [name, p] : store.latest_bucket_stats(run)) got[{name, p.bucket}] = {p.step, p.value};
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got.at({"compression_rate", 0}), std::make_pair(std::int64_t{4}, 40.0));
  EXPECT_EQ(got.at({"compression_rate", 1}), std::make_pair(std::int64_t{4}, 41.0));
  EXPECT_EQ(got.at({"error_norm", 1}), std::make_pair(std::int64_t{2}, -2.0));
  EXPECT_EQ(store.latest_bucket_stats(run, 1).front().second.value, 140.0);
}

TEST_F(StoreTest, WriterCommitsRowsInOrderWithTasks) {
  const auto path = file("runs.db");
  std::int64_t run_id = 0;
  {
    Writer writer(path);
    run_id = writer.call([](Store& s) { return s.create_run(sample_run()); }).get();
    const auto rate = writer.name_id("compression_rate");
    for (int rank = 0; rank < 2; ++rank)
      for (int step = 0; step < 1000; ++step) {
        StepRow row;
        row.run_id = run_id;
        row.rank = rank;
        row.step = step;
        row.loss = 1.0 / (step + 1) + rank;
        row.wire_bytes = 1000 + step;
        writer.add(row);
        writer.add(Writer::Stat{run_id, rate, kWholeStep, rank, step, 2.0 * step});
        writer.add(Writer::Stat{run_id, rate, 3, rank, step, 3.0 * step});
      }
    writer.add(EventRow{run_id, 0, 1.0, "log", {{"text", "hello"}}});
    RunEnd end;
    end.status = status::kSucceeded;
    end.steps_completed = 1000;
    end.final_loss = 0.5;
    writer.call([=](Store& s) { s.finish_run(run_id, end); });
    writer.flush();
    const auto stats = writer.stats();
    EXPECT_EQ(stats.rows, 2u * 1000u * 3u + 3u);
    EXPECT_TRUE(writer.error().empty());
  }
  Store store(path, Store::Access::ReadOnly);
  EXPECT_EQ(store.count_steps(run_id), 2000);
  const auto rank1 = store.steps(run_id, 1);
  ASSERT_EQ(rank1.size(), 1000u);
  EXPECT_DOUBLE_EQ(rank1[9].loss, 0.1 + 1);
  EXPECT_EQ(rank1[9].wire_bytes, 1009u);
  const auto curve = store.curve(run_id);
  ASSERT_EQ(curve.size(), 1000u);
  EXPECT_DOUBLE_EQ(curve[0].loss.value(), 1.5);
  EXPECT_EQ(curve[0].ranks, 2);
  const auto rate = store.stat(run_id, "compression_rate");
  ASSERT_EQ(rate.size(), 4000u);
  EXPECT_EQ(rate.front().bucket, kWholeStep);
  EXPECT_EQ(rate.back().bucket, 3);
  EXPECT_DOUBLE_EQ(rate.back().value, 3.0 * 999);
  EXPECT_EQ(store.stat_names(run_id), std::vector<std::string>{"compression_rate"});
  const auto run = store.run(run_id);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, status::kSucceeded);
  EXPECT_TRUE(run->finished_at.has_value());
  EXPECT_EQ(store.events(run_id, "log").at(0).body["text"], "hello");
}

TEST_F(StoreTest, AFailingTaskRollsBackOnlyItself) {
  Writer writer(file("runs.db"));
  const auto run_id = writer.call([](Store& s) { return s.create_run(sample_run()); }).get();
  auto bad = writer.call([](Store& s) {
    s.set_run_status(1, status::kFailed);
    throw std::runtime_error("task went wrong");
    return 0;
  });
  StepRow row;
  row.run_id = run_id;
  writer.add(row);
  EXPECT_THROW(bad.get(), std::runtime_error);
  writer.flush();
  EXPECT_EQ(writer.call([=](Store& s) { return s.run(run_id)->status; }).get(), status::kRunning);
  EXPECT_EQ(writer.call([=](Store& s) { return s.count_steps(run_id); }).get(), 1);
}

TEST_F(StoreTest, ReadersWorkBesideTheWriter) {
  const auto path = file("runs.db");
  Writer writer(path, WriterOptions{std::chrono::milliseconds(5)});
  const auto run_id = writer.call([](Store& s) { return s.create_run(sample_run()); }).get();
  constexpr int kFirst = 1000;
  constexpr int kTotal = 200000;
  std::atomic<bool> done{false};
  std::atomic<std::int64_t> last_seen{-1};
  std::vector<std::int64_t> seen;
  std::string reader_error;
  std::thread reader([&] {
    try {
      Store store(path, Store::Access::ReadOnly);
      while (!done.load()) {
        seen.push_back(store.count_steps(run_id));
        last_seen = seen.back();
      }
      seen.push_back(store.count_steps(run_id));
    } catch (const std::exception& e) {
      reader_error = e.what();
      last_seen = kTotal;
    }
  });
  // The writer goes on only once the reader has read its first commit, so the reader sees the
  // writer in progress however the threads are scheduled on a loaded machine.
  queue_steps(writer, run_id, kFirst);
  writer.flush();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (last_seen.load() < kFirst && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  queue_steps(writer, run_id, kTotal - kFirst, kFirst);
  writer.flush();
  done = true;
  reader.join();
  EXPECT_EQ(reader_error, "");
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back(), kTotal);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));  // each read sees a committed prefix
  EXPECT_GT(std::count_if(seen.begin(), seen.end(), [](auto n) { return n > 0 && n < kTotal; }), 0)
      << "the reader never saw the writer in progress";
}

TEST_F(StoreTest, MigratesAVersion1FileAndKeepsItsRuns) {
  const auto path = file("old.db");
  {
    Connection c(path, Connection::Access::ReadWrite);
    migrate(c, 1);
    c.prepare(
         "INSERT INTO runs (id, name, config, status, host, world_size, steps_requested, created_at) VALUES (7, 'old', "
         "?, 'succeeded', 'h', 2, 10, 1.0)")
        .run(sample_run(2).config.dump());
    c.prepare("INSERT INTO step_metrics (run_id, rank, step, wall_s, loss) VALUES (7, 0, 0, 0.5, 2.25)").run();
    EXPECT_EQ(c.query_integer("PRAGMA user_version"), 1);
  }
  Store store(path);
  EXPECT_EQ(store.connection().query_integer("PRAGMA user_version"), kSchemaVersion);
  const auto run = store.run(7);
  ASSERT_TRUE(run);
  EXPECT_EQ(run->name, "old");
  EXPECT_EQ(store.steps(7).at(0).loss, 2.25);
  RunFilter filter;
  filter.params = {{"hook.matrix_approximation_rank", "2"}};
  ASSERT_EQ(store.runs(filter).size(), 1u);  // backfilled by the migration
  EXPECT_GT(stored_params(store, 7).size(), 4u);
}

// A store on a read-only share cannot be migrated: one of version 4 (before
// stamps) reads as it is, its configurations checked; an older one is
// refused, naming what to do; written to, version 4 becomes the current one.
TEST_F(StoreTest, AVersion4StoreIsReadReadOnlyAsItIs) {
  const auto path = file("runs.db");
  const auto id = Store(path).create_run(sample_run());
  {
    Connection c(path, Connection::Access::ReadWrite);
    c.exec("ALTER TABLE runs DROP COLUMN config_stamp");
    c.exec("ALTER TABLE runs DROP COLUMN samples");
    c.exec("PRAGMA user_version = 4");
  }
  {
    const Store store(path, Store::Access::ReadOnly);
    EXPECT_EQ(store.run(id)->config, sample_run().config);
    EXPECT_EQ(store.stored_samples({id}), std::vector<std::string>{""});  // none: its steps answer
    ASSERT_EQ(store.runs(RunFilter{}).size(), 1u);
    EXPECT_EQ(store.runs(RunFilter{}).front().config_problem, "");
  }
  Connection(path, Connection::Access::ReadWrite).exec("PRAGMA user_version = 3");
  try {
    Store store(path, Store::Access::ReadOnly);
    ADD_FAILURE() << "a version 3 store was read without migrating it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("open it once with write access"), std::string::npos) << e.what();
  }
  Connection(path, Connection::Access::ReadWrite).exec("PRAGMA user_version = 4");
  Store store(path);
  EXPECT_EQ(store.connection().query_integer("PRAGMA user_version"), kSchemaVersion);
  EXPECT_EQ(store.run(id)->name, sample_run().name);
}

TEST_F(StoreTest, ARunsStepProfileIsKeptFromItsEndUntilItStartsAgain) {
  Store store(file("runs.db"));
  const auto id = store.create_run(sample_run());
  store.start_run(id);
  RunEnd end;
  end.status = status::kSucceeded;
  end.samples = std::string("CTSP\0\x01\xff profile", 15);  // bytes, NUL and all
  store.finish_run(id, end);
  EXPECT_EQ(store.stored_samples({id, id + 1}), (std::vector<std::string>{end.samples, ""}));
  EXPECT_EQ(store.connection().query_integer("SELECT typeof(samples) = 'blob' FROM runs"), 1);
  store.start_run(id);  // resumed: what it stored no longer describes it
  EXPECT_EQ(store.stored_samples({id}), std::vector<std::string>{""});
}

// Ids close together are read in one scan of their range, ids far apart one
// by one: either way each place gets its own run's profile, in the order and
// with the repeats named.
TEST_F(StoreTest, StepProfilesAreReadInTheOrderTheIdsAreNamed) {
  Store store(file("runs.db"));
  std::vector<std::int64_t> ids;
  std::vector<std::string> profiles;
  for (int i = 0; i < 4; ++i) {
    ids.push_back(store.create_run(sample_run()));
    store.start_run(ids.back());
    RunEnd end;
    end.status = status::kSucceeded;
    end.samples = i == 2 ? "" : "profile " + std::to_string(i);  // run 3 stored none
    store.finish_run(ids.back(), end);
    profiles.push_back(end.samples);
  }
  EXPECT_EQ(store.stored_samples({ids[3], ids[0], ids[2], ids[3], ids[1]}),
            (std::vector<std::string>{profiles[3], profiles[0], "", profiles[3], profiles[1]}));
  const auto far = ids[0] + 1000;  // no such run: the range is sparse, read id by id
  EXPECT_EQ(store.stored_samples({ids[1], far, ids[1]}), (std::vector<std::string>{profiles[1], "", profiles[1]}));
  EXPECT_EQ(store.stored_samples({}), std::vector<std::string>{});
}

TEST_F(StoreTest, RefusesFilesThatAreNotOurs) {
  const auto text = file("notes.txt");
  std::ofstream(text) << "these are my notes, not a database\n" << std::string(4096, 'x');
  EXPECT_NE(message_of([&] { Store store(text); }).find("not a commtune database"), std::string::npos);

  const auto other = file("other.db");
  {
    Connection c(other, Connection::Access::ReadWrite);
    c.exec("CREATE TABLE recipes (name TEXT)");
  }
  EXPECT_NE(message_of([&] { Store store(other); }).find("another application"), std::string::npos);

  const auto newer = file("newer.db");
  {
    Store store(newer);
    store.connection().exec("PRAGMA user_version = " + std::to_string(kSchemaVersion + 1));
  }
  EXPECT_NE(message_of([&] { Store store(newer); }).find("newer commtune"), std::string::npos);

  // None of them was touched.
  std::ifstream in(text);
  std::string first;
  std::getline(in, first);
  EXPECT_EQ(first, "these are my notes, not a database");
  Connection c(other, Connection::Access::ReadOnly);
  EXPECT_EQ(c.query_integer("SELECT count(*) FROM sqlite_master"), 1);
  EXPECT_EQ(c.query_integer("PRAGMA user_version"), 0);
}

TEST_F(StoreTest, ADamagedFileGivesAClearError) {
  const auto path = file("runs.db");
  {
    Writer writer(path);
    const auto run_id = writer.call([](Store& s) { return s.create_run(sample_run()); }).get();
    queue_steps(writer, run_id, 20000);
    writer.flush();
  }
  {
    Connection c(path, Connection::Access::ReadWrite);
    c.exec("PRAGMA wal_checkpoint(TRUNCATE)");
  }
  {
    // Scribble over every page after the first few: the b-trees break.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0, std::ios::end);
    const auto size = static_cast<std::size_t>(f.tellp());
    ASSERT_GT(size, 40000u);
    for (std::size_t offset = 8192; offset + 100 < size; offset += 4096) {
      f.seekp(static_cast<std::streamoff>(offset));
      f << std::string(100, '\x5a');
    }
  }
  const auto message = message_of([&] {
    Store store(path);
    store.count_steps(1);
    store.steps(1);
  });
  EXPECT_NE(message.find("damaged"), std::string::npos) << message;
}

TEST_F(StoreTest, RunsOfADeadProcessBecomeInterrupted) {
  const auto path = file("runs.db");
  std::int64_t orphan = 0, mine = 0;
  {
    Store store(path);
    orphan = store.create_run(sample_run());
    mine = store.create_run(sample_run());
    // Committed before the process died: both ranks' steps 0..2, rank 0's step 3.
    for (int rank = 0; rank < 2; ++rank)
      for (int step = 0; step < (rank == 0 ? 4 : 3); ++step) {
        StepRow row;
        row.run_id = orphan;
        row.rank = rank;
        row.step = step;
        row.loss = 1.0 + step + rank;
        row.wall_s = 0.5 * (step + 1);
        store.insert(row);
      }
    // A process that cannot exist: pid 0 is never a user process.
    store.connection()
        .prepare("UPDATE runs SET owner = ? WHERE id = ?")
        .run(this_process_owner().substr(0, this_process_owner().find(':')) + ":0:1", orphan);
  }
  Store store(path);
  EXPECT_EQ(store.run(orphan)->status, status::kInterrupted);
  EXPECT_NE(store.run(orphan)->reason.find("ended without finishing"), std::string::npos);
  // What was committed counts: the steps every rank stored, the time to the last step, the loss there.
  EXPECT_EQ(store.run(orphan)->steps_completed, 3);
  EXPECT_DOUBLE_EQ(store.run(orphan)->wall_s, 2.0);
  ASSERT_TRUE(store.run(orphan)->final_loss);
  EXPECT_DOUBLE_EQ(*store.run(orphan)->final_loss, 3.5);  // step 2: ranks 3.0 and 4.0
  EXPECT_EQ(store.run(mine)->status, status::kRunning);  // this process is alive
}

TEST_F(StoreTest, NonFiniteLossesAreStoredAsSuchNotAsNull) {
  Store store(file("runs.db"));
  const auto id = store.create_run(sample_run());
  const double values[] = {NAN, INFINITY, 2.0};
  for (int rank = 0; rank < 2; ++rank)
    for (int step = 0; step < 3; ++step) {
      StepRow row;
      row.run_id = id;
      row.rank = rank;
      row.step = step;
      row.loss = rank == 0 ? values[step] : 1.0;
      store.insert(row);
    }
  RunEnd end;
  end.status = status::kDiverged;
  end.final_loss = NAN;
  store.finish_run(id, end);

  const auto steps = store.steps(id, 0);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_TRUE(std::isnan(steps[0].loss));
  EXPECT_EQ(steps[1].loss, INFINITY);
  EXPECT_EQ(steps[2].loss, 2.0);
  const auto curve = store.curve(id);  // a NaN on one rank makes the step's mean NaN, not the other rank's value
  ASSERT_EQ(curve.size(), 3u);
  EXPECT_TRUE(std::isnan(curve[0].loss.value()));
  EXPECT_EQ(curve[1].loss.value(), INFINITY);
  EXPECT_EQ(curve[2].loss.value(), 1.5);
  ASSERT_TRUE(store.run(id)->final_loss);
  EXPECT_TRUE(std::isnan(*store.run(id)->final_loss));
  EXPECT_TRUE(std::isnan(*store.loss_at_step(id, 0)));
  EXPECT_TRUE(status::is_end(status::kDiverged));
  RunFilter diverged;
  diverged.statuses = {status::kDiverged};
  EXPECT_EQ(store.runs(diverged).size(), 1u);
}

TEST(StoreOwner, NamesThisProcessUniquely) {
  const auto me = this_process_owner();
  EXPECT_TRUE(owner_alive(me));
  auto other_start = me.substr(0, me.rfind(':') + 1) + "12345";
  EXPECT_FALSE(owner_alive(other_start));           // same pid, another process start: the pid was reused
  EXPECT_TRUE(owner_alive("some-other-host:1:1"));  // cannot tell from here
}

}  // namespace
