#!/usr/bin/env bash
# README command 1: install what is missing, build, and run the main job on
# the bundled example: compile the example language model for 2 ranks with
# the hybrid synchronization (parameter server for its embeddings, fused
# all-reduce for the dense layers) and train it on 2 local ranks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh parallax-opt parallax-run
scripts/models.sh
STEPS=${PARALLAX_STEPS:-200}
B=${PARALLAX_BUILD_DIR:-build}
echo
echo "== parallax-opt examples/models/lm.onnx --np 2 --optimizer=adam --emit=plan -o $B/lm.pxplan --report"
$B/bin/parallax-opt examples/models/lm.onnx --np 2 --optimizer=adam \
  --emit=plan -o $B/lm.pxplan --report
echo
echo "== parallax-run $B/lm.pxplan --np 2 --synthetic --steps $STEPS --metrics $B/lm-metrics.jsonl"
$B/bin/parallax-run $B/lm.pxplan --np 2 --synthetic --steps "$STEPS" \
  --log-every 20 --metrics $B/lm-metrics.jsonl
echo
echo "per-step metrics (loss, step time, bytes sent and received per variable) of each rank: $B/lm-metrics.rank{0,1}.jsonl"
