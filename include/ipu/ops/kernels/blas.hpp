#pragma once
// Matrix multiplication for the numeric kernels: oneDNN's sgemm for F32 products beyond the
// smallest, OpenBLAS for the smallest and for F64, a plain loop for integer types, a splitter
// that spreads one product over the context's parallel_for, and for a few rows times a large B
// stored [n x k] (a classifier at a small batch) a product that streams B once
// (few_rows_gemm.hpp). oneDNN picks its kernels from the CPU it runs on (1.4-3.5x OpenBLAS's
// when OPENBLAS_CORETYPE holds OpenBLAS to an older core set, and no slower otherwise, measured
// on the transformer's products); OpenBLAS's call costs less below about 25^3 multiply-adds.
// OpenBLAS is used as the process configured it; programs that own the process opt into the host
// device's settings with ipu/cpu/blas_tuning.hpp.
#include <cblas.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "ipu/ops/kernels/dnnl_thread.hpp"
#include "ipu/ops/kernels/few_rows_gemm.hpp"
#include "ipu/ops/kernels/numeric.hpp"

namespace ipu::detail::math_ops {

inline blasint blas_dim(std::int64_t v) {
  if (v < 0 || v > std::numeric_limits<blasint>::max())
    throw error(error_category::runtime, "matrix dimension " + std::to_string(v) + " exceeds the BLAS index range",
                "GEMM", "split the operation into smaller ones");
  return static_cast<blasint>(v);
}

/// F32 products of at least this many multiply-adds run on oneDNN (see the header comment).
inline constexpr double dnnl_sgemm_min_macs = 16384;

/// C = alpha * op(A) * op(B) + beta * C, row-major. T is float (oneDNN or OpenBLAS) or double (OpenBLAS); integer
/// types use a wrapping loop (alpha, beta must be 1 / 0 or 1 there).
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
          std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (k == 0) {
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == T{0} ? T{0} : beta * c[i * ldc + j];
      return;
    }
    const auto ta = trans_a ? CblasTrans : CblasNoTrans;
    const auto tb = trans_b ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>) {
      if (static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) >= dnnl_sgemm_min_macs) {
        const dnnl_one_thread one;
        const dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                            beta, c, ldc);
        if (st != dnnl_success)
          throw error(error_category::runtime, "oneDNN's sgemm failed with status " + std::to_string(st), "GEMM",
                      "check the operands' shapes; report this with the model if they are valid");
        return;
      }
      cblas_sgemm(CblasRowMajor, ta, tb, blas_dim(m), blas_dim(n), blas_dim(k), alpha, a, blas_dim(lda), b,
                  blas_dim(ldb), beta, c, blas_dim(ldc));
    } else {
      cblas_dgemm(CblasRowMajor, ta, tb, blas_dim(m), blas_dim(n), blas_dim(k), alpha, a, blas_dim(lda), b,
                  blas_dim(ldb), beta, c, blas_dim(ldc));
    }
  } else {
    static_assert(std::is_integral_v<T>, "ipu: gemm takes float, double or an integer type");
    for (std::int64_t i = 0; i < m; ++i) {
      T* crow = c + i * ldc;
      if (beta == T{0}) std::fill(crow, crow + n, T{0});
      for (std::int64_t p = 0; p < k; ++p) {
        const T av = trans_a ? a[p * lda + i] : a[i * lda + p];
        if (av == T{0}) continue;
        if (trans_b)
          for (std::int64_t j = 0; j < n; ++j) crow[j] = add(crow[j], mul(av, b[j * ldb + p]));
        else
          for (std::int64_t j = 0; j < n; ++j) crow[j] = add(crow[j], mul(av, b[p * ldb + j]));
      }
    }
    (void)alpha;
  }
}

/// Whether an F32 product goes to few_rows_gemm_bt (few_rows_gemm.hpp): 2 to 16 rows times a B
/// stored [n x k] that the caches cannot hold, a fully connected layer at a small batch, bound by
/// reading B. One thread, AMD Zen 5, B from memory, against oneDNN's sgemm: 4 x 9216 by 4096 x 9216
/// 12.8 -> 7.5 ms, 4 x 4096 by 1000 x 4096 (16 MB) 0.69 -> 0.49 ms. From the caches (B of 2 MB)
/// oneDNN was up to 1.6x ahead and for one row level; without AVX2 there is no fast copy.
[[nodiscard]] inline bool few_rows_bt_pays(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k) {
  constexpr double min_b_bytes = 8.0 * 1024 * 1024;
  return !trans_a && trans_b && m >= static_cast<std::int64_t>(few_rows_min) &&
         m <= static_cast<std::int64_t>(few_rows_max) &&
         static_cast<double>(n) * static_cast<double>(k) * sizeof(float) > min_b_bytes &&
         host_vector_isa() != vector_isa::baseline;
}

/// gemm() spread over the context's threads: the larger of M and N is cut into blocks (each a
/// separate single-threaded GEMM). Small products run inline.
template <class T>
void parallel_gemm(const kernel_context& ctx, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                   std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                   std::int64_t ldc) {
  if constexpr (std::is_same_v<T, float>) {
    if (few_rows_bt_pays(trans_a, trans_b, m, n, k)) {
      parallel_blocks(ctx, static_cast<std::size_t>(n), 64, [&](std::size_t c0, std::size_t c1) {
        const auto j0 = static_cast<std::int64_t>(c0);
        few_rows_gemm_bt(a, static_cast<std::size_t>(m), static_cast<std::size_t>(lda), b + j0 * ldb,
                         static_cast<std::size_t>(ldb), c1 - c0, static_cast<std::size_t>(k), alpha, beta, c + j0,
                         static_cast<std::size_t>(ldc));
      });
      return;
    }
  }
  const double flops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(std::max<std::int64_t>(k, 1));
  if (flops < 4.0e6) {
    gemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  if (m >= n) {
    parallel_blocks(ctx, static_cast<std::size_t>(m), 32, [&](std::size_t r0, std::size_t r1) {
      const auto i0 = static_cast<std::int64_t>(r0);
      const T* ab = trans_a ? a + i0 : a + i0 * lda;
      gemm(trans_a, trans_b, static_cast<std::int64_t>(r1 - r0), n, k, alpha, ab, lda, b, ldb, beta, c + i0 * ldc,
           ldc);
    });
  } else {
    parallel_blocks(ctx, static_cast<std::size_t>(n), 64, [&](std::size_t c0, std::size_t c1) {
      const auto j0 = static_cast<std::int64_t>(c0);
      const T* bb = trans_b ? b + j0 * ldb : b + j0;
      gemm(trans_a, trans_b, m, static_cast<std::int64_t>(c1 - c0), k, alpha, a, lda, bb, ldb, beta, c + j0, ldc);
    });
  }
}

}  // namespace ipu::detail::math_ops
