// Element-wise kernels against hand-computed values (numpy semantics).
#include "ipu/ops/kernels/elementwise.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_elementwise {

using namespace mk;

namespace {
const float qnan = std::numeric_limits<float>::quiet_NaN();
const float inf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("Add/Sub/Mul/Div broadcast numpy-style") {
  auto a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = f32({3}, {10, 20, 30});
  check_close(floats(run1("Add", {a, b}, {data_type::F32, {2, 3}})), {11, 22, 33, 14, 25, 36});
  check_close(floats(run1("Sub", {b, a}, {data_type::F32, {2, 3}})), {9, 18, 27, 6, 15, 24});
  check_close(floats(run1("Mul", {a, f32({2, 1}, {2, -1})}, {data_type::F32, {2, 3}})), {2, 4, 6, -4, -5, -6});
  check_close(floats(run1("Div", {a, f32({}, {4})}, {data_type::F32, {2, 3}})), {0.25f, 0.5f, 0.75f, 1, 1.25f, 1.5f});
  // Both sides broadcast: [2,1,3] + [4,1] -> [2,4,3].
  auto c = run1("Add", {f32({2, 1, 3}, {0, 1, 2, 3, 4, 5}), f32({4, 1}, {0, 10, 20, 30})}, {data_type::F32, {2, 4, 3}});
  check_close(floats(c), {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 3, 4, 5, 13, 14, 15, 23, 24, 25, 33, 34, 35});
}

TEST_CASE("integer arithmetic wraps and Div truncates toward zero") {
  const std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  auto q = run1("Div", {i32({4}, {7, -7, 7, lo}), i32({4}, {2, 2, -2, -1})}, {data_type::S32, {4}});
  CHECK(values<std::int32_t>(q) == std::vector<std::int32_t>{3, -3, -3, lo});
  auto s = run1("Add", {i32({1}, {std::numeric_limits<std::int32_t>::max()}), i32({1}, {1})}, {data_type::S32, {1}});
  CHECK(values<std::int32_t>(s) == std::vector<std::int32_t>{lo});
  auto m = run1("Mul", {make<std::uint16_t>({1}, {65535}), make<std::uint16_t>({1}, {65535})}, {data_type::U16, {1}});
  CHECK(values<std::uint16_t>(m) == std::vector<std::uint16_t>{1});
  CHECK_THROWS_AS(run1("Div", {i32({2}, {1, 2}), i32({2}, {1, 0})}, {data_type::S32, {2}}), ipu::error);
}

TEST_CASE("Mod follows the divisor's sign unless fmod=1") {
  auto m = run1("Mod", {i64({4}, {-7, 7, -7, 7}), i64({4}, {3, -3, -3, 3})}, {data_type::S64, {4}});
  CHECK(values<std::int64_t>(m) == std::vector<std::int64_t>{2, -2, -1, 1});
  auto f = run1("Mod", {i64({4}, {-7, 7, -7, 7}), i64({4}, {3, -3, -3, 3})}, {data_type::S64, {4}}, {{"fmod", std::int64_t{1}}});
  CHECK(values<std::int64_t>(f) == std::vector<std::int64_t>{-1, 1, -1, 1});
  auto g = run1("Mod", {f32({3}, {-7.5f, 7.5f, 5.0f}), f32({3}, {2, -2, 2.5f})}, {data_type::F32, {3}}, {{"fmod", std::int64_t{1}}});
  check_close(floats(g), {-1.5f, 1.5f, 0});
  auto h = run1("Mod", {f32({2}, {-7.5f, 7.5f}), f32({2}, {2, -2})}, {data_type::F32, {2}});
  check_close(floats(h), {0.5f, -0.5f});
}

TEST_CASE("Pow mixes base and exponent types") {
  auto ii = run1("Pow", {i64({3}, {2, -3, 5}), i64({3}, {10, 3, 0})}, {data_type::S64, {3}});
  CHECK(values<std::int64_t>(ii) == std::vector<std::int64_t>{1024, -27, 1});
  auto fi = run1("Pow", {f32({2}, {2.5f, -2.0f}), i64({2}, {2, 3})}, {data_type::F32, {2}});
  check_close(floats(fi), {6.25f, -8.0f});
  auto i_f = run1("Pow", {i32({2}, {9, 2}), f32({2}, {0.5f, -1.0f})}, {data_type::S32, {2}});
  CHECK(values<std::int32_t>(i_f) == std::vector<std::int32_t>{3, 0});
  auto hh = run1("Pow", {f16({2}, {3, 2}), f16({1}, {2})}, {data_type::F16, {2}});
  check_close(floats(hh), {9, 4});
  // A scalar exponent 2 (float or integer) squares: the exact square rounded once to float, as
  // numpy's float32 power gives; also NaN, infinities and negative zero.
  auto xv = random_floats(1000, 7, -100.0f, 100.0f);
  xv.insert(xv.end(), {qnan, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), -0.0f,
                       3.0e19f, 1.0e-30f});
  std::vector<float> want;
  for (float v : xv) want.push_back(static_cast<float>(static_cast<double>(v) * static_cast<double>(v)));
  const auto n = static_cast<std::int64_t>(xv.size());
  for (const auto& e : {f32({}, {2.0f}), i64({1}, {2})}) {
    const auto got = floats(run1("Pow", {f32({n}, xv), e}, {data_type::F32, {n}}));
    for (std::size_t i = 0; i < got.size(); ++i)
      CHECK(((std::isnan(want[i]) && std::isnan(got[i])) || (got[i] == want[i] && !std::signbit(got[i]))));
  }
}

