// Tests of the Loss kernels (to be written).
#include "KernelTestUtil.h"
