#!/usr/bin/env bash
# The whole test suite under AddressSanitizer (with LeakSanitizer) and
# UndefinedBehaviorSanitizer: builds everything with
# -DPARALLAX_SANITIZE=address,undefined in build-asan/ (Debian's GCC, as the
# normal build) and runs ctest there. Any report fails the test that caused
# it. Open MPI's own leaks at exit are suppressed (test/Fuzz/lsan.supp names
# its libraries only, never ours). docs/testing.md has the measured times.
#
# Usage: scripts/sanitize.sh [ctest arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
B=${PARALLAX_SANITIZE_BUILD_DIR:-build-asan}
scripts/setup.sh
scripts/models.sh
if [ ! -f "$B/build.ninja" ]; then
  cmake -G Ninja -S . -B "$B" -DCMAKE_BUILD_TYPE=Release \
    -DPARALLAX_SANITIZE=address,undefined
fi
ninja -C "$B" -j "${PARALLAX_JOBS:-2}"
# allow_user_poisoning=0: see scripts/fuzz.sh (LLVM headers against
# uninstrumented MLIR libraries). fast_unwind_on_malloc=0: the leaks Open MPI
# leaves at exit come from plugins it has already unloaded, whose frames the
# fast unwinder loses; the full stacks reach libmpi and the suppressions.
export ASAN_OPTIONS=allow_user_poisoning=0:fast_unwind_on_malloc=0:detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1
export LSAN_OPTIONS=suppressions=$PWD/test/Fuzz/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$B" --output-on-failure -j 2 "$@"
