#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "ipu/bfloat16.hpp"

namespace test_bfloat16 {

namespace {

using ipu::bfloat16;

std::uint16_t to_bits(std::uint32_t float_bits) { return bfloat16::from_float(std::bit_cast<float>(float_bits)); }

std::uint32_t float_bits(std::uint16_t b) { return std::bit_cast<std::uint32_t>(bfloat16::to_float(b)); }

}  // namespace

// Each expected pattern below is worked out by hand from the float's bits: the top 16 bits, plus
// one when the low 16 are above 0x8000 or equal to it with the top half odd.

TEST_CASE("bfloat16: exact values keep their top 16 bits") {
  CHECK(to_bits(0x3f800000u) == 0x3f80);  // 1
  CHECK(to_bits(0xc0000000u) == 0xc000);  // -2
  CHECK(to_bits(0x40490000u) == 0x4049);  // 3.140625
  CHECK(bfloat16::to_float(0x3f80) == 1.0f);
  CHECK(bfloat16::to_float(0x4049) == 3.140625f);
  CHECK(bfloat16::to_float(0x7f7f) == std::ldexp(255.0f, 120));  // the largest: (2 - 2^-7) * 2^127
}

TEST_CASE("bfloat16: float rounds to nearest, ties to even") {
  CHECK(to_bits(0x3f808000u) == 0x3f80);  // 1 + 2^-8: the tie between 1 and 1 + 2^-7; 0x3f80 is even
  CHECK(to_bits(0x3f818000u) == 0x3f82);  // tie between 0x3f81 and 0x3f82: up to the even one
  CHECK(to_bits(0x3f808001u) == 0x3f81);  // just above the tie
  CHECK(to_bits(0x3f807fffu) == 0x3f80);  // just below it
  CHECK(to_bits(0xbf818000u) == 0xbf82);  // negative ties go to even too (away from zero here)
  CHECK(to_bits(0x3dcccccdu) == 0x3dcd);  // 0.1f: low half 0xcccd rounds up
  CHECK(to_bits(0x40490fdbu) == 0x4049);  // pi: low half 0x0fdb rounds down
  CHECK(to_bits(0x3f7fffffu) == 0x3f80);  // the carry moves into the exponent: 1 - 2^-24 -> 1
  CHECK(bfloat16(0.1f).bits() == 0x3dcd);
  CHECK(static_cast<float>(bfloat16(0.1f)) == std::bit_cast<float>(0x3dcd0000u));
}

TEST_CASE("bfloat16: overflow rounds to infinity; infinities stay") {
  CHECK(to_bits(0x7f7f7fffu) == 0x7f7f);  // below the tie above the largest: stays the largest
  CHECK(to_bits(0x7f7f8000u) == 0x7f80);  // the tie: 0x7f7f is odd, so up, into infinity
  CHECK(to_bits(0x7f7fffffu) == 0x7f80);  // FLT_MAX
  CHECK(to_bits(0xff7fffffu) == 0xff80);  // -FLT_MAX
  CHECK(to_bits(0x7f800000u) == 0x7f80);
  CHECK(to_bits(0xff800000u) == 0xff80);
  CHECK(std::isinf(bfloat16::to_float(0x7f80)));
  CHECK(bfloat16::to_float(0xff80) < 0);
}

TEST_CASE("bfloat16: NaN stays NaN, quiet, even when its payload is only in the dropped bits") {
  CHECK(to_bits(0x7fc00000u) == 0x7fc0);
  CHECK(to_bits(0xffc00000u) == 0xffc0);
  CHECK(to_bits(0x7f800001u) == 0x7fc0);  // truncating would make +inf
  CHECK(to_bits(0xff800001u) == 0xffc0);
  CHECK(to_bits(0x7fa00000u) == 0x7fe0);  // signalling: made quiet, top payload bit kept
  CHECK(to_bits(0x7fffffffu) == 0x7fff);  // no rounding carry out of a NaN
  CHECK(std::isnan(bfloat16::to_float(0x7fc0)));
  CHECK(std::isnan(bfloat16::to_float(0x7f81)));  // a signalling bfloat16 NaN reads as NaN
}

TEST_CASE("bfloat16: subnormals and zeros of both signs") {
  CHECK(to_bits(0x00010000u) == 0x0001);  // 2^-133, the smallest subnormal
  CHECK(to_bits(0x00008000u) == 0x0000);  // 2^-134, half of it: ties to even (zero)
  CHECK(to_bits(0x00008001u) == 0x0001);
  CHECK(to_bits(0x00018000u) == 0x0002);  // tie between 1 and 2 subnormal steps
  CHECK(to_bits(0x007f0000u) == 0x007f);  // the largest subnormal
  CHECK(to_bits(0x007f8000u) == 0x0080);  // tie with the smallest normal: up to the even one
  CHECK(to_bits(0x00000001u) == 0x0000);  // float's smallest subnormal is far below bfloat16's
  CHECK(to_bits(0x80000000u) == 0x8000);  // -0 keeps its sign
  CHECK(to_bits(0x80007fffu) == 0x8000);  // a tiny negative rounds to -0
  CHECK(bfloat16::to_float(0x0001) == std::ldexp(1.0f, -133));
  CHECK(bfloat16::to_float(0x0080) == std::numeric_limits<float>::min());
  CHECK(std::signbit(bfloat16::to_float(0x8000)));
  CHECK(bfloat16::to_float(0x8000) == 0.0f);
  CHECK_FALSE(bfloat16::from_bits(0x8000).identical(bfloat16::from_bits(0x0000)));
}

TEST_CASE("bfloat16: conversions are constexpr") {
  static_assert(bfloat16::from_float(1.0f) == 0x3f80);
  static_assert(bfloat16::from_float(std::bit_cast<float>(0x3f818000u)) == 0x3f82);
  static_assert(bfloat16::to_float(0xc000) == -2.0f);
  static_assert(bfloat16(3.0f).bits() == 0x4040);
  static_assert(bfloat16::from_bits(0x4040).identical(bfloat16(3.0f)));
  CHECK(sizeof(bfloat16) == 2);
}

TEST_CASE("bfloat16: every value converts to float and back unchanged (NaNs made quiet)") {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = bfloat16::to_float(bits);
    const bool nan = (bits & 0x7fff) > 0x7f80;
    // bfloat16's value is its bits over float's top half, with zero below.
    CHECK((float_bits(bits) == (b << 16)));
    CHECK((bfloat16::from_float(f) == (nan ? (bits | 0x40) : bits)));
  }
}

TEST_CASE("bfloat16: random floats round to the nearer neighbour, against double arithmetic") {
  std::mt19937 rng(12345);
  for (int i = 0; i < 200000; ++i) {
    const auto x = static_cast<std::uint32_t>(rng());
    const float f = std::bit_cast<float>(x);
    if (!std::isfinite(f)) continue;
    const std::uint16_t got = bfloat16::from_float(f);
    // The two bfloat16 values around f (toward zero and away), compared in double, where the
    // distances are exact. Above the largest, the step away is infinity, which IEEE rounding
    // reaches as if it were 2^128 (the next power of two with an unbounded exponent).
    const auto lo = static_cast<std::uint16_t>(x >> 16);
    const auto hi = static_cast<std::uint16_t>(lo + 1);
    const double d = f, dlo = bfloat16::to_float(lo);
    const double dhi = (hi & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), d) : bfloat16::to_float(hi);
    const double elo = std::fabs(d - dlo), ehi = std::fabs(dhi - d);
    const std::uint16_t want = elo < ehi ? lo : ehi < elo ? hi : ((lo & 1) ? hi : lo);
    if (got != want) {
      CHECK(got == want);
      break;
    }
  }
}

}  // namespace test_bfloat16
