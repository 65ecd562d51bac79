#include "ipu/utf8.hpp"

#include <doctest/doctest.h>

#include <string>

namespace test_utf8 {

using namespace std::string_literals;

TEST_CASE("utf8: decodes one code point of each length") {
  const std::string s = "a\u00e9\u65e5\U0001F600";  // 1, 2, 3 and 4 bytes
  auto d = ipu::utf8::decode(s, 0);
  CHECK(d.code_point == U'a');
  CHECK(d.length == 1);
  d = ipu::utf8::decode(s, 1);
  CHECK(d.code_point == 0xE9);
  CHECK(d.length == 2);
  d = ipu::utf8::decode(s, 3);
  CHECK(d.code_point == 0x65E5);
  CHECK(d.length == 3);
  d = ipu::utf8::decode(s, 6);
  CHECK(d.code_point == 0x1F600);
  CHECK(d.length == 4);
  CHECK(ipu::utf8::decode(s, s.size()).length == 0);
  static_assert(ipu::utf8::is_valid("caf\xc3\xa9"));
}

TEST_CASE("utf8: refuses what is not UTF-8") {
  for (const std::string& bad : {"\x80"s, "\xc3"s, "\xc0\xaf"s /* overlong '/' */, "\xe0\x80\xaf"s /* overlong */,
                                "\xed\xa0\x80"s /* surrogate D800 */, "\xf4\x90\x80\x80"s /* past 10FFFF */,
                                "\xf5\x80\x80\x80"s, "\xe6\x97"s /* truncated */, "a\xffz"s}) {
    CAPTURE(bad);
    CHECK_FALSE(ipu::utf8::is_valid(bad));
  }
  CHECK(ipu::utf8::is_valid(""));
  CHECK(ipu::utf8::is_valid("\xf4\x8f\xbf\xbf"));  // U+10FFFF, the last
}

TEST_CASE("utf8: append writes what decode reads") {
  for (char32_t cp : {U'\0', U'z', char32_t{0x7FF}, char32_t{0x800}, char32_t{0xFFFF}, char32_t{0x10000},
                      char32_t{0x10FFFF}}) {
    std::string s;
    ipu::utf8::append(s, cp);
    const auto d = ipu::utf8::decode(s, 0);
    CHECK(d.code_point == cp);
    CHECK(d.length == s.size());
  }
  CHECK_FALSE(ipu::utf8::is_scalar_value(0xDFFF));
  CHECK_FALSE(ipu::utf8::is_scalar_value(0x110000));
}

}  // namespace test_utf8
