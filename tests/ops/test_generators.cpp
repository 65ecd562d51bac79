#include "ipu/ops/kernels/generators.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "tensor_kernel_harness.hpp"

namespace test_generators {

using namespace tk;

TEST_CASE("generators: Constant from a tensor, value_floats and value_int") {
  const float v[] = {1.5f, -2.0f};
  ipu::constant_tensor t{f32_info({2}), ipu::byte_buffer::from_values<float>(v)};
  CHECK(values<float>(run1("Constant", {}, f32_info({2}), {{"value", t}})) == std::vector<float>{1.5f, -2.0f});
  CHECK(values<float>(run1("Constant", {}, f32_info({3}), {attr("value_floats", std::vector<float>{1, 2, 3})})) ==
        std::vector<float>{1, 2, 3});
  CHECK(values<std::int64_t>(run1("Constant", {}, info(data_type::S64, {}), {attr("value_int", 7)})) ==
        std::vector<std::int64_t>{7});
  // The IR must agree with the constant.
  CHECK_THROWS_AS(run1("Constant", {}, f32_info({3}), {{"value", t}}), ipu::error);
}

TEST_CASE("generators: ConstantOfShape fills with the value (F32 zero by default)") {
  auto z = run1("ConstantOfShape", {i64({2}, {2, 3})}, f32_info({2, 3}));
  CHECK(values<float>(z) == std::vector<float>(6, 0.0f));
  const std::int32_t v[] = {-4};
  ipu::constant_tensor t{info(data_type::S32, {1}), ipu::byte_buffer::from_values<std::int32_t>(v)};
  auto y = run1("ConstantOfShape", {i64({1}, {3})}, info(data_type::S32, {3}), {{"value", t}});
  CHECK(values<std::int32_t>(y) == std::vector<std::int32_t>{-4, -4, -4});
  CHECK_THROWS_AS(run1("ConstantOfShape", {i64({1}, {4})}, info(data_type::S32, {3}), {{"value", t}}), ipu::error);
}

TEST_CASE("generators: Range for integers and floats, with negative deltas") {
  auto r = run1("Range", {i32({}, {10}), i32({}, {1}), i32({}, {-3})}, info(data_type::S32, {3}));
  CHECK(values<std::int32_t>(r) == std::vector<std::int32_t>{10, 7, 4});
  auto f = run1("Range", {f32({}, {1}), f32({}, {2}), f32({}, {0.25f})}, f32_info({4}));
  CHECK(values<float>(f) == std::vector<float>{1, 1.25f, 1.5f, 1.75f});
  auto e = run1("Range", {i64({}, {5}), i64({}, {5}), i64({}, {1})}, info(data_type::S64, {0}));
  CHECK(e.info().num_elements() == 0);
  CHECK_THROWS_AS(run1("Range", {i64({}, {0}), i64({}, {5}), i64({}, {1})}, info(data_type::S64, {4})), ipu::error);
}

TEST_CASE("generators: Range bounds far apart or not finite are errors, not wrapped or empty outputs") {
  using lim = std::numeric_limits<std::int64_t>;
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  // (limit - start) overflows int64, and so did the count: now exact in unsigned arithmetic.
  auto w = run1("Range", {i64({}, {lim::min()}), i64({}, {lim::max()}), i64({}, {std::int64_t{1} << 62})},
                info(data_type::S64, {4}));
  CHECK(values<std::int64_t>(w) ==
        std::vector<std::int64_t>{lim::min(), -(std::int64_t{1} << 62), 0, std::int64_t{1} << 62});
  auto down = run1("Range", {i64({}, {lim::max()}), i64({}, {lim::min()}), i64({}, {lim::min()})}, info(data_type::S64, {2}));
  CHECK(values<std::int64_t>(down) == std::vector<std::int64_t>{lim::max(), -1});
  CHECK(message([&] { run1("Range", {i64({}, {lim::min()}), i64({}, {lim::max()}), i64({}, {1})}, info(data_type::S64, {1})); })
            .find("18446744073709551615 elements, more than a tensor can hold") != std::string::npos);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(message([&] { run1("Range", {f32({}, {0}), f32({}, {inf}), f32({}, {1})}, f32_info({1})); })
            .find("does not have a finite number of elements") != std::string::npos);
  CHECK(message([&] { run1("Range", {f32({}, {0}), f32({}, {std::nanf("")}), f32({}, {1})}, f32_info({1})); })
            .find("does not have a finite number of elements") != std::string::npos);
  // Going the other way from an infinite start is empty, as numpy's arange says, not undefined.
  auto none = run1("Range", {f32({}, {inf}), f32({}, {0}), f32({}, {1})}, f32_info({0}));
  CHECK(none.info().num_elements() == 0);
}

TEST_CASE("generators: a ConstantOfShape whose element count overflows is refused by the shape itself") {
  // 2^32 x 2^32 wraps to 0 in int64 arithmetic: it must not pass as an empty tensor.
  CHECK_THROWS_WITH_AS(ipu::shape({std::int64_t{1} << 32, std::int64_t{1} << 32}),
                       doctest::Contains("has more than 2^59 elements"), ipu::error);
  CHECK_THROWS_AS(ipu::shape({std::int64_t{1} << 40, std::int64_t{1} << 20}), ipu::error);
  CHECK(ipu::shape({std::int64_t{1} << 29, 0, std::int64_t{1} << 30}).num_elements() == 0);  // empty is fine
  CHECK_THROWS_AS(ipu::shape({std::int64_t{1} << 62, 0, std::int64_t{1} << 62}), ipu::error);  // but bounded
  CHECK_THROWS_AS(run1("ConstantOfShape", {i64({2}, {std::int64_t{1} << 32, std::int64_t{1} << 32})}, f32_info({1})),
                  ipu::error);
}

TEST_CASE("generators: EyeLike with a diagonal offset") {
  auto y = run1("EyeLike", {f32({3, 4}, std::vector<float>(12, 5.0f))}, info(data_type::S32, {3, 4}), {attr("k", 1)});
  CHECK(values<std::int32_t>(y) == std::vector<std::int32_t>{0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1});
  auto n = run1("EyeLike", {f32({2, 2}, {0, 0, 0, 0})}, f32_info({2, 2}), {attr("k", -1)});
  CHECK(values<float>(n) == std::vector<float>{0, 0, 1, 0});
  n = run1("EyeLike", {f32({3, 2}, std::vector<float>(6, 1.0f))}, f32_info({3, 2}), {attr("k", -2)});
  CHECK(values<float>(n) == std::vector<float>{0, 0, 0, 0, 1, 0});
  // Offsets at the int64 limits put no one anywhere (i + k overflowed); an empty input with 2^32 rows
  // is not walked row by row (the ONNX fuzzer's timeout).
  using lim = std::numeric_limits<std::int64_t>;
  for (const auto k : {lim::max(), lim::min(), std::int64_t{4}, std::int64_t{-3}}) {
    n = run1("EyeLike", {f32({3, 4}, std::vector<float>(12, 1.0f))}, f32_info({3, 4}), {attr("k", k)});
    CHECK(values<float>(n) == std::vector<float>(12, 0.0f));
  }
  const ipu::shape tall{std::int64_t{1} << 32, 0};
  for (const auto k : {std::int64_t{0}, std::int64_t{-1}, lim::min()})
    CHECK(run1("EyeLike", {f32(tall, {})}, f32_info(tall), {attr("k", k)}).info().num_elements() == 0);
}

TEST_CASE("generators: OneHot with negative and out-of-range indices, on any axis") {
  auto idx = i64({3}, {0, -1, 7});
  auto vals = f32({2}, {-1, 5});
  auto y = run1("OneHot", {idx, i64({}, {3}), vals}, f32_info({3, 3}));
  CHECK(values<float>(y) == std::vector<float>{5, -1, -1, -1, -1, 5, -1, -1, -1});
  // axis 0: the depth axis comes first. Float indices are truncated.
  auto z = run1("OneHot", {f32({2}, {1.7f, 0.0f}), f32({}, {2}), vals}, f32_info({2, 2}), {attr("axis", 0)});
  CHECK(values<float>(z) == std::vector<float>{-1, 5, 5, -1});
}

TEST_CASE("generators: Trilu keeps the upper or lower triangle of each matrix") {
  auto x = iota_f32({2, 2, 3});
  auto up = run1("Trilu", {x}, f32_info({2, 2, 3}));
  CHECK(values<float>(up) == std::vector<float>{0, 1, 2, 0, 4, 5, 6, 7, 8, 0, 10, 11});
  auto lo = run1("Trilu", {x, i64({}, {-1})}, f32_info({2, 2, 3}), {attr("upper", 0)});
  CHECK(values<float>(lo) == std::vector<float>{0, 0, 0, 3, 0, 0, 0, 0, 0, 9, 0, 0});
  auto up1 = run1("Trilu", {x, i64({}, {1})}, f32_info({2, 2, 3}));
  CHECK(values<float>(up1) == std::vector<float>{0, 1, 2, 0, 0, 5, 0, 7, 8, 0, 0, 11});
}

TEST_CASE("generators: Cast truncates toward zero, saturates, and maps NaN to 0 for integers") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = f32({6}, {2.9f, -2.9f, 1e10f, -1e10f, nan, 0.5f});
  CHECK(values<std::int32_t>(run1("Cast", {x}, info(data_type::S32, {6}))) ==
        std::vector<std::int32_t>{2, -2, 2147483647, -2147483647 - 1, 0, 0});
  CHECK(values<std::uint8_t>(run1("Cast", {x}, info(data_type::U8, {6}))) ==
        std::vector<std::uint8_t>{2, 0, 255, 0, 0, 0});
  CHECK(values<bool>(run1("Cast", {x}, info(data_type::BOOL, {6}))) ==
        std::vector<bool>{true, true, true, true, true, true});
  CHECK(values<float>(run1("Cast", {boolean({2}, {1, 0})}, f32_info({2}))) == std::vector<float>{1, 0});
  // Integers wrap like numpy's astype.
  CHECK(values<std::int8_t>(run1("Cast", {i32({2}, {300, -129})}, info(data_type::S8, {2}))) ==
        std::vector<std::int8_t>{44, 127});
}

