//===- Conv.cpp - Conv kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerConvKernels(KernelRegistry &) {}

} // namespace parallax::rt
