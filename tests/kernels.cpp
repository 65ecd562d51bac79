// The library's kernels, compiled once for every test program (IPU_SEPARATE_KERNELS: see
// include/ipu/ops/all.hpp); the test sources see only the registry's declaration.
#define IPU_KERNELS_IMPLEMENTATION
#include "ipu/ops/all.hpp"
