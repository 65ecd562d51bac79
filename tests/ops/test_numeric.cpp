// Numeric-kernel support: type dispatch, wrapping arithmetic, safe conversions, blocked loops.
#include "ipu/ops/kernels/numeric.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <mutex>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_numeric {

using namespace ipu::detail::math_ops;

TEST_CASE("visit dispatches on the element type and rejects the rest with the supported list") {
  ipu::op_node op;
  op.type = "Demo";
  const ipu::kernel_context ctx{op, {}, {}};
  std::size_t size = 0;
  visit(float_types, ipu::data_type::F64, ctx, [&]<class T>() { size = sizeof(T); });
  CHECK(size == 8);
  visit(int_types, ipu::data_type::U16, ctx, [&]<class T>() { size = sizeof(T) + (std::is_unsigned_v<T> ? 100 : 0); });
  CHECK(size == 102);
  CHECK_THROWS_WITH_AS(visit(float_types, ipu::data_type::S32, ctx, [&]<class T>() {}),
                       doctest::Contains("S32 is not supported (supported: F32, F64, F16)"), ipu::error);
}

TEST_CASE("integer helpers wrap instead of overflowing") {
  CHECK(add<std::int32_t>(std::numeric_limits<std::int32_t>::max(), 1) == std::numeric_limits<std::int32_t>::min());
  CHECK(sub<std::int64_t>(std::numeric_limits<std::int64_t>::min(), 1) == std::numeric_limits<std::int64_t>::max());
  CHECK(mul<std::uint16_t>(65535, 65535) == 1);
  CHECK(mul<std::int8_t>(-128, -1) == -128);
  CHECK(negate<std::int32_t>(std::numeric_limits<std::int32_t>::min()) == std::numeric_limits<std::int32_t>::min());
  CHECK(static_cast<float>(add(ipu::half(1.0f), ipu::half(2.0f))) == 3.0f);
}

TEST_CASE("float_to_int truncates and saturates - NaN becomes 0") {
  CHECK(float_to_int<std::int32_t>(2.9) == 2);
  CHECK(float_to_int<std::int32_t>(-2.9) == -2);
  CHECK(float_to_int<std::int8_t>(1000.0) == 127);
  CHECK(float_to_int<std::int8_t>(-1000.0) == -128);
  CHECK(float_to_int<std::uint8_t>(-5.0) == 0);
  CHECK(float_to_int<std::int64_t>(1e30) == std::numeric_limits<std::int64_t>::max());
  CHECK(float_to_int<std::int64_t>(std::nan("")) == 0);
  CHECK(from_double<ipu::half>(0.1).bits() == ipu::half(0.1f).bits());
}

TEST_CASE("parallel_blocks covers 0 to n in blocks of at least the grain") {
  ipu::op_node op;
  const ipu::kernel_context ctx{op, {}, {}, mk::chunked_for};
  for (std::size_t n : {0u, 1u, 99u, 100u, 101u, 1000u}) {
    std::vector<int> seen(n, 0);
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    parallel_blocks(ctx, n, 100, [&](std::size_t b, std::size_t e) {
      ranges.emplace_back(b, e);
      for (std::size_t i = b; i < e; ++i) ++seen[i];
    });
    for (int s : seen) CHECK(s == 1);
    for (auto [b, e] : ranges) {
      CHECK(b % 100 == 0);
      CHECK((e == n || e % 100 == 0));
    }
  }
}

}  // namespace test_numeric