TEST_CASE("Pow with a scalar exponent 1 or 0.5 gives what pow gives, edge cases included") {
  auto xv = random_floats(1000, 11, -50.0f, 50.0f);
  xv.insert(xv.end(), {qnan, inf, -inf, 0.0f, -0.0f, 1.0e-40f, 3.0e38f, -2.0f});
  const auto n = static_cast<std::int64_t>(xv.size());
  const auto same = [](float got, float want) {
    return (std::isnan(got) && std::isnan(want)) || (got == want && std::signbit(got) == std::signbit(want));
  };
  const auto one = floats(run1("Pow", {f32({n}, xv), f32({}, {1.0f})}, {data_type::F32, {n}}));
  for (std::size_t i = 0; i < xv.size(); ++i) CHECK(same(one[i], xv[i]));
  // The double square root rounded to float is the correctly rounded float one; pow(-0, 0.5) is +0
  // and pow(-inf, 0.5) is +inf (C's pow, numpy's power), where sqrt would give -0 and NaN.
  for (const auto& e : {f32({1}, {0.5f}), f32({}, {0.5f})}) {
    const auto root = floats(run1("Pow", {f32({n}, xv), e}, {data_type::F32, {n}}));
    for (std::size_t i = 0; i < xv.size(); ++i)
      CHECK(same(root[i], static_cast<float>(std::pow(static_cast<double>(xv[i]), 0.5))));
  }
  auto hh = run1("Pow", {f16({3}, {4, -0.0f, 2}), f16({}, {0.5f})}, {data_type::F16, {3}});
  check_close(floats(hh), {2, 0, 1.4140625f}, 0, 0);
  CHECK(!std::signbit(floats(hh)[1]));
}

TEST_CASE("comparisons give BOOL and broadcast") {
  auto a = f32({2, 2}, {1, 2, 3, qnan});
  auto b = f32({2}, {2, 2});
  CHECK(bools(run1("Equal", {a, b}, {data_type::BOOL, {2, 2}})) == std::vector<int>{0, 1, 0, 0});
  CHECK(bools(run1("Greater", {a, b}, {data_type::BOOL, {2, 2}})) == std::vector<int>{0, 0, 1, 0});
  CHECK(bools(run1("GreaterOrEqual", {a, b}, {data_type::BOOL, {2, 2}})) == std::vector<int>{0, 1, 1, 0});
  CHECK(bools(run1("Less", {a, b}, {data_type::BOOL, {2, 2}})) == std::vector<int>{1, 0, 0, 0});
  CHECK(bools(run1("LessOrEqual", {a, b}, {data_type::BOOL, {2, 2}})) == std::vector<int>{1, 1, 0, 0});
  CHECK(bools(run1("Equal", {boolean({2}, {1, 0}), boolean({1}, {0})}, {data_type::BOOL, {2}})) == std::vector<int>{0, 1});
  CHECK(bools(run1("Less", {i64({3}, {-1, 0, 1}), i64({}, {0})}, {data_type::BOOL, {3}})) == std::vector<int>{1, 0, 0});
}

