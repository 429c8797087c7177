#!/usr/bin/env bash
# Installs the Debian 12 packages commtune needs, skipping those already present.
# Safe to run repeatedly; uses sudo when not root. With --tests, also what only
# the test suite uses (a SLURM on localhost: scripts/slurm-local.sh).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libtorch-dev libgloo-dev python3-torch python3-numpy libopenblas0-pthread
  nlohmann-json3-dev libcli11-dev libsqlite3-dev zlib1g-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth
  desktop-file-utils appstream file
  clang libclang-rt-14-dev
)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(slurm-wlm munge)
fi

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "commtune: installing ${missing[*]}" >&2
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
