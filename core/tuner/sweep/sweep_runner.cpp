#include "core/tuner/sweep/sweep_runner.h"

#include <chrono>
#include <cstdio>
#include <functional>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <set>
#include <thread>

#include "core/tuner/launch/gpus.h"
#include "core/tuner/launch/job.h"
#include "core/tuner/launch/run_end.h"
#include "core/tuner/launch/slurm_job.h"
#include "core/tuner/netmodel/cost_model.h"
#include "core/tuner/store/run_metrics.h"
#include "core/tuner/store/run_recorder.h"
#include "core/tuner/sweep/successive_halving.h"
#include "db/sqlite.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;

// Where a trial runs: its cores (CPU) or GPUs, and its threads per rank.
struct Slot {
  std::vector<std::vector<int>> rank_cpus;
  std::vector<std::pair<std::string, std::string>> env;
  std::int64_t threads = 0;
};

std::vector<Slot> make_slots(std::int64_t parallel, const RunConfig& base, const std::string& backend) {
  std::vector<Slot> slots(static_cast<std::size_t>(parallel));
  // One trial at a time uses the machine as a single run does; SLURM places its jobs itself.
  if (parallel == 1 || backend == "slurm") return slots;
  const int gpus = visible_gpus();
  const bool cuda = base.run.device == "cuda" || (base.run.device == "auto" && gpus > 0);
  // Gloo ranks share the GPUs (rank r on GPU r mod their count): every trial sees them all.
  if (cuda && base.run.backend == "gloo") return slots;
  if (cuda) {
    if (base.run.world_size < 1)
      throw ConfigError("base.world_size", "set it explicitly when GPU trials run in parallel");
    if (base.run.world_size * parallel > gpus)
      throw ConfigError("parallel", std::to_string(parallel) + " trials of " + std::to_string(base.run.world_size) +
                                        " ranks need " + std::to_string(base.run.world_size * parallel) +
                                        " GPUs; this machine has " + std::to_string(gpus));
    for (std::int64_t s = 0; s < parallel; ++s) {
      std::string devices;
      for (std::int64_t g = 0; g < base.run.world_size; ++g)
        devices += (g ? "," : "") + std::to_string(s * base.run.world_size + g);
      slots[s].env = {{"CUDA_VISIBLE_DEVICES", devices}};
    }
    return slots;
  }
  const int world = resolve_world_size(base.run.world_size, base.run.device);
  const auto cores = allowed_cores();
  for (std::int64_t s = 0; s < parallel; ++s) {
    // Slots share cores round-robin when there are more slots than cores.
    std::vector<int> mine;
    const auto shares = split_cores(static_cast<int>(parallel), cores);
    if (!shares.empty())
      mine = shares[s];
    else
      mine = {cores.at(static_cast<std::size_t>(s) % cores.size())};
    auto per_rank = split_cores(world, mine);
    if (per_rank.empty()) per_rank.assign(world, mine);  // fewer cores than ranks: the ranks share them
    slots[s].rank_cpus = per_rank;
    slots[s].threads = std::max<std::int64_t>(1, static_cast<std::int64_t>(mine.size()) / world);
  }
  return slots;
}

struct Trial {
  db::RunRecord run;
  RunConfig config;      // the trial's whole configuration (all steps)
  bool to_draw = false;  // TPE: its values are drawn when it starts
};

db::NewRun new_trial_run(const PlannedTrial& t, const SweepOptions& options) {
  db::NewRun run;
  run.trial = t.index;
  run.name = t.label;
  run.config = t.config.to_json();
  // A SLURM trial's ranks run on its nodes, not on this machine's cores.
  run.world_size = options.backend == "slurm" ? t.config.run.world_size : job_world_size(t.config);
  run.steps_requested = t.config.run.steps;
  run.fingerprint = run_fingerprint(t.config);
  return run;
}

