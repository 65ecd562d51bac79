#include "ipu/format.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

namespace test_format {

// The formatting runs in constant evaluation: the device model's messages are checked at compile time.
static_assert(ipu::format_uint(0) == "0");
static_assert(ipu::format_bytes(700000) == "700000 B (683.6 KiB)");

TEST_CASE("format_uint writes every digit, up to the largest 64-bit value") {
  CHECK(ipu::format_uint(7) == "7");
  CHECK(ipu::format_uint(1234567890) == "1234567890");
  CHECK(ipu::format_uint(std::numeric_limits<std::uint64_t>::max()) == "18446744073709551615");
}

TEST_CASE("format_scaled and format_fixed keep exactly the decimals asked for") {
  CHECK(ipu::format_scaled(8975, 1) == "897.5");
  CHECK(ipu::format_scaled(5, 3) == "0.005");
  CHECK(ipu::format_scaled(42, 0) == "42");
  CHECK(ipu::format_fixed(2.345, 2) == "2.35");  // half up
  CHECK(ipu::format_fixed(0.0, 1) == "0.0");
}

TEST_CASE("format_bytes gives exact bytes and one binary unit") {
  CHECK(ipu::format_bytes(1023) == "1023 B");
  CHECK(ipu::format_bytes(1024) == "1024 B (1.0 KiB)");
  CHECK(ipu::format_bytes(3u * 1024 * 1024 / 2) == "1572864 B (1.5 MiB)");
  CHECK(ipu::format_bytes(std::uint64_t{900} * 1024 * 1024 * 1024) == "966367641600 B (900.0 GiB)");
}

static_assert(ipu::format_grouped(61100840) == "61,100,840");

TEST_CASE("format_grouped puts a comma between groups of three digits, none before the first") {
  CHECK(ipu::format_grouped(0) == "0");
  CHECK(ipu::format_grouped(999) == "999");
  CHECK(ipu::format_grouped(1000) == "1,000");
  CHECK(ipu::format_grouped(123456) == "123,456");
  CHECK(ipu::format_grouped(std::numeric_limits<std::uint64_t>::max()) == "18,446,744,073,709,551,615");
}

}  // namespace test_format
