#pragma once
// UTF-8, the encoding of ONNX's STRING elements: one code point read or written at a time, for
// the kernels that change case (StringNormalizer) and the .npy reader and writer (numpy's 'U'
// strings are UTF-32).
#include <cstddef>
#include <string>
#include <string_view>

namespace ipu::utf8 {

/// A code point UTF-8 can carry: at most U+10FFFF, and not a UTF-16 surrogate.
constexpr bool is_scalar_value(char32_t cp) noexcept { return cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

/// The code point starting at s[at] and how many bytes it takes; length 0 for bytes that are not
/// UTF-8 there (a stray continuation byte, a truncated or overlong sequence, a surrogate, or a
/// value past U+10FFFF).
struct decoded {
  char32_t code_point = 0;
  std::size_t length = 0;
};
constexpr decoded decode(std::string_view s, std::size_t at) noexcept {
  if (at >= s.size()) return {};
  const auto c = static_cast<unsigned char>(s[at]);
  if (c < 0x80) return {c, 1};
  const std::size_t len = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
  if (len == 0 || at + len > s.size()) return {};
  char32_t cp = c & (0x7Fu >> len);
  for (std::size_t k = 1; k < len; ++k) {
    const auto t = static_cast<unsigned char>(s[at + k]);
    if ((t & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (t & 0x3Fu);
  }
  const bool overlong = (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000);
  if (overlong || !is_scalar_value(cp)) return {};
  return {cp, len};
}

/// Whether all of `s` is UTF-8.
constexpr bool is_valid(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const auto d = decode(s, i);
    if (d.length == 0) return false;
    i += d.length;
  }
  return true;
}

/// Appends `cp` (a scalar value: see is_scalar_value) to `out`.
inline void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace ipu::utf8
