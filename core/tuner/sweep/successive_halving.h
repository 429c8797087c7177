// Asynchronous successive halving (ASHA, Li et al. 2020) over a fixed set of
// trials: when a slot frees up, promote a trial that is in the best
// 1/reduction_factor of those finished at its rung (highest rung first);
// otherwise start a trial that has not run yet. A single rung is a plain
// sweep: every trial runs once. The state is plain data, so a resumed sweep
// rebuilds it from the store.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace commtune {

class SuccessiveHalving {
 public:
  struct Job {
    std::int64_t trial = 0;
    std::size_t rung = 0;  // run the trial until this rung's step count
  };

  SuccessiveHalving(std::int64_t trials, std::vector<std::int64_t> rung_steps, double reduction_factor);

  // The next job to run, or nullopt when none can start now (wait for a
  // running one) or the sweep is done.
  std::optional<Job> next();
  // A trial finished `rung` with metric value `loss` (lower is better).
  void report(std::int64_t trial, std::size_t rung, double loss);
  // A trial failed: it is never promoted, and leaves the race.
  void failed(std::int64_t trial);
  // A trial diverged on its way to `rung`: it stays in the race as its worst
  // result there (the others' share of promotions does not grow), and is
  // never promoted.
  void diverged(std::int64_t trial, std::size_t rung);
  // A job that was handed out did not finish (cancelled): it may be handed out again.
  void abandon(const Job& job);
  // Marks a job as handed out before (restoring a resumed sweep's state).
  void mark_started(const Job& job);

  // Whether a handed-out job has not reported yet. When next() has nothing
  // and nothing is running, the sweep is done.
  bool running() const;
  std::size_t rungs() const { return rung_steps_.size(); }
  std::int64_t steps(std::size_t rung) const { return rung_steps_.at(rung); }
  // The rung each trial finished last (-1: none).
  int finished_rung(std::int64_t trial) const { return trials_.at(trial).finished_rung; }

 private:
  struct Trial {
    int finished_rung = -1;
    int running_rung = -1;  // the rung of its job in flight
    bool started = false;
    bool failed = false;
    bool ended = false;        // failed or diverged: never runs again
    std::vector<double> loss;  // per finished rung
  };
  bool promotable(std::int64_t trial, std::size_t rung) const;

  std::vector<std::int64_t> rung_steps_;
  double reduction_factor_;
  std::vector<Trial> trials_;
};

}  // namespace commtune
