#!/bin/bash
# A real SLURM on this machine, for tests and for trying commtune's SLURM
# scripts without a cluster: munged, slurmctld and slurmd (Debian 12's
# slurm-wlm and munge), bound to 127.0.0.1, with every file under one state
# folder, starting each time with no jobs. SLURM_LOCAL_NODES nodes
# (default 1: "localhost" with this machine's cores; more: node1, node2, ...
# each a slurmd of its own on 127.0.0.1 with an equal share of the cores, so
# jobs span "nodes").
#
#   scripts/slurm-local.sh start   # prints the line that points sbatch/squeue at it
#   scripts/slurm-local.sh stop
#   scripts/slurm-local.sh run COMMAND ARGS...   # start, run the command pointed at it, stop
#
# Environment: SLURM_LOCAL_DIR (state folder, default /tmp/commtune-slurm),
# SLURM_LOCAL_NODES (default 1).
# Exit status 77 (skip) where it cannot start: not root (slurmd runs jobs as
# their users), or the packages are missing (scripts/setup-deps.sh installs them).
set -euo pipefail

STATE=${SLURM_LOCAL_DIR:-/tmp/commtune-slurm}
CONF=$STATE/slurm.conf
NODES=${SLURM_LOCAL_NODES:-1}

daemon_pids() {
  for f in "$STATE"/run/*.pid; do
    [ -s "$f" ] && cat "$f"
  done 2>/dev/null || true
}

# This instance's step daemons (titled "slurmstepd: [JOB.STEP]", each holding
# its node's log under $STATE open) and every process below them.
job_pids() {
  local pid
  for pid in $(pgrep -f '^slurmstepd: ' || true); do
    if ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF -- "-> $STATE/"; then
      descendants "$pid"
      echo "$pid"
    fi
  done
}

descendants() {
  local child
  for child in $(pgrep -P "$1" || true); do
    descendants "$child"
    echo "$child"
  done
}

stop() {
  # A job still running would outlive its daemons: nothing would ever end it.
  for pid in $(job_pids); do kill -9 "$pid" 2>/dev/null || true; done
  for pid in $(daemon_pids); do kill "$pid" 2>/dev/null || true; done
  for _ in $(seq 50); do
    alive=0
    for pid in $(daemon_pids); do kill -0 "$pid" 2>/dev/null && alive=1; done
    [ $alive = 0 ] && break
    sleep 0.1
  done
  for pid in $(daemon_pids); do kill -9 "$pid" 2>/dev/null || true; done
  rm -f "$STATE"/run/*.pid
}

free_port() {
  /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  if [ "$(id -u)" != 0 ]; then
    echo "slurm-local: needs root (slurmd starts each job as its user)" >&2
    exit 77
  fi
  for tool in munged slurmctld slurmd sbatch; do
    if ! command -v "$tool" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$tool" ]; then
      echo "slurm-local: $tool is missing: apt-get install slurm-wlm munge (scripts/setup-deps.sh --tests does)" >&2
      exit 77
    fi
  done
  if ! [[ "$NODES" =~ ^[1-9][0-9]*$ ]] || [ "$NODES" -gt "$(nproc)" ]; then
    echo "slurm-local: SLURM_LOCAL_NODES must be from 1 to $(nproc) (the cores), got '$NODES'" >&2
    exit 2
  fi
  stop
  trap 'stop' EXIT  # a daemon that did not come up takes the others down with it
  mkdir -p "$STATE"/{munge,ctld,spool,log,run}
  chmod 700 "$STATE/munge"
  [ -s "$STATE/munge/munge.key" ] || dd if=/dev/urandom of="$STATE/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$STATE/munge/munge.key"
  /usr/sbin/munged --force --socket="$STATE/munge/munge.socket" --key-file="$STATE/munge/munge.key" \
    --pid-file="$STATE/run/munged.pid" --log-file="$STATE/log/munged.log" --seed-file="$STATE/munge/munged.seed"

  cat >"$CONF" <<EOF
ClusterName=commtune-local
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$(free_port)
SlurmdPort=$(free_port)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$STATE/munge/munge.socket
StateSaveLocation=$STATE/ctld
SlurmdSpoolDir=$STATE/spool/%n
SlurmctldPidFile=$STATE/run/slurmctld.pid
SlurmdPidFile=$STATE/run/slurmd-%n.pid
SlurmctldLogFile=$STATE/log/slurmctld.log
SlurmdLogFile=$STATE/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
ReturnToService=2
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
EOF
  local names=()
  if [ "$NODES" = 1 ]; then
    names=(localhost)
    echo "NodeName=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN" >>"$CONF"
  else
    for n in $(seq "$NODES"); do
      names+=("node$n")
      echo "NodeName=node$n NodeHostname=localhost NodeAddr=127.0.0.1 Port=$(free_port) CPUs=$(($(nproc) / NODES)) State=UNKNOWN" >>"$CONF"
    done
  fi
  echo "PartitionName=local Nodes=$(IFS=,; echo "${names[*]}") Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE" >>"$CONF"
  export SLURM_CONF=$CONF
  # A clean controller each start (-c): jobs of an earlier start that its
  # stop cut short would otherwise come back "running" on their nodes, which
  # then never report idle (a second `run` of the docs' command failed so).
  /usr/sbin/slurmctld -f "$CONF" -c -i
  for name in "${names[@]}"; do
    mkdir -p "$STATE/spool/$name"
    /usr/sbin/slurmd -f "$CONF" -N "$name"
  done
  for _ in $(seq 100); do
    if [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cx idle)" = "$NODES" ]; then
      trap - EXIT
      echo "export SLURM_CONF=$CONF"
      return 0
    fi
    sleep 0.2
  done
  echo "slurm-local: the nodes did not come up in 20 s; logs in $STATE/log" >&2
  exit 1
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 run COMMAND [ARGS...]" >&2; exit 2; }
    start >/dev/null
    export SLURM_CONF=$CONF
    trap 'stop' EXIT
    "$@"
    ;;
  *)
    echo "usage: $0 start|stop|run COMMAND [ARGS...]" >&2
    exit 2
    ;;
esac
