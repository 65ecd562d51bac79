// Softmax / LogSoftmax / Hardmax against hand-computed values and a direct loop.
#include "ipu/ops/kernels/softmax.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_softmax {

using namespace mk;

TEST_CASE("Softmax and LogSoftmax along the last axis") {
  auto x = f32({2, 3}, {1, 2, 3, 1000, 1000, 1000});
  check_close(floats(run1("Softmax", {x}, {data_type::F32, {2, 3}})),
              {0.09003057f, 0.24472847f, 0.66524096f, 1 / 3.0f, 1 / 3.0f, 1 / 3.0f});
  check_close(floats(run1("LogSoftmax", {x}, {data_type::F32, {2, 3}})),
              {-2.40760596f, -1.40760596f, -0.40760596f, -std::log(3.0f), -std::log(3.0f), -std::log(3.0f)});
}

TEST_CASE("Softmax along an inner axis normalises only that axis (opset 13)") {
  auto x = f32({2, 2}, {1, 2, 3, 4});
  check_close(floats(run1("Softmax", {x}, {data_type::F32, {2, 2}}, {{"axis", std::int64_t{0}}})),
              {0.11920292f, 0.11920292f, 0.88079708f, 0.88079708f});
}

TEST_CASE("Hardmax marks the first maximum") {
  auto x = f32({2, 3}, {3, 1, 3, 0, 2, 1});
  check_close(floats(run1("Hardmax", {x}, {data_type::F32, {2, 3}})), {1, 0, 0, 0, 1, 0});
  check_close(floats(run1("Hardmax", {x}, {data_type::F32, {2, 3}}, {{"axis", std::int64_t{0}}})), {1, 0, 1, 0, 1, 0});
}

TEST_CASE("Softmax over a middle axis of a large tensor matches a direct loop") {
  const std::int64_t a = 50, n = 7, b = 30;
  auto xv = random_floats(static_cast<std::size_t>(a * n * b), 3, -5, 5);
  auto y = floats(run1("Softmax", {f32({a, n, b}, xv)}, {data_type::F32, {a, n, b}}, {{"axis", std::int64_t{-2}}}));
  std::vector<float> want(xv.size());
  for (std::int64_t i = 0; i < a; ++i)
    for (std::int64_t j = 0; j < b; ++j) {
      double sum = 0;
      for (std::int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(xv[static_cast<std::size_t>((i * n + k) * b + j)]));
      for (std::int64_t k = 0; k < n; ++k) {
        const auto o = static_cast<std::size_t>((i * n + k) * b + j);
        want[o] = static_cast<float>(std::exp(static_cast<double>(xv[o])) / sum);
      }
    }
  check_close(y, want, 1e-5f, 1e-7f);
}

TEST_CASE("Softmax of long rows (attention's 128) matches double; NaN and -inf rows as numpy") {
  const std::int64_t rows = 37, n = 131;
  auto xv = random_floats(static_cast<std::size_t>(rows * n), 5, -20, 20);
  const float inf = std::numeric_limits<float>::infinity();
  xv[3] = -inf;                                                      // masked: exactly 0
  xv[static_cast<std::size_t>(n) + 4] = std::numeric_limits<float>::quiet_NaN();  // row 1 all NaN
  for (std::int64_t k = 0; k < n; ++k) xv[static_cast<std::size_t>(2 * n + k)] = -inf;  // row 2 NaN (0/0)
  auto y = floats(run1("Softmax", {f32({rows, n}, xv)}, {data_type::F32, {rows, n}}));
  CHECK(y[3] == 0.0f);
  for (std::int64_t k = 0; k < 2 * n; ++k) CHECK(std::isnan(y[static_cast<std::size_t>(n + k)]));
  for (std::int64_t r = 3; r < rows; ++r) {
    const float* x = xv.data() + r * n;
    // x - max rounds to float in any float softmax (PyTorch's too): the reference takes that step.
    float m = x[0];
    for (std::int64_t k = 0; k < n; ++k) m = std::max(m, x[k]);
    double sum = 0;
    for (std::int64_t k = 0; k < n; ++k) sum += std::exp(static_cast<double>(x[k] - m));
    for (std::int64_t k = 0; k < n; ++k) {
      const double want = std::exp(static_cast<double>(x[k] - m)) / sum;
      CHECK(std::abs(y[static_cast<std::size_t>(r * n + k)] - want) <= 1e-6 * want + 1e-30);
    }
  }
}

TEST_CASE("F16 Softmax sums in F32") {
  auto y = run1("Softmax", {f16({4}, {0, 0, 0, 0})}, {data_type::F16, {4}});
  for (half h : y.as<half>()) CHECK(h.bits() == half(0.25f).bits());
  CHECK_THROWS_AS(run1("Softmax", {i32({2}, {1, 2})}, {data_type::S32, {2}}), ipu::error);
}

}  // namespace test_softmax
