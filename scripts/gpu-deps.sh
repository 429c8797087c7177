#!/usr/bin/env bash
# Run here, on Debian (after scripts/setup-deps.sh): copies the header-only
# dependencies that the lent GPU machines lack (and cannot fetch; Gloo's
# headers too, which PyTorch's wheels do not ship) into
# .gpu-deps/include, and SQLite's static library into .gpu-deps/lib, for the
# device tool to carry with the working tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.gpu-deps/include
rm -rf "$root/.gpu-deps"
mkdir -p "$dest" "$root/.gpu-deps/lib"
cp -r /usr/include/nlohmann /usr/include/CLI /usr/include/gloo "$dest/"
cp /usr/include/zlib.h /usr/include/zconf.h /usr/include/sqlite3.h "$dest/"
cp "/usr/lib/$(gcc -dumpmachine)/libsqlite3.a" "$root/.gpu-deps/lib/"
exclude=$(git -C "$root" rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qx '/.gpu-deps/' "$exclude" 2>/dev/null || echo '/.gpu-deps/' >> "$exclude"
du -sh "$root/.gpu-deps"
