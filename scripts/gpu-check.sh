#!/usr/bin/env bash
# The GPU checks in one call, on a machine with a GPU and a PyTorch 2.x wheel
# (its libtorch, CUDA and NCCL), without Qt and without network:
#   1. the CUDA kernels produce the CPU kernels' bits;
#   2. commtune on the GPU (NCCL) against PyTorch's DDP on the GPU, same hook;
#   3. commtune on the GPU against commtune on the CPU (when Gloo is built in),
#      and the compressors' device path against their host path on the GPU;
#   4. the device path's encode + decode bandwidth against a device copy.
# Each check has a time limit, and one that fails or runs over does not stop
# the others: $OUT/summary.txt lists every verdict, $OUT/NAME.txt each output.
# Header-only dependencies come from .gpu-deps/ (scripts/gpu-deps.sh, run on
# Debian, fills it; the device tool carries it). Results go to $OUT if set.
#
#   scripts/gpu-check.sh [--build-only]
#
# --build-only configures and builds as on the GPU machine (PyTorch 2.11's
# libtorch from $PYTHON, CUDA on for sm_90, no GUI, no tests) and stops: it
# needs no GPU, and the suite runs it here so the GPU build keeps compiling.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=$(command -v "${PYTHON:-python3}")
build=${COMMTUNE_GPU_BUILD_DIR:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
mkdir -p "$out"

"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
configure=(cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCOMMTUNE_TORCH=pypi
  -DCOMMTUNE_PYTHON="$py" -DCOMMTUNE_GUI=OFF -DCOMMTUNE_BUILD_TESTS=OFF -DCOMMTUNE_BUILD_BENCH=ON -DCOMMTUNE_CUDA=ON
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCOMMTUNE_EXTRA_INCLUDE_DIRS="$root/.gpu-deps/include")
if ! "${configure[@]}" >"$out/configure.log" 2>&1; then
  tail -20 "$out/configure.log"
  exit 1
fi
if ! cmake --build "$build" --parallel "$(nproc)" >"$out/build.log" 2>&1; then
  grep -E 'error|FAILED' "$out/build.log" | head -40
  exit 1
fi
"$build/app/commtune-cli" --version | tee "$out/version.txt"
[[ "${1:-}" == "--build-only" ]] && exit 0
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$out/device.txt" || true

# Each check runs under its own time limit, writes its output to $out/NAME.txt
# and its verdict to $out/summary.txt; a check that fails does not stop the
# others (a lent GPU's minutes are too few to rerun them all for one failure).
# The exit status is 1 when any failed.
set +e
failed=0
: >"$out/summary.txt"
check() {  # check NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 started=$SECONDS rc
  shift 2
  echo "== $name"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  rc=${PIPESTATUS[0]}
  local verdict="passed"
  if ((rc == 124 || rc == 137)); then
    verdict="FAILED: over its ${limit} s"
  elif ((rc == 77)); then
    verdict="FAILED: skipped itself (exit status 77: no GPU it could use)"
  elif ((rc != 0)); then
    verdict="FAILED: exit status $rc"
  fi
  ((rc == 0)) || failed=1
  printf '%-16s %s (%d s)\n' "$name" "$verdict" $((SECONDS - started)) | tee -a "$out/summary.txt"
}

# 1. The CUDA kernels against the CPU kernels.
check kernels 120 "$build/tests/gpu/gpu_kernel_check"
# 2/3. Training on the GPU against PyTorch DDP on the GPU, against the CPU, and the device path against the host path.
check runs 360 "$py" "$root/tests/gpu/compare_gpu_runs.py" --build "$build" --out "$out"
# 4. The compressors' device path: encode + decode against a device copy of the bucket.
check device_bench 120 "$build/bench/device_compress_bench"
echo "== summary"
cat "$out/summary.txt"
exit "$failed"
