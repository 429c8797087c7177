// commtune-cli: the headless front end. Runs jobs and sweeps on this
// machine, keeps every run in the run store, compares them, predicts how
// they would do on another network, and exports the chosen configuration.
#include <cstdio>
#include <optional>
#include <string>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "app/heap_tuning.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/version.h"

namespace {

// The first word of the command line that is neither an option nor --db's
// value, when it names no command: CLI11 would only say "A subcommand is
// required".
std::optional<std::string> unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--db") {
      ++i;
      continue;
    }
    if (arg.empty() || arg[0] == '-') continue;
    for (const auto* command : app.get_subcommands([](CLI::App*) { return true; }))
      if (command->get_name() == arg) return std::nullopt;
    return arg;
  }
  return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace commtune::cli;
  commtune::tune_heap();
  install_stop_signals();
  CLI::App app{"commtune: tune and visualise how data-parallel training communicates gradients"};
  app.set_version_flag("--version", commtune::version_text());
  app.require_subcommand(1);
  app.fallthrough();  // --db may come after the subcommand
  Context context;
  app.add_option("--db", context.db,
                 "the run store (SQLite); default $COMMTUNE_DB, else $XDG_DATA_HOME/commtune/runs.db")
      ->check(store_file_problem, "FILE");

  add_run_commands(app, context);
  add_sweep_command(app, context);
  add_store_commands(app, context);
  add_netmodel_commands(app, context);
  add_export_commands(app, context);
  add_params_command(app, context);
  add_plugins_command(app, context);

  try {
    app.parse(argc, argv);  // runs the chosen command
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0)
      if (const auto word = unknown_command(app, argc, argv)) {
        std::string commands;
        for (const auto* command : app.get_subcommands([](CLI::App*) { return true; }))
          commands += (commands.empty() ? "" : ", ") + command->get_name();
        std::fprintf(stderr, "commtune: no command '%s'; the commands are %s\n", printable(*word).c_str(),
                     commands.c_str());
        return kExitConfig;
      }
    // Usage errors exit 2, as configuration errors do (CLI11's own codes are 100 and up).
    return app.exit(e) == 0 ? kExitOk : kExitConfig;
  } catch (const commtune::ConfigError& e) {
    // Messages quote files from elsewhere (a spec, a stored configuration): escaped, on one line.
    std::fprintf(stderr, "commtune: configuration error: %s\n", printable(e.what()).c_str());
    return kExitConfig;
  } catch (const std::invalid_argument& e) {  // a command's arguments that do not fit together
    std::fprintf(stderr, "commtune: %s\n", printable(e.what()).c_str());
    return kExitConfig;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commtune: %s\n", printable(e.what()).c_str());
    return kExitFailed;
  }
  return context.exit_code;
}
