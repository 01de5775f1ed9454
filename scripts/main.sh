#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on
# the bundled example: compile the example LM to px IR and print its
# variable report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh parallax-opt
scripts/models.sh
echo
echo "== parallax-opt examples/models/lm.onnx -o build/lm.mlir --report"
build/bin/parallax-opt examples/models/lm.onnx -o build/lm.mlir --report
echo
echo "px IR written to build/lm.mlir ($(grep -c '^    %' build/lm.mlir) ops)"