struct Job {
  std::size_t trial = 0;
  std::size_t rung = 0;  // for the baseline: the last one
  std::optional<SuccessiveHalving::Job> asha;
};

bool in_flight(const std::string& status) {
  return status == db::status::kRunning || status == db::status::kInterrupted || status == db::status::kCancelled;
}

class SweepExecution {
 public:
  SweepExecution(std::int64_t sweep_id, const SweepRunOptions& options) : id_(sweep_id), options_(options) {}
  SweepOutcome run();

 private:
  void load();
  std::optional<Job> take_job();
  void run_segment(const Job& job, const Slot& slot);
  // The segment `local` describes, as a SLURM job whose files go to `folder`.
  JobResult run_slurm_segment(const JobRequest& local, const fs::path& folder);
  std::optional<double> loss_at(std::int64_t run_id, std::int64_t step);
  // What successive halving ranks the trial by at `rung` (lower is better).
  double rung_metric(std::int64_t run_id, std::size_t rung);
  // The newest checkpoint of the run at or before `step` that is still on disk: (step, folder).
  std::optional<std::pair<std::int64_t, std::string>> checkpoint_before(std::int64_t run_id, std::int64_t step);
  void prune_checkpoints(std::int64_t run_id, const std::string& keep);
  void notify(const TrialEvent& event);
  // TPE: what the trial scored at `rung` (lower is better, inf when it diverged).
  std::vector<double> objective_values(std::int64_t run_id, std::size_t rung, bool diverged);
  // TPE's step_time: measured here, or predicted on the spec's objective_network.
  double step_ms_objective(std::int64_t run_id);
  // TPE: draws trial t's values from the trials finished so far and stores its
  // configuration; false when every configuration of the space has been taken.
  bool draw_trial(std::size_t t);
  bool cancelled() const { return options_.cancel && options_.cancel->load(); }

  std::int64_t id_;
  const SweepRunOptions& options_;
  db::Writer& store() const { return *options_.store; }

  SweepSpec spec_;
  std::vector<Trial> trials_;
  std::vector<std::int64_t> rung_steps_;
  std::set<std::size_t> baselines_;  // run to the end, outside successive halving
  std::vector<std::size_t> asha_trials_;  // ASHA's trial i is trials_[asha_trials_[i]]
  std::unique_ptr<SuccessiveHalving> halving_;
  std::deque<Job> forced_;  // resumed in-flight segments and the baseline, before anything else
  std::map<std::size_t, TpeObservation> observations_;  // TPE's history, by trial

  std::mutex mutex_;  // guards halving_, forced_, running_, observations_ and trials_' drawn values
  std::condition_variable changed_;
  int running_ = 0;
  std::mutex notify_mutex_;
};

