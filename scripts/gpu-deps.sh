#!/usr/bin/env bash
# Run here, on Debian (after scripts/setup-deps.sh): copies the header-only
# dependencies that the lent GPU machines lack (and cannot fetch; Gloo's
# headers too, which PyTorch's wheels do not ship, and NCCL's header, which
# the wheels' CUDA packages may not) into .gpu-deps/include, and SQLite's
# library into .gpu-deps/lib, for the device tool to carry with the
# working tree. With a GPU build here (scripts/gpu-check.sh --build-only, the
# same wheel as the GPU machines'), its programs go to .gpu-deps/prebuilt:
# gpu-check.sh runs them there if its own build fails, so a failed build does
# not cost the lent minutes.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.gpu-deps/include
rm -rf "$root/.gpu-deps"
mkdir -p "$dest" "$root/.gpu-deps/lib"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/gloo "$dest/"
cp /usr/include/zlib.h /usr/include/zconf.h /usr/include/sqlite3.h "$dest/"
# Debian's libsqlite3.a is not position-independent, so it cannot go into
# libcommtune_tuner.so: the shared library instead, under the name the linker
# looks for (its soname, libsqlite3.so.0, is what the programs then load,
# from this folder: CMake puts it in their run path).
cp -L "/usr/lib/$(gcc -dumpmachine)/libsqlite3.so.0" "$root/.gpu-deps/lib/"
cp -L "/usr/lib/$(gcc -dumpmachine)/libsqlite3.so.0" "$root/.gpu-deps/lib/libsqlite3.so"
nccl=$(find /usr/local/cuda/include /usr/include -maxdepth 1 -name nccl.h 2>/dev/null | head -1)
[[ -n "$nccl" ]] && cp "$nccl" "$dest/"
build=$root/build-gpu
if [[ -x "$build/app/commtune-cli" ]]; then
  prebuilt=$root/.gpu-deps/prebuilt
  mkdir -p "$prebuilt/lib"
  (cd "$build" && cp --parents app/commtune-cli app/commtune-worker core/tuner/libcommtune_tuner.so core/engine/libcommtune_engine.so tests/gpu/gpu_kernel_check \
    bench/device_compress_bench $(find plugins -name '*.so') "$prebuilt/")
  cp -L "/usr/lib/$(gcc -dumpmachine)/libsqlite3.so.0" "$prebuilt/lib/"
fi
exclude=$(git -C "$root" rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >> "$exclude"
du -sh "$root/.gpu-deps"
