// The recommendation: among runs of the same model and data, the
// configuration whose loss stays within a tolerance of its allreduce
// baseline (the one at its own learning rate, batch, ...: core/tuner/verdict/
// evidence.h) and whose predicted step time on the target cluster beats it
// by more than noise and the model's error; or, honestly, "keep allreduce".
//
// A configuration is recommended only when
//   - every run of it succeeded, and its baseline has the same values of
//     every parameter outside the hook;
//   - its hook acted on the wire during the steps its figures come from;
//   - its loss is within the tolerance of the baseline's over the whole
//     interval the seeds give (one seed: the point, said so);
//   - its predicted speedup's 95% interval lies above 1 and the speedup
//     reaches min_speedup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/netmodel/cost_model.h"
#include "core/tuner/store/run_label.h"
#include "core/tuner/verdict/evidence.h"
#include "db/store.h"

namespace commtune {

struct RecommendOptions {
  net::Cluster cluster;
  TargetCompute compute;                     // the target's compute (default: this machine's, pooled)
  double tolerance = 0.01;                   // relative: a loss at most (1 + tolerance) x the baseline's
  double min_speedup = 1.05;                 // predicted gains below 5% are within the model's error
  std::optional<std::int64_t> baseline_run;  // compare everything with this run's configuration
  // How many of the fastest predicted candidates show 95% intervals; the
  // candidate the verdict judges always does. The rest show their points:
  // each interval draws EvidenceOptions::replicates profiles, too many for
  // a sweep of 10^5 trials to draw for all.
  std::size_t intervals = 50;
  // How many of the fastest predicted candidates, baselines not counted, get
  // their Candidate::reason (the rest's is empty): a page that shows 20
  // formats 20, not one per trial of a sweep of 10^5.
  std::size_t reasons = SIZE_MAX;
};

struct Candidate {
  std::int64_t run_id = 0;          // the configuration's first run
  std::vector<std::int64_t> runs;   // all of its runs
  std::size_t seeds = 0;            // the distinct seeds among them (repeats of a seed are one observation)
  std::string label;                // the run's name (without its seed), or its hook
  std::string hook;                 // hook name (+ wrapper)
  bool is_baseline = false;         // a plain-allreduce configuration: a reference, not a candidate
  std::optional<std::int64_t> baseline_run;  // the first run of the baseline it is compared with
  std::optional<double> loss;       // mean tail loss over its seeds
  std::optional<double> loss_sd;    // their standard deviation (two seeds or more)
  LossChange loss_change;           // against its baseline
  bool within_tolerance = false;
  std::string excluded;  // why it cannot be recommended ("" when it can)
  // Its outcome in one phrase, for every candidate (candidate_reason): "chosen", "the baseline", "excluded: ...",
  // or what its speedup shows when it could have been chosen and was not.
  std::string reason;
  std::optional<StepPrediction> prediction;
  Estimate step_s;   // predicted, with its interval
  Estimate speedup;  // its baseline's predicted step / its own

  nlohmann::json to_json() const;
};

struct Recommendation {
  net::Cluster cluster;
  std::string compute;  // which compute the predictions assumed
  RunToRun run_to_run;  // the run-to-run spread its intervals include
  double tolerance = 0;
  std::size_t intervals = 0;               // how many of the fastest candidates have intervals drawn
  std::int64_t baseline_run = 0;           // the chosen one's baseline, else the first baseline
  std::vector<Candidate> candidates;       // fastest predicted first
  std::optional<std::int64_t> chosen_run;  // null: keep allreduce
  std::string verdict;                     // one sentence for humans

  nlohmann::json to_json() const;
  nlohmann::json summary_json() const;  // the same without its candidates
};

// Whether the candidate with the best predicted speedup is recommended: its
// 95% interval lies above 1.0 and the speedup reaches options.min_speedup.
bool is_recommended(const Candidate& best, const RecommendOptions& options);
// The one sentence a recommendation says about its best candidate (null: none
// is left) on `where`; "keep allreduce" gives the reason its interval shows.
std::string recommendation_verdict(const Candidate* best, const std::string& where, const RecommendOptions& options);

// `value` with two decimals, or as many more (up to six) as it takes for
// each of `marks` to read on the side of it that it is: 0.99947 beside 1.0
// is "0.9995", not "1.00" (a printed interval "wholly below 1.0" must read so).
std::string digits_beside(double value, std::initializer_list<double> marks);
// "1.19x (95%: 1.12-1.25)", its figures with the digits that keep them on their side of 1.0 and of `margin`.
std::string speedup_text(const Estimate& speedup, double margin);
// Why `k` was or was not chosen, given the best candidate (null: none) and
// the chosen run; the reason a keep-allreduce verdict gives for the best.
std::string candidate_reason(const Candidate& k, const Candidate* best, const std::optional<std::int64_t>& chosen,
                             const RecommendOptions& options);

// Every configuration judged as a candidate on what does not depend on the
// target: its runs, loss and baseline, its hook's activity, whether it can be
// profiled (options' tolerance and baseline_run; not its cluster or compute).
// The Analysis page judges once and recommends on each network from it.
struct JudgedCandidates {
  std::vector<Candidate> candidates;  // by configuration, without predictions
  std::optional<std::size_t> forced;  // the named baseline's configuration
  double tolerance = 0;
  std::optional<std::int64_t> baseline_run;
  std::string compute_source;  // the pooled compute's description, of the first profiled configuration
};
// Throws db::Error when the runs hold no allreduce baseline (and none is named).
JudgedCandidates judge_candidates(const Evidence& evidence, const RecommendOptions& options);
// The recommendation on options' cluster and compute from candidates judged
// from the same evidence with the same tolerance and baseline
// (std::invalid_argument otherwise).
Recommendation recommend(const Evidence& evidence, const JudgedCandidates& judged, const RecommendOptions& options);
// Both at once.
Recommendation recommend(const Evidence& evidence, const RecommendOptions& options);
// For stored runs; the named baseline (options.baseline_run) joins them
// when it is not among them. Throws db::Error when it is not stored.
Recommendation recommend(const db::Store& store, std::vector<db::RunRecord> runs, const RecommendOptions& options);

}  // namespace commtune
