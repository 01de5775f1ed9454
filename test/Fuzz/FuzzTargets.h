//===- FuzzTargets.h - what the fuzzers run, shared with the replay test -*- C++ -*-===//
//
// One function per fuzz target. Each takes the fuzzer's bytes and returns
// the error message a user would see ("" when the input was accepted). The
// libFuzzer entry points (OnnxImportFuzzer.cpp, PlanFuzzer.cpp) call them
// under ASan and UBSan; the replay test (ReplayTest.cpp) calls them in every
// build on the inputs kept under regressions/ and checks those messages.
// Anything other than a returned message (a crash, a sanitizer report, an
// exception of any other type, a violated consistency check, which
// aborts) is a bug.
//
//===----------------------------------------------------------------------===//

#ifndef PARALLAX_TEST_FUZZ_FUZZTARGETS_H
#define PARALLAX_TEST_FUZZ_FUZZTARGETS_H

#include <cstdint>
#include <string>

namespace parallax::fuzz {

/// Memory the runtime may allocate for one fuzzed session (the runtime's
/// SessionOptions::memoryLimit): a plan that needs more is refused, as a
/// plan that needs more than the machine is refused by parallax-run. Small,
/// because zeroing what a session allocates is most of an execution's time.
constexpr int64_t kSessionMemoryLimit = 16 << 20;

/// A session this small also runs one step (the kernels on zeroed inputs):
/// kernels trust what binding checked, so a step must stay inside the
/// buffers of any plan that binds.
constexpr int64_t kStepMemoryLimit = 1 << 20;

/// parallax-opt's job on an ONNX model (binary protobuf): import with the
/// ONNX checker and shape inference, the training pipeline, plan emission;
/// once for one process and once for 2 data-parallel ranks. Every plan the
/// compiler emits must pass the plan reader and (for one process, within
/// kSessionMemoryLimit) bind in a session; if not, this aborts.
std::string compileOnnx(const uint8_t *data, size_t size);

/// parallax-run's job up to the first step on a plan: read it (checksum,
/// structure, every reference), allocate a session and bind every kernel.
/// The bytes are a plan file, or (what the fuzzer mutates best, see
/// regressions/README.md) the plan's JSON program, then optionally a NUL
/// byte and the blobs, which are packed into a file with a valid checksum.
/// Initial values that name the ONNX model become zeros: there is no model
/// file. Plans for several ranks bind as rank 0 of a world whose
/// collectives are never called; a plan for one process within
/// kStepMemoryLimit then runs one step.
std::string bindPlan(const uint8_t *data, size_t size);

} // namespace parallax::fuzz

#endif
