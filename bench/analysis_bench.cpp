// The Analysis page's figures for a stored sweep (core/tuner/verdict/
// sweep_analysis.h: every run's loss and predicted step time, parameter
// importance, and the recommendation on every preset network), computed as
// the page computes them before it draws; beside it, in the same run, the
// reference: the sweep's runs read alone (Store::runs, what any reader of
// the sweep does first).
//
//   build/bench/analysis_bench STORE [SWEEP_ID]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "app/heap_tuning.h"
#include "core/tuner/verdict/sweep_analysis.h"
#include "db/store.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s STORE [SWEEP_ID]\n", argv[0]);
    return 2;
  }
  commtune::tune_heap();  // as the desktop app's
  using clock_type = std::chrono::steady_clock;
  const auto seconds_since = [](clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
  };
  try {
    const commtune::db::Store store(argv[1], commtune::db::Store::Access::ReadOnly);
    commtune::SweepAnalysisQuery query;
    query.sweep_id = argc > 2 ? std::atoll(argv[2]) : 1;
    auto start = clock_type::now();
    commtune::db::RunFilter filter;
    filter.sweep_id = query.sweep_id;
    const auto runs = store.runs(filter).size();
    const double read = seconds_since(start);
    start = clock_type::now();
    const auto analysis = commtune::analyse_sweep(store, query);
    const double analysed = seconds_since(start);
    std::printf("analysis of %zu runs (%zu networks): %.2f s; their rows read alone: %.2f s (%.1fx)\n",
                analysis.runs.size(), analysis.networks.size(), analysed, read, analysed / read);
    return runs == 0 ? 1 : 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "analysis_bench: %s\n", e.what());
    return 1;
  }
}
