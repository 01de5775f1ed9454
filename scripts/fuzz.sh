#!/usr/bin/env bash
# Fuzzes the ONNX importer and the plan reader (test/Fuzz, docs/testing.md):
# installs clang-22 (setup.sh's fuzz list), builds the libFuzzer targets
# with ASan and UBSan in build-fuzz/, seeds their corpora from the example
# models and the plans compiled from them, and runs each target for SECONDS
# (default 60). A crash, leak, sanitizer report, out-of-memory or hang stops
# it, with the input saved as build-fuzz/fuzz/TARGET/crash-* (or leak-,
# timeout-, oom-); docs/testing.md says how to keep it as a regression test.
# The corpora grow in build-fuzz/fuzz/TARGET/corpus from run to run.
#
# Usage: scripts/fuzz.sh [SECONDS] [TARGET...]   (targets: onnx-import plan)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(onnx-import plan)
B=${PARALLAX_FUZZ_BUILD_DIR:-build-fuzz}

scripts/setup.sh fuzz
scripts/models.sh
# Without oneDNN: Debian's is built against GCC's OpenMP runtime, and clang
# links its own; products run on OpenBLAS (the fuzzers run no step anyway).
if [ ! -f "$B/build.ninja" ]; then
  CC=clang-22 CXX=clang++-22 cmake -G Ninja -S . -B "$B" \
    -DCMAKE_BUILD_TYPE=Release -DPARALLAX_FUZZ=ON -DPARALLAX_USE_DNNL=OFF
fi
ninja -C "$B" -j "${PARALLAX_JOBS:-2}" parallax-onnx-import-fuzzer parallax-plan-fuzzer parallax-opt

# LLVM's headers poison the unused part of a BumpPtrAllocator's slab when
# compiled with ASan, and Debian's MLIR libraries, compiled without it,
# allocate from the same slabs without unpoisoning: which copy of the inline
# allocator the linker keeps decides whether MLIRContext's constructor
# "reads poisoned memory". Manual poisoning off; ASan's own checks stay.
export ASAN_OPTIONS=allow_user_poisoning=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}

seeds=$B/fuzz/seeds
if [ ! -f "$seeds/.done" ] || [ examples/models/.stamp -nt "$seeds/.done" ]; then
  rm -rf "$seeds"
  nodes=$B/test/Conformance/onnx-backend-data
  /usr/bin/python3 test/Conformance/generate.py "$nodes" >/dev/null
  # The compiler that makes the seed plans is the instrumented one: no leaks
  # to report at its exit (LLVM leaves its option registry to the OS).
  ASAN_OPTIONS=$ASAN_OPTIONS:detect_leaks=0 /usr/bin/python3 test/Fuzz/make_corpus.py --src . \
    --opt "$B/bin/parallax-opt" --out "$seeds" --node-tests "$nodes"
  touch "$seeds/.done"
fi

export UBSAN_OPTIONS=print_stacktrace=1
for target in "${targets[@]}"; do
  case "$target" in
    onnx-import) input=onnx; extra=(-max_len=1048576 -timeout=60) ;;
    plan) input=plan; extra=(-max_len=1048576 -timeout=30 "-dict=$seeds/plan.dict") ;;
    *) echo "fuzz: unknown target '$target' (known: onnx-import plan)" >&2; exit 2 ;;
  esac
  dir=$B/fuzz/$target
  mkdir -p "$dir/corpus"
  echo "== $target: $seconds s"
  rc=0
  "$B/bin/parallax-$target-fuzzer" "$dir/corpus" "$seeds/$input" "${extra[@]}" \
    -max_total_time="$seconds" -rss_limit_mb=3072 -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$dir/" > "$dir/last-run.log" 2>&1 || rc=$?
  grep -E '^#[0-9]+ +(INITED|DONE)|^stat::(number_of_executed_units|peak_rss)|^(ERROR|SUMMARY|==[0-9]+==)' \
    "$dir/last-run.log" || true
  if [ $rc -ne 0 ]; then
    echo "fuzz: $target found a bug (exit $rc): see $dir/last-run.log"
    exit 1
  fi
done
