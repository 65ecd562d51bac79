#pragma once
// Number formatting usable in constant evaluation (std::to_string is not constexpr), so that the
// device model's and the planner's messages can be built and checked at compile time.
#include <cstdint>
#include <string>

namespace ipu {

constexpr std::string format_uint(std::uint64_t v) {
  char buf[24]{};
  std::size_t n = 0;
  do {
    buf[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  std::string s(n, '0');
  for (std::size_t i = 0; i < n; ++i) s[i] = buf[n - 1 - i];
  return s;
}

/// Digits in groups of three, e.g. 61100840 -> "61,100,840". Built front to back: inserting commas
/// into the string in place trips GCC 12's -Wrestrict at -O3.
constexpr std::string format_grouped(std::uint64_t v) {
  const std::string digits = format_uint(v);
  std::string s;
  s.reserve(digits.size() + digits.size() / 3);
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i != 0 && (digits.size() - i) % 3 == 0) s += ',';
    s += digits[i];
  }
  return s;
}

/// `value / 10^decimals` written with exactly `decimals` decimals, e.g. (8975, 1) -> "897.5".
constexpr std::string format_scaled(std::uint64_t value, unsigned decimals) {
  std::uint64_t scale = 1;
  for (unsigned i = 0; i < decimals; ++i) scale *= 10;
  std::string s = format_uint(value / scale);
  if (decimals == 0) return s;
  std::string frac = format_uint(value % scale);
  s += '.';
  s.append(decimals - frac.size(), '0');
  return s + frac;
}

/// A non-negative double with `decimals` decimals, rounded half up.
constexpr std::string format_fixed(double v, unsigned decimals) {
  double scale = 1;
  for (unsigned i = 0; i < decimals; ++i) scale *= 10;
  return format_scaled(static_cast<std::uint64_t>(v * scale + 0.5), decimals);
}

/// "700000 B (683.6 KiB)": exact bytes for tile-level reasoning plus a readable binary unit.
constexpr std::string format_bytes(std::uint64_t bytes) {
  std::string s = format_uint(bytes) + " B";
  constexpr std::uint64_t kib = 1024, mib = kib * 1024, gib = mib * 1024;
  auto unit = [&](std::uint64_t u, const char* name) {
    // One decimal, rounded half up, in integer arithmetic.
    const std::uint64_t tenths = bytes <= UINT64_MAX / 10 - u ? (bytes * 10 + u / 2) / u : bytes / u * 10;
    return " (" + format_scaled(tenths, 1) + " " + name + ")";
  };
  if (bytes >= gib) return s + unit(gib, "GiB");
  if (bytes >= mib) return s + unit(mib, "MiB");
  if (bytes >= kib) return s + unit(kib, "KiB");
  return s;
}

}  // namespace ipu
