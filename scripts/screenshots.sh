#!/usr/bin/env bash
# Screenshots of the desktop app's main views for the README, taken under Xvfb
# from a real sweep (docs/screenshots/sweep.json, or the spec given) in a
# scratch run store, at 1920x1080 (VIEW.png, VIEW-dark.png) and 1366x768
# (VIEW-1366.png, VIEW-1366-dark.png):
#   scripts/screenshots.sh [out_dir [spec]]      (default docs/screenshots)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${COMMTUNE_BUILD_DIR:-$root/build}
out=${1:-$root/docs/screenshots}
spec=${2:-$root/docs/screenshots/sweep.json}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
[[ -x "$build/app/commtune" ]] || "$root/scripts/build.sh"
# A fresh settings folder: the default layout and the system theme, not the user's.
XDG_CONFIG_HOME="$scratch/config" QT_QPA_PLATFORM=xcb \
  xvfb-run -a -s "-screen 0 1920x1080x24" \
  "$build/app/commtune" --db "$scratch/runs.db" --spec "$spec" --screenshots "$out"
ls -l "$out"/*.png
