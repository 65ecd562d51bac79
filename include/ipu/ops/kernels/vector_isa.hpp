#pragma once
// Element-wise loops compiled up to three times, for the x86-64 baseline the library is built for
// (SSE2: four floats a vector), for AVX2 (eight) and for AVX-512 (sixteen), and run in the best
// copy the host CPU has. A header-only library cannot ask its users for -mavx2, and a binary built
// with it would not start on older CPUs; one run-time check per loop costs nothing next to the loop.
//
// No copy uses FMA: a fused multiply-add rounds once where the baseline rounds twice, so the
// outputs would depend on the machine. Without it every copy does the same IEEE operations on each
// element in the same order and gives the same bits, which tests/ops/test_vector_isa.cpp checks.
// target("avx2") has no FMA; AVX-512F brings its own, so that copy also turns contraction off.
// Only GCC builds the AVX-512 copy: Clang has no per-function switch for contraction.
//
// Sixteen lanes pay even where the core splits a 512-bit operation in two (AMD Zen 4): the loop
// issues half the instructions, and Swish's went from 1.05 to 0.71 ns an element.
//
// Define IPU_VECTOR_COPIES to 0 (in every translation unit of the program) for the baseline copy
// alone: GCC then compiles the kernels in a quarter to a half less time (measured under TSan and
// ASan), at the cost of the element-wise loops' speed. The project's ThreadSanitizer build uses it:
// it tests the threads, which every copy shares.
#include <cstddef>

#include "ipu/host_cpu.hpp"
#include "ipu/ops/kernels/numeric.hpp"

#ifndef IPU_VECTOR_COPIES
#define IPU_VECTOR_COPIES 1
#endif
#if IPU_VECTOR_COPIES != 0 && IPU_VECTOR_COPIES != 1
#error "ipu: IPU_VECTOR_COPIES is 1 (the default: AVX2 and AVX-512 copies of the element-wise loops) or 0 (the baseline copy alone)"
#endif

#if IPU_VECTOR_COPIES && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__AVX2__)
#define IPU_AVX2_COPY 1
#else
#define IPU_AVX2_COPY 0  // not x86-64, the whole build already targets AVX2, or IPU_VECTOR_COPIES is 0
#endif

#if IPU_AVX2_COPY && !defined(__clang__) && !defined(__AVX512F__)
#define IPU_AVX512_COPY 1
#else
#define IPU_AVX512_COPY 0
#endif

namespace ipu::detail::math_ops {

enum class vector_isa : unsigned char { baseline, avx2, avx512 };

/// The widest copy the build has and the host CPU supports (ipu::this_host_cpu): AVX-512 (F, VL,
/// BW and DQ), AVX2, or the baseline.
[[nodiscard]] inline vector_isa host_vector_isa() noexcept {
#if IPU_AVX2_COPY
  const host_cpu& cpu = this_host_cpu();
  if (IPU_AVX512_COPY && cpu.avx512) return vector_isa::avx512;
  return cpu.avx2 ? vector_isa::avx2 : vector_isa::baseline;
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

#if IPU_AVX512_COPY
/// body() inlined and compiled for AVX-512 with 512-bit vectors (GCC's generic tuning prefers 256)
/// and without contraction into FMA.
template <class Body>
[[gnu::target("avx512f,avx512vl,avx512bw,avx512dq,prefer-vector-width=512"), gnu::optimize("fp-contract=off"),
  gnu::flatten]] void run_avx512(Body& body) {
  body();
}
#endif

/// Runs body() in the copy for `isa`; the baseline when the build has no such copy.
template <class Body>
void run_on(vector_isa isa, Body&& body) {
#if IPU_AVX512_COPY
  if (isa == vector_isa::avx512) {
    run_avx512(body);
    return;
  }
#endif
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
