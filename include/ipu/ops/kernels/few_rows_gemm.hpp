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
//
// And C = alpha A B^T + beta C for a few rows with B stored [n x k]: a fully connected layer at a
// small batch (AlexNet's and VGG's classifiers), where B is read once from memory and the product
// is bound by that read. A GEMM library packs B first; here each B row meets all of A's rows as it
// streams past. Each dot product is summed in sixteen lanes in a fixed order, so every copy gives
// the same bits, and so does any split of the columns over threads.
#include <algorithm>
#include <cstddef>
#include <cstring>

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

/// Lanes of each dot product in few_rows_gemm_bt, whatever the vector width: the sum's order is
/// fixed, so the AVX2 and AVX-512 copies (two vectors of eight, one of sixteen) give the same bits.
inline constexpr std::size_t few_rows_dot_lanes = 16;

/// The dot products of `Rows` rows of A with `Cols` rows of B, each split over the lanes by k mod
/// 16 (the last k % 16 products land in the first lanes), then the lanes summed as a tree. Written
/// with vector types, not left to the vectorizer: at -O3 GCC vectorised the plain loop nest across
/// rows with permutes, ten times slower than the same loops at -O2.
template <std::size_t Rows, std::size_t Cols>
inline void few_rows_dots(const float* a, std::size_t lda, const float* b, std::size_t ldb, std::size_t k,
                          float (&dots)[Rows][Cols]) {
  constexpr std::size_t L = few_rows_dot_lanes;
  typedef float lanes __attribute__((vector_size(L * sizeof(float))));
  lanes acc[Rows][Cols];
#pragma GCC unroll 16
  for (std::size_t r = 0; r < Rows; ++r)
#pragma GCC unroll 16
    for (std::size_t c = 0; c < Cols; ++c) acc[r][c] = lanes{};
  const std::size_t k_whole = k - k % L;
  // Unrolled whole, so that the accumulators live in registers at -O2 as well.
  for (std::size_t p = 0; p < k_whole; p += L) {
    lanes bv[Cols];
#pragma GCC unroll 16
    for (std::size_t c = 0; c < Cols; ++c) std::memcpy(&bv[c], b + c * ldb + p, sizeof(lanes));
#pragma GCC unroll 16
    for (std::size_t r = 0; r < Rows; ++r) {
      lanes av;
      std::memcpy(&av, a + r * lda + p, sizeof(lanes));
#pragma GCC unroll 16
      for (std::size_t c = 0; c < Cols; ++c) acc[r][c] += av * bv[c];
    }
  }
  for (std::size_t r = 0; r < Rows; ++r)
    for (std::size_t c = 0; c < Cols; ++c) {
      float v[L];
      std::memcpy(v, &acc[r][c], sizeof v);
      for (std::size_t p = k_whole; p < k; ++p) v[p - k_whole] += a[r * lda + p] * b[c * ldb + p];
      for (std::size_t w = L / 2; w > 0; w /= 2)
        for (std::size_t l = 0; l < w; ++l) v[l] += v[l + w];
      dots[r][c] = v[0];
    }
}

/// C = alpha A B^T + beta C for a few rows of A ([m x k], row stride lda) and B stored [n x k]
/// (row stride ldb), as a fully connected layer's weights are: each B row is read once, from
/// memory, for all of A's rows (`Rows` at a time, the rest then find it in cache), where a GEMM
/// library would pack B first. With beta 0, C is not read.
template <std::size_t Rows, std::size_t Cols>
inline void few_rows_gemm_bt_blocks(const float* a, std::size_t m, std::size_t lda, const float* b, std::size_t ldb,
                                    std::size_t n, std::size_t k, float alpha, float beta, float* c, std::size_t ldc) {
  auto store = [&](std::size_t i, std::size_t j, float dot) {
    float& out = c[i * ldc + j];
    out = beta == 0.0f ? alpha * dot : alpha * dot + beta * out;
  };
  auto block = [&]<std::size_t R, std::size_t C>(std::size_t i0, std::size_t j0) {
    float dots[R][C];
    few_rows_dots<R, C>(a + i0 * lda, lda, b + j0 * ldb, ldb, k, dots);
    for (std::size_t r = 0; r < R; ++r)
      for (std::size_t q = 0; q < C; ++q) store(i0 + r, j0 + q, dots[r][q]);
  };
  auto rows_of = [&]<std::size_t C>(std::size_t j0) {
    std::size_t i0 = 0;
    for (; i0 + Rows <= m; i0 += Rows) block.template operator()<Rows, C>(i0, j0);
    for (; i0 < m; ++i0) block.template operator()<1, C>(i0, j0);
  };
  std::size_t j0 = 0;
  for (; j0 + Cols <= n; j0 += Cols) rows_of.template operator()<Cols>(j0);
  for (; j0 < n; ++j0) rows_of.template operator()<1>(j0);
}

/// few_rows_gemm_bt_blocks in the host's AVX2 or AVX-512 copy; false, with C untouched, when the
/// host has neither (the caller keeps its GEMM library).
inline bool few_rows_gemm_bt(const float* a, std::size_t m, std::size_t lda, const float* b, std::size_t ldb,
                             std::size_t n, std::size_t k, float alpha, float beta, float* c, std::size_t ldc) {
  const auto isa = host_vector_isa();
  if (isa == vector_isa::baseline) return false;
  run_on(isa, [&] {
    // 16 accumulators in 32 zmm registers; an AVX2 lane vector takes two of its 16 ymm ones.
    if (isa == vector_isa::avx512) few_rows_gemm_bt_blocks<4, 4>(a, m, lda, b, ldb, n, k, alpha, beta, c, ldc);
    else few_rows_gemm_bt_blocks<4, 1>(a, m, lda, b, ldb, n, k, alpha, beta, c, ldc);
  });
  return true;
}

}  // namespace ipu::detail::math_ops