void SweepExecution::load() {
  const auto sweep = store().call([id = id_](db::Store& s) { return s.sweep(id); }).get();
  if (!sweep) throw db::Error("there is no sweep " + std::to_string(id_) + " in " + store().path());
  if (sweep->status == db::status::kSucceeded)
    throw db::Error("sweep " + std::to_string(id_) + " has finished: nothing to resume");
  spec_ = SweepSpec::parse(sweep->spec);
  db::RunFilter filter;
  filter.sweep_id = id_;
  for (auto& run : store().call([filter](db::Store& s) { return s.runs(filter); }).get()) {
    if (!run.config_problem.empty())
      throw db::Error("sweep " + std::to_string(id_) + "'s trial run " + std::to_string(run.id) +
                      " has no usable configuration (" + run.config_problem + "): the sweep cannot be resumed");
    Trial t;
    t.config = RunConfig::parse(run.config);
    t.run = std::move(run);
    trials_.push_back(std::move(t));
  }
  if (trials_.empty()) throw db::Error("sweep " + std::to_string(id_) + " has no trials");
  store().call([id = id_](db::Store& s) { s.claim_sweep(id); }).get();

  const auto& base = trials_.front().config;
  rung_steps_ = spec_.early_stopping.rungs(base.run.steps);
  // The plan is deterministic: its baselines are the stored trials at their places.
  std::set<std::size_t> planned_baselines;
  std::size_t planned = 0;
  for_each_trial(spec_, [&](const PlannedTrial& t) {
    if (t.baseline) planned_baselines.insert(planned);
    ++planned;
  });
  if (planned == trials_.size()) {
    baselines_ = std::move(planned_baselines);
  } else if (spec_.options.baseline) {
    baselines_.insert(0);  // planned by an older commtune: one baseline, first
  }
  for (std::size_t t = 0; t < trials_.size(); ++t)
    if (!baselines_.count(t)) asha_trials_.push_back(t);
  halving_ = std::make_unique<SuccessiveHalving>(static_cast<std::int64_t>(asha_trials_.size()), rung_steps_,
                                                 spec_.early_stopping.reduction_factor);

  // What the store says happened: rungs finished, trials failed, segments in flight.
  for (const auto baseline : baselines_) {
    const auto& s = trials_[baseline].run.status;
    if (s != db::status::kSucceeded && s != db::status::kFailed && s != db::status::kDiverged)
      forced_.push_back({baseline, rung_steps_.size() - 1, {}});
  }
  for (std::size_t a = 0; a < asha_trials_.size(); ++a) {
    const auto& run = trials_[asha_trials_[a]].run;
    if (run.status == db::status::kFailed) {
      halving_->failed(static_cast<std::int64_t>(a));
      continue;
    }
    if (run.status == db::status::kPending && run.steps_completed == 0) {
      trials_[asha_trials_[a]].to_draw = spec_.options.strategy == "tpe";
      continue;
    }
    // A diverged run stored the step that diverged: the rung it ran for is the
    // first that step did not pass.
    const bool diverged = run.status == db::status::kDiverged;
    const auto done = [&](std::size_t k) {
      return diverged ? rung_steps_[k] < run.steps_completed : rung_steps_[k] <= run.steps_completed;
    };
    std::size_t next = 0;  // the first rung its stored steps did not pass
    while (next < rung_steps_.size() && done(next)) ++next;
    // Every step stored but no end (a stop that came as the run ended, or a
    // launcher killed then): its last segment runs again from a checkpoint
    // before its last step, so that it ends, instead of staying unfinished.
    if (in_flight(run.status) && next > 0 && next == rung_steps_.size()) --next;
    for (std::size_t k = 0; k < next; ++k) halving_->report(static_cast<std::int64_t>(a), k, rung_metric(run.id, k));
    if (spec_.options.strategy == "tpe" && (next > 0 || diverged)) {
      const auto rung = diverged ? std::min(next, rung_steps_.size() - 1) : next - 1;
      observations_[asha_trials_[a]] = {position_of(spec_, run.config), objective_values(run.id, rung, diverged),
                                        static_cast<int>(rung)};
    }
    if (diverged) {
      halving_->diverged(static_cast<std::int64_t>(a), std::min(next, rung_steps_.size() - 1));
      continue;
    }
    if (in_flight(run.status) && next < rung_steps_.size()) {
      const SuccessiveHalving::Job asha{static_cast<std::int64_t>(a), next};
      halving_->mark_started(asha);
      forced_.push_back({asha_trials_[a], next, asha});
    }
  }
}

