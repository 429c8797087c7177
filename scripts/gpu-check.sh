#!/usr/bin/env bash
# The GPU checks in one call, on a machine with a GPU and a PyTorch 2.x wheel
# (its libtorch, CUDA and NCCL), without Qt and without network:
#   1. the CUDA kernels produce the CPU kernels' bits;
#   2. commtune on the GPU (NCCL) against PyTorch's DDP on the GPU, same hook;
#   3. commtune on the GPU against commtune on the CPU (when Gloo is built in),
#      and the compressors' device path against their host path on the GPU;
#   4. the device path's encode + decode bandwidth against a device copy.
# Header-only dependencies come from .gpu-deps/ (scripts/gpu-deps.sh, run on
# Debian, fills it; the device tool carries it). Results go to $OUT if set.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
py=${PYTHON:-python3}
build=${COMMTUNE_GPU_BUILD_DIR:-$root/build-gpu}
out=${OUT:-$build/gpu-check}
mkdir -p "$out"

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count())'

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" \
  -DCOMMTUNE_BUILD_TESTS=OFF -DCOMMTUNE_BUILD_BENCH=ON -DCOMMTUNE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCOMMTUNE_EXTRA_INCLUDE_DIRS="$root/.gpu-deps/include" 2>&1 | tee "$out/configure.log" | tail -3
cmake --build "$build" --parallel "$(nproc)" 2>&1 | tee "$out/build.log" | tail -3
"$build/app/commtune-cli" --version | tee "$out/version.txt"

echo "== 1. CUDA kernels against the CPU kernels"
"$build/tests/gpu/gpu_kernel_check" | tee "$out/kernels.txt"

echo "== 2/3. training on the GPU against PyTorch DDP on the GPU and against the CPU"
"$py" "$root/tests/gpu/compare_gpu_runs.py" --build "$build" --out "$out" | tee "$out/runs.txt"

echo "== 4. the compressors' device path: encode + decode against a device copy of the bucket"
"$build/bench/device_compress_bench" | tee "$out/device_compress_bench.txt"