TEST_CASE("logical and bitwise ops") {
  auto a = boolean({4}, {0, 0, 1, 1});
  auto b = boolean({4}, {0, 1, 0, 1});
  CHECK(bools(run1("And", {a, b}, {data_type::BOOL, {4}})) == std::vector<int>{0, 0, 0, 1});
  CHECK(bools(run1("Or", {a, b}, {data_type::BOOL, {4}})) == std::vector<int>{0, 1, 1, 1});
  CHECK(bools(run1("Xor", {a, b}, {data_type::BOOL, {4}})) == std::vector<int>{0, 1, 1, 0});
  CHECK(bools(run1("Not", {a}, {data_type::BOOL, {4}})) == std::vector<int>{1, 1, 0, 0});
  auto x = make<std::uint8_t>({4}, {1, 0x81, 16, 255});
  auto s = make<std::uint8_t>({4}, {1, 1, 4, 8});
  CHECK(values<std::uint8_t>(run1("BitShift", {x, s}, {data_type::U8, {4}}, {{"direction", std::string("LEFT")}})) ==
        std::vector<std::uint8_t>{2, 0x02, 0, 0});
  CHECK(values<std::uint8_t>(run1("BitShift", {x, s}, {data_type::U8, {4}}, {{"direction", std::string("RIGHT")}})) ==
        std::vector<std::uint8_t>{0, 0x40, 1, 0});
  CHECK_THROWS_AS(run1("BitShift", {x, s}, {data_type::U8, {4}}, {{"direction", std::string("UP")}}), ipu::error);
  auto p = i32({3}, {0b1100, -1, 5});
  auto q = i32({3}, {0b1010, 7, 0});
  CHECK(values<std::int32_t>(run1("BitwiseAnd", {p, q}, {data_type::S32, {3}})) == std::vector<std::int32_t>{0b1000, 7, 0});
  CHECK(values<std::int32_t>(run1("BitwiseOr", {p, q}, {data_type::S32, {3}})) == std::vector<std::int32_t>{0b1110, -1, 5});
  CHECK(values<std::int32_t>(run1("BitwiseXor", {p, q}, {data_type::S32, {3}})) == std::vector<std::int32_t>{0b0110, -8, 5});
  CHECK(values<std::int32_t>(run1("BitwiseNot", {p}, {data_type::S32, {3}})) == std::vector<std::int32_t>{-13, 0, -6});
}

