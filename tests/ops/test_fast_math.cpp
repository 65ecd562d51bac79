// The vectorisable float transcendentals against libm in double, over a sweep of the float line
// and the special values: what the Sigmoid, Softmax and Exp kernels promise in ulp.
#include "ipu/ops/kernels/fast_math.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

namespace test_fast_math {

namespace {

using ipu::detail::math_ops::exp_vectorisable;
using ipu::detail::math_ops::sigmoid_vectorisable;
using ipu::detail::math_ops::tanh_vectorisable;

/// |got - want| in units of the float spacing at `want` (denormal results: of the smallest normal's).
double ulps(float got, double want) {
  const double spacing = std::ldexp(1.0, std::max(std::ilogb(std::abs(want)), -126) - 23);
  return std::abs(static_cast<double>(got) - want) / spacing;
}

/// Every 4099th float bit pattern with |x| <= `limit`, both signs.
template <class F>
void sweep(float limit, F check) {
  for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 4099) {
    const float x = std::bit_cast<float>(bits);
    if (x > limit) break;
    check(x);
    check(-x);
  }
}

}  // namespace

TEST_CASE("exp_vectorisable: within 2 ulp of e^x over the float range, 0 below and inf above it") {
  double worst = 0;
  sweep(88.7f, [&](float x) {
    const double want = std::exp(static_cast<double>(x));
    if (want < 1.2e-38) return;  // the flushed range, checked below
    worst = std::max(worst, ulps(exp_vectorisable(x), want));
  });
  // The ends of the range and of the reduction's interval |r| <= ln2 / 2.
  for (float x : {-87.33f, -1e-7f, 1e-7f, 0.34657f, -0.34658f, 88.72f})
    worst = std::max(worst, ulps(exp_vectorisable(x), std::exp(static_cast<double>(x))));
  CHECK(worst <= 2.0);
  CHECK(exp_vectorisable(89.0f) == std::numeric_limits<float>::infinity());
  CHECK(exp_vectorisable(0.0f) == 1.0f);
  CHECK(exp_vectorisable(-100.0f) == 0.0f);
  CHECK(exp_vectorisable(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(exp_vectorisable(100.0f) == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(exp_vectorisable(std::numeric_limits<float>::quiet_NaN())));
}

TEST_CASE("sigmoid_vectorisable: within 3 ulp of 1 / (1 + e^-x), small values keep their digits") {
  double worst = 0;
  sweep(100.0f, [&](float x) {
    const double want = 1.0 / (1.0 + std::exp(-static_cast<double>(x)));
    if (want < 1.2e-38) {  // e^-|x| is flushed to 0 there, and so is the result
      CHECK(sigmoid_vectorisable(x) == 0.0f);
      return;
    }
    worst = std::max(worst, ulps(sigmoid_vectorisable(x), want));
  });
  CHECK(worst <= 3.0);
  CHECK(sigmoid_vectorisable(0.0f) == 0.5f);
  CHECK(sigmoid_vectorisable(-0.0f) == 0.5f);
  CHECK(sigmoid_vectorisable(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(sigmoid_vectorisable(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(sigmoid_vectorisable(std::numeric_limits<float>::quiet_NaN())));
  // e^-30 / (1 + e^-30) is 9.36e-14: 1 - sigmoid(30) would have rounded it to 0.
  CHECK(ulps(sigmoid_vectorisable(-30.0f), 1.0 / (1.0 + std::exp(30.0))) <= 3.0);
}

TEST_CASE("tanh_vectorisable: within 3 ulp of tanh, odd, small values keep their digits") {
  double worst = 0;
  sweep(20.0f, [&](float x) { worst = std::max(worst, ulps(tanh_vectorisable(x), std::tanh(static_cast<double>(x)))); });
  // Either side of the switch from the series to the exponential form, and tiny values.
  for (float x : {0.39999998f, 0.4f, 0.40000004f, -0.4f, 1e-20f, -3e-8f, 1e-3f})
    worst = std::max(worst, ulps(tanh_vectorisable(x), std::tanh(static_cast<double>(x))));
  CHECK(worst <= 3.0);
  CHECK(tanh_vectorisable(0.0f) == 0.0f);
  CHECK(std::signbit(tanh_vectorisable(-0.0f)));
  CHECK(tanh_vectorisable(std::numeric_limits<float>::infinity()) == 1.0f);
  CHECK(tanh_vectorisable(-std::numeric_limits<float>::infinity()) == -1.0f);
  CHECK(tanh_vectorisable(100.0f) == 1.0f);
  CHECK(std::isnan(tanh_vectorisable(std::numeric_limits<float>::quiet_NaN())));
}

}  // namespace test_fast_math
