// The GEMM layer: every transpose combination against a direct loop, on both F32 paths (OpenBLAS
// below dnnl_sgemm_min_macs, oneDNN above).
#include "ipu/ops/kernels/blas.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_blas {

using namespace ipu::detail::math_ops;

void check_transposes(std::int64_t m, std::int64_t n, std::int64_t k) {
  auto a = mk::random_floats(static_cast<std::size_t>(m * k), 50);   // [m, k]
  auto b = mk::random_floats(static_cast<std::size_t>(k * n), 51);   // [k, n]
  std::vector<float> at(a.size()), bt(b.size());                     // [k, m], [n, k]
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t p = 0; p < k; ++p) at[static_cast<std::size_t>(p * m + i)] = a[static_cast<std::size_t>(i * k + p)];
  for (std::int64_t p = 0; p < k; ++p)
    for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(j * k + p)] = b[static_cast<std::size_t>(p * n + j)];
  std::vector<float> want(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += double(a[static_cast<std::size_t>(i * k + p)]) * b[static_cast<std::size_t>(p * n + j)];
      want[static_cast<std::size_t>(i * n + j)] = static_cast<float>(s);
    }
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      // C has a leading dimension wider than n; beta = 1 adds to what is there.
      const std::int64_t ldc = n + 3;
      std::vector<float> c(static_cast<std::size_t>(m * ldc), 1.0f);
      gemm<float>(ta != 0, tb != 0, m, n, k, 2.0f, ta ? at.data() : a.data(), ta ? m : k, tb ? bt.data() : b.data(),
                  tb ? k : n, 1.0f, c.data(), ldc);
      for (std::int64_t i = 0; i < m; ++i) {
        for (std::int64_t j = 0; j < n; ++j)
          CHECK(c[static_cast<std::size_t>(i * ldc + j)] == doctest::Approx(2 * want[static_cast<std::size_t>(i * n + j)] + 1).epsilon(1e-5));
        CHECK(c[static_cast<std::size_t>(i * ldc + n)] == 1.0f);  // padding untouched
      }
      // beta = 0 never reads C: NaNs there (as debug builds leave in fresh outputs) vanish.
      std::vector<float> d(static_cast<std::size_t>(m * n), std::numeric_limits<float>::quiet_NaN());
      gemm<float>(ta != 0, tb != 0, m, n, k, 1.0f, ta ? at.data() : a.data(), ta ? m : k, tb ? bt.data() : b.data(),
                  tb ? k : n, 0.0f, d.data(), n);
      for (std::size_t i = 0; i < d.size(); ++i) CHECK(d[i] == doctest::Approx(want[i]).epsilon(1e-5));
    }
}

TEST_CASE("gemm: all transpose combinations, leading dimensions and beta, on both F32 paths") {
  static_assert(5 * 7 * 3 < dnnl_sgemm_min_macs && 40 * 33 * 29 >= dnnl_sgemm_min_macs);
  SUBCASE("OpenBLAS") { check_transposes(5, 7, 3); }
  SUBCASE("oneDNN") { check_transposes(40, 33, 29); }
}

TEST_CASE("gemm on doubles with K = 0") {
  // K = 0: C = beta * C.
  std::vector<double> c0{1, 2};
  gemm<double>(false, false, 1, 2, 0, 1.0, nullptr, 1, nullptr, 2, 3.0, c0.data(), 2);
  CHECK(c0 == std::vector<double>{3, 6});
}

TEST_CASE("gemm on integers wraps and honours transposes") {
  const std::vector<std::uint8_t> a{200, 1, 2, 3};  // [2, 2]
  const std::vector<std::uint8_t> b{2, 0, 0, 1};
  std::vector<std::uint8_t> c(4, 99);
  gemm<std::uint8_t>(true, false, 2, 2, 2, 1, a.data(), 2, b.data(), 2, 0, c.data(), 2);
  // A^T = [[200, 2], [1, 3]]: row 0 = [400 mod 256, 2] = [144, 2]
  CHECK(c == std::vector<std::uint8_t>{144, 2, 2, 3});
}

}  // namespace test_blas
