// commtune-worker: one rank of a training job. Started by commtune's launcher,
// or directly by torchrun/srun (`torchrun --no-python commtune-worker --config c.json`):
// it reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/config/run_config.h"
#include "core/events/event_writer.h"
#include "core/train/trainer.h"
#include "core/version.h"

#include <unistd.h>

int main(int argc, char** argv) {
  CLI::App app{"commtune-worker: one rank of a commtune DDP job (reads torchrun's environment variables)"};
  std::string config_path;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "run configuration (JSON)");
  app.add_option("--set", overrides, "override a parameter: path=value (repeatable)");
  app.set_version_flag("--version", commtune::version_text());
  CLI11_PARSE(app, argc, argv);

  ::signal(SIGPIPE, SIG_IGN);  // a vanished launcher must not kill training mid-write
  std::unique_ptr<commtune::events::EventWriter> events;
  commtune::DistEnv env;
  try {
    env = commtune::DistEnv::from_environment();
    events = commtune::events::EventWriter::from_environment(
        {commtune::events::kProtocolVersion, static_cast<std::uint32_t>(env.rank),
         static_cast<std::uint32_t>(env.world_size), static_cast<std::uint32_t>(::getpid())});
    nlohmann::json raw = nlohmann::json::object();
    if (!config_path.empty()) raw = commtune::RunConfig::from_file(config_path).to_json();
    for (const auto& o : overrides) commtune::apply_override(raw, o);
    const auto config = commtune::RunConfig::parse(raw);
    commtune::train_rank(config, env, events.get());
    return 0;
  } catch (const std::exception& e) {
    const auto kind = commtune::failure_kind(e);
    std::fprintf(stderr, "rank %d: %s error: %s\n", env.rank, kind.c_str(), e.what());
    if (events) {
      events->message({{"kind", "error"}, {"rank", env.rank}, {"error_kind", kind}, {"message", e.what()}});
      events->flush();
    }
    return kind == "config" ? 2 : 1;
  }
}