std::optional<Job> SweepExecution::take_job() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!cancelled()) {
    if (!forced_.empty()) {
      auto job = forced_.front();
      forced_.pop_front();
      ++running_;
      return job;
    }
    if (auto asha = halving_->next()) {
      const auto t = asha_trials_[static_cast<std::size_t>(asha->trial)];
      if (trials_[t].to_draw) {
        db::RunEnd end;
        try {
          if (!draw_trial(t)) {
            end.status = db::status::kStopped;
            end.reason = "TPE: every configuration of the search space has run or is running, and training is "
                         "deterministic: nothing new to draw";
          }
        } catch (const ConfigError& e) {  // the drawn values do not make a configuration that can run
          end.status = db::status::kFailed;
          end.reason = e.what();
        }
        if (!end.status.empty()) {
          store().call([id = trials_[t].run.id, end](db::Store& s) { finish_run_with_digest(s, id, end); }).get();
          trials_[t].to_draw = false;
          halving_->failed(asha->trial);
          continue;
        }
      }
      ++running_;
      return Job{t, asha->rung, asha};
    }
    if (running_ == 0) return std::nullopt;  // nothing left, and no running trial can change that
    changed_.wait_for(lock, std::chrono::milliseconds(200));
  }
  return std::nullopt;
}

std::optional<double> SweepExecution::loss_at(std::int64_t run_id, std::int64_t step) {
  const auto curve = store().call([run_id](db::Store& s) { return s.curve(run_id); }).get();
  return tail_loss(curve, step);
}

double SweepExecution::rung_metric(std::int64_t run_id, std::size_t rung) {
  if (spec_.early_stopping.metric == "tail_loss") return loss_at(run_id, rung_steps_[rung]).value_or(INFINITY);
  const auto from = rung > 0 ? rung_steps_[rung - 1] : 0, to = rung_steps_[rung];
  const auto curve = store().call([run_id](db::Store& s) { return s.curve(run_id); }).get();
  std::vector<double> times;
  for (const auto& p : curve)
    if (p.step >= from && p.step < to) {
      if (!p.t_step) return INFINITY;  // a step without its time: not known to be fast
      times.push_back(*p.t_step);
    }
  if (times.empty()) return INFINITY;
  std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
  return times[times.size() / 2];
}

std::optional<std::pair<std::int64_t, std::string>> SweepExecution::checkpoint_before(std::int64_t run_id,
                                                                                      std::int64_t step) {
  const auto [events, stored] =
      store()
          .call([run_id](db::Store& s) {
            return std::make_pair(s.events(run_id, "checkpoint"), s.steps_of_every_rank(run_id));
          })
          .get();
  // A checkpoint past the steps every rank has stored would leave a gap in
  // the run's metrics: rank 0 writes checkpoints while slower ranks' last
  // steps may not have reached the store when the process died.
  const auto limit = std::min(step, stored);
  std::optional<std::pair<std::int64_t, std::string>> best;
  for (const auto& e : events) {
    const auto at = e.body.value("step", std::int64_t{-1});
    const auto folder = e.body.value("folder", "");
    if (at < 0 || at > limit || !fs::is_directory(folder)) continue;
    if (!best || at > best->first) best = {at, folder};
  }
  return best;
}

void SweepExecution::prune_checkpoints(std::int64_t run_id, const std::string& keep) {
  for (const auto& e : store().call([run_id](db::Store& s) { return s.events(run_id, "checkpoint"); }).get()) {
    const auto folder = e.body.value("folder", "");
    std::error_code ignored;
    if (!folder.empty() && folder != keep) fs::remove_all(folder, ignored);
  }
}

std::vector<double> SweepExecution::objective_values(std::int64_t run_id, std::size_t rung, bool diverged) {
  std::vector<double> values;
  const auto& objective = spec_.options.objective;
  if (objective != "step_time")
    values.push_back(diverged ? INFINITY : loss_at(run_id, rung_steps_[rung]).value_or(INFINITY));
  if (objective != "tail_loss") values.push_back(diverged ? INFINITY : step_ms_objective(run_id));
  return values;
}

