// Tests of the Conv kernels (to be written).
#include "KernelTestUtil.h"
