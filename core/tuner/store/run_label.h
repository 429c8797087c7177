// What a stored run is called and which hook it trained with, the same in
// every table, legend and verdict; and which runs are plain allreduce (the
// baselines every comparison is made against).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "db/store.h"

namespace commtune {

// Whether a configuration trains with plain allreduce (hook allreduce or none, no wrapper).
bool is_plain_allreduce(const nlohmann::json& config);

// The succeeded run among `runs` that plain allreduce trained, preferring
// the one with most steps; nullptr if none.
const db::RunRecord* find_allreduce_baseline(const std::vector<db::RunRecord>& runs);
const db::RunRecord* find_allreduce_baseline(std::vector<db::RunRecord>&&) = delete;  // would point into a temporary

// "powersgd (fp16 wrapper)" and the like.
std::string describe_hook(const nlohmann::json& config);
// A stored run's hook, or "(unreadable configuration)" for a row whose
// configuration the schema refused (db::RunRecord::config_problem).
std::string describe_hook(const db::RunRecord& run);
// What a run is called in every table and legend: its name, else its hook.
std::string run_label(const db::RunRecord& run);

}  // namespace commtune
