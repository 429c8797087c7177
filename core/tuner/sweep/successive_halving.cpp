#include "core/tuner/sweep/successive_halving.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace commtune {

SuccessiveHalving::SuccessiveHalving(std::int64_t trials, std::vector<std::int64_t> rung_steps, double reduction_factor)
    : rung_steps_(std::move(rung_steps)),
      reduction_factor_(reduction_factor),
      trials_(static_cast<std::size_t>(trials)) {
  if (rung_steps_.empty()) throw std::invalid_argument("successive halving needs at least one rung");
}

bool SuccessiveHalving::promotable(std::int64_t trial, std::size_t rung) const {
  // Among the trials that finished this rung, is this one in the best 1/eta?
  std::vector<std::pair<double, std::int64_t>> finished;
  for (std::size_t t = 0; t < trials_.size(); ++t) {
    const auto& s = trials_[t];
    if (!s.failed && s.finished_rung >= static_cast<int>(rung))
      finished.emplace_back(s.loss[rung], static_cast<std::int64_t>(t));
  }
  const auto keep = static_cast<std::size_t>(std::floor(static_cast<double>(finished.size()) / reduction_factor_));
  if (keep == 0) return false;
  std::sort(finished.begin(), finished.end());  // by loss, then trial index: deterministic
  for (std::size_t i = 0; i < keep; ++i)
    if (finished[i].second == trial) return true;
  return false;
}

std::optional<SuccessiveHalving::Job> SuccessiveHalving::next() {
  for (std::size_t rung = rung_steps_.size() - 1; rung-- > 0;) {
    for (std::size_t t = 0; t < trials_.size(); ++t) {
      auto& s = trials_[t];
      if (s.ended || s.running_rung >= 0 || s.finished_rung != static_cast<int>(rung)) continue;
      if (!promotable(static_cast<std::int64_t>(t), rung)) continue;
      s.running_rung = static_cast<int>(rung + 1);
      return Job{static_cast<std::int64_t>(t), rung + 1};
    }
  }
  for (std::size_t t = 0; t < trials_.size(); ++t) {
    auto& s = trials_[t];
    if (s.started) continue;
    s.started = true;
    s.running_rung = 0;
    return Job{static_cast<std::int64_t>(t), 0};
  }
  return std::nullopt;
}

void SuccessiveHalving::report(std::int64_t trial, std::size_t rung, double loss) {
  auto& s = trials_.at(trial);
  s.started = true;
  s.running_rung = -1;
  s.finished_rung = static_cast<int>(rung);
  s.loss.resize(rung + 1, loss);
  s.loss[rung] = std::isfinite(loss) ? loss : INFINITY;  // a diverged trial is the worst, never a tie
}

void SuccessiveHalving::failed(std::int64_t trial) {
  auto& s = trials_.at(trial);
  s.started = true;
  s.failed = true;
  s.ended = true;
  s.running_rung = -1;
}

void SuccessiveHalving::diverged(std::int64_t trial, std::size_t rung) {
  report(trial, rung, INFINITY);
  trials_.at(trial).ended = true;
}

void SuccessiveHalving::abandon(const Job& job) {
  auto& s = trials_.at(job.trial);
  s.running_rung = -1;
  if (job.rung == 0 && s.finished_rung < 0) s.started = false;
}

void SuccessiveHalving::mark_started(const Job& job) {
  auto& s = trials_.at(job.trial);
  s.started = true;
  s.running_rung = static_cast<int>(job.rung);
}

bool SuccessiveHalving::running() const {
  return std::any_of(trials_.begin(), trials_.end(), [](const Trial& s) { return s.running_rung >= 0; });
}

}  // namespace commtune