TEST_CASE("generators: Cast to F16 rounds once, to nearest even, also from F64") {
  // 1 + 2^-11 + 2^-40 is just above the tie between the halves 1 and 1 + 2^-10. Rounding to
  // float first would land exactly on the tie and round down to 1.
  const double d = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  auto y = run1("Cast", {make<double>({3}, {d, 65520.0, -std::ldexp(1.0, -25)})}, info(data_type::F16, {3}));
  auto h = values<half>(y);
  CHECK(static_cast<float>(h[0]) == 1.0f + std::ldexp(1.0f, -10));
  CHECK(std::isinf(static_cast<float>(h[1])));  // 65520 rounds up past the largest half
  CHECK(h[2].bits() == 0x8000);                 // -2^-25 is half the smallest subnormal: ties to -0
  auto back = run1("Cast", {y}, info(data_type::F64, {3}));
  CHECK(values<double>(back)[0] == 1.0 + std::ldexp(1.0, -10));
  // CastLike takes its type from the output too.
  auto like = run1("CastLike", {f32({2}, {1.5f, -7.25f}), f32({1}, {0})}, info(data_type::S64, {2}));
  CHECK(values<std::int64_t>(like) == std::vector<std::int64_t>{1, -7});
}

TEST_CASE("generators: Cast to and from Graphcore float8") {
  auto x = f32({4}, {1.0f, 0.5f, 240.0f, 300.0f});
  auto f8 = run1("Cast", {x}, info(data_type::F8143, {4}));
  auto bits = values<ipu::float8_143>(f8);
  CHECK(bits[0].bits() == 0x40);  // exponent 8 = bias: 1.0
  CHECK(bits[3].is_nan());        // beyond 240: NaN, as PopART converts
  auto back = values<float>(run1("Cast", {f8}, f32_info({4})));
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == 0.5f);
  CHECK(back[2] == 240.0f);
  CHECK(std::isnan(back[3]));
}