TEST_CASE("unary maths") {
  auto x = f32({5}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f});
  check_close(floats(run1("Round", {x}, {data_type::F32, {5}})), {0, 2, 2, -0.0f, -2});
  check_close(floats(run1("Floor", {x}, {data_type::F32, {5}})), {0, 1, 2, -1, -2});
  check_close(floats(run1("Ceil", {x}, {data_type::F32, {5}})), {1, 2, 3, -0.0f, -1});
  check_close(floats(run1("Abs", {x}, {data_type::F32, {5}})), {0.5f, 1.5f, 2.5f, 0.5f, 1.5f});
  check_close(floats(run1("Neg", {x}, {data_type::F32, {5}})), {-0.5f, -1.5f, -2.5f, 0.5f, 1.5f});
  check_close(floats(run1("Reciprocal", {x}, {data_type::F32, {5}})), {2, 1 / 1.5f, 0.4f, -2, -1 / 1.5f});
  check_close(floats(run1("Sign", {f32({4}, {-3, 0, 2, qnan})}, {data_type::F32, {4}})), {-1, 0, 1, qnan});
  check_close(floats(run1("Sqrt", {f32({3}, {4, 2, -1})}, {data_type::F32, {3}})), {2, std::sqrt(2.0f), qnan});
  check_close(floats(run1("Exp", {f32({2}, {0, 1})}, {data_type::F32, {2}})), {1, std::exp(1.0f)});
  check_close(floats(run1("Log", {f32({3}, {1, std::exp(2.0f), 0})}, {data_type::F32, {3}})), {0, 2, -inf});
  const float pi = 3.14159265358979f;
  check_close(floats(run1("Sin", {f32({2}, {0, pi / 2})}, {data_type::F32, {2}})), {0, 1});
  check_close(floats(run1("Cos", {f32({2}, {0, pi})}, {data_type::F32, {2}})), {1, -1});
  check_close(floats(run1("Tan", {f32({1}, {pi / 4})}, {data_type::F32, {1}})), {1});
  check_close(floats(run1("Asin", {f32({1}, {1})}, {data_type::F32, {1}})), {pi / 2});
  check_close(floats(run1("Acos", {f32({1}, {-1})}, {data_type::F32, {1}})), {pi});
  check_close(floats(run1("Atan", {f32({1}, {1})}, {data_type::F32, {1}})), {pi / 4});
  check_close(floats(run1("Sinh", {f32({1}, {1})}, {data_type::F32, {1}})), {1.17520119f});
  check_close(floats(run1("Cosh", {f32({1}, {1})}, {data_type::F32, {1}})), {1.54308063f});
  check_close(floats(run1("Asinh", {f32({1}, {1})}, {data_type::F32, {1}})), {0.88137359f});
  check_close(floats(run1("Acosh", {f32({1}, {2})}, {data_type::F32, {1}})), {1.3169579f});
  check_close(floats(run1("Atanh", {f32({1}, {0.5f})}, {data_type::F32, {1}})), {0.54930614f});
  CHECK(bools(run1("IsNaN", {f32({3}, {qnan, 1, inf})}, {data_type::BOOL, {3}})) == std::vector<int>{1, 0, 0});
  auto infs = f32({4}, {inf, -inf, qnan, 1});
  CHECK(bools(run1("IsInf", {infs}, {data_type::BOOL, {4}})) == std::vector<int>{1, 1, 0, 0});
  CHECK(bools(run1("IsInf", {infs}, {data_type::BOOL, {4}}, {{"detect_negative", std::int64_t{0}}})) ==
        std::vector<int>{1, 0, 0, 0});
  CHECK(bools(run1("IsInf", {infs}, {data_type::BOOL, {4}}, {{"detect_positive", std::int64_t{0}}})) ==
        std::vector<int>{0, 1, 0, 0});
  // Integer Abs / Neg wrap at the most negative value, like numpy.
  CHECK(values<std::int8_t>(run1("Abs", {make<std::int8_t>({3}, {-128, -5, 7})}, {data_type::S8, {3}})) ==
        std::vector<std::int8_t>{-128, 5, 7});
  CHECK(values<std::int64_t>(run1("Sign", {i64({3}, {-9, 0, 4})}, {data_type::S64, {3}})) ==
        std::vector<std::int64_t>{-1, 0, 1});
  CHECK_THROWS_AS(run1("Sqrt", {i32({1}, {4})}, {data_type::S32, {1}}), ipu::error);
}

TEST_CASE("F16 arithmetic rounds each result to nearest even") {
  // 2048 + 1 is a tie between 2048 and 2050 in F16: rounds to even (2048); 2048 + 3 -> 2052.
  auto r = run1("Add", {f16({2}, {2048, 2048}), f16({2}, {1, 3})}, {data_type::F16, {2}});
  check_close(floats(r), {2048, 2052}, 0, 0);
  auto d = run1("Div", {f16({1}, {1}), f16({1}, {3})}, {data_type::F16, {1}});
  CHECK(r.as<half>()[0].bits() == half(2048.0f).bits());
  CHECK(d.as<half>()[0].bits() == half(1.0f / 3.0f).bits());
}

TEST_CASE("Max/Min/Sum/Mean are variadic with broadcasting") {
  auto a = f32({2, 2}, {1, 5, qnan, 0});
  auto b = f32({2}, {3, 2});
  auto c = f32({}, {4});
  check_close(floats(run1("Max", {a, b, c}, {data_type::F32, {2, 2}})), {4, 5, qnan, 4});
  check_close(floats(run1("Min", {a, b, c}, {data_type::F32, {2, 2}})), {1, 2, qnan, 0});
  check_close(floats(run1("Sum", {a, b, c}, {data_type::F32, {2, 2}})), {8, 11, qnan, 6});
  check_close(floats(run1("Mean", {a, b, c}, {data_type::F32, {2, 2}})), {8 / 3.0f, 11 / 3.0f, qnan, 2});
  check_close(floats(run1("Sum", {b}, {data_type::F32, {2}})), {3, 2});
  check_close(floats(run1("Max", {b}, {data_type::F32, {2}})), {3, 2});
  CHECK(values<std::int32_t>(run1("Max", {i32({3}, {-1, 7, 2}), i32({3}, {0, 3, 9})}, {data_type::S32, {3}})) ==
        std::vector<std::int32_t>{0, 7, 9});
  // F16 Sum accumulates in F32: 2048 + 1 + 1 would lose both 1s summed in F16 pairwise.
  auto h = run1("Sum", {f16({1}, {2048}), f16({1}, {1}), f16({1}, {1})}, {data_type::F16, {1}});
  check_close(floats(h), {2050}, 0, 0);
}

