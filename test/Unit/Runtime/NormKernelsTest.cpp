// Tests of the Norm kernels (to be written).
#include "KernelTestUtil.h"
