// Where this process sits in the job, read from the variables torchrun sets, so
// the same worker binary runs under commtune's launcher, torchrun or srun.
#pragma once

#include <string>

namespace commtune {

struct DistEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  // TORCHELASTIC_USE_AGENT_STORE=True: the launcher (or torchrun's agent)
  // hosts the TCPStore; otherwise rank 0 hosts it.
  bool agent_hosts_store = false;
  // COMMTUNE_STORE_FILE: commtune's local launcher rendezvouses its ranks
  // through a file in its private run folder instead (no port is opened).
  std::string store_file;

  // Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
  // MASTER_PORT, TORCHELASTIC_USE_AGENT_STORE, COMMTUNE_STORE_FILE. A missing
  // variable takes the single-process default; a malformed one throws,
  // naming the variable.
  static DistEnv from_environment();

  bool is_loopback() const;
};

}  // namespace commtune
