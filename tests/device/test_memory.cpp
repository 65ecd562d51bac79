#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/device/memory.hpp"

namespace test_memory {

using ipu::data_type;
using ipu::memory_allocation;
using ipu::memory_kind;

namespace {
constexpr auto mk2_1 = ipu::ipu_model<ipu::mk2, 1>::description();

// One oversized embedding on tile 0, an activation on tiles 0-1, weights and exchange buffers on all.
std::vector<memory_allocation> crowded_tile_zero() {
  return {
      ipu::tensor_allocation("embedding", memory_kind::variable, data_type::F32, 0, ipu::map_linearly(200'000, 1)),
      ipu::tensor_allocation("x", memory_kind::activation, data_type::F32, 0, ipu::map_linearly(60'000, 2)),
      ipu::tensor_allocation("w2", memory_kind::variable, data_type::F16, 0, ipu::map_linearly(1'000'000, 1472)),
      ipu::per_tile_allocation("matmul/exchange", memory_kind::exchange_buffer, 0, 0, 1472, 4096),
  };
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct tiny_ipu : ipu::mk2 {
  static constexpr std::string_view name = "tiny";
  static constexpr std::uint32_t tiles_per_ipu = 4;
  static constexpr std::uint64_t sram_bytes_per_tile = 1024;
};

constexpr ipu::memory_report tiny_report(std::uint64_t elements) {
  const std::vector<memory_allocation> a{
      ipu::tensor_allocation("big", memory_kind::variable, data_type::F16, 0, ipu::map_linearly(elements, 4)),
      ipu::per_tile_allocation("code", memory_kind::code, 0, 0, 4, 100)};
  return ipu::check_memory(ipu::ipu_model<tiny_ipu>::description(), a);
}

constexpr std::string tiny_error() {
  const std::vector<memory_allocation> a{
      ipu::tensor_allocation("lookup", memory_kind::constant, data_type::F16, 0, ipu::map_linearly(600, 1, 1, 0, 2))};
  const auto d = ipu::ipu_model<tiny_ipu>::description();
  return ipu::describe_out_of_memory(d, a, ipu::check_memory(d, a)).message;
}
}  // namespace

TEST_CASE("tile usage adds every allocation's bytes on each tile, by kind") {
  const auto a = crowded_tile_zero();
  const auto tiles = ipu::tile_usage(mk2_1, a, 0);
  REQUIRE(tiles.size() == 1472);
  CHECK(tiles[0].bytes(memory_kind::variable) == 800'000 + 680 * 2);
  CHECK(tiles[0].bytes(memory_kind::activation) == 120'000);
  CHECK(tiles[0].bytes(memory_kind::exchange_buffer) == 4096);
  CHECK(tiles[0].total() == 925'456);
  CHECK(tiles[1].total() == 120'000 + 1360 + 4096);
  CHECK(tiles[1471].total() == 4096);  // w2 fits on 1471 tiles: 680 elements each
  std::uint64_t sum = 0, expected = 0;
  for (const auto& t : tiles) sum += t.total();
  for (const auto& x : a) expected += x.bytes();
  CHECK(sum == expected);
  CHECK(ipu::tile_usage(mk2_1, a, 0)[5].tile == 5);
}

TEST_CASE("check_memory: fits, tile by tile") {
  const std::vector<memory_allocation> ok{
      ipu::tensor_allocation("w", memory_kind::variable, data_type::F32, 0, ipu::map_linearly(100'000'000, 1472))};
  const auto r = ipu::check_memory(mk2_1, ok);  // 400 MB spread: 271740 B per tile
  CHECK(r.fits());
  REQUIRE(r.ipus.size() == 1);
  CHECK(r.ipus[0].total_bytes == 400'000'000);
  CHECK(r.ipus[0].worst_tiles.size() == 5);
  CHECK(r.ipus[0].worst_tiles[0].total() == 67'935 * 4);
  const auto crowded = ipu::check_memory(mk2_1, crowded_tile_zero());
  CHECK_FALSE(crowded.fits());
  CHECK(crowded.ipus[0].tiles_over_capacity == 1);
  CHECK(crowded.ipus[0].worst_tiles[0].tile == 0);
  CHECK(crowded.ipus[0].worst_tiles[1].tile == 1);
}

TEST_CASE("the out-of-memory error names the IPU, the fullest tiles, the largest tensors and what helps") {
  const auto a = crowded_tile_zero();
  try {
    ipu::require_memory_fits(mk2_1, a);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::memory);
    CHECK(e.location() == "IPU 0 of 1 x mk2 (GC200)");
    CHECK(e.message() ==
          "out of memory: 1 of 1472 tiles need more than the 638976 B (624.0 KiB) of a tile; the IPU holds "
          "9069312 B (8.6 MiB) of its 940572672 B (897.0 MiB). Fullest tiles: tile 0: 925456 B (903.8 KiB) "
          "(variable 801360, activation 120000, exchange buffer 4096), largest: 'embedding' 800000 B (variable F32), "
          "'x' 120000 B (activation F32), 'matmul/exchange' 4096 B (exchange buffer)");
    const auto& h = e.hint();
    CHECK(contains(h, "unevenly used: spread the largest tensors over more tiles"));
    CHECK(contains(h, "more IPUs"));
    CHECK(contains(h, "pipelining"));
    CHECK(contains(h, "phased execution"));
    CHECK(contains(h, "lower precision"));
    CHECK(contains(h, "a smaller batch (activations are 12% of the fullest tile)"));
  }
}

TEST_CASE("an IPU holding more than its memory: how many IPUs the model needs") {
  const auto pair = ipu::ipu_model<ipu::mk1, 2>::description();
  const std::vector<memory_allocation> a{
      ipu::tensor_allocation("weights", memory_kind::variable, data_type::F32, 1, ipu::map_linearly(100'000'000, 1216)),
      ipu::tensor_allocation("small", memory_kind::variable, data_type::F16, 0, ipu::map_linearly(1000, 4))};
  try {
    ipu::require_memory_fits(pair, a);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.location() == "IPU 1 of 2 x mk1 (GC2)");
    CHECK(contains(e.message(), "out of memory: 1216 of 1216 tiles need more than the 262144 B (256.0 KiB) of a tile"));
    CHECK(contains(e.message(), "of its 318767104 B (304.0 MiB)"));
    CHECK(contains(e.message(), "Fullest tiles: tile 0: 328948 B (321.2 KiB) (variable 328948), largest: 'weights' 328948 B"));
    CHECK(contains(e.message(), "; tile 4: 328948 B"));  // five tiles named, in tile order on ties
    CHECK_FALSE(contains(e.message(), "; tile 5:"));
    CHECK(contains(e.hint(), "this IPU's data is 125% of an IPU's memory, so a model loading every IPU alike needs at least 4 IPUs"));
    CHECK(contains(e.hint(), "lower precision"));
    CHECK_FALSE(contains(e.hint(), "phased execution"));  // Mk1 has no Streaming Memory
    CHECK_FALSE(contains(e.hint(), "smaller batch"));     // no activations there
  }
}

TEST_CASE("other IPUs that do not fit are mentioned") {
  const auto quad = ipu::ipu_model<ipu::mk2, 4>::description();
  std::vector<memory_allocation> a;
  for (std::uint32_t ipu : {1u, 2u, 3u})
    a.push_back(ipu::per_tile_allocation("blob" + std::string(1, static_cast<char>('0' + ipu)), memory_kind::constant, ipu,
                                         7, 1, 700'000));
  const auto r = ipu::check_memory(quad, a);
  CHECK(r.ipus[0].fits());
  const auto details = ipu::describe_out_of_memory(quad, a, r);
  CHECK(details.location == "IPU 1 of 4 x mk2 (GC200)");
  CHECK(contains(details.message, "tile 7: 700000 B (683.6 KiB) (constant 700000), largest: 'blob1' 700000 B (constant)"));
  CHECK(contains(details.message, ". IPUs 2, 3 also do not fit"));
}

TEST_CASE("temporaries are bounded by the available memory proportion") {
  const std::vector<memory_allocation> a{
      ipu::per_tile_allocation("conv/partials", memory_kind::temporary, 0, 0, 10, 400'000),
      ipu::tensor_allocation("act", memory_kind::activation, data_type::F16, 0, ipu::map_linearly(1000, 1472))};
  const auto r = ipu::check_memory(mk2_1, a);
  CHECK(r.ipus[0].tiles_over_capacity == 0);
  CHECK(r.ipus[0].tiles_over_temporary_budget == 10);
  CHECK(r.ipus[0].temporary_budget == 383385);  // 0.6 x 638976
  CHECK_FALSE(r.fits());
  try {
    ipu::require_memory_fits(mk2_1, a);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::memory);
    CHECK(contains(e.message(), "out of temporary memory: 10 of 1472 tiles need more temporary memory than the 383385 B "
                                "(374.4 KiB) the available memory proportion (0.60) leaves per tile"));
    CHECK(contains(e.message(), "'conv/partials' 400000 B (temporary)"));
    CHECK(contains(e.hint(), "set_available_memory"));
    CHECK(contains(e.hint(), "serializedMatMul"));
  }
  CHECK(ipu::check_memory(mk2_1, a, {0.7}).fits());
  CHECK_NOTHROW(ipu::require_memory_fits(mk2_1, a, {0.7}));
  try {
    (void)ipu::check_memory(mk2_1, a, {0.0});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::options);
    CHECK(e.message() == "available memory proportion 0.000 is not in (0, 1]");
    CHECK(e.location() == "memory check");
  }
}

TEST_CASE("the host device has no tile limits") {
  const auto cpu = ipu::cpu_device_description();
  const std::vector<memory_allocation> a{
      ipu::tensor_allocation("huge", memory_kind::variable, data_type::F32, 0, ipu::map_linearly(1ull << 32, 1))};
  CHECK(ipu::check_memory(cpu, a).fits());
  CHECK(ipu::check_memory(cpu, a).ipus.empty());
  CHECK_NOTHROW(ipu::require_memory_fits(cpu, a));
}

TEST_CASE("allocations outside the device are usage errors") {
  std::vector<memory_allocation> a{
      ipu::tensor_allocation("w", memory_kind::variable, data_type::F32, 2, ipu::map_linearly(10, 1))};
  try {
    (void)ipu::check_memory(mk2_1, a);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    CHECK(e.message() == "'w' is placed on IPU 2 of a 1-IPU device");
  }
  a[0].ipu = 0;
  a[0].mapping = ipu::map_linearly(10, 5, 1, 0, 1470);
  try {
    (void)ipu::check_memory(mk2_1, a);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.message() == "'w' is mapped up to tile 1474 but an IPU has 1472 tiles");
  }
}

TEST_CASE("vertex state: a lower bound on per-tile code, one 32-bit address per operand per worker") {
  CHECK(ipu::vertex_state_bytes(mk2_1.arch, 3) == 6 * 3 * 4);
}

TEST_CASE("memory accounting and the out-of-memory message at compile time") {
  static_assert(tiny_report(1600).fits());  // 800 B of F16 + 100 B code per tile
  static_assert(!tiny_report(2000).fits());
  static_assert(tiny_report(2000).ipus[0].tiles_over_capacity == 4);
  static_assert(tiny_error().find("tile 2: 1200 B (1.2 KiB) (constant 1200), largest: 'lookup' 1200 B (constant F16)") !=
                std::string::npos);
  CHECK(tiny_error().starts_with("out of memory: 1 of 4 tiles"));
}

}  // namespace test_memory