double SweepExecution::step_ms_objective(std::int64_t run_id) {
  const auto& network = spec_.options.objective_network;
  return store()
      .call([run_id, network](db::Store& s) {
        if (!network.empty()) {
          try {
            const auto profile = RunProfile::from_store(s, run_id);
            net::Cluster cluster;
            cluster.nodes = profile.world_size;
            cluster.inter = net::link_preset(network, "objective_network");
            cluster.intra = net::link_preset("nvlink", "intra");
            return 1e3 * predict(profile, cluster).step_s;
          } catch (const db::Error&) {  // too few steps to profile: what was measured
          }
        }
        return digest_run(s, run_id).step_ms.value_or(INFINITY);
      })
      .get();
}

bool SweepExecution::draw_trial(std::size_t t) {
  std::vector<TpeObservation> history;
  for (const auto& [trial, observation] : observations_) history.push_back(observation);
  const TpeOptions tpe{spec_.options.tpe_startup_trials, spec_.options.tpe_candidates, spec_.options.seed};
  // Training is deterministic: a configuration already run (or running) would
  // only repeat it. Draw again (fresh candidates) until the trial is new.
  std::set<std::string> taken;
  for (const auto& other : trials_)
    if (!other.to_draw) taken.insert(other.config.to_json().dump());
  const auto dimensions = tpe_dimensions(spec_);
  std::optional<PlannedTrial> planned;
  constexpr std::int64_t kRedraws = 64, kStride = 1000003;
  for (std::int64_t attempt = 0; attempt < kRedraws && !planned; ++attempt) {
    auto candidate = trial_at(spec_, tpe_sample(dimensions, history, static_cast<std::int64_t>(t) + attempt * kStride, tpe));
    if (!taken.count(candidate.config.to_json().dump())) planned = std::move(candidate);
  }
  if (!planned && std::all_of(spec_.axes.begin(), spec_.axes.end(), [](const SweepAxis& a) { return !a.min; })) {
    // A space of listed values only: the first configuration of it not taken, if any is left.
    auto grid = spec_;
    grid.options.strategy = "grid";
    grid.options.baseline = false;
    if (count_trials(grid) <= 100000)
      for (auto& candidate : plan_trials(grid))
        if (!taken.count(candidate.config.to_json().dump())) {
          planned = std::move(candidate);
          break;
        }
  }
  if (!planned) return false;
  auto& trial = trials_[t];
  planned->index = trial.run.trial.value_or(static_cast<std::int64_t>(t));
  const auto run = new_trial_run(*planned, spec_.options);
  store().call([id = trial.run.id, run](db::Store& s) { s.plan_pending_run(id, run); }).get();
  trial.config = planned->config;
  trial.run.name = run.name;
  trial.run.config = run.config;
  trial.to_draw = false;
  return true;
}

JobResult SweepExecution::run_slurm_segment(const JobRequest& local, const fs::path& folder) {
  SlurmJobRequest request;
  request.config = local.config;
  const auto& o = spec_.slurm;
  request.plan.nodes = o.nodes;
  request.plan.ranks_per_node = o.ranks_per_node;
  request.plan.gpus_per_node = o.gpus_per_node;
  request.plan.partition = o.partition;
  request.plan.time_limit = o.time_limit;
  request.plan.requeue = o.requeue;
  request.plan.sbatch_options = o.sbatch;
  request.plan.quiet_limit = std::chrono::milliseconds(static_cast<std::int64_t>(1000 * o.quiet_limit_s));
  request.plan.poll = std::chrono::milliseconds(static_cast<std::int64_t>(1000 * o.poll_s));
  request.folder = fs::absolute(folder).string();
  // Unique to this store's run and segment, so that a resumed sweep finds the job by it.
  char tag[17];
  std::snprintf(tag, sizeof tag, "%016zx", std::hash<std::string>{}(store().path() + "|" + request.folder));
  request.job_name = "commtune-" + std::to_string(*local.continue_run) + "-" + tag;
  request.worker_path = o.worker.empty() ? default_worker_path() : o.worker;
  request.subscribers = local.subscribers;
  request.cancel = local.cancel;
  request.cancels_all = local.cancels_all;
  request.store = local.store;
  request.run_id = *local.continue_run;
  return run_slurm_job(request);
}

