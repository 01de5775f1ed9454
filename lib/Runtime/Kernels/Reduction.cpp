//===- Reduction.cpp - Reduction kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerReductionKernels(KernelRegistry &) {}

} // namespace parallax::rt
