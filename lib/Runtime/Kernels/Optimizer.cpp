//===- Optimizer.cpp - Optimizer kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerOptimizerKernels(KernelRegistry &) {}

} // namespace parallax::rt