void SweepExecution::notify(const TrialEvent& event) {
  if (!options_.on_trial) return;
  std::lock_guard<std::mutex> lock(notify_mutex_);
  options_.on_trial(event);
}

void SweepExecution::run_segment(const Job& job, const Slot& slot) {
  const auto& trial = trials_[job.trial];
  const auto run_id = trial.run.id;
  const auto to_step = rung_steps_[job.rung];
  const bool final_rung = job.rung + 1 == rung_steps_.size();

  auto config = trial.config;
  config.run.steps = to_step;
  const bool slurm = spec_.options.backend == "slurm";
  const auto& work_dir = slurm && !spec_.slurm.folder.empty() ? spec_.slurm.folder : options_.work_dir;
  // By run id, unique in the store and shown beside the trial's number: no two trials share a folder,
  // whatever named the folders of a sweep resumed here.
  const auto trial_dir = fs::path(work_dir) / ("sweep-" + std::to_string(id_)) / ("run-" + std::to_string(run_id));
  config.checkpoint.dir = trial_dir.string();
  config.checkpoint.every = spec_.options.checkpoint_every;
  // Before the last step: a segment resumed at its own end would run no step
  // (a run stored whole that had not ended runs its last steps again).
  const auto resume = checkpoint_before(run_id, to_step - 1);
  config.checkpoint.resume = resume ? resume->second : "";
  if (config.run.threads == 0) config.run.threads = slot.threads;

  TrialEvent event;
  event.sweep_id = id_;
  event.trial = static_cast<std::int64_t>(job.trial);
  event.trials = static_cast<std::int64_t>(trials_.size());
  event.run_id = run_id;
  event.label = trial.run.name;
  event.from_step = resume ? resume->first : 0;
  event.to_step = to_step;
  event.final_rung = final_rung;
  notify(event);

  std::vector<std::unique_ptr<EventSubscriber>> owned;
  if (options_.subscribers) owned = options_.subscribers(event);
  JobRequest request;
  request.config = config;
  for (auto& s : owned) request.subscribers.push_back(s.get());
  request.rank_cpus = slot.rank_cpus;
  request.env = slot.env;
  request.echo_worker_output = options_.echo_worker_output;
  request.cancel = options_.trial_cancel ? options_.trial_cancel(event) : options_.cancel;
  if (options_.trial_cancel) request.cancels_all = options_.cancel;
  request.store = options_.store;
  request.continue_run = run_id;
  // The plan asked the engine about every trial (SweepSpec::parse_new); a TPE draw it refuses fails as its trial.
  request.engine_checked = true;

  JobResult result;
  try {
    result = slurm ? run_slurm_segment(request, trial_dir / ("to-step-" + std::to_string(to_step))) : run_job(request);
  } catch (const std::exception& e) {  // nothing launched: the trial's configuration cannot run here
    result.outcome.status = RunStatus::Failed;
    result.outcome.reason = e.what();
    result.summary["reason"] = e.what();
    db::RunEnd end;
    end.status = db::status::kFailed;
    end.reason = e.what();
    end.steps_completed = trial.run.steps_completed;
    store().call([run_id, end](db::Store& s) { finish_run_with_digest(s, run_id, end); }).get();
  }

  event.finished = true;
  event.summary = result.summary;
  event.status = stored_status(result.outcome.status);
  // Stopped on its own (trial_cancel) while the sweep goes on: for good, so
  // that resuming the sweep does not run it again (the job stored it so).
  if (stopped_alone(result.outcome, request.cancels_all)) event.status = db::status::kStopped;
  const bool succeeded = result.outcome.status == RunStatus::Succeeded;
  event.digest = store().call([run_id](db::Store& s) { return digest_run(s, run_id); }).get();
  const bool diverged = result.outcome.status == RunStatus::Diverged;
  std::optional<TpeObservation> observation;
  if (spec_.options.strategy == "tpe" && job.asha && (succeeded || diverged))
    observation = TpeObservation{position_of(spec_, trial.run.config), objective_values(run_id, job.rung, diverged),
                                 static_cast<int>(job.rung)};
  double metric = INFINITY;
  if (succeeded) {
    if (job.asha) metric = rung_metric(run_id, job.asha->rung);
    if (!final_rung) {
      event.status = db::status::kPaused;
      store().call([run_id](db::Store& s) { s.set_run_status(run_id, db::status::kPaused); }).get();
    }
    if (const auto latest = checkpoint_before(run_id, to_step)) prune_checkpoints(run_id, latest->second);
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --running_;
    if (observation) observations_[job.trial] = *observation;
    if (job.asha) {
      if (succeeded)
        halving_->report(job.asha->trial, job.asha->rung, metric);
      else if (diverged)
        halving_->diverged(job.asha->trial, job.asha->rung);
      else if (result.outcome.status == RunStatus::Failed || !cancelled())  // stopped alone: out of the race
        halving_->failed(job.asha->trial);
      else
        halving_->abandon(*job.asha);
    }
  }
  changed_.notify_all();
  notify(event);
}

