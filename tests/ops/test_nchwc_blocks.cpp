// The channel blocks the blocked ops take, and channel counts rounded up to them: hand-computed
// cases, the overflow edge, and the same answers inside a constant expression.
#include "ipu/ops/nchwc_blocks.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <initializer_list>
#include <limits>

namespace test_nchwc_blocks {

constexpr std::int64_t int64_max = std::numeric_limits<std::int64_t>::max();

static_assert(ipu::is_nchwc_block(8) && ipu::is_nchwc_block(16) && !ipu::is_nchwc_block(12));
static_assert(ipu::nchwc_padded_channels(24, 16) == 32);

TEST_CASE("blocks of 8 and 16 channels, and nothing else") {
  for (const std::int64_t b : {-16, -8, 0, 1, 4, 7, 9, 12, 15, 17, 32, 64}) {
    CAPTURE(b);
    CHECK_FALSE(ipu::is_nchwc_block(b));
  }
  CHECK(ipu::is_nchwc_block(8));
  CHECK(ipu::is_nchwc_block(16));
  CHECK(ipu::nchwc_max_block == 16);
}

TEST_CASE("channels round up to whole blocks; -1 where that would overflow") {
  CHECK(ipu::nchwc_padded_channels(1, 8) == 8);
  CHECK(ipu::nchwc_padded_channels(3, 16) == 16);
  CHECK(ipu::nchwc_padded_channels(8, 8) == 8);
  CHECK(ipu::nchwc_padded_channels(9, 8) == 16);
  CHECK(ipu::nchwc_padded_channels(24, 8) == 24);
  CHECK(ipu::nchwc_padded_channels(24, 16) == 32);
  CHECK(ipu::nchwc_padded_channels(1000, 16) == 1008);
  // 2^63 - 16 and 2^63 - 8 are whole blocks, the largest counts that round without overflow; one
  // more channel would round up past 2^63 - 1.
  CHECK(ipu::nchwc_padded_channels(int64_max - 15, 16) == int64_max - 15);
  CHECK(ipu::nchwc_padded_channels(int64_max - 14, 16) == -1);
  CHECK(ipu::nchwc_padded_channels(int64_max - 7, 8) == int64_max - 7);
  CHECK(ipu::nchwc_padded_channels(int64_max - 6, 8) == -1);
  CHECK(ipu::nchwc_padded_channels(int64_max, 8) == -1);
}

}  // namespace test_nchwc_blocks
