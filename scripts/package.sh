#!/usr/bin/env bash
# Builds the Debian package: a CPU-only release build against Debian's own
# libtorch 1.13 (no CUDA kernels, so no libcudart dependency; its Depends
# are Debian packages) in build-package/, then `cpack -G DEB`. Prints the
# .deb's path. scripts/test.sh builds the same folder's unit tests first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${COMMTUNE_PACKAGE_BUILD_DIR:-$root/build-package}
export COMMTUNE_TORCH=debian
"$root/scripts/setup-deps.sh"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCOMMTUNE_TORCH=debian -DCOMMTUNE_CUDA=OFF \
  -DCOMMTUNE_BUILD_TESTS=OFF -DCOMMTUNE_BUILD_BENCH=OFF >/dev/null
cmake --build "$build" --parallel "$(nproc)"
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/*.deb
