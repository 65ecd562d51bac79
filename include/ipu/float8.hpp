#pragma once
// Graphcore's 8-bit floats, stored as bits; arithmetic goes through float.
//
//   float8_143 (PopEF F8143, PopART FLOAT8_143): 1 sign, 4 exponent, 3 mantissa bits, bias 8.
//   float8_152 (PopEF F8152, PopART FLOAT8_152): 1 sign, 5 exponent, 2 mantissa bits, bias 16.
//
// These are not IEEE-style and not NVIDIA's E4M3/E5M2: every exponent code holds numbers (there are
// no infinities), the one NaN is 0x80 (the pattern IEEE would use for -0, so there is no -0), and
// subnormals are kept. Hence the bias is one more than IEEE's 2^(e-1)-1.
//
//              largest   smallest normal   smallest subnormal
//   float8_143     240              2^-7                2^-10
//   float8_152   57344             2^-15                2^-17
//
// On the IPU the bias can be moved at run time by a log2 scale held in tensor metadata (PopXL's
// `log2_scale`, in [-32, 32)). These types are the plain formats, scale 0: to apply a scale,
// multiply the float by a power of two before converting or after converting back.
//
// float -> float8 rounds to nearest, ties to even. Values that round to zero (either sign) become
// +0. A value whose rounded magnitude is beyond the largest, and +-inf, become NaN by default (as
// PopART's host conversion does, `nan_on_overflow = true`) or +-largest with
// `float8_overflow::saturate`. NaN stays NaN.
#include <bit>
#include <cstdint>
#include <limits>

namespace ipu {

/// What float -> float8 does with values beyond the format's range (including infinities).
enum class float8_overflow : std::uint8_t { nan, saturate };

template <int ExponentBits, int MantissaBits, int Bias>
class basic_float8 {
  static_assert(1 + ExponentBits + MantissaBits == 8, "ipu: a float8 format has 1 sign, E exponent and M mantissa bits, E + M == 7");
  static_assert(MantissaBits >= 1 && ExponentBits >= 2, "ipu: a float8 format needs at least 1 mantissa and 2 exponent bits");

 public:
  static constexpr int exponent_bits = ExponentBits;
  static constexpr int mantissa_bits = MantissaBits;
  static constexpr int exponent_bias = Bias;
  static constexpr std::uint8_t nan_bits = 0x80;
  static constexpr std::uint8_t max_bits = 0x7f;

  constexpr basic_float8() = default;
  constexpr explicit basic_float8(float f, float8_overflow overflow = float8_overflow::nan) noexcept
      : bits_(from_float(f, overflow)) {}
  constexpr explicit operator float() const noexcept { return to_float(bits_); }

  static constexpr basic_float8 from_bits(std::uint8_t b) noexcept {
    basic_float8 r;
    r.bits_ = b;
    return r;
  }
  [[nodiscard]] constexpr std::uint8_t bits() const noexcept { return bits_; }
  [[nodiscard]] constexpr bool is_nan() const noexcept { return bits_ == nan_bits; }
  /// Bitwise equality (NaN == NaN).
  [[nodiscard]] constexpr bool identical(basic_float8 o) const noexcept { return bits_ == o.bits_; }

  static constexpr basic_float8 max() noexcept { return from_bits(max_bits); }
  static constexpr basic_float8 lowest() noexcept { return from_bits(0xff); }
  /// Smallest positive normal value.
  static constexpr basic_float8 min() noexcept { return from_bits(std::uint8_t{1} << MantissaBits); }
  static constexpr basic_float8 denorm_min() noexcept { return from_bits(1); }
  static constexpr basic_float8 quiet_nan() noexcept { return from_bits(nan_bits); }

  static constexpr std::uint8_t from_float(float f, float8_overflow overflow = float8_overflow::nan) noexcept {
    const auto x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 31) << 7;
    const std::uint32_t magnitude = x & 0x7fffffffu;
    const auto overflowed = static_cast<std::uint8_t>(overflow == float8_overflow::nan ? nan_bits : (sign | max_bits));
    if (magnitude > 0x7f800000u) return nan_bits;
    if (magnitude == 0x7f800000u) return overflowed;
    const std::uint32_t exp = magnitude >> 23;
    if (exp == 0) return 0;  // float zero or subnormal: far below the smallest float8 subnormal
    const std::uint32_t mant = (magnitude & 0x7fffffu) | 0x800000u;  // with the implicit bit
    // float8 biased exponent; <= 0 means the result is subnormal (or zero).
    const int e = static_cast<int>(exp) - 127 + Bias;
    constexpr int drop = 23 - MantissaBits;  // float mantissa bits that do not fit
    std::uint32_t r = 0;
    if (e >= 1) {
      if (e > (1 << ExponentBits)) return overflowed;  // also keeps the shift below in range
      r = (static_cast<std::uint32_t>(e) << MantissaBits) | ((mant & 0x7fffffu) >> drop);
      r = round(r, mant & ((1u << drop) - 1), 1u << (drop - 1));  // a carry moves into the exponent: correct
    } else {
      const int shift = drop + 1 - e;
      if (shift > 24) return 0;  // below half the smallest subnormal
      r = round(mant >> shift, mant & ((1u << shift) - 1), 1u << (shift - 1));
    }
    if (r > max_bits) return overflowed;
    if (r == 0) return 0;  // no -0 in these formats
    return static_cast<std::uint8_t>(sign | r);
  }

  static constexpr float to_float(std::uint8_t b) noexcept {
    if (b == nan_bits) return std::numeric_limits<float>::quiet_NaN();
    const std::uint32_t sign = static_cast<std::uint32_t>(b >> 7) << 31;
    const int e = (b >> MantissaBits) & ((1 << ExponentBits) - 1);
    std::uint32_t mant = b & ((1u << MantissaBits) - 1);
    if (e == 0) {
      if (mant == 0) return 0.0f;
      int shifts = 0;  // normalise the subnormal
      while ((mant & (1u << MantissaBits)) == 0) {
        mant <<= 1;
        ++shifts;
      }
      const auto fexp = static_cast<std::uint32_t>(1 - Bias - shifts + 127);
      return std::bit_cast<float>(sign | (fexp << 23) | ((mant & ((1u << MantissaBits) - 1)) << (23 - MantissaBits)));
    }
    const auto fexp = static_cast<std::uint32_t>(e - Bias + 127);
    return std::bit_cast<float>(sign | (fexp << 23) | (mant << (23 - MantissaBits)));
  }

 private:
  // Round to nearest, ties to even: `r` is the truncated result, `rem` what was dropped.
  static constexpr std::uint32_t round(std::uint32_t r, std::uint32_t rem, std::uint32_t halfway) noexcept {
    return (rem > halfway || (rem == halfway && (r & 1u))) ? r + 1 : r;
  }

  std::uint8_t bits_ = 0;
};

using float8_143 = basic_float8<4, 3, 8>;
using float8_152 = basic_float8<5, 2, 16>;

}  // namespace ipu
