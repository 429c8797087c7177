// commtune-worker: one rank of a training job. Started by commtune's launcher,
// or directly by torchrun/srun (`torchrun --no-python commtune-worker --config c.json`):
// it reads RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "core/tuner/config/run_config.h"
#include "core/engine/describe.h"
#include "core/engine/export/powersgd_export.h"
#include "core/tuner/export/powersgd_export.h"
#include "core/tuner/events/event_writer.h"
#include "core/tuner/io/input_file.h"
#include "core/tuner/io/output_file.h"
#include "core/tuner/launch/launcher.h"
#include "core/tuner/launch/worker_zygote.h"
#include "core/engine/train/trainer.h"
#include "core/tuner/version.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

namespace {

int g_stop_pipe[2] = {-1, -1};

extern "C" void on_stop_signal(int sig) {
  const char byte = static_cast<char>(sig);
  (void)!::write(g_stop_pipe[1], &byte, 1);  // async-signal-safe; the stop thread does the rest
}

// SIGTERM, SIGINT and SIGHUP (how the launcher stops the other ranks when one
// fails, or a run is cancelled) flush the event stream before the worker
// exits, so no step that finished goes unreported. A handler rather than
// sigwait: libraries start threads before main, and any of them may receive
// the signal.
void flush_events_on_stop(commtune::events::EventWriter* events) {
  if (::pipe2(g_stop_pipe, O_CLOEXEC) != 0) return;
  std::thread([events] {
    char sig = 0;
    while (::read(g_stop_pipe[0], &sig, 1) < 0 && errno == EINTR) {
    }
    if (events) events->flush();
    commtune::remove_unfinished_output_files();  // a checkpoint half written leaves no temporary
    std::_Exit(128 + sig);
  }).detach();
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) ::sigaction(sig, &action, nullptr);
}

// A rank ends when whatever started it does (commtune's launcher, torchrun's
// agent, srun's step daemon), even by SIGKILL: SIGTERM then, which flushes
// the event stream. torchrun (2.x) starts each rank in a session of its own,
// out of reach of a signal to its process group, so a killed agent would
// otherwise leave its ranks training with nobody to stop them.
void stop_with_the_parent() {
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::raise(SIGTERM);  // it died before the request
}

int run_worker(int argc, char** argv) {
  CLI::App app{"commtune-worker: one rank of a commtune DDP job (reads torchrun's environment variables)"};
  std::string config_path;
  std::vector<std::string> overrides;
  app.add_option("--config", config_path, "run configuration (JSON)");
  app.add_option("--set", overrides, "override a parameter: path=value (repeatable)");
  app.set_version_flag("--version", commtune::version_text());
  bool describe = false;
  std::string check_path, export_path;
  app.add_flag("--describe", describe, "print the engine's components and their parameters (JSON) for the tuner");
  app.add_option("--check", check_path, "answer the tuner's check of components and models asked in this JSON file (JSON)");
  app.add_option(commtune::kExportPowerSgdFlag, export_path,
                 "write the PowerSGD export asked in this JSON file ({config, checkpoint, out}); prints the files");
  CLI11_PARSE(app, argc, argv);
  // The tuner's requests (core/tuner/launch/worker_call.h): an answer in JSON on stdout, or a reason on stderr.
  if (describe || !check_path.empty() || !export_path.empty()) {
    try {
      nlohmann::json answer;
      if (describe) {
        answer = commtune::describe_engine();
      } else if (!check_path.empty()) {
        answer = commtune::check_for_the_tuner(commtune::read_json_file(check_path));
      } else {
        const auto request = commtune::read_json_file(export_path);
        answer = commtune::write_powersgd_export(request.at("config"), request.at("checkpoint").get<std::string>(),
                                                 request.at("out").get<std::string>());
      }
      std::printf("%s\n", answer.dump().c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  }

  ::signal(SIGPIPE, SIG_IGN);  // a vanished launcher must not kill training mid-write
  std::unique_ptr<commtune::events::EventWriter> events;
  commtune::DistEnv env;
  try {
    env = commtune::DistEnv::from_environment();
    events = commtune::events::EventWriter::from_environment(
        {commtune::events::kProtocolVersion, static_cast<std::uint32_t>(env.rank),
         static_cast<std::uint32_t>(env.world_size), static_cast<std::uint32_t>(::getpid())});
    flush_events_on_stop(events.get());
    stop_with_the_parent();
    const auto config = commtune::RunConfig::parse(commtune::load_raw_config(config_path, overrides));
    return commtune::train_rank(config, env, events.get()) ? commtune::kExitDiverged : 0;
  } catch (const std::exception& e) {
    const auto kind = commtune::failure_kind(e);
    std::fprintf(stderr, "rank %d: %s error: %s\n", env.rank, kind.c_str(), e.what());  // with any backtrace
    if (events) events->report_error(env.rank, kind, commtune::failure_message(e));
    if (kind == "diverged") return commtune::kExitDiverged;
    return kind == "config" ? 2 : 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  // The launcher's zygote: ranks forked from here skip loading libtorch (core/tuner/launch/worker_zygote.h).
  if (argc >= 2 && std::string_view(argv[1]) == "--zygote") return commtune::serve_as_zygote(3, run_worker);
  return run_worker(argc, argv);
}
