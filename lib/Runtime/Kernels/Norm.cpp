//===- Norm.cpp - Norm kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerNormKernels(KernelRegistry &) {}

} // namespace parallax::rt
