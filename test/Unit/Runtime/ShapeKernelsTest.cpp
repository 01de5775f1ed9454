// Tests of the Shape kernels (to be written).
#include "KernelTestUtil.h"
