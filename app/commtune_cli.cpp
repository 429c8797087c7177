// commtune-cli: the headless front end. Runs jobs and sweeps on this
// machine, keeps every run in the run store, compares them, predicts how
// they would do on another network, and exports the chosen configuration.
#include <cstdio>

#include "app/cli/cli_common.h"
#include "app/cli/commands.h"
#include "core/config/run_config.h"
#include "core/version.h"

int main(int argc, char** argv) {
  using namespace commtune::cli;
  CLI::App app{"commtune: tune and visualise how data-parallel training communicates gradients"};
  app.set_version_flag("--version", commtune::version_text());
  app.require_subcommand(1);
  app.fallthrough();  // --db may come after the subcommand
  Context context;
  app.add_option("--db", context.db,
                 "the run store (SQLite); default $COMMTUNE_DB, else $XDG_DATA_HOME/commtune/runs.db");

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
    return app.exit(e);
  } catch (const commtune::ConfigError& e) {
    std::fprintf(stderr, "commtune: configuration error: %s\n", e.what());
    return kExitConfig;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "commtune: %s\n", e.what());
    return kExitFailed;
  }
  return context.exit_code;
}
