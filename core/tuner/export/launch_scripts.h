// A configuration started on a cluster: a torchrun script to run on every
// node, or an sbatch file for SLURM. Both have the ranks write their event
// files to one folder (shared by the nodes), which `commtune-cli import
// --follow` streams into the run store while the job runs.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace commtune {

struct LaunchPlan {
  int nodes = 2;
  int ranks_per_node = 1;                  // one per GPU on GPU nodes
  std::string rendezvous = "node0:29400";  // torchrun: host:port of a node every node reaches
  std::string name = "commtune";           // the job's name (SLURM)
  // More sbatch options, one per line of the script ("--partition=gpu",
  // "--time=01:00:00"): each must start with "--" and hold no line break.
  std::vector<std::string> sbatch_options;
};

// Checks the plan; throws ConfigError naming the field (nodes, ranks_per_node, rendezvous).
void check_launch_plan(const LaunchPlan& plan);

// Writes run.json (the configuration, for nodes x ranks_per_node ranks),
// launch_torchrun.sh and launch.sbatch into `out_dir`; returns their paths.
std::vector<std::string> write_launch_scripts(const nlohmann::json& config, const LaunchPlan& plan,
                                              const std::string& out_dir);

}  // namespace commtune
