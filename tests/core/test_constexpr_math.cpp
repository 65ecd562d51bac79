#include "ipu/constexpr_math.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

namespace test_constexpr_math {

static_assert(ipu::ceil_div(7, 2) == 4);
static_assert(ipu::ceil_to_u64(2.000001) == 3);

TEST_CASE("ceil_div rounds up and treats a zero divisor as zero") {
  CHECK(ipu::ceil_div(0, 5) == 0);
  CHECK(ipu::ceil_div(10, 5) == 2);
  CHECK(ipu::ceil_div(11, 5) == 3);
  CHECK(ipu::ceil_div(11, 0) == 0);
}

TEST_CASE("ceil_to_u64 rounds up and saturates") {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  CHECK(ipu::ceil_to_u64(-1.0) == 0);
  CHECK(ipu::ceil_to_u64(0.0) == 0);
  CHECK(ipu::ceil_to_u64(3.0) == 3);
  CHECK(ipu::ceil_to_u64(3.5) == 4);
  CHECK(ipu::ceil_to_u64(1e30) == max);
  CHECK(ipu::ceil_to_u64(std::numeric_limits<double>::quiet_NaN()) == 0);
}

TEST_CASE("mul_sat saturates instead of wrapping around") {
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  CHECK(ipu::mul_sat(0, max) == 0);
  CHECK(ipu::mul_sat(3, 7) == 21);
  CHECK(ipu::mul_sat(std::uint64_t{1} << 32, std::uint64_t{1} << 32) == max);
  CHECK(ipu::is_power_of_two(64));
  CHECK_FALSE(ipu::is_power_of_two(0));
  CHECK_FALSE(ipu::is_power_of_two(96));
}

}  // namespace test_constexpr_math
