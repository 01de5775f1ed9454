// Data loading tests (to be written).
#include "KernelTestUtil.h"
