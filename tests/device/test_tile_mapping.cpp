#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <vector>

#include "ipu/device/tile_mapping.hpp"

namespace test_tile_mapping {

using ipu::amp_partition;
using ipu::amp_problem;

namespace {
std::uint64_t sum_over_tiles(const ipu::linear_tile_mapping& m, std::uint32_t tiles) {
  std::uint64_t s = 0;
  for (std::uint32_t t = 0; t < tiles; ++t) s += m.elements_on_tile(t);
  return s;
}

constexpr bool covers(const amp_problem& p, const amp_partition& parts) {
  // parts x share must cover every dimension, and one part fewer must not (no empty parts).
  const auto w = ipu::tile_share(p, parts);
  const auto pass = ipu::serial_pass(p, parts);
  auto ok = [](std::uint64_t dim, std::uint64_t n, std::uint64_t piece) {
    return n * piece >= dim && (n - 1) * piece < dim;
  };
  return ok(pass.groups, parts.groups, w.groups) && ok(pass.rows, parts.rows, w.rows) &&
         ok(pass.in_channels, parts.in_channels, w.in_channels) &&
         ok(pass.out_channels, parts.out_channels, w.out_channels);
}
}  // namespace

TEST_CASE("linear mapping: whole grains per tile, the remainder on the last tile, sums to the tensor") {
  const auto m = ipu::map_linearly(1000, 16, 4);
  // 250 grains over 16 tiles: 16 grains (64 elements) per tile, 16 tiles used, last holds 40.
  CHECK(m.elements_per_tile == 64);
  CHECK(m.tiles_used == 16);
  CHECK(m.elements_on_tile(0) == 64);
  CHECK(m.elements_on_tile(15) == 1000 - 15 * 64);
  CHECK(m.elements_on_tile(16) == 0);
  CHECK(sum_over_tiles(m, 32) == 1000);
  CHECK(m.max_elements_per_tile() == 64);
  CHECK(m.tile_of(0) == 0);
  CHECK(m.tile_of(63) == 0);
  CHECK(m.tile_of(64) == 1);
  CHECK(m.tile_of(999) == 15);
}

TEST_CASE("linear mapping uses fewer tiles when whole grains run out, or a minimum per tile applies") {
  const auto few = ipu::map_linearly(10, 1472, 4);  // 3 grains
  CHECK(few.tiles_used == 3);
  CHECK(few.elements_on_tile(2) == 2);
  CHECK(sum_over_tiles(few, 1472) == 10);
  const auto min = ipu::map_linearly(1000, 1472, 1, 128);
  CHECK(min.elements_per_tile == 128);
  CHECK(min.tiles_used == 8);
  CHECK(sum_over_tiles(min, 1472) == 1000);
  const auto one = ipu::map_linearly(7, 1);
  CHECK(one.tiles_used == 1);
  CHECK(one.elements_on_tile(0) == 7);
  const auto empty = ipu::map_linearly(0, 4, 2);
  CHECK(empty.tiles_used == 0);
  CHECK(empty.max_elements_per_tile() == 0);
}

TEST_CASE("linear mapping from a first tile, and its intervals") {
  const auto m = ipu::map_linearly(10, 4, 1, 0, 100);  // 3, 3, 3, 1 on tiles 100..103
  CHECK(m.first_tile == 100);
  CHECK(m.end_tile() == 104);
  CHECK(m.elements_on_tile(99) == 0);
  CHECK(m.elements_on_tile(103) == 1);
  const std::vector<ipu::tile_interval> expected{{100, 0, 3}, {101, 3, 6}, {102, 6, 9}, {103, 9, 10}};
  CHECK(m.intervals() == expected);
  CHECK_THROWS_AS((void)ipu::map_linearly(1, 0), ipu::error);
}

TEST_CASE("a linear mapping is computed at compile time") {
  constexpr auto m = ipu::map_linearly(1'000'000, 1472, 4);
  static_assert(m.elements_per_tile == 680);  // ceil(250000 / 1472) = 170 grains
  static_assert(m.tiles_used == 1471);
  static_assert(m.elements_on_tile(1470) == 1'000'000 - 1470 * 680);
}

TEST_CASE("per-tile buffers put the same bytes on each tile") {
  const auto m = ipu::map_per_tile(512, 8, 4);
  CHECK(m.tiles_used == 8);
  for (std::uint32_t t = 4; t < 12; ++t) CHECK(m.elements_on_tile(t) == 512);
  CHECK(m.elements_on_tile(12) == 0);
  CHECK(sum_over_tiles(m, 16) == 8 * 512);
}

TEST_CASE("partitions are balanced to drop empty parts, and the pieces cover the problem") {
  const amp_problem p{1, 10, 64, 48, 1, 10};
  const auto b = ipu::balanced(p, amp_partition{1, 4, 5, 3});
  CHECK(b.rows == 4);          // pieces of 3: 3+3+3+1
  CHECK(b.out_channels == 5);  // 48 / 5 -> pieces of 10: 5 parts
  CHECK(b.in_channels == 3);   // 64 / 3 -> pieces of 22: 3 parts
  CHECK(ipu::balanced(p, amp_partition{1, 8, 1, 1}).rows == 5);  // pieces of 2
  CHECK(ipu::balanced(p, amp_partition{7, 64, 1, 1}).groups == 1);
  CHECK(ipu::balanced(p, amp_partition{7, 64, 1, 1}).rows == 10);
  CHECK(ipu::tile_share(p, b) == amp_problem{1, 3, 22, 10, 1, 3});
  CHECK(covers(p, b));
  static_assert(covers(amp_problem{3, 1000, 17, 100, 9, 2000}, ipu::balanced({3, 1000, 17, 100, 9, 2000}, {2, 64, 8, 4})));
}

TEST_CASE("serial passes cut rows or output channels, then tiles split each pass") {
  const amp_problem p{1, 100, 64, 48, 1, 100};
  const amp_partition rows4{1, 2, 1, 1, false, 4, true};
  CHECK(ipu::serial_pass(p, rows4) == amp_problem{1, 25, 64, 48, 1, 25});
  CHECK(ipu::tile_share(p, rows4) == amp_problem{1, 13, 64, 48, 1, 13});
  const amp_partition out3{1, 1, 2, 1, false, 3, false};
  CHECK(ipu::serial_pass(p, out3) == amp_problem{1, 100, 64, 16, 1, 100});
  CHECK(ipu::tile_share(p, out3).out_channels == 8);
  CHECK(ipu::balanced(p, amp_partition{1, 1, 1, 1, false, 500, true}).serial_passes == 100);
}

TEST_CASE("partition_tile numbers the pieces 0..tiles-1 exactly once, in either order") {
  for (bool rows_inner : {false, true}) {
    const amp_partition parts{2, 3, 4, 5, rows_inner};
    std::set<std::uint64_t> seen;
    for (std::uint64_t g = 0; g < 2; ++g)
      for (std::uint64_t k = 0; k < 5; ++k)
        for (std::uint64_t r = 0; r < 3; ++r)
          for (std::uint64_t n = 0; n < 4; ++n) seen.insert(ipu::partition_tile(parts, {g, r, n, k}));
    CHECK(seen.size() == parts.tiles());
    CHECK(*seen.rbegin() == parts.tiles() - 1);
  }
  // Neighbours share a weight block when rows are innermost, an input block otherwise.
  const amp_partition by_rows{1, 2, 2, 1, true};
  CHECK(ipu::partition_tile(by_rows, {0, 1, 0, 0}) == 1);
  const amp_partition by_out{1, 2, 2, 1, false};
  CHECK(ipu::partition_tile(by_out, {0, 0, 1, 0}) == 1);
}

TEST_CASE("partition candidates: powers of two, then fill the tiles") {
  CHECK(ipu::partition_candidates(1000, 1472) == std::vector<std::uint64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000});
  CHECK(ipu::partition_candidates(5000, 1472).back() == 1472);
  CHECK(ipu::partition_candidates(1, 1472) == std::vector<std::uint64_t>{1});
  CHECK(ipu::partition_candidates(0, 8) == std::vector<std::uint64_t>{1});
  CHECK(ipu::partition_candidates(16, 16) == std::vector<std::uint64_t>{1, 2, 4, 8, 16});
}

}  // namespace test_tile_mapping
