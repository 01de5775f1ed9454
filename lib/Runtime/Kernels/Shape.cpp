//===- Shape.cpp - Shape kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerShapeKernels(KernelRegistry &) {}

} // namespace parallax::rt