// BF16 expectations are worked out by hand: a bfloat16 is float's top 16 bits, so 1 is 0x3f80,
// 2^60 is 0x5d80 (exponent 60 + 127 = 0xbb), 2^30 is 0x4e80, and one step above each adds 1.
std::vector<std::uint16_t> bf16_bits(const host_tensor& t) {
  std::vector<std::uint16_t> out;
  for (auto v : values<ipu::bfloat16>(t)) out.push_back(v.bits());
  return out;
}

TEST_CASE("generators: Cast F32 -> BF16 rounds to nearest even; BF16 -> F32 is exact") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto x = f32({7}, {1.0f, std::bit_cast<float>(0x3f808000u), std::bit_cast<float>(0x3f818000u), 0.1f,
                     std::numeric_limits<float>::max(), nan, -0.0f});
  auto y = run1("Cast", {x}, info(data_type::BF16, {7}));
  CHECK(bf16_bits(y) == std::vector<std::uint16_t>{0x3f80, 0x3f80, 0x3f82, 0x3dcd, 0x7f80, 0x7fc0, 0x8000});
  auto back = values<float>(run1("Cast", {y}, f32_info({7})));
  CHECK(back[0] == 1.0f);
  CHECK(back[1] == 1.0f);
  CHECK(back[2] == 1.015625f);  // 1 + 2/128
  CHECK(std::bit_cast<std::uint32_t>(back[3]) == 0x3dcd0000u);
  CHECK(std::isinf(back[4]));
  CHECK(std::isnan(back[5]));
  CHECK(std::signbit(back[6]));
}

