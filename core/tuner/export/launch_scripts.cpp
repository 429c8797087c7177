#include "core/tuner/export/launch_scripts.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string_view>

#include "core/tuner/config/command_line.h"
#include "core/tuner/config/run_config.h"
#include "core/tuner/export/export_files.h"
#include "core/tuner/launch/script_job.h"

namespace commtune {

namespace {

namespace fs = std::filesystem;

bool is_host_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_'; }

// A host name or IPv4 address: dot-separated labels of 1 to 63 of those
// characters, none starting or ending with '-' ("-x" would reach torchrun as
// an option).
bool is_host_name(const std::string& host) {
  if (host.empty() || host.size() > 253 || !std::all_of(host.begin(), host.end(), is_host_char)) return false;
  std::size_t at = 0;
  while (true) {
    const auto end = std::min(host.find('.', at), host.size());
    const auto label = std::string_view(host).substr(at, end - at);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') return false;
    if (end == host.size()) return true;
    at = end + 1;
  }
}

// Letters, digits, '-' and '_' only: the name goes into a shell script and SLURM's job name.
std::string job_name(const std::string& name) {
  std::string out;
  for (const char c : name) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '-';
  return out.empty() ? "commtune" : out.substr(0, 64);
}

// The template with each @KEY@ replaced.
std::string fill(std::string text, const std::vector<std::pair<std::string, std::string>>& values) {
  for (const auto& [key, value] : values)
    for (auto at = text.find(key); at != std::string::npos; at = text.find(key, at + value.size()))
      text.replace(at, key.size(), value);
  return text;
}

const char* const kTorchrunScript = R"SH(#!/bin/sh
# commtune: @NODES@ nodes x @PER_NODE@ ranks. Run this on every node (any order):
#   sh launch_torchrun.sh
# and, on any machine that sees the event folder, stream the job into the run store:
#   commtune-cli import --follow events/
# Environment: RDZV_ENDPOINT (default @RDZV@: a node every node reaches),
# EVENT_DIR (default events/ beside this script: a folder every node writes),
# COMMTUNE_WORKER (default commtune-worker on PATH), PYTHON (default: the first of
# python3, python, /usr/bin/python3 that imports torch), TORCHRUN_ARGS (more
# torchrun options, none by default).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
if [ -z "${PYTHON:-}" ]; then
  for candidate in python3 python /usr/bin/python3; do
    if "$candidate" -c "import torch.distributed.run" >/dev/null 2>&1; then PYTHON=$candidate; break; fi
  done
  if [ -z "${PYTHON:-}" ]; then
    echo "launch_torchrun.sh: no python3 here imports torch (tried python3, python, /usr/bin/python3): set PYTHON" >&2
    exit 1
  fi
fi
EVENT_DIR=${EVENT_DIR:-$HERE/events}
mkdir -p "$EVENT_DIR"
export COMMTUNE_EVENT_FILE="$EVENT_DIR/events-{rank}.ctev"
# TORCHRUN_ARGS is split into words on purpose.
# shellcheck disable=SC2086
exec "$PYTHON" -m torch.distributed.run --nnodes @NODES@ --nproc_per_node @PER_NODE@ \
  --rdzv_backend c10d --rdzv_endpoint "${RDZV_ENDPOINT:-@RDZV@}" --rdzv_id @NAME@ \
  ${TORCHRUN_ARGS:-} --no_python "${COMMTUNE_WORKER:-commtune-worker}" --config "$HERE/run.json"
)SH";

const char* const kSbatchScript = R"SH(#!/bin/bash
#SBATCH --job-name=@NAME@
#SBATCH --nodes=@NODES@
#SBATCH --ntasks-per-node=@PER_NODE@
@GPUS@@OPTIONS@# commtune: @NODES@ nodes x @PER_NODE@ ranks, one task per rank. Submit from this folder:
#   sbatch launch.sbatch
# and stream the job into the run store from any machine that sees the event folder:
#   commtune-cli import --follow events/
# Environment: EVENT_DIR (default events/ in the submit folder, shared by the nodes),
# COMMTUNE_WORKER (default commtune-worker on PATH), MASTER_PORT (default: from
# the job id, so that jobs sharing a node differ). A job SLURM requeues writes
# its events anew, to events/restart-N.
set -eu
HERE=${SLURM_SUBMIT_DIR:-$(pwd)}
EVENT_DIR=${EVENT_DIR:-$HERE/events}
if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then EVENT_DIR=$EVENT_DIR/restart-$SLURM_RESTART_COUNT; fi
mkdir -p "$EVENT_DIR"
# Rank 0's node by the address SLURM reaches it at (its NodeAddr), else by its name.
FIRST_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MASTER_ADDR=$(scontrol -o show node "$FIRST_NODE" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
export MASTER_ADDR=${MASTER_ADDR:-$FIRST_NODE}
export MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 40000))}
export COMMTUNE_EVENT_FILE="$EVENT_DIR/events-{rank}.ctev"
# Each task is one rank: torch.distributed's variables from SLURM's.
srun --kill-on-bad-exit=1 bash -c '
  export RANK=$SLURM_PROCID WORLD_SIZE=$SLURM_NTASKS LOCAL_RANK=$SLURM_LOCALID
  export LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE
  exec "$0" --config "$1"' "${COMMTUNE_WORKER:-commtune-worker}" "$HERE/run.json"
)SH";

