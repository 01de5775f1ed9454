// Tests of the Optimizer kernels (to be written).
#include "KernelTestUtil.h"
