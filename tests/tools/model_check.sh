#!/usr/bin/env bash
# The network model against link emulation (docs/network-model.md): for each
# configuration, a run here predicted for a link, and a run with that link
# emulated. Prints predicted and emulated median ms/step. Uses a scratch store.
set -euo pipefail
cli=${COMMTUNE_BUILD_DIR:-$(cd "$(dirname "$0")/../.." && pwd)/build}/app/commtune-cli
store=$(mktemp -d)
trap 'rm -rf "$store"' EXIT
export COMMTUNE_DB=$store/runs.db

run() {  # prints the stored run's id
  "$cli" run -q --summary "$store/summary.json" --set world_size=2 "$@" 2>&1 | sed -n 's/.*stored as run \([0-9]*\).*/\1/p'
}
ms() { "$cli" show "$1" --json | python3 -c "import json,sys; print('%.1f' % json.load(sys.stdin)['digest']['step_ms'])"; }

configs=("allreduce:hook.name=allreduce"
         "fp16_compress:hook.name=fp16_compress"
         "powersgd rank 4:hook.name=powersgd hook.matrix_approximation_rank=4 hook.start_powerSGD_iter=2")
links=("200 Mbit/s, 50 us|--bandwidth-gbit 0.2 --latency-us 50|network.emulate=custom network.bandwidth_gbit_s=0.2 network.latency_us=50"
       "1 Gbit/s|--network 1gbit|network.emulate=1gbit")
echo "| configuration | link | predicted ms/step | emulated ms/step |"
echo "|---|---|---|---|"
for config in "${configs[@]}"; do
  name=${config%%:*}
  sets=(); for s in ${config#*:}; do sets+=(--set "$s"); done
  here=$(run --set steps=40 "${sets[@]}")
  for link in "${links[@]}"; do
    IFS='|' read -r label predict_args emulate <<< "$link"
    # shellcheck disable=SC2086
    predicted=$("$cli" predict "$here" $predict_args --json |
      python3 -c "import json,sys; print('%.1f' % (1e3 * json.load(sys.stdin)['runs'][0]['predictions'][0]['step_s']))")
    esets=(); for s in $emulate; do esets+=(--set "$s"); done
    emulated=$(run --set steps=24 "${sets[@]}" "${esets[@]}")
    echo "| $name | $label | $predicted | $(ms "$emulated") |"
  done
done
