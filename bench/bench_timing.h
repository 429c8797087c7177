// Timing for the C++ benchmarks: warm up, then the median of several batches.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace commtune::bench {

// Median seconds per call of fn over `batches` batches of `calls` calls each.
template <class Fn>
double median_seconds(Fn&& fn, int batches = 15, int calls = 1) {
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> samples;
  for (int b = 0; b < batches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    for (int c = 0; c < calls; ++c) fn();
    samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / calls);
  }
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

}  // namespace commtune::bench
