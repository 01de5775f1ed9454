//===- Linalg.cpp - Linalg kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerLinalgKernels(KernelRegistry &) {}

} // namespace parallax::rt
