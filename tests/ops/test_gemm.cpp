// Gemm and MatMul against hand-computed products and a direct triple loop.
#include "ipu/ops/kernels/gemm.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "ipu/cpu/thread_pool.hpp"
#include "math_kernel_harness.hpp"

namespace test_gemm {

using namespace mk;

namespace {
/// Row-major [m, k] x [k, n] in double.
std::vector<float> matmul_ref(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t k,
                              std::int64_t n) {
  std::vector<float> c(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p)
        s += static_cast<double>(a[static_cast<std::size_t>(i * k + p)]) * static_cast<double>(b[static_cast<std::size_t>(p * n + j)]);
      c[static_cast<std::size_t>(i * n + j)] = static_cast<float>(s);
    }
  return c;
}
}  // namespace

TEST_CASE("Gemm: transposes, alpha, beta and a broadcast C") {
  auto a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  // A x B = [[58, 64], [139, 154]]
  check_close(floats(run1("Gemm", {a, b}, {data_type::F32, {2, 2}})), {58, 64, 139, 154});
  auto at = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  auto bt = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  check_close(floats(run1("Gemm", {at, bt}, {data_type::F32, {2, 2}}, {{"transA", std::int64_t{1}}, {"transB", std::int64_t{1}}})),
              {58, 64, 139, 154});
  auto c_row = f32({2}, {1, -1});
  check_close(floats(run1("Gemm", {a, b, c_row}, {data_type::F32, {2, 2}}, {{"alpha", 0.5f}, {"beta", 2.0f}})),
              {31, 30, 71.5f, 75});
  check_close(floats(run1("Gemm", {a, b, f32({2, 1}, {10, 20})}, {data_type::F32, {2, 2}})), {68, 74, 159, 174});
  check_close(floats(run1("Gemm", {a, b, f32({}, {1})}, {data_type::F32, {2, 2}}, {{"beta", 0.0f}})), {58, 64, 139, 154});
  CHECK_THROWS_AS(run1("Gemm", {a, a}, {data_type::F32, {2, 3}}), ipu::error);
}

TEST_CASE("Gemm on integer, F64 and F16 types") {
  auto a = i64({2, 2}, {1, 2, 3, 4});
  auto b = i64({2, 2}, {5, 6, 7, 8});
  CHECK(values<std::int64_t>(run1("Gemm", {a, b, i64({2}, {1, 1})}, {data_type::S64, {2, 2}})) ==
        std::vector<std::int64_t>{20, 23, 44, 51});
  CHECK(values<std::int64_t>(run1("Gemm", {a, b}, {data_type::S64, {2, 2}}, {{"alpha", 2.0f}})) ==
        std::vector<std::int64_t>{38, 44, 86, 100});
  auto d = run1("Gemm", {f64({1, 2}, {0.1, 0.2}), f64({2, 1}, {0.3, 0.4})}, {data_type::F64, {1, 1}});
  CHECK(d.as<double>()[0] == doctest::Approx(0.11).epsilon(1e-15));
  // F16: 1 + 1/1024 + 1/2048 accumulates in F32 (1.00146484375) and rounds once to F16 (1.0009765625 + ...).
  auto h = run1("Gemm", {f16({1, 3}, {1, 1, 1}), f16({3, 1}, {1, 1.0f / 1024, 1.0f / 2048})}, {data_type::F16, {1, 1}});
  CHECK(h.as<half>()[0].bits() == half(1.0f + 1.0f / 1024 + 1.0f / 2048).bits());
}

TEST_CASE("MatMul: 1-D operands are promoted and the added dimension dropped") {
  auto v = f32({3}, {1, 2, 3});
  auto m = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  check_close(floats(run1("MatMul", {v, v}, {data_type::F32, {}})), {14});
  check_close(floats(run1("MatMul", {v, m}, {data_type::F32, {2}})), {4, 5});
  check_close(floats(run1("MatMul", {f32({2, 3}, {1, 0, 0, 0, 1, 1}), v}, {data_type::F32, {2}})), {1, 5});
  // A batch of matrices times a vector.
  check_close(floats(run1("MatMul", {f32({2, 1, 3}, {1, 1, 1, 2, 2, 2}), v}, {data_type::F32, {2, 1}})), {6, 12});
  CHECK_THROWS_AS(run1("MatMul", {v, f32({2}, {1, 2})}, {data_type::F32, {}}), ipu::error);
}

