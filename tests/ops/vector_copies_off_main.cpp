// Its own program, compiled with IPU_VECTOR_COPIES=0 (tests/CMakeLists.txt): the build holds the
// baseline copy of the element-wise loops alone, so whatever the host CPU has, the host's copy is
// the baseline and a loop asked to run in a wider copy runs in the baseline one.
#include <cstdio>

#include "ipu/ops/kernels/vector_isa.hpp"

static_assert(IPU_VECTOR_COPIES == 0, "ipu: build this test with -DIPU_VECTOR_COPIES=0");

int main() {
  namespace m = ipu::detail::math_ops;
  int failures = 0;
  if (IPU_AVX2_COPY || IPU_AVX512_COPY) {
    std::fprintf(stderr, "FAILED: IPU_VECTOR_COPIES=0 still builds a wider copy\n");
    ++failures;
  }
  if (m::host_vector_isa() != m::vector_isa::baseline) {
    std::fprintf(stderr, "FAILED: the host's copy is not the baseline\n");
    ++failures;
  }
  for (const auto isa : {m::vector_isa::baseline, m::vector_isa::avx2, m::vector_isa::avx512}) {
    int runs = 0;
    m::run_on(isa, [&] { ++runs; });
    if (runs != 1) {
      std::fprintf(stderr, "FAILED: run_on(%d) ran the loop %d times\n", static_cast<int>(isa), runs);
      ++failures;
    }
  }
  if (failures == 0) std::puts("IPU_VECTOR_COPIES=0: the baseline copy alone");
  return failures == 0 ? 0 : 1;
}
