#!/usr/bin/env bash
# Installs the Debian 12 packages commtune needs, skipping those already present,
# then the project's Python environment with PyTorch 2.11 (scripts/setup-torch.sh;
# not with COMMTUNE_TORCH=debian, which builds against Debian's libtorch 1.13).
# Safe to run repeatedly; uses sudo when not root. With --tests, also what only
# the test suite uses (a SLURM on localhost: scripts/slurm-local.sh).
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  python3-venv libgloo-dev
  nlohmann-json3-dev libcli11-dev libsqlite3-dev zlib1g-dev libmimalloc-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  qt6-base-dev qt6-svg-dev libqcustomplot-dev libqcustomplot2.1-qt6 xvfb xauth
  desktop-file-utils appstream file
  clang libclang-rt-14-dev
)
# Debian's libtorch 1.13 and its Python, the reference of that build: for
# COMMTUNE_TORCH=debian, and for the suite, which builds it too (scripts/test.sh).
debian_torch=(libtorch-dev python3-torch python3-numpy libopenblas0-pthread)
if [[ "${1:-}" == "--tests" ]]; then
  packages+=(slurm-wlm munge "${debian_torch[@]}")
elif [[ "${COMMTUNE_TORCH:-pypi}" == "debian" ]]; then
  packages+=("${debian_torch[@]}")
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
if [[ "${COMMTUNE_TORCH:-pypi}" != "debian" ]]; then
  "$(dirname "$0")/setup-torch.sh"
fi
