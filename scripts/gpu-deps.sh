#!/usr/bin/env bash
# Run here, on Debian (after scripts/setup-deps.sh): copies the header-only
# dependencies that the lent GPU machines lack (and cannot fetch) into
# .gpu-deps/include, for the device tool to carry with the working tree.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.gpu-deps/include
rm -rf "$dest"
mkdir -p "$dest"
cp -r /usr/include/nlohmann /usr/include/CLI "$dest/"
cp /usr/include/zlib.h /usr/include/zconf.h "$dest/"
grep -qx '/.gpu-deps/' "$root/.git/info/exclude" 2>/dev/null || echo '/.gpu-deps/' >> "$root/.git/info/exclude"
du -sh "$root/.gpu-deps"
