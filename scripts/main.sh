#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a finished training run:
# installs what is missing, builds only what the run needs (the CLI and the
# worker), and runs commtune on its embedded defaults (2 CPU ranks over Gloo,
# or one rank per GPU, a synthetic task, the allreduce hook). Arguments go to
# `commtune-cli run`; with --gui first, it builds and opens the desktop app instead.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${COMMTUNE_BUILD_DIR:-$root/build}
"$root/scripts/setup-deps.sh"
if [[ "${1:-}" == "--gui" ]]; then
  shift
  COMMTUNE_BUILD_TARGETS="commtune-cli commtune-worker commtune" "$root/scripts/build.sh"
  exec "$build_dir/app/commtune" "$@"
fi
COMMTUNE_BUILD_TARGETS="commtune-cli commtune-worker" "$root/scripts/build.sh"
exec "$build_dir/app/commtune-cli" run "$@"
