#pragma once
// bfloat16 (ONNX BFLOAT16, PopEF BF16): the top 16 bits of an IEEE binary32, stored as bits;
// arithmetic goes through float.
//
// It has float's 8-bit exponent (so float's range, infinities and subnormals) and 7 mantissa bits.
// float -> bfloat16 rounds to nearest, ties to even, on the 16 dropped bits; a carry may move into
// the exponent, which is what makes values near float's largest round to infinity. NaN stays NaN
// (quiet, top payload bits kept). bfloat16 -> float is exact: the bits are shifted back.
#include <bit>
#include <cstdint>

namespace ipu {

class bfloat16 {
 public:
  constexpr bfloat16() = default;
  constexpr explicit bfloat16(float f) noexcept : bits_(from_float(f)) {}
  constexpr explicit operator float() const noexcept { return to_float(bits_); }

  static constexpr bfloat16 from_bits(std::uint16_t b) noexcept {
    bfloat16 r;
    r.bits_ = b;
    return r;
  }
  [[nodiscard]] constexpr std::uint16_t bits() const noexcept { return bits_; }

  /// Bitwise equality (NaN == NaN with the same payload; +0 != -0).
  [[nodiscard]] constexpr bool identical(bfloat16 o) const noexcept { return bits_ == o.bits_; }

  static constexpr std::uint16_t from_float(float f) noexcept {
    const auto x = std::bit_cast<std::uint32_t>(f);
    // NaN: truncating could clear every payload bit left (making an infinity), so force quiet.
    if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x0040u);
    const std::uint32_t rem = x & 0xffffu;
    std::uint32_t r = x >> 16;
    if (rem > 0x8000u || (rem == 0x8000u && (r & 1u))) ++r;  // an infinity has rem 0: unchanged
    return static_cast<std::uint16_t>(r);
  }

  static constexpr float to_float(std::uint16_t b) noexcept {
    return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
  }

 private:
  std::uint16_t bits_ = 0;
};

}  // namespace ipu
