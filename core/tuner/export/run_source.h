// What a stored run is exported from (a production configuration, launch
// scripts): its configuration, checked, and its last checkpoint folder. The
// CLI's `export --run` and the desktop app's export dialog both take it from
// here, so neither exports a configuration the schema refused.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "db/store.h"

namespace commtune {

struct RunExportSource {
  db::RunRecord run;
  nlohmann::json config;
  std::string checkpoint;  // its last checkpoint folder, "" when it has none on this machine
};

// Throws std::runtime_error naming the run when it is not in the store or its
// stored configuration is unusable (db::RunRecord::config_problem).
RunExportSource run_export_source(const db::Store& store, std::int64_t run_id);

}  // namespace commtune
