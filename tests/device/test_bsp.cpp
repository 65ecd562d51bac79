#include <doctest/doctest.h>

#include <array>
#include <vector>

#include "ipu/device/bsp.hpp"

namespace test_bsp {

namespace {
constexpr auto mk1 = ipu::describe_architecture<ipu::mk1>();
constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
constexpr auto bow = ipu::describe_architecture<ipu::bow>();
}  // namespace

TEST_CASE("exchange cycles = ceil(max bytes per tile / 4) + setup") {
  static_assert(mk2.exchange_setup_cycles == 6);
  CHECK(ipu::exchange_cycles(mk2, 0) == 0);  // no exchange phase at all
  CHECK(ipu::exchange_cycles(mk2, 1) == 1 + 6);
  CHECK(ipu::exchange_cycles(mk2, 4) == 1 + 6);
  CHECK(ipu::exchange_cycles(mk2, 5) == 2 + 6);
  CHECK(ipu::exchange_cycles(mk2, 4096) == 1024 + 6);
  // The slowest tile sets the phase.
  const std::vector<std::uint64_t> per_tile{100, 4000, 17, 0};
  CHECK(ipu::exchange_cycles(mk2, per_tile) == 1000 + 6);
  // 4 B/cycle/tile over all 1472 tiles at 1.325 GHz = 7.8 TB/s of on-chip exchange.
  const double aggregate = 1472.0 * mk2.exchange_bytes_per_cycle * static_cast<double>(mk2.clock_hz);
  CHECK(aggregate / 1e12 == doctest::Approx(7.8016));
}

TEST_CASE("sync cycles = ceil(15 ns x clock x hops x 2), hops = 1 + numIPUs / 4") {
  CHECK(ipu::sync_hops(mk2, 1) == 1);
  CHECK(ipu::sync_hops(mk2, 2) == 1);
  CHECK(ipu::sync_hops(mk2, 4) == 2);
  CHECK(ipu::sync_hops(mk2, 16) == 5);
  CHECK(ipu::sync_hops(mk2, 64) == 17);
  CHECK(ipu::sync_cycles(mk2, 1) == 40);    // 39.75
  CHECK(ipu::sync_cycles(mk2, 4) == 80);    // 79.5
  CHECK(ipu::sync_cycles(mk2, 16) == 199);  // 198.75
  CHECK(ipu::sync_cycles(mk2, 64) == 676);  // 675.75
  CHECK(ipu::sync_cycles(mk1, 1) == 48);    // exactly 48: no rounding up on floating-point noise
  CHECK(ipu::sync_cycles(mk1, 4) == 96);
  CHECK(ipu::sync_cycles(bow, 1) == 56);    // 55.5
  CHECK(ipu::sync_cycles(bow, 4) == 111);   // exactly 111
  static_assert(ipu::sync_cycles(ipu::ipu_model<ipu::mk2, 16>::description()) == 199);
}

TEST_CASE("a BSP superstep: slowest tile's compute + sync + exchange") {
  const std::array<std::uint64_t, 4> compute{500, 1200, 800, 0};
  CHECK(ipu::superstep_cycles(compute, 40, 1006) == 1200 + 40 + 1006);
  CHECK(ipu::superstep_cycles({}, 40, 0) == 40);

  constexpr auto d = ipu::ipu_model<ipu::mk2, 4>::description();
  const std::array<std::uint64_t, 3> bytes{64, 4, 400};
  const auto s = ipu::make_superstep(d, compute, bytes);
  CHECK(s.compute_cycles == 1200);
  CHECK(s.sync_cycles == 80);
  CHECK(s.exchange_cycles == 100 + 6);
  CHECK(s.total() == 1200 + 80 + 106);
}

}  // namespace test_bsp
