// Tests of the Indexing kernels (to be written).
#include "KernelTestUtil.h"
