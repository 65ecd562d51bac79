#pragma once
// Integer and floating helpers that must work in constant evaluation (the device model, the planner)
// (std::ceil and friends are not constexpr in C++20).
#include <cstdint>
#include <limits>

namespace ipu {

/// ceil(a / b) for b > 0.
constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept { return b == 0 ? 0 : (a + b - 1) / b; }

/// ceil(x) for a finite, non-negative x; saturates instead of overflowing.
constexpr std::uint64_t ceil_to_u64(double x) noexcept {
  if (!(x > 0.0)) return 0;
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  if (x >= 18446744073709549568.0) return max;  // the largest double below 2^64
  const auto i = static_cast<std::uint64_t>(x);
  return static_cast<double>(i) < x ? i + 1 : i;
}

/// a * b, saturating at the largest value (byte counts of absurd shapes must not wrap around).
constexpr std::uint64_t mul_sat(std::uint64_t a, std::uint64_t b) noexcept {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  if (a != 0 && b > max / a) return max;
  return a * b;
}

constexpr bool is_power_of_two(std::uint64_t x) noexcept { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace ipu
