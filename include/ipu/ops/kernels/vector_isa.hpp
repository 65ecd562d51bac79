#pragma once
// Element-wise loops compiled twice, for the x86-64 baseline the library is built for (SSE2: four
// floats a vector) and for AVX2 (eight), and run in whichever the host CPU has. A header-only
// library cannot ask its users for -mavx2, and a binary built with it would not start on older
// CPUs; one run-time check per loop costs nothing next to the loop.
//
// The AVX2 copy has no FMA: a fused multiply-add rounds once where the baseline rounds twice, so
// the outputs would depend on the machine. Without it both copies do the same IEEE operations on
// each element in the same order and give the same bits, which tests/ops/test_vector_isa.cpp checks.
#include <cstddef>

#include "ipu/ops/kernels/numeric.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define IPU_AVX2_COPY 1
#else
#define IPU_AVX2_COPY 0  // not x86-64, or the whole build already targets AVX2
#endif

namespace ipu::detail::math_ops {

enum class vector_isa : unsigned char { baseline, avx2 };

/// AVX2 when the host CPU (and its operating system, which __builtin_cpu_supports checks through
/// XGETBV) supports it and the build has an AVX2 copy of the loops; otherwise the baseline.
[[nodiscard]] inline vector_isa host_vector_isa() noexcept {
#if IPU_AVX2_COPY
  static const vector_isa isa = __builtin_cpu_supports("avx2") ? vector_isa::avx2 : vector_isa::baseline;
  return isa;
#else
  return vector_isa::baseline;
#endif
}

#if IPU_AVX2_COPY
/// body() with everything it calls inlined and compiled for AVX2 (flatten: a callee left out of
/// line would run the baseline code).
template <class Body>
[[gnu::target("avx2"), gnu::flatten]] void run_avx2(Body& body) {
  body();
}
#endif

/// Runs body() in the copy for `isa`; the baseline when the build has no such copy.
template <class Body>
void run_on(vector_isa isa, Body&& body) {
#if IPU_AVX2_COPY
  if (isa == vector_isa::avx2) {
    run_avx2(body);
    return;
  }
#endif
  (void)isa;
  body();
}

/// parallel_blocks (numeric.hpp) whose blocks run in the host's best copy.
template <class F>
void vectorised_blocks(const kernel_context& ctx, std::size_t n, std::size_t grain, F&& body) {
  const vector_isa isa = host_vector_isa();
  parallel_blocks(ctx, n, grain, [&](std::size_t begin, std::size_t end) { run_on(isa, [&] { body(begin, end); }); });
}

}  // namespace ipu::detail::math_ops
