#pragma once
// C[m x n] += A[m x k] * B[k x n] for a few rows m, with B stored k-major: the step GEMM of a
// recurrent layer (the batch's states times R^T, once per time step, R the same every step).
// OpenBLAS packs B on every call, which for 4 rows of a 128 x 512 product is most of its time
// (17.5 us against 6.8 us here for the AVX-512 copy on an AMD EPYC Zen 4, 14.7 us for the AVX2 copy).
//
// Each C element is its start value plus the products summed over k in order, with separate
// multiplies and adds (vector_isa.hpp), so the AVX2 and AVX-512 copies give the same bits. The
// baseline (SSE2) copy would be twice as slow as OpenBLAS, so without AVX2 the caller keeps
// OpenBLAS, which sums in another order.
#include <algorithm>
#include <cstddef>

#include "ipu/ops/kernels/vector_isa.hpp"

namespace ipu::detail::math_ops {

/// Rows for which few_rows_gemm beats OpenBLAS's sgemm on a 128 x 512 step product: one row goes
/// to OpenBLAS's matrix-vector path, 64 rows amortise its packing.
inline constexpr std::size_t few_rows_min = 2, few_rows_max = 16;

/// Floats past column n that each row of B must hold (any finite values, zeros say): a block of
/// columns is read whole, and its columns past n are computed and dropped.
inline constexpr std::size_t few_rows_pad = 64;

/// Columns in blocks of `Cols`, rows in fours: 4 x Cols accumulators stay in vector registers
/// while k runs, and each loaded piece of B serves four rows.
template <std::size_t Cols>
inline void few_rows_gemm_blocks(const float* a, std::size_t m, std::size_t k, const float* b, std::size_t ldb,
                                 std::size_t n, float* c, std::size_t ldc) {
  static_assert(Cols <= few_rows_pad, "ipu: a block of columns must fit in B's padding");
  constexpr std::size_t rows = 4;
  for (std::size_t j0 = 0; j0 < n; j0 += Cols) {
    const std::size_t jn = std::min(Cols, n - j0);
    for (std::size_t i0 = 0; i0 < m; i0 += rows) {
      const std::size_t in = std::min(rows, m - i0);
      float acc[rows][Cols] = {};
      for (std::size_t i = 0; i < in; ++i)
        for (std::size_t j = 0; j < jn; ++j) acc[i][j] = c[(i0 + i) * ldc + j0 + j];
      for (std::size_t p = 0; p < k; ++p) {
        const float* bp = b + p * ldb + j0;
        float av[rows];
        for (std::size_t i = 0; i < rows; ++i) av[i] = i < in ? a[(i0 + i) * k + p] : 0.0f;
#pragma GCC unroll 4
        for (std::size_t i = 0; i < rows; ++i)
#pragma GCC unroll 64
          for (std::size_t j = 0; j < Cols; ++j) acc[i][j] += av[i] * bp[j];
      }
      for (std::size_t i = 0; i < in; ++i)
        for (std::size_t j = 0; j < jn; ++j) c[(i0 + i) * ldc + j0 + j] = acc[i][j];
    }
  }
}

/// C += A B (A [m x k] row-major; B [k x n] with row stride ldb, each row readable few_rows_pad
/// floats past n; C with row stride ldc) in the host's AVX2 or AVX-512 copy; false, with C
/// untouched, when the host has neither.
inline bool few_rows_gemm(const float* a, std::size_t m, std::size_t k, const float* b, std::size_t ldb,
                          std::size_t n, float* c, std::size_t ldc) {
  const auto isa = host_vector_isa();
  if (isa == vector_isa::baseline) return false;
  run_on(isa, [&] {
    if (isa == vector_isa::avx512) few_rows_gemm_blocks<64>(a, m, k, b, ldb, n, c, ldc);
    else few_rows_gemm_blocks<32>(a, m, k, b, ldb, n, c, ldc);
  });
  return true;
}

}  // namespace ipu::detail::math_ops