TEST_CASE("Where selects with three-way broadcasting") {
  auto cnd = boolean({2, 1}, {1, 0});
  auto x = f32({3}, {1, 2, 3});
  auto y = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  check_close(floats(run1("Where", {cnd, x, y}, {data_type::F32, {2, 3}})), {1, 2, 3, -4, -5, -6});
  CHECK_THROWS_AS(run1("Where", {x, x, y}, {data_type::F32, {2, 3}}), ipu::error);
}

TEST_CASE("Where selects bit-exactly (NaN, -0) for a random mask, in every layout") {
  const std::int64_t n = 4099;
  auto a = random_floats(static_cast<std::size_t>(n), 21, -3, 3);
  auto b = random_floats(static_cast<std::size_t>(n), 22, -3, 3);
  a[5] = qnan;
  a[6] = -0.0f;
  b[7] = -0.0f;
  b[8] = qnan;
  std::vector<float> maskf = random_floats(static_cast<std::size_t>(n), 23);
  std::vector<int> mask;
  for (float m : maskf) mask.push_back(m > 0 ? 1 : 0);
  mask[5] = mask[6] = 1;
  mask[7] = mask[8] = 0;
  const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
  const auto both = floats(run1("Where", {boolean({n}, mask), f32({n}, a), f32({n}, b)}, {data_type::F32, {n}}));
  const auto zero = floats(run1("Where", {boolean({n}, mask), f32({n}, a), f32({}, {-0.0f})}, {data_type::F32, {n}}));
  const auto ones = floats(run1("Where", {boolean({n}, mask), f32({}, {1.0f}), f32({n}, b)}, {data_type::F32, {n}}));
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(bits(both[i]) == bits(mask[i] ? a[i] : b[i]));
    CHECK(bits(zero[i]) == bits(mask[i] ? a[i] : -0.0f));
    CHECK(bits(ones[i]) == bits(mask[i] ? 1.0f : b[i]));
  }
  const auto wide = run1("Where", {boolean({3}, {1, 0, 1}), i64({3}, {-1, 2, std::numeric_limits<std::int64_t>::min()}),
                                   i64({3}, {7, std::numeric_limits<std::int64_t>::max(), 9})},
                         {data_type::S64, {3}});
  CHECK(values<std::int64_t>(wide) ==
        std::vector<std::int64_t>{-1, std::numeric_limits<std::int64_t>::max(), std::numeric_limits<std::int64_t>::min()});
  CHECK(bools(run1("Where", {boolean({3}, {1, 0, 1}), boolean({3}, {0, 0, 1}), boolean({3}, {1, 1, 0})},
                   {data_type::BOOL, {3}})) == std::vector<int>{0, 1, 1});
}

TEST_CASE("large broadcasts split into chunks match a direct loop") {
  const std::int64_t d0 = 3, d1 = 1000, d2 = 17;
  auto av = random_floats(static_cast<std::size_t>(d0 * d1 * d2), 1);
  auto bv = random_floats(static_cast<std::size_t>(d1), 2);
  auto r = run1("Sub", {f32({d0, d1, d2}, av), f32({d1, 1}, bv)}, {data_type::F32, {d0, d1, d2}});
  std::vector<float> want(av.size());
  for (std::int64_t i = 0; i < d0; ++i)
    for (std::int64_t j = 0; j < d1; ++j)
      for (std::int64_t k = 0; k < d2; ++k) {
        const auto o = static_cast<std::size_t>((i * d1 + j) * d2 + k);
        want[o] = av[o] - bv[static_cast<std::size_t>(j)];
      }
  check_close(floats(r), want, 0, 0);
}

TEST_CASE("mismatched types and shapes are errors") {
  CHECK_THROWS_AS(run1("Add", {f32({1}, {1}), f64({1}, {1})}, {data_type::F32, {1}}), ipu::error);
  CHECK_THROWS_AS(run1("Add", {f32({2}, {1, 2}), f32({3}, {1, 2, 3})}, {data_type::F32, {3}}), ipu::error);
  CHECK_THROWS_AS(run1("And", {i32({1}, {1}), i32({1}, {1})}, {data_type::S32, {1}}), ipu::error);
}

}  // namespace test_elementwise
