#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
# installs what is missing, builds, and runs every test with ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh" --tests
"$root/scripts/build.sh"
cd "${COMMTUNE_BUILD_DIR:-$root/build}"
# One test more than there are cores: many tests wait on their processes
# (rendezvous, event files, SLURM) part of the time, and a third one fills
# the gaps (2 cores: 745 s against 795 s with two). The long ones start first
# (their COST in tests/CMakeLists.txt).
exec ctest --output-on-failure --timeout 900 --parallel "${COMMTUNE_TEST_JOBS:-$(($(nproc) + 1))}" "$@"
