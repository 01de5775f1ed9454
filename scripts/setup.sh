#!/usr/bin/env bash
# Installs every Debian package Parallax needs, and nothing that is already there.
# Idempotent: a second run does no apt work at all. Safe under `set -u` and CI=true.
set -euo pipefail

# Packages the build, the tests and the example generator need. Keep this list the single
# source of truth: the README, .ci/run and docs/user-guide.md all go through this script.
PACKAGES=(
  build-essential cmake ninja-build ccache git pkg-config
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools
  libonnx-dev libprotobuf-dev protobuf-compiler
  libcxxopts-dev nlohmann-json3-dev zlib1g-dev
  libopenmpi-dev openmpi-bin
  libopenblas-dev libdnnl-dev
  ocl-icd-opencl-dev  # dnnl's CMake config requires OpenCL; apt's --no-install-recommends drops it
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-numpy python3-onnx python3-torch python3-torchvision
)

# Extra lists, named on the command line: `scripts/setup.sh fuzz` adds what
# scripts/fuzz.sh needs: clang of the LLVM release we link, its libFuzzer
# and sanitizer runtimes, and its OpenMP runtime (clang cannot use GCC's).
FUZZ_PACKAGES=(clang-22 libclang-rt-22-dev libomp-22-dev)

wanted=("${PACKAGES[@]}")
for extra in "$@"; do
  case "$extra" in
    fuzz) wanted+=("${FUZZ_PACKAGES[@]}") ;;
    *) echo "setup: unknown package list '$extra' (known: fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${wanted[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#wanted[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
