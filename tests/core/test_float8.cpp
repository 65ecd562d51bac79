#include <doctest/doctest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <ios>
#include <sstream>
#include <string>
#include <limits>
#include <random>

#include "ipu/float8.hpp"

namespace test_float8 {

using ipu::float8_143;
using ipu::float8_152;
using ipu::float8_overflow;

namespace {
std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

// Independent reference: the value of a bit pattern by the textbook formula, in double.
template <int E, int M, int Bias>
double reference_value(std::uint8_t b) {
  const int sign = b >> 7;
  const int e = (b >> M) & ((1 << E) - 1);
  const int m = b & ((1 << M) - 1);
  const double mag = e == 0 ? std::ldexp(m, 1 - Bias - M) : std::ldexp(1.0 + std::ldexp(m, -M), e - Bias);
  return sign ? -mag : mag;
}

// Independent reference for float -> float8: scan all codes for the nearest (ties to the even
// code); beyond max + half an ulp is overflow.
template <class F, int E, int M, int Bias>
std::uint8_t reference_round(float f, float8_overflow o) {
  if (std::isnan(f)) return 0x80;
  const double x = f;
  const double max = reference_value<E, M, Bias>(0x7f);
  const double limit = max + std::ldexp(1.0, (1 << E) - 1 - Bias - M) / 2;  // halfway to the next power
  if (std::fabs(x) >= limit) return o == float8_overflow::nan ? 0x80 : (x < 0 ? 0xff : 0x7f);
  int best = 0;
  double best_err = std::numeric_limits<double>::infinity();
  for (int c = 0; c < 256; ++c) {
    if (c == 0x80) continue;
    const double err = std::fabs(reference_value<E, M, Bias>(static_cast<std::uint8_t>(c)) - x);
    if (err < best_err || (err == best_err && (c & 1) == 0 && (best & 1) == 1)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<std::uint8_t>(best);
}

template <class F, int E, int M, int Bias>
void check_against_reference() {
  // Every code decodes to the formula's value; every non-NaN code round-trips.
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<std::uint8_t>(c);
    const float f = F::to_float(b);
    if (b == 0x80) {
      CHECK(std::isnan(f));
      continue;
    }
    CHECK(static_cast<double>(f) == reference_value<E, M, Bias>(b));
    CHECK(F::from_float(f) == b);
  }
  // Positive codes increase strictly: the encoding is monotonic.
  for (int c = 1; c < 128; ++c)
    CHECK(F::to_float(static_cast<std::uint8_t>(c)) > F::to_float(static_cast<std::uint8_t>(c - 1)));
  // Random floats over the format's range and beyond, in both overflow modes.
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> exps(127 - Bias - M - 4, 127 + (1 << E) - Bias + 2);
  std::uniform_int_distribution<std::uint32_t> mants(0, (1u << 23) - 1);
  int mismatches = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t bits = (static_cast<std::uint32_t>(i & 1) << 31) | (static_cast<std::uint32_t>(exps(rng)) << 23) |
                               (i % 7 == 0 ? mants(rng) & ~((1u << (22 - M)) - 1) : mants(rng));  // many exact ties
    const float f = std::bit_cast<float>(bits);
    for (auto o : {float8_overflow::nan, float8_overflow::saturate}) {
      const auto got = F::from_float(f, o);
      const auto want = reference_round<F, E, M, Bias>(f, o);
      if (got != want && ++mismatches <= 10)
        FAIL_CHECK("float " << f << " (" << hex(bits) << "): got " << hex(got) << ", want " << hex(want));
    }
  }
  CHECK(mismatches == 0);
}
}  // namespace

TEST_CASE("float8_143 (1.4.3, bias 8): hand-computed values") {
  CHECK(float8_143::to_float(0x00) == 0.0f);
  CHECK(std::isnan(float8_143::to_float(0x80)));
  CHECK(float8_143::to_float(0x01) == 0x1p-10f);  // smallest subnormal
  CHECK(float8_143::to_float(0x07) == 0x7p-10f);  // largest subnormal
  CHECK(float8_143::to_float(0x08) == 0x1p-7f);   // smallest normal
  CHECK(float8_143::to_float(0x38) == 0.5f);
  CHECK(float8_143::to_float(0x40) == 1.0f);
  CHECK(float8_143::to_float(0x41) == 1.125f);
  CHECK(float8_143::to_float(0x4c) == 3.0f);
  CHECK(float8_143::to_float(0xc8) == -2.0f);
  CHECK(float8_143::to_float(0x7f) == 240.0f);  // largest: no exponent code is reserved
  CHECK(float8_143::to_float(0xff) == -240.0f);
  CHECK(float8_143::to_float(0x81) == -0x1p-10f);

  CHECK(float8_143::from_float(1.0f) == 0x40);
  CHECK(float8_143::from_float(-3.0f) == 0xcc);
  CHECK(float8_143::from_float(1.0625f) == 0x40);  // tie between 1 and 1.125: even
  CHECK(float8_143::from_float(1.1875f) == 0x42);  // tie between 1.125 and 1.25: even
  CHECK(float8_143::from_float(std::nextafter(1.0625f, 2.0f)) == 0x41);
  CHECK(float8_143::from_float(0x1p-11f) == 0x00);  // half the smallest subnormal: even is 0
  CHECK(float8_143::from_float(0x1.000002p-11f) == 0x01);
  CHECK(float8_143::from_float(0x3p-11f) == 0x02);  // 1.5 units: even
  CHECK(float8_143::from_float(0xfp-11f) == 0x08);  // 7.5 units: rounds up into the normals
  CHECK(float8_143::from_float(-0.0f) == 0x00);     // no -0: 0x80 is NaN
  CHECK(float8_143::from_float(-1e-9f) == 0x00);    // underflow to +0
  CHECK(float8_143::from_float(247.9f) == 0x7f);
  CHECK(float8_143::from_float(248.0f) == 0x80);    // tie past the largest: overflow -> NaN
  CHECK(float8_143::from_float(248.0f, float8_overflow::saturate) == 0x7f);
  CHECK(float8_143::from_float(-1e30f, float8_overflow::saturate) == 0xff);
  CHECK(float8_143::from_float(std::numeric_limits<float>::infinity()) == 0x80);
  CHECK(float8_143::from_float(-std::numeric_limits<float>::infinity(), float8_overflow::saturate) == 0xff);
  CHECK(float8_143::from_float(std::numeric_limits<float>::quiet_NaN(), float8_overflow::saturate) == 0x80);
  CHECK(float8_143::from_float(std::numeric_limits<float>::denorm_min()) == 0x00);
}

TEST_CASE("float8_152 (1.5.2, bias 16): hand-computed values") {
  CHECK(float8_152::to_float(0x01) == 0x1p-17f);
  CHECK(float8_152::to_float(0x03) == 0x3p-17f);
  CHECK(float8_152::to_float(0x04) == 0x1p-15f);
  CHECK(float8_152::to_float(0x3c) == 0.5f);
  CHECK(float8_152::to_float(0x40) == 1.0f);
  CHECK(float8_152::to_float(0x41) == 1.25f);
  CHECK(float8_152::to_float(0x43) == 1.75f);
  CHECK(float8_152::to_float(0xc4) == -2.0f);
  CHECK(float8_152::to_float(0x7f) == 57344.0f);
  CHECK(std::isnan(float8_152::to_float(0x80)));

  CHECK(float8_152::from_float(1.125f) == 0x40);  // tie: even
  CHECK(float8_152::from_float(1.375f) == 0x42);  // tie: even
  CHECK(float8_152::from_float(61439.0f) == 0x7f);
  CHECK(float8_152::from_float(61440.0f) == 0x80);  // tie past 57344 rounds to 65536: overflow
  CHECK(float8_152::from_float(61440.0f, float8_overflow::saturate) == 0x7f);
  CHECK(float8_152::from_float(0x1p-18f) == 0x00);
  CHECK(float8_152::from_float(0x3p-18f) == 0x02);
  CHECK(float8_152::from_float(-0x1p-17f) == 0x81);
}

TEST_CASE("float8 formats agree with a brute-force nearest-value reference") {
  check_against_reference<float8_143, 4, 3, 8>();
  check_against_reference<float8_152, 5, 2, 16>();
}

TEST_CASE("float8: limits, construction, constant evaluation") {
  static_assert(float8_143(1.0f).bits() == 0x40);
  static_assert(static_cast<float>(float8_143::max()) == 240.0f);
  static_assert(static_cast<float>(float8_143::lowest()) == -240.0f);
  static_assert(static_cast<float>(float8_143::min()) == 0x1p-7f);
  static_assert(static_cast<float>(float8_143::denorm_min()) == 0x1p-10f);
  static_assert(static_cast<float>(float8_152::max()) == 57344.0f);
  static_assert(static_cast<float>(float8_152::min()) == 0x1p-15f);
  static_assert(static_cast<float>(float8_152::denorm_min()) == 0x1p-17f);
  static_assert(float8_152(1e9f).is_nan());
  static_assert(float8_152(1e9f, float8_overflow::saturate).identical(float8_152::max()));
  static_assert(sizeof(float8_143) == 1 && sizeof(float8_152) == 1);
  CHECK(float8_143::quiet_nan().is_nan());
  CHECK(float8_143().bits() == 0);
  CHECK(float8_143::from_bits(0x4c).identical(float8_143(3.0f)));
}

}  // namespace test_float8
