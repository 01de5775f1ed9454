//===- CollectiveTest.cpp - the Collective CUDA kernels against the CPU's --------------===//

#include "CudaKernelTestUtil.h"

namespace parallax::rt::test {
namespace {
} // namespace
} // namespace parallax::rt::test
