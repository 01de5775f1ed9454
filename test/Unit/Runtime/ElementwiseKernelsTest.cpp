// Tests of the Elementwise kernels (to be written).
#include "KernelTestUtil.h"
