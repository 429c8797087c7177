// A run that was launched elsewhere (torchrun or srun on several nodes),
// read from the event files its ranks write (COMMTUNE_EVENT_FILE): every
// rank's events go to the subscribers as they are appended, and the outcome
// is decided as the launcher decides it for its own workers. `summarize`
// reads finished files once; `import --follow` streams a running job into
// the store.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/tuner/launch/launcher.h"

namespace commtune {

struct EventFilesOptions {
  // Event files, one per rank; or folders, whose *.ctev files are taken
  // (and, when following, waited for until every rank's has appeared).
  std::vector<std::string> paths;
  bool follow = false;  // keep reading until every rank has ended
  // Following: a rank whose file has not grown for this long, without an
  // end, is given up (its node may be gone), as are ranks whose files never
  // appeared.
  std::chrono::milliseconds quiet_limit{std::chrono::seconds(120)};
  std::chrono::milliseconds poll{200};
  bool local = false;  // the ranks run on this machine (a script trial): a silent one's node is not gone
  const std::atomic<bool>* cancel = nullptr;  // stops reading: the outcome is Cancelled
  // Following: asked after each pass over the files; a non-empty answer (the
  // job is gone, say) ends the reading once what the files hold is read, and
  // ranks that have not ended then fail the run with it as the reason.
  std::function<std::string()> abort_reason;
};

struct EventFilesRun {
  RunOutcome outcome;
  nlohmann::json config = nlohmann::json::object();  // from rank 0's run_start
  int world_size = 0;
};

// Called once, when the run's configuration is known (rank 0's run_start,
// or the end of reading when no rank started): returns more subscribers,
// which then get every event from the first.
using OnRunStart = std::function<std::vector<EventSubscriber*>(const nlohmann::json& config, int world_size)>;

// Throws std::runtime_error when a file cannot be read, is not an event
// stream, or the ranks' streams disagree (world sizes, a rank twice).
EventFilesRun read_event_files(const EventFilesOptions& options, std::vector<EventSubscriber*> subscribers,
                               const OnRunStart& on_start = {});

}  // namespace commtune
