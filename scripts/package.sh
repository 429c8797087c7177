#!/usr/bin/env bash
# Builds the Debian package for machines without the CUDA toolkit: a
# CPU-only release build (no CUDA kernels, so no libcudart dependency) in
# build-package/, then `cpack -G DEB`. Prints the .deb's path.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${COMMTUNE_PACKAGE_BUILD_DIR:-$root/build-package}
"$root/scripts/setup-deps.sh"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCOMMTUNE_CUDA=OFF \
  -DCOMMTUNE_BUILD_TESTS=OFF -DCOMMTUNE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --parallel "$(nproc)"
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/*.deb
