//===- Loss.cpp - Loss kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerLossKernels(KernelRegistry &) {}

} // namespace parallax::rt