SweepOutcome SweepExecution::run() {
  load();
  const auto slots = make_slots(spec_.options.parallel, trials_.front().config, spec_.options.backend);
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex failure_mutex;
  for (const auto& slot : slots)
    threads.emplace_back([&, slot] {
      try {
        while (const auto job = take_job()) run_segment(*job, slot);
      } catch (...) {
        std::lock_guard<std::mutex> lock(failure_mutex);
        if (!failure) failure = std::current_exception();
      }
      changed_.notify_all();
    });
  for (auto& t : threads) t.join();
  if (failure) {
    store().call([id = id_](db::Store& s) { s.set_sweep_status(id, db::status::kFailed); }).get();
    std::rethrow_exception(failure);
  }

  SweepOutcome outcome;
  outcome.sweep_id = id_;
  outcome.status = cancelled() ? db::status::kCancelled : db::status::kSucceeded;
  db::RunFilter filter;
  filter.sweep_id = id_;
  const auto status = outcome.status;
  const auto runs = store()
                        .call([filter, status, id = id_](db::Store& s) {
                          // Trials that waited at a rung and were never promoted were stopped early.
                          if (status == db::status::kSucceeded)
                            for (const auto& r : s.runs(filter))
                              if (r.status == db::status::kPaused)
                                s.set_run_status(r.id, db::status::kStopped, "stopped early by successive halving");
                          s.set_sweep_status(id, status);
                          return s.runs(filter);
                        })
                        .get();
  store().flush();
  for (const auto& r : runs) ++outcome.trial_statuses[r.status];
  return outcome;
}

}  // namespace

std::int64_t create_sweep(const SweepSpec& spec, db::Writer& store, std::int64_t* trials) {
  std::int64_t stored = 0;
  const auto id = store
                      .call([&spec, &stored](db::Store& s) {
                        // All of the sweep or none of it; the trials stream from the plan.
                        db::Transaction transaction(s.connection());
                        const auto sweep_id = s.create_sweep(spec.options.name, spec.to_json());
                        for_each_trial(spec, [&](const PlannedTrial& t) {
                          auto run = new_trial_run(t, spec.options);
                          run.sweep_id = sweep_id;
                          s.create_run(run, db::status::kPending);
                          ++stored;
                        });
                        transaction.commit();
                        return sweep_id;
                      })
                      .get();
  if (trials) *trials = stored;
  return id;
}

SweepOutcome run_sweep(std::int64_t sweep_id, const SweepRunOptions& options) {
  if (!options.store) throw std::invalid_argument("run_sweep needs the run store");
  SweepExecution execution(sweep_id, options);
  return execution.run();
}

}  // namespace commtune
