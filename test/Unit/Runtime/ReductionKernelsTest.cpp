// Tests of the Reduction kernels (to be written).
#include "KernelTestUtil.h"
