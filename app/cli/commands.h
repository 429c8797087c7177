// The CLI's commands, one group per file. Each adds its subcommands to the
// app; when one runs, it leaves its exit code in the context.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace commtune::cli {

struct Context {
  std::string db;  // --db: the run store (default: default_store_path())
  int exit_code = 0;
};

// `compare`: the runs named, or a sweep's trials, against a baseline.
struct CompareArgs {
  std::vector<std::int64_t> runs;
  std::optional<std::int64_t> sweep;
  std::optional<std::int64_t> baseline;
  bool as_json = false;
};
int compare_command(const CompareArgs& args, const Context& context);

// --on-nonfinite=stop|warn, as an override of the parameter on_nonfinite.
void add_on_nonfinite_option(CLI::App& command, std::vector<std::string>& overrides);

void add_run_commands(CLI::App& app, Context& context);       // run, summarize
void add_params_command(CLI::App& app, Context& context);     // params
void add_store_commands(CLI::App& app, Context& context);     // list, show, compare
void add_export_commands(CLI::App& app, Context& context);    // export runs|powersgd|production
void add_sweep_command(CLI::App& app, Context& context);      // sweep
void add_netmodel_commands(CLI::App& app, Context& context);  // predict, recommend
void add_plugins_command(CLI::App& app, Context& context);    // plugins

}  // namespace commtune::cli
