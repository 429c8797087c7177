#!/usr/bin/env bash
# The GPU checks in one call, on a machine with a GPU and a PyTorch 2.x wheel
# (its libtorch, CUDA and NCCL), without Qt and without network:
#   kernels       the CUDA kernels produce the CPU kernels' bits;
#   runs          commtune on the GPU (NCCL, one rank) against PyTorch's DDP on
#                 the GPU with the same hook; two ranks sharing the GPU over
#                 Gloo against PyTorch's DDP run the same way; each against
#                 commtune on the CPU; the compressors' device path against
#                 their host path; exported files under torchrun;
#   script_trials a user's own script (tests/script_trials/train_ddp.py) as a
#                 trial against the script registering PyTorch's hook by hand:
#                 one rank on NCCL, two ranks sharing the GPU over Gloo;
#   device_bench  the device path's encode + decode bandwidth against a
#                 device-to-device copy of the bucket;
#   ddp_speed     step time against PyTorch's DDP on the GPU at 10M and 100M
#                 parameters (allreduce, fp16, PowerSGD rank 4), interleaved.
# Each check has a time limit, and one that fails or runs over does not stop
# the others. What comes back from a lent machine is few files, so $OUT gets
# three: summary.txt (every verdict, the device and versions), report.txt
# (every check's output) and logs.tar.gz (the build logs, each output, the
# speed figures as JSON); scratch folders stay in the build folder.
# Header-only dependencies come from .gpu-deps/ (scripts/gpu-deps.sh, run on
# Debian, fills it; the device tool carries it). When the build here fails,
# the checks run the programs built on Debian against the same wheel
# (.gpu-deps/prebuilt) and the summary says so.
#
#   scripts/gpu-check.sh [--build-only | CHECK...]
#
# --build-only configures and builds as on the GPU machine (PyTorch 2.11's
# libtorch from $PYTHON, CUDA on for sm_90, no GUI, no tests) and stops: it
# needs no GPU, and the suite runs it here so the GPU build keeps compiling.
# Naming checks runs only those (a rerun of the ones that failed);
# GPU_CHECK_CASES=a,b runs only the cases of `runs` whose names contain a or b,
# and GPU_CHECK_SPEED_ROUNDS sets ddp_speed's rounds (3; each takes about
# 100 s on an H100, most of it starting processes).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=$(command -v "${PYTHON:-python3}")
build=${COMMTUNE_GPU_BUILD_DIR:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
logs=$build/gpu-check-logs
only=()
[[ "${1:-}" == "--build-only" ]] || only=("$@")
((${#only[@]})) || rm -rf "$logs"  # a rerun of some checks keeps the others' logs
mkdir -p "$out" "$logs"

"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())' |
  tee "$logs/versions.txt"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
configure=(cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCOMMTUNE_TORCH=pypi
  -DCOMMTUNE_PYTHON="$py" -DCOMMTUNE_GUI=OFF -DCOMMTUNE_BUILD_TESTS=OFF -DCOMMTUNE_BUILD_BENCH=ON -DCOMMTUNE_CUDA=ON
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCOMMTUNE_EXTRA_INCLUDE_DIRS="$root/.gpu-deps/include")
# On the GPU machine (16 cores, minutes of device time) a build that takes
# over 4 minutes is stuck; --build-only runs where the suite runs (2 cores,
# a fresh clone: longer than that, with CI's own limit above it).
build_limit=240
[[ "${1:-}" == "--build-only" ]] && build_limit=0
built=yes
started=$SECONDS
if ! "${configure[@]}" >"$logs/configure.log" 2>&1; then
  tail -20 "$logs/configure.log" >&2
  built="no: configure failed (configure.log)"
elif timeout "$build_limit" cmake --build "$build" --parallel "$(nproc)" >"$logs/build.log" 2>&1; then
  :
elif (($? == 124)); then
  built="no: the build ran over ${build_limit} s (build.log)"
else
  # The linker's own lines too ("/usr/bin/ld: cannot find ..."), which say no "error".
  grep -E 'error|FAILED|ld: |undefined reference' "$logs/build.log" | sort -u | head -40 |
    tee "$logs/build-errors.txt" >&2
  built="no: the build failed (build.log)"
fi
echo "build: $built ($((SECONDS - started)) s)" | tee "$logs/build-verdict.txt"
if [[ "${1:-}" == "--build-only" ]]; then
  [[ "$built" == yes ]] || echo "commtune: the GPU build ($build) failed: $logs/build.log" >&2
  [[ "$built" == yes ]] || exit 1
  "$build/app/commtune-cli" --version
  exit 0
fi

programs=$build
if [[ "$built" != yes ]]; then
  # The programs built on Debian against the same wheel: the machine's libtorch, CUDA and NCCL libraries by path.
  programs=$root/.gpu-deps/prebuilt
  [[ -x "$programs/app/commtune-cli" ]] || { echo "no build and no prebuilt programs"; exit 1; }
  site=$("$py" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')
  libs=$( (find "$site/torch/lib" "$site/nvidia" /usr/local/cuda/lib64 /usr/local/cuda/lib -name 'lib*.so*' -printf '%h\n' \
    2>/dev/null || true) | sort -u | paste -sd:)
  export LD_LIBRARY_PATH="$programs/core:$programs/lib:$libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
"$programs/app/commtune-cli" --version | tee "$logs/version.txt"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$logs/device.txt" || true

# Each check runs under its own time limit, writes its output to
# $logs/NAME.txt and its verdict to summary.txt; a check that fails does not
# stop the others (a lent GPU's minutes are too few to rerun them all for one
# failure). The exit status is 1 when any failed.
set +e
failed=0
{
  date -u '+%Y-%m-%d %H:%M UTC'
  echo "device: $(cat "$logs/device.txt" 2>/dev/null)"
  cat "$logs/versions.txt"
  head -3 "$logs/version.txt"
  echo "build: $built"
  # A call cut short returns no logs.tar.gz: the build's errors travel here.
  sed 's/^/  /' "$logs/build-errors.txt" 2>/dev/null
} >"$out/summary.txt"
: >"$out/report.txt"
# The whole script ends by GPU_CHECK_DEADLINE_S (from its start): a check gets
# what is left when less than its own limit is, and none under 20 s, so the
# summary and logs come back before the lent machine's call ends.
deadline=${GPU_CHECK_DEADLINE_S:-540}
check() {  # check NAME LIMIT_S COMMAND...
  local name=$1 limit=$2 started=$SECONDS rc
  shift 2
  if ((${#only[@]})) && [[ " ${only[*]} " != *" $name "* ]]; then return; fi
  ((limit > deadline - SECONDS)) && limit=$((deadline - SECONDS))
  if ((limit < 20)); then
    failed=1
    printf '%-14s FAILED: not run, %d s left of the %d s deadline\n' "$name" $((deadline - SECONDS)) "$deadline" |
      tee -a "$out/summary.txt"
    return
  fi
  echo "== $name" | tee -a "$out/report.txt"
  timeout --kill-after=10 "$limit" "$@" 2>&1 | tee "$logs/$name.txt" | tee -a "$out/report.txt"
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
  printf '%-14s %s (%d s)\n' "$name" "$verdict" $((SECONDS - started)) | tee -a "$out/summary.txt"
}

export COMMTUNE_BUILD_DIR=$programs COMMTUNE_ORACLE_PYTHON=$py PYTHONUNBUFFERED=1
check kernels 120 "$programs/tests/gpu/gpu_kernel_check"
rm -rf "$logs/runs"
check runs 240 "$py" "$root/tests/gpu/compare_gpu_runs.py" --build "$programs" --out "$logs/runs" \
  --only "${GPU_CHECK_CASES:-}"
check script_trials 150 "$py" "$root/tests/gpu/compare_script_trials.py" --build "$programs"
check device_bench 90 "$programs/bench/device_compress_bench"
check ddp_speed 240 "$py" "$root/bench/ddp_step_bench.py" --gpu --rounds "${GPU_CHECK_SPEED_ROUNDS:-3}" \
  --json "$logs/ddp_speed.json"
tar -czf "$out/logs.tar.gz" -C "$logs" --exclude='*.pt' --exclude='checkpoints' . 2>/dev/null
echo "== summary"
cat "$out/summary.txt"
exit "$failed"