// A script trial: torchrun of the trial's Python on the user's script, one
// torchrun per node. Each rank's python/commtune (the copy beside this
// script, first on PYTHONPATH) reads run.json and writes the events.
const char* const kScriptEnvironment = R"SH(export COMMTUNE_TRIAL_CONFIG="$HERE/run.json"
export COMMTUNE_EVENT_FILE="$EVENT_DIR/events-{rank}.ctev"
export PYTHONPATH="$HERE/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
@THREADS@cd @SCRIPT_DIR@
)SH";

const char* const kScriptTorchrunScript = R"SH(#!/bin/sh
# commtune: @NODES@ nodes x @PER_NODE@ ranks of your script, as the trial in run.json.
# Run this on every node (any order):
#   sh launch_torchrun.sh
# and, on any machine that sees the event folder, stream the job into the run store:
#   commtune-cli import --follow events/
# Environment: RDZV_ENDPOINT (default @RDZV@: a node every node reaches),
# EVENT_DIR (default events/ beside this script: a folder every node writes),
# PYTHON (default the trial's, @PYTHON@), TORCHRUN_ARGS (more torchrun options).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
EVENT_DIR=${EVENT_DIR:-$HERE/events}
mkdir -p "$EVENT_DIR"
@ENVIRONMENT@# TORCHRUN_ARGS is split into words on purpose.
# shellcheck disable=SC2086
exec "${PYTHON:-@PYTHON@}" -m torch.distributed.run --nnodes @NODES@ --nproc_per_node @PER_NODE@ \
  --rdzv_backend c10d --rdzv_endpoint "${RDZV_ENDPOINT:-@RDZV@}" --rdzv_id @NAME@ --max_restarts 0 \
  ${TORCHRUN_ARGS:-} @COMMAND@
)SH";

const char* const kScriptSbatchScript = R"SH(#!/bin/bash
#SBATCH --job-name=@NAME@
#SBATCH --nodes=@NODES@
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=@PER_NODE@
@GPUS@@OPTIONS@# commtune: @NODES@ nodes x @PER_NODE@ ranks of your script, as the trial in run.json: one
# torchrun per node. Submit from this folder:
#   sbatch launch.sbatch
# and stream the job into the run store from any machine that sees the event folder:
#   commtune-cli import --follow events/
# Environment: EVENT_DIR (default events/ in the submit folder, shared by the nodes),
# PYTHON (default the trial's, @PYTHON@), MASTER_PORT (default: from the job id). A job
# SLURM requeues writes its events anew, to events/restart-N.
set -eu
HERE=${SLURM_SUBMIT_DIR:-$(pwd)}
EVENT_DIR=${EVENT_DIR:-$HERE/events}
if [ "${SLURM_RESTART_COUNT:-0}" != 0 ]; then EVENT_DIR=$EVENT_DIR/restart-$SLURM_RESTART_COUNT; fi
mkdir -p "$EVENT_DIR"
FIRST_NODE=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
MASTER_ADDR=$(scontrol -o show node "$FIRST_NODE" | tr ' ' '\n' | sed -n 's/^NodeAddr=//p')
MASTER_ADDR=${MASTER_ADDR:-$FIRST_NODE}
MASTER_PORT=${MASTER_PORT:-$((20000 + SLURM_JOB_ID % 40000))}
@ENVIRONMENT@srun --kill-on-bad-exit=1 "${PYTHON:-@PYTHON@}" -m torch.distributed.run --nnodes @NODES@ \
  --nproc_per_node @PER_NODE@ --rdzv_backend c10d --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \
  --rdzv_id "$SLURM_JOB_ID" --max_restarts 0 @COMMAND@
)SH";

// GPUs for a cuda run; for device auto, the line to uncomment on GPU nodes.
std::string gpus_line(const std::string& device, int per_node) {
  const auto line = "#SBATCH --gpus-per-node=" + std::to_string(per_node);
  if (device == "cuda") return line + "\n";
  if (device == "auto") return "# " + line + "   (device auto: uncomment on GPU nodes)\n";
  return "";
}

std::string sbatch_option_lines(const std::vector<std::string>& options) {
  std::string out;
  for (const auto& option : options) out += "#SBATCH " + option + "\n";
  return out;
}

}  // namespace

