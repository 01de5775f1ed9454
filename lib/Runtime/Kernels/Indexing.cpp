//===- Indexing.cpp - Indexing kernels (stub until implemented) -----------------===//

#include "parallax/Runtime/Kernel.h"

namespace parallax::rt {

void registerIndexingKernels(KernelRegistry &) {}

} // namespace parallax::rt
