#pragma once
// Matrix multiplication for the numeric kernels: OpenBLAS for F32 / F64 (single-threaded per call,
// so the device's thread pool alone decides the parallelism), a plain loop for integer types, and
// a splitter that spreads one product over the context's parallel_for.
#include <cblas.h>

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

#include "ipu/ops/kernels/numeric.hpp"

// Present in OpenBLAS builds with DYNAMIC_ARCH (Debian's); weak so other builds still link.
extern "C" {
void gotoblas_dynamic_init(void) __attribute__((weak));
void gotoblas_dynamic_quit(void) __attribute__((weak));
}

namespace ipu::detail::math_ops {

/// 3: AVX-512 kernels, 2: AVX2+FMA kernels, 0: older.
inline int openblas_core_rank(std::string_view core) noexcept {
  std::string c(core);
  for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (c == "skylakex" || c == "cooperlake" || c == "sapphirerapids") return 3;
  if (c == "haswell" || c == "zen" || c == "excavator") return 2;
  return 0;
}

/// OpenBLAS 0.3.21 (Debian 12) does not know recent Xeon models and falls back to its SSE3
/// "Prescott" kernels, 4-5x slower than the AVX-512 ones the CPU runs. Unless the user chose a
/// core with OPENBLAS_CORETYPE, re-run OpenBLAS's own core selection forced to the best kernel set
/// the CPU supports.
inline void select_openblas_core() noexcept {
  if (!gotoblas_dynamic_init || !gotoblas_dynamic_quit || std::getenv("OPENBLAS_CORETYPE")) return;
#if defined(__x86_64__)
  __builtin_cpu_init();
  const char* want = nullptr;
  int want_rank = 0;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512cd")) {
    want = "SkylakeX";
    want_rank = 3;
  } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    want = "Haswell";
    want_rank = 2;
  }
  if (!want || openblas_core_rank(openblas_get_corename()) >= want_rank) return;
  // gotoblas_dynamic_init reads the core type from the environment: set it just for this call.
  if (setenv("OPENBLAS_CORETYPE", want, 0) != 0) return;
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
#endif
}

/// One-time OpenBLAS configuration: best kernels, one thread per call.
inline void blas_setup() noexcept {
  static const bool done = [] {
    select_openblas_core();
    openblas_set_num_threads(1);
    return true;
  }();
  (void)done;
}

inline blasint blas_dim(std::int64_t v) {
  if (v < 0 || v > std::numeric_limits<blasint>::max())
    throw error(error_category::runtime, "matrix dimension " + std::to_string(v) + " exceeds the BLAS index range",
                "GEMM", "split the operation into smaller ones");
  return static_cast<blasint>(v);
}

/// C = alpha * op(A) * op(B) + beta * C, row-major. T is float or double (OpenBLAS); integer
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
    blas_setup();
    const auto ta = trans_a ? CblasTrans : CblasNoTrans;
    const auto tb = trans_b ? CblasTrans : CblasNoTrans;
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, ta, tb, blas_dim(m), blas_dim(n), blas_dim(k), alpha, a, blas_dim(lda), b,
                  blas_dim(ldb), beta, c, blas_dim(ldc));
    else
      cblas_dgemm(CblasRowMajor, ta, tb, blas_dim(m), blas_dim(n), blas_dim(k), alpha, a, blas_dim(lda), b,
                  blas_dim(ldb), beta, c, blas_dim(ldc));
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

/// gemm() spread over the context's threads: the larger of M and N is cut into blocks (each a
/// separate single-threaded GEMM). Small products run inline.
template <class T>
void parallel_gemm(const kernel_context& ctx, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n,
                   std::int64_t k, T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                   std::int64_t ldc) {
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