TEST_CASE("generators: Cast F64 and 32/64-bit integers -> BF16 round once") {
  // 1 + 2^-8 + 2^-40 is just above the tie between 1 (0x3f80) and 1 + 2^-7 (0x3f81). As a float it
  // is 1 + 2^-8, exactly the tie, which would then round to even: 0x3f80.
  const double d = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  auto y = run1("Cast", {make<double>({3}, {d, -d, 1e300})}, info(data_type::BF16, {3}));
  CHECK(bf16_bits(y) == std::vector<std::uint16_t>{0x3f81, 0xbf81, 0x7f80});
  // 2^60 + 2^52 + 1 is just above the tie between 2^60 and 2^60 + 2^53. A double (53 bits) or a
  // float drops the 1 and lands on the tie, which rounds down to 2^60.
  const std::int64_t big = (std::int64_t{1} << 60) + (std::int64_t{1} << 52) + 1;
  auto z = run1("Cast", {make<std::int64_t>({4}, {big, -big, std::numeric_limits<std::int64_t>::min(), 3})},
                info(data_type::BF16, {4}));
  CHECK(bf16_bits(z) == std::vector<std::uint16_t>{0x5d81, 0xdd81, 0xdf00, 0x4040});
  auto u = run1("Cast", {make<std::uint64_t>({2}, {std::numeric_limits<std::uint64_t>::max(), std::uint64_t{1} << 60})},
                info(data_type::BF16, {2}));
  CHECK(bf16_bits(u) == std::vector<std::uint16_t>{0x5f80, 0x5d80});  // 2^64 - 1 rounds up to 2^64
  // INT32: 2^30 + 2^22 + 1 is just above the tie between 2^30 and 2^30 + 2^23; a float drops the 1.
  auto w = run1("Cast", {i32({1}, {(1 << 30) + (1 << 22) + 1})}, info(data_type::BF16, {1}));
  CHECK(bf16_bits(w) == std::vector<std::uint16_t>{0x4e81});
}

TEST_CASE("generators: Cast BF16 to integers, BOOL, F16, F64 and float8, and CastLike to BF16") {
  auto x = make<ipu::bfloat16>({4}, {ipu::bfloat16::from_bits(0x4049), ipu::bfloat16::from_bits(0xc0c0),
                                     ipu::bfloat16::from_bits(0x8000), ipu::bfloat16::from_bits(0x0001)});
  // 3.140625, -6, -0 and 2^-133
  CHECK(values<std::int32_t>(run1("Cast", {x}, info(data_type::S32, {4}))) == std::vector<std::int32_t>{3, -6, 0, 0});
  CHECK(values<bool>(run1("Cast", {x}, info(data_type::BOOL, {4}))) == std::vector<bool>{true, true, false, true});
  auto h = values<half>(run1("Cast", {x}, info(data_type::F16, {4})));
  CHECK(h[0].bits() == 0x4248);  // 3.140625 = 1.5703125 * 2: exponent 16, mantissa 584
  CHECK(h[1].bits() == 0xc600);  // -6
  CHECK(h[2].bits() == 0x8000);
  CHECK(h[3].bits() == 0x0000);  // far below half's smallest subnormal
  auto f64 = values<double>(run1("Cast", {x}, info(data_type::F64, {4})));
  CHECK(f64[0] == 3.140625);
  CHECK(f64[3] == std::ldexp(1.0, -133));
  auto f8 = values<ipu::float8_143>(run1("Cast", {x}, info(data_type::F8143, {4})));
  CHECK(f8[1].bits() == 0xd4);  // -6 = -1.5 * 2^2: sign, exponent 2 + 8, mantissa 4
  // F16 -> BF16: half's 1 + 2^-10 is below bfloat16's tie at 1 + 2^-8.
  auto b = run1("Cast", {make<half>({2}, {half::from_bits(0x3c01), half::from_bits(0x7c00)})}, info(data_type::BF16, {2}));
  CHECK(bf16_bits(b) == std::vector<std::uint16_t>{0x3f80, 0x7f80});
  auto like = run1("CastLike", {boolean({2}, {1, 0}), make<ipu::bfloat16>({1}, {ipu::bfloat16(0.0f)})},
                   info(data_type::BF16, {2}));
  CHECK(bf16_bits(like) == std::vector<std::uint16_t>{0x3f80, 0x0000});
}

}  // namespace test_generators
