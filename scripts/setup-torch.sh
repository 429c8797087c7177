#!/usr/bin/env bash
# The project's Python environment: PyTorch 2.11.0 from PyPI (the GPU
# machines' version) in a virtual environment made with Debian's python3,
# in .venv (or $COMMTUNE_VENV). The engine builds against the wheel's
# libtorch, and the tests take its torch as the reference.
#
# Kept small: the packages of scripts/python-requirements.txt, pinned and
# installed without pip's cache; of the wheel's CUDA libraries
# (scripts/torch-cuda-libraries.txt) only those this machine lacks. With the
# CUDA 13 toolkit installed (cuBLAS, cuDNN, NCCL, ...), that is cuSPARSELt,
# NVSHMEM and cuFile: 0.78 GB downloaded, 1.7 GB on disk (docs/install.md, "The two
# commands", has the measurements). Without the toolkit pip brings every one.
#
# Does nothing when the environment was made from the same two files.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv=${COMMTUNE_VENV:-$root/.venv}
requirements=$root/scripts/python-requirements.txt
libraries=$root/scripts/torch-cuda-libraries.txt
stamp=$venv/commtune-setup.txt

wanted() { cat "$requirements" "$libraries"; }
if [[ -x $venv/bin/python ]] && [[ -f $stamp ]] && cmp -s <(wanted) "$stamp"; then
  exit 0
fi

# The wheel's CMake files look for a CUDA toolkit (12 or later) even to
# build for the CPU: say so now rather than in CMake's words later.
if ! command -v nvcc >/dev/null && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "commtune: PyTorch 2.11's CMake files need a CUDA toolkit (12 or later) to build against, even for the" \
    "CPU, and this machine has none: install one, or build against Debian's libtorch 1.13 with" \
    "COMMTUNE_TORCH=debian ./scripts/main.sh" >&2
  exit 1
fi

echo "commtune: setting up $venv (PyTorch 2.11.0 from PyPI)" >&2
rm -f "$stamp"
/usr/bin/python3 -m venv "$venv"
pip=("$venv/bin/python" -m pip --disable-pip-version-check --no-input --quiet)
"${pip[@]}" install --no-cache-dir --no-deps -r "$requirements"

# The libraries the wheel's own libraries cannot load here: each one's
# package, until none is missing (a package may need another, as
# cuSPARSE needs nvJitLink). libcuda.so.1 is the GPU driver's, there where a GPU is.
torch_dir=$("$venv/bin/python" -c 'import importlib.util, os; print(os.path.dirname(importlib.util.find_spec("torch").origin))')
for _ in 1 2 3 4; do
  missing=$(ldd "$torch_dir"/lib/*.so "$torch_dir"/_C*.so 2>/dev/null |
    awk '$2 == "=>" && $3 == "not" && $1 != "libcuda.so.1" {print $1}' | sort -u)
  [[ -z $missing ]] && break
  packages=()
  for library in $missing; do
    package=$(awk -v lib="$library" '$1 == lib {print $2}' "$libraries")
    if [[ -z $package ]]; then
      echo "commtune: torch needs $library, which neither this machine nor scripts/torch-cuda-libraries.txt has" >&2
      exit 1
    fi
    packages+=("$package")
  done
  echo "commtune: from PyPI, for libraries this machine lacks (${missing//$'\n'/ }): ${packages[*]}" >&2
  "${pip[@]}" install --no-cache-dir --no-deps "${packages[@]}"
done

"$venv/bin/python" -c 'import torch; assert torch.__version__.startswith("2.11.0"), torch.__version__'
wanted >"$stamp"
