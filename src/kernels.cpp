// The library is header-only; this translation unit exists for the project's own programs (tests,
// tools, examples, benchmarks). The kernels are most of the library's code, so these programs
// compile them once, here, instead of in every translation unit that uses the op registry
// (IPU_SEPARATE_KERNELS: see include/ipu/ops/all.hpp). Users get the same choice.
#define IPU_KERNELS_IMPLEMENTATION
#include "ipu/ops/all.hpp"
