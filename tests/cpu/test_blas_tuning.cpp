// The opt-in OpenBLAS tuning, as the tests' main applies it (tests/cpu/blas_untuned_main.cpp checks
// that without it the library leaves OpenBLAS alone).
#include "ipu/cpu/blas_tuning.hpp"

#include <doctest/doctest.h>

#include <cstdlib>

namespace test_blas_tuning {

TEST_CASE("tuned for the host device (tests/main.cpp opts in): one thread per call, the best kernels the CPU allows") {
  CHECK(openblas_get_num_threads() == 1);
  CHECK(ipu::openblas_core_rank("SkylakeX") == 3);
  CHECK(ipu::openblas_core_rank("haswell") == 2);
  CHECK(ipu::openblas_core_rank("Prescott") == 0);
#if defined(__x86_64__)
  if (!std::getenv("OPENBLAS_CORETYPE") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CHECK(ipu::openblas_core_rank(openblas_get_corename()) >= 2);
#endif
}

}  // namespace test_blas_tuning
