// Tests of the Linalg kernels (to be written).
#include "KernelTestUtil.h"
