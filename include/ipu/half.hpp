#pragma once
// IEEE 754 binary16, stored as bits; arithmetic goes through float.
//
// Conversions are constexpr and exact: float -> half rounds to nearest, ties to even, and keeps
// infinities, NaNs (quiet) and subnormals.
#include <bit>
#include <cstdint>

namespace ipu {

class half {
 public:
  constexpr half() = default;
  constexpr explicit half(float f) noexcept : bits_(from_float(f)) {}
  constexpr explicit operator float() const noexcept { return to_float(bits_); }

  static constexpr half from_bits(std::uint16_t b) noexcept {
    half h;
    h.bits_ = b;
    return h;
  }
  [[nodiscard]] constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// Bitwise equality (NaN == NaN with the same payload; +0 != -0).
  [[nodiscard]] constexpr bool identical(half o) const noexcept { return bits_ == o.bits_; }

  static constexpr std::uint16_t from_float(float f) noexcept {
    const auto x = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (x >> 16) & 0x8000u;
    const std::uint32_t exp = (x >> 23) & 0xffu;
    std::uint32_t mant = x & 0x7fffffu;
    if (exp == 0xff)  // inf or NaN (NaN stays NaN: keep the top payload bits, force quiet)
      return static_cast<std::uint16_t>(sign | 0x7c00u | (mant ? 0x200u | (mant >> 13) : 0u));
    const int e = static_cast<int>(exp) - 127 + 15;
    if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7c00u);  // overflow -> inf
    if (e <= 0) {                                                       // subnormal or zero
      if (e < -10) return static_cast<std::uint16_t>(sign);
      mant |= 0x800000u;
      const int shift = 14 - e;  // 14..24
      std::uint32_t r = mant >> shift;
      const std::uint32_t rem = mant & ((1u << shift) - 1);
      const std::uint32_t halfway = 1u << (shift - 1);
      if (rem > halfway || (rem == halfway && (r & 1u))) ++r;
      return static_cast<std::uint16_t>(sign | r);
    }
    std::uint32_t r = (static_cast<std::uint32_t>(e) << 10) | (mant >> 13);
    const std::uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;  // may carry into the exponent: correct
    return static_cast<std::uint16_t>(sign | r);
  }

  static constexpr float to_float(std::uint16_t h) noexcept {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exp = (h >> 10) & 0x1fu;
    std::uint32_t mant = h & 0x3ffu;
    std::uint32_t bits = 0;
    if (exp == 0x1f) {
      bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp == 0) {
      if (mant == 0) {
        bits = sign;
      } else {  // subnormal: normalise
        int e = -1;
        do {
          ++e;
          mant <<= 1;
        } while ((mant & 0x400u) == 0);
        bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
      }
    } else {
      bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    return std::bit_cast<float>(bits);
  }

 private:
  std::uint16_t bits_ = 0;
};

}  // namespace ipu
