#!/usr/bin/env bash
# How much a run's time outside compute (its collectives, waiting for a
# peer, the hook's work) differs from one run of a configuration to the
# next on this machine: the spread single-run intervals assume
# (RunToRun::kAssumedLogSd in core/tuner/verdict/evidence.h). Runs each of two
# 2-rank configurations (allreduce, fp16) REPEATS times into a scratch
# store and prints each run's figure and the spread commtune measures.
# Run it beside `stress-ng --cpu 2` for a loaded machine's spread.
#   bench/run_to_run.sh [REPEATS]   (default 4)
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-4}
cli=${COMMTUNE_BUILD_DIR:-build}/app/commtune-cli
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
export COMMTUNE_DB=$scratch/runs.db
small=(--set model.hidden=512 --set data.features=256 --set world_size=2 --set steps=40)
for ((i = 0; i < repeats; ++i)); do
  "$cli" run --quiet --summary /dev/null "${small[@]}" >/dev/null 2>&1
  "$cli" run --quiet --summary /dev/null "${small[@]}" --set hook.name=fp16_compress >/dev/null 2>&1
done
"$cli" predict $(seq 1 $((2 * repeats))) --nodes 1 --gpus-per-node 2 --json | python3 -c '
import json, sys
out = json.load(sys.stdin)
for r in out["runs"]:
    print("runs {}: {}, measured step {:.2f} ms".format(r["runs"], r["label"], 1e3 * r["profile"]["measured_step_s"]))
s = out["run_to_run"]
print(s["text"])
print("log sd measured: {:.3f} over {} runs".format(s["measured_log_sd"], s["repeated_runs"]))'
