#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to the whole test suite:
# installs what is missing, builds, and runs every test with ctest.
#   1. the main build (PyTorch 2.11 from PyPI) into ./build;
#   2. the Debian package's build (Debian's libtorch 1.13) into
#      ./build-package, its unit tests built and run there, so that the code
#      for both libtorch versions is compiled and tested (the package test
#      in step 4 then packages from that folder);
#   3. the GPU machines' build (scripts/gpu-check.sh --build-only: CUDA for
#      sm_90, no GUI, no tests) into ./build-gpu, compiled only: no GPU here;
#   4. ctest over the main build: every test. Arguments go to this ctest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup-deps.sh" --tests
"$root/scripts/build.sh"
debian_build=${COMMTUNE_PACKAGE_BUILD_DIR:-$root/build-package}
COMMTUNE_TORCH=debian COMMTUNE_BUILD_DIR="$debian_build" \
  COMMTUNE_BUILD_TARGETS="commtune_unit_tests commtune_store_tests" "$root/scripts/build.sh" \
  -DCMAKE_BUILD_TYPE=Release -DCOMMTUNE_TORCH=debian -DCOMMTUNE_CUDA=OFF -DCOMMTUNE_BUILD_TESTS=ON \
  -DCOMMTUNE_BUILD_BENCH=OFF
(cd "$debian_build" && ctest --output-on-failure --timeout 300 --parallel "$(nproc)" -L unit)
PYTHON="${COMMTUNE_VENV:-$root/.venv}/bin/python" COMMTUNE_GPU_BUILD_DIR="$root/build-gpu" \
  "$root/scripts/gpu-check.sh" --build-only >/dev/null
cd "${COMMTUNE_BUILD_DIR:-$root/build}"
# One test more than there are cores: many tests wait on their processes
# (rendezvous, event files, SLURM) part of the time, and a third one fills
# the gaps (2 cores: 745 s against 795 s with two). The long ones start first
# (their COST in tests/CMakeLists.txt).
exec ctest --output-on-failure --timeout 900 --parallel "${COMMTUNE_TEST_JOBS:-$(($(nproc) + 1))}" "$@"
