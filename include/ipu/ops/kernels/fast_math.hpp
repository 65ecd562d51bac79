#pragma once
// Float transcendentals without a libm call, so that loops of them vectorise: a scalar expf is
// ~15 ns an element here (tanhf ~23), and EfficientNet's SiLU (x * Sigmoid(x)) then took 60% of
// the model's time. Each is within a few ulp of the libm function; kernels use them for F32 (and F16, which
// computes in F32) and keep libm for F64.
#include <bit>
#include <cstdint>
#include <limits>

namespace ipu::detail::math_ops {

/// e^x for float without a libm call, so that a loop of them vectorises (the attention softmax
/// spent ~15 ns an element in scalar expf). x = n ln2 + r with |r| <= ln2 / 2 (ln2 split in two so
/// n ln2 is exact), e^r by its degree-7 Taylor polynomial (truncation < 1e-8 relative), times 2^n
/// built in the exponent bits: within 2 ulp of expf. NaN stays NaN; below -87.33 (where e^x is
/// under the smallest normal float) the result is 0, above 88.72 it is +inf.
inline float exp_vectorisable(float x) noexcept {
  constexpr float lo = -87.33654f, hi = 88.72283f;
  // Selections as bit masks, not ?: -- with trapping maths on, GCC keeps a ?: whose arm computes as
  // a branch, and a branch stops the loop vectorising. NaN is neither below nor above: it passes.
  const std::uint32_t below = 0u - static_cast<std::uint32_t>(x < lo), above = 0u - static_cast<std::uint32_t>(x > hi);
  const std::uint32_t out_of_range = below | above;
  const float c = std::bit_cast<float>((std::bit_cast<std::uint32_t>(x) & ~out_of_range) |
                                       (std::bit_cast<std::uint32_t>(lo) & below) | (std::bit_cast<std::uint32_t>(hi) & above));
  // n = round(c / ln2) by the 1.5 * 2^23 trick: the sum's low mantissa bits hold n.
  constexpr float shifter = 12582912.0f;
  const float t = c * 1.44269504f + shifter;
  // n from the integer, not t - shifter: under -ffast-math the compiler may fold (c k + S) - S to c k.
  const std::int32_t ni = static_cast<std::int32_t>(std::bit_cast<std::uint32_t>(t) - std::bit_cast<std::uint32_t>(shifter));
  const float n = static_cast<float>(ni);
  const float r = (c - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n as (n + 127) << 23; n is in [-126, 128], and 2^128 (not a float) is taken as 2^127 * 2.
  const std::int32_t half_n = ni >> 1;
  const float s1 = std::bit_cast<float>(static_cast<std::uint32_t>(half_n + 127) << 23);
  const float s2 = std::bit_cast<float>(static_cast<std::uint32_t>(ni - half_n + 127) << 23);
  const float y = p * s1 * s2;
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(y) & ~out_of_range) |
                              (std::bit_cast<std::uint32_t>(std::numeric_limits<float>::infinity()) & above));
}

/// 1 / (1 + e^-x) for float: e = e^-|x| never overflows, and the result is 1 / (1 + e) for x >= 0
/// and e / (1 + e) below (not 1 - 1 / (1 + e), which loses the small values' digits). Within 3 ulp.
inline float sigmoid_vectorisable(float x) noexcept {
  const float e = exp_vectorisable(-std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) & 0x7fffffffu));
  const float s = 1.0f / (1.0f + e);
  // Chosen by bit mask, not ?:, so the loop has no branch (see exp_vectorisable).
  const std::uint32_t negative = 0u - static_cast<std::uint32_t>(x < 0.0f);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(s) & ~negative) | (std::bit_cast<std::uint32_t>(e * s) & negative));
}

/// tanh for float, odd: |x| < 0.4 by its Taylor series to x^13 (truncation < 1e-8 relative), above
/// it (1 - e) / (1 + e) with e = e^-2|x|, where 1 - e >= 0.55 loses no digits; the sign put back
/// last. Within 3 ulp; -0 stays -0, +-inf gives +-1, NaN stays NaN.
inline float tanh_vectorisable(float x) noexcept {
  const std::uint32_t sign = std::bit_cast<std::uint32_t>(x) & 0x80000000u;
  const float a = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x) ^ sign);
  const float x2 = x * x;
  float p = 21844.0f / 6081075.0f;
  p = p * x2 - 1382.0f / 155925.0f;
  p = p * x2 + 62.0f / 2835.0f;
  p = p * x2 - 17.0f / 315.0f;
  p = p * x2 + 2.0f / 15.0f;
  p = p * x2 - 1.0f / 3.0f;
  // x's sign put on too: x + x * (x2 * p) is +0 for x = -0.
  const float small = std::bit_cast<float>(std::bit_cast<std::uint32_t>(x + x * (x2 * p)) | sign);
  const float e = exp_vectorisable(-2.0f * a);
  const float large = std::bit_cast<float>(std::bit_cast<std::uint32_t>((1.0f - e) / (1.0f + e)) | sign);
  // Chosen by bit mask, not ?:, so the loop has no branch (see exp_vectorisable).
  const std::uint32_t use_small = 0u - static_cast<std::uint32_t>(a < 0.4f);
  return std::bit_cast<float>((std::bit_cast<std::uint32_t>(small) & use_small) |
                              (std::bit_cast<std::uint32_t>(large) & ~use_small));
}

}  // namespace ipu::detail::math_ops
