//===- Elementwise.cpp - Elementwise kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerElementwiseKernels(KernelRegistry &) {}

} // namespace parallax::rt