void check_launch_plan(const LaunchPlan& plan) {
  if (plan.nodes < 1 || plan.nodes > 65536) throw ConfigError("nodes", "must be an integer from 1 to 65536");
  if (plan.ranks_per_node < 1 || plan.ranks_per_node > 1024)
    throw ConfigError("ranks_per_node", "must be an integer from 1 to 1024");
  const auto colon = plan.rendezvous.rfind(':');
  const auto host = plan.rendezvous.substr(0, colon == std::string::npos ? 0 : colon);
  const auto port = colon == std::string::npos ? std::string() : plan.rendezvous.substr(colon + 1);
  // A name or IPv4 address, or an IPv6 address in brackets as torchrun takes it ([::1]:29400).
  const bool ipv6 = host.size() > 2 && host.front() == '[' && host.back() == ']' &&
                    host.find_first_not_of("0123456789abcdefABCDEF:.", 1) == host.size() - 1;
  const bool host_ok = ipv6 || is_host_name(host);
  const bool port_ok = !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), ::isdigit) &&
                       std::stoi(port) >= 1 && std::stoi(port) <= 65535;
  for (const auto& option : plan.sbatch_options)
    if (option.rfind("--", 0) != 0 || option.size() < 3 ||
        std::any_of(option.begin(), option.end(), [](unsigned char c) { return std::isspace(c) || c == 0; }))
      throw ConfigError("sbatch", "each option must start with \"--\" and hold no blank (e.g. \"--account=proj\"), got '" +
                                      option + "'");
  if (!host_ok || !port_ok)
    throw ConfigError("rendezvous", "must be HOST:PORT (a host name, an address, [an IPv6 address]; a port from 1 to 65535), got '" +
                                        plan.rendezvous + "'");
}

std::vector<std::string> write_launch_scripts(const nlohmann::json& config, const LaunchPlan& plan,
                                              const std::string& out_dir) {
  check_launch_plan(plan);
  auto raw = config;
  raw["world_size"] = plan.nodes * plan.ranks_per_node;
  const auto parsed = RunConfig::parse(raw);
  parsed.check_world_size(plan.nodes * plan.ranks_per_node);  // as `run` checks it, before any node starts
  fs::create_directories(out_dir);
  const auto dir = fs::path(out_dir);
  const bool script = parsed.script.enabled();
  // The script and its Python by the paths every node finds them at (this process's, absolute).
  const auto trial = script ? with_absolute_paths(parsed.script) : parsed.script;
  auto stored = parsed.to_json();
  if (script) stored["script"] = trial.to_json();
  write_file_whole(dir / "run.json", stored.dump(2) + "\n");
  std::vector<std::pair<std::string, std::string>> values = {
      {"@NODES@", std::to_string(plan.nodes)},
      {"@PER_NODE@", std::to_string(plan.ranks_per_node)},
      {"@RDZV@", plan.rendezvous},
      {"@NAME@", job_name(plan.name)},
      {"@GPUS@", gpus_line(parsed.run.device, plan.ranks_per_node)},
      {"@OPTIONS@", sbatch_option_lines(plan.sbatch_options)}};
  if (script) {
    fs::create_directories(dir / "python" / "commtune");
    for (const auto& [name, text] : script_package_files()) write_file_whole(dir / "python" / "commtune" / name, text);
    std::vector<std::string> command{trial.path};
    for (auto& a : trial.command_args(parsed.run.steps)) command.push_back(std::move(a));
    const auto threads = parsed.run.threads > 0 ? "export OMP_NUM_THREADS=" + std::to_string(parsed.run.threads) + "\n"
                                                : std::string();
    // Filled first: the environment holds keys of its own.
    values.insert(values.begin(), {"@ENVIRONMENT@", kScriptEnvironment});
    values.insert(values.begin() + 1, {"@THREADS@", threads});
    values.insert(values.begin() + 2, {"@SCRIPT_DIR@", join_command_line({fs::path(trial.path).parent_path().string()})});
    values.push_back({"@PYTHON@", join_command_line({trial.python})});
    values.push_back({"@COMMAND@", join_command_line(command)});
  }
  write_file_whole(dir / "launch_torchrun.sh", fill(script ? kScriptTorchrunScript : kTorchrunScript, values));
  write_file_whole(dir / "launch.sbatch", fill(script ? kScriptSbatchScript : kSbatchScript, values));
  for (const auto* name : {"launch_torchrun.sh", "launch.sbatch"})
    fs::permissions(dir / name, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec,
                    fs::perm_options::add);
  return {(dir / "run.json").string(), (dir / "launch_torchrun.sh").string(), (dir / "launch.sbatch").string()};
}

}  // namespace commtune
