// Plan format tests (to be written).
#include "KernelTestUtil.h"
