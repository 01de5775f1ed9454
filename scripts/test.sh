#!/usr/bin/env bash
# README command 2 (and .ci/run): install what is missing, build everything,
# export the generated example models, and run every test under ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
scripts/models.sh
ctest --test-dir "${PARALLAX_BUILD_DIR:-build}" --output-on-failure -j 2
