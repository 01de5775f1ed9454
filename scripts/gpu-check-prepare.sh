#!/usr/bin/env bash
# Prepares what scripts/gpu-check.sh carries to a GPU machine, which has CUDA
# but neither MLIR (so no parallax-opt) nor libonnx: into .gpu-check/ (git
# ignored; `device run ... carry=[".gpu-check"]`):
#   deps/   libonnx's headers, libraries and CMake config from this machine
#           (the runtime reads ONNX initializers and writes --save with it);
#   plans/  every example model compiled here for --target=cuda (1 rank, and
#           the LM for 2 and 4 ranks) and --target=cpu; plans/bench/ the
#           models at larger batches for bench/gpu.py;
#   ref/    20 steps of each CPU plan here: the losses the GPU must match;
#   conformance/  the ONNX node tests compiled for --target=cuda with their
#           inputs and expected outputs (run_conformance.py --export).
# Initial values are drawn from the seed (--weights random) so that no model
# file has to travel (lm.onnx alone is 200 MB, over the 64 MiB a call takes).
# Usage: scripts/gpu-check-prepare.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
dir=.gpu-check
rm -rf "$dir" && mkdir -p "$dir"/deps "$dir"/plans "$dir"/ref
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
mkdir -p "$dir/deps/usr/include" "$dir/deps/usr/lib/$arch/cmake"
cp -r /usr/include/onnx "$dir/deps/usr/include/"
cp -a /usr/lib/$arch/libonnx* "$dir/deps/usr/lib/$arch/"
cp -a /usr/lib/libonnxifi.so "$dir/deps/usr/lib/"
cp -r /usr/lib/$arch/cmake/ONNX "$dir/deps/usr/lib/$arch/cmake/"

opt=$build/bin/parallax-opt run=$build/bin/parallax-run
models="mlp cnn bag densenet lm lstm_lm gru_classifier nmt dlrm mobile tv_squeezenet tv_mobilenet_v2 tv_resnet18"
shape_args() { # the inputs some models leave dynamic
  case $1 in
    bag) echo "--input-shape item_ids=96 --input-shape tag_ids=48" ;;
  esac
}
for m in $models; do
  for t in cpu cuda; do
    # shellcheck disable=SC2046
    "$opt" examples/models/$m.onnx --target=$t $(shape_args $m) --emit=plan \
      -o "$dir/plans/$m.$t.pxplan"
  done
  "$run" "$dir/plans/$m.cpu.pxplan" --device=cpu --synthetic --seed 1 --weights random \
    --steps 20 --quiet --metrics "$dir/ref/$m.jsonl"
done
# bench/gpu.py's second table: batches that fill the GPU better (the LM at
# 128 x 20, as issue 14 asks), compiled only: no CPU reference.
mkdir -p "$dir/plans/bench"
bench_batches="mlp=4096 cnn=256 densenet=128 lm=128 lstm_lm=128 gru_classifier=1024 nmt=128
  dlrm=4096 mobile=256 tv_squeezenet=256 tv_mobilenet_v2=256 tv_resnet18=256"
for mb in $bench_batches; do
  "$opt" examples/models/${mb%=*}.onnx --target=cuda --batch-size ${mb#*=} --emit=plan \
    -o "$dir/plans/bench/${mb%=*}.cuda.pxplan"
done
for np in 2 4; do
  "$opt" examples/models/lm.onnx --target=cuda --np $np --emit=plan -o "$dir/plans/lm.np$np.cuda.pxplan"
done
# Models the tests export at test time, for the grids below (a vocabulary
# padded for its model ranks, grouped convolutions on their groups).
exports=$(mktemp -d)
trap 'rm -rf "$exports"' EXIT
/usr/bin/python3 test/Distributed/Inputs/vocab_models.py "$exports" tied 2>/dev/null
/usr/bin/python3 test/Distributed/Inputs/grouped_models.py "$exports" resnext 2>/dev/null
resnext_split=stem.weight=whole,fc.weight=whole,blocks.0.expand.weight=out,blocks.0.project.weight=in,blocks.1.expand.weight=out,blocks.1.project.weight=in
# What --sync offers, on 2 ranks: parameter servers, sharded weight updates,
# synchronized batch norm; and Pr x Pc grids on 4 ranks (issue 15: row- and
# column-split products, channel-split convolutions with batch norm
# synchronized over the batch axis, vocabulary-parallel embeddings, and
# convolutions split by rows with halo exchanges, attention split by heads
# with split dropouts, depthwise and grouped convolutions split by channels,
# a vocabulary of 27 words padded to 28 for 4 model ranks, layer norms
# on a block of rows with sequence parallelism). The
# CPU's losses for the same plan are the reference; ref/NAME.np says the
# number of ranks.
variants() {
  echo "lm.ps 2 examples/models/lm.onnx --sync=ps"
  echo "lm.shard 2 examples/models/lm.onnx --sync=allreduce --shard-weight-update=on"
  echo "tv_resnet18.syncbn 2 examples/models/tv_resnet18.onnx"
  echo "grid.mlp.2x2 4 examples/models/mlp.onnx --grid=2x2"
  echo "grid.cnn.2x2 4 examples/models/cnn.onnx --grid=2x2"
  echo "grid.dlrm.2x2 4 examples/models/dlrm.onnx --grid=2x2"
  echo "grid.lm.2x2 4 examples/models/lm.onnx --grid=2x2"
  echo "grid.nmt.4x1 4 examples/models/nmt.onnx --grid=4x1"
  echo "grid.lm.sequence.4x1 4 examples/models/lm.onnx --grid=4x1 --sequence-parallel"
  echo "grid.mobile.2x1 2 examples/models/mobile.onnx --grid=2x1"
  echo "grid.mobile.2x2 4 examples/models/mobile.onnx --grid=2x2"
  echo "grid.cnn.domain.2x2 4 examples/models/cnn.onnx --grid=2x2 --conv-split=domain"
  echo "grid.cnn.domain.4x1 4 examples/models/cnn.onnx --grid=4x1 --conv-split=domain"
  echo "grid.vocab.4x1 4 $exports/tied.onnx --grid=4x1"
  echo "grid.resnext.4x1 4 $exports/resnext.onnx --grid=4x1 --layer-split=$resnext_split"
}
variants | while read -r name np model flags; do
  for t in cpu cuda; do
    # shellcheck disable=SC2086
    "$opt" "$model" --target=$t --np $np $flags --emit=plan -o "$dir/plans/sync.$name.$t.pxplan"
  done
  echo "$np" >"$dir/ref/sync.$name.np"
  "$run" "$dir/plans/sync.$name.cpu.pxplan" --np $np --device=cpu --synthetic --seed 1 \
    --weights random --steps 20 --quiet --metrics "$dir/ref/sync.$name.jsonl"
done
/usr/bin/python3 test/Conformance/run_conformance.py --opt "$opt" --target cuda \
  --export "$dir/conformance" --data "$build/test/Conformance/onnx-backend-data" \
  --work /tmp/gpu-check-conformance -j 2 | tail -2
du -sh --apparent-size "$dir"
