#!/usr/bin/env bash
# Configures and builds commtune into ./build (Release with debug info by default).
# Extra arguments are passed to the CMake configure step. Build output goes to
# stderr, so that scripts/main.sh's stdout is the run summary alone.
set -euo pipefail
exec 1>&2
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${COMMTUNE_BUILD_DIR:-$root/build}
jobs=${COMMTUNE_JOBS:-$(nproc)}
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
# COMMTUNE_TORCH=debian: against Debian's libtorch 1.13 in place of the PyPI wheel's 2.11.
torch=()
[[ -n "${COMMTUNE_TORCH:-}" ]] && torch=(-DCOMMTUNE_TORCH="$COMMTUNE_TORCH")
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo "${torch[@]}" "$@"
elif (($#)); then
  cmake "$build_dir" "$@"
fi
# COMMTUNE_BUILD_TARGETS: only these targets (space-separated), e.g. what scripts/main.sh runs.
targets=()
for t in ${COMMTUNE_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build_dir" --parallel "$jobs" "${targets[@]}"
