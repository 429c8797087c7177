#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a finished training run:
# installs what is missing, builds, and runs commtune on its embedded defaults
# (2 CPU ranks over Gloo, or one rank per GPU, a synthetic task, the allreduce hook).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh"
"$root/scripts/build.sh"
exec "${COMMTUNE_BUILD_DIR:-$root/build}/app/commtune-cli" run "$@"