TEST_CASE("MatMul broadcasts batch dimensions") {
  const std::int64_t m = 3, k = 4, n = 5;
  auto av = random_floats(static_cast<std::size_t>(2 * 1 * m * k), 10);
  auto bv = random_floats(static_cast<std::size_t>(3 * k * n), 11);
  auto y = floats(run1("MatMul", {f32({2, 1, m, k}, av), f32({3, k, n}, bv)}, {data_type::F32, {2, 3, m, n}}));
  std::vector<float> want;
  for (std::int64_t i = 0; i < 2; ++i)
    for (std::int64_t j = 0; j < 3; ++j) {
      std::vector<float> a(av.begin() + i * m * k, av.begin() + (i + 1) * m * k);
      std::vector<float> b(bv.begin() + j * k * n, bv.begin() + (j + 1) * k * n);
      auto c = matmul_ref(a, b, m, k, n);
      want.insert(want.end(), c.begin(), c.end());
    }
  check_close(y, want, 1e-5f, 1e-6f);
  // Shared B: the batches fold into one GEMM.
  auto y2 = floats(run1("MatMul", {f32({2, m, k}, std::vector<float>(av.begin(), av.begin() + 2 * m * k)),
                                   f32({k, n}, std::vector<float>(bv.begin(), bv.begin() + k * n))},
                        {data_type::F32, {2, m, n}}));
  auto want2 = matmul_ref(std::vector<float>(av.begin(), av.begin() + 2 * m * k),
                          std::vector<float>(bv.begin(), bv.begin() + k * n), 2 * m, k, n);
  check_close(y2, want2, 1e-5f, 1e-6f);
}

TEST_CASE("large MatMul split over a thread pool matches the direct product") {
  const std::int64_t m = 300, k = 200, n = 170;
  auto av = random_floats(static_cast<std::size_t>(m * k), 20);
  auto bv = random_floats(static_cast<std::size_t>(k * n), 21);
  auto want = matmul_ref(av, bv, m, k, n);
  ipu::thread_pool pool({.threads = 2});
  auto pf = [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
    pool.parallel_for(count, body);
  };
  check_close(floats(run1("MatMul", {f32({m, k}, av), f32({k, n}, bv)}, {data_type::F32, {m, n}}, {}, pf)), want, 1e-4f, 1e-5f);
  check_close(floats(run1("MatMul", {f32({m, k}, av), f32({k, n}, bv)}, {data_type::F32, {m, n}})), want, 1e-4f, 1e-5f);
  // Wide and short (splits N) and many batches (splits batches).
  auto wide = floats(run1("MatMul", {f32({4, k}, std::vector<float>(av.begin(), av.begin() + 4 * k)), f32({k, n}, bv)},
                          {data_type::F32, {4, n}}, {}, pf));
  check_close(wide, matmul_ref(std::vector<float>(av.begin(), av.begin() + 4 * k), bv, 4, k, n), 1e-4f, 1e-5f);
  auto batched = floats(run1("MatMul", {f32({6, 50, k}, av), f32({6, k, 10}, std::vector<float>(bv.begin(), bv.begin() + 6 * k * 10))},
                             {data_type::F32, {6, 50, 10}}, {}, pf));
  for (std::int64_t i = 0; i < 6; ++i) {
    auto c = matmul_ref(std::vector<float>(av.begin() + i * 50 * k, av.begin() + (i + 1) * 50 * k),
                        std::vector<float>(bv.begin() + i * k * 10, bv.begin() + (i + 1) * k * 10), 50, k, 10);
    check_close(std::vector<float>(batched.begin() + i * 500, batched.begin() + (i + 1) * 500), c, 1e-4f, 1e-5f);
  }
}

TEST_CASE("MatMul on integers wraps") {
  auto a = i32({1, 2}, {0x40000000, 0x40000000});
  auto b = i32({2, 1}, {2, 2});
  CHECK(values<std::int32_t>(run1("MatMul", {a, b}, {data_type::S32, {1, 1}})) == std::vector<std::int32_t>{0});
}

}  // namespace test_gemm
