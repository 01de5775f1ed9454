#!/usr/bin/env bash
# Configures (once) and builds Parallax into build/ with Ninja and ccache.
# Usage: scripts/build.sh [extra ninja targets...]
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${PARALLAX_BUILD_DIR:-build}
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
fi
# Two jobs: the machines this runs on (CI included) have two cores, and
# MLIR translation units need ~1 GiB each.
ninja -C "$BUILD_DIR" -j "${PARALLAX_JOBS:-2}" "$@"
