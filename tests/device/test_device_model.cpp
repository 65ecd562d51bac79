#include <doctest/doctest.h>

#include <string>

#include "ipu/device/device_model.hpp"

namespace test_device_model {

namespace {
struct small_ipu : ipu::mk2 {
  static constexpr std::string_view name = "small";
  static constexpr std::uint32_t tiles_per_ipu = 16;
};

// Something written against the concept: works for any compile-time device.
template <ipu::device_model D>
constexpr std::uint64_t memory_of() {
  return D::description().total_sram_bytes();
}
}  // namespace

static_assert(ipu::device_model<ipu::ipu_model<ipu::mk2, 4>>);
static_assert(ipu::device_model<ipu::ipu_model<small_ipu>>);
static_assert(ipu::device_model<ipu::cpu_device_model>);
static_assert(!ipu::device_model<ipu::mk2>, "an architecture alone is not a device");
static_assert(!ipu::device_model<int>);

TEST_CASE("valid_ipu_count: a power of two from 1 to 64") {
  for (std::uint64_t n : {1, 2, 4, 8, 16, 32, 64}) CHECK(ipu::valid_ipu_count(n));
  for (std::uint64_t n : {0, 3, 5, 6, 12, 48, 128}) CHECK_FALSE(ipu::valid_ipu_count(n));
}

TEST_CASE("ipu_model exposes its architecture and totals") {
  using pod16 = ipu::ipu_model<ipu::mk2, 16>;
  static_assert(std::is_same_v<pod16::arch_type, ipu::mk2>);
  static_assert(pod16::num_ipus == 16);
  static_assert(pod16::total_tiles == 16 * 1472);
  static_assert(pod16::total_sram_bytes == 16ull * 897 * 1024 * 1024);
  constexpr auto d = ipu::describe_device<pod16>();
  static_assert(d.kind == ipu::device_kind::ipu);
  static_assert(d.num_ipus == 16);
  static_assert(d.arch == ipu::describe_architecture<ipu::mk2>());
  static_assert(d.has_tile_limits());
  static_assert(d.total_tiles() == pod16::total_tiles);
  CHECK(ipu::to_string(d) == "16 x mk2 (GC200)");
  CHECK(memory_of<ipu::ipu_model<small_ipu, 2>>() == 2 * 16 * 624 * 1024);
  static_assert(ipu::ipu_model<ipu::mk1>::num_ipus == 1, "one IPU by default");
}

TEST_CASE("cpu_device_model has no tiles and no tile limits") {
  constexpr auto d = ipu::describe_device<ipu::cpu_device_model>();
  static_assert(d.kind == ipu::device_kind::cpu);
  static_assert(!d.has_tile_limits());
  static_assert(d.total_tiles() == 0);
  static_assert(d.total_sram_bytes() == 0);
  CHECK(ipu::to_string(d) == "cpu");
  CHECK(memory_of<ipu::cpu_device_model>() == 0);
}

TEST_CASE("device_from_name: the run-time choice equals the compile-time description") {
  CHECK(ipu::device_from_name("mk2", 4) == ipu::describe_device<ipu::ipu_model<ipu::mk2, 4>>());
  CHECK(ipu::device_from_name("GC2") == ipu::describe_device<ipu::ipu_model<ipu::mk1>>());
  CHECK(ipu::device_from_name("bow", 64) == ipu::describe_device<ipu::ipu_model<ipu::bow, 64>>());
  CHECK(ipu::device_from_name("cpu") == ipu::describe_device<ipu::cpu_device_model>());
  CHECK(ipu::device_from_name("cpu", 4).num_ipus == 4);
  static_assert(ipu::device_from_name("ipu2", 2).total_tiles() == 2944);
}

TEST_CASE("device_from_name rejects unknown names and IPU counts, saying what is accepted") {
  try {
    (void)ipu::device_from_name("mk3");
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    CHECK(e.message() == "unknown device 'mk3'");
    CHECK(e.hint().find("mk1, mk2, bow, cpu") != std::string::npos);
  }
  try {
    (void)ipu::device_from_name("mk2", 3);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    CHECK(e.message() == "3 IPUs requested; a device has a power of two from 1 to 64 IPUs");
    CHECK(e.location() == "device mk2");
    CHECK(e.hint().find("autoRoundNumIPUs") != std::string::npos);
  }
  CHECK_THROWS_AS((void)ipu::device_from_name("bow", 128), ipu::error);
  CHECK_THROWS_AS((void)ipu::device_from_name("cpu", 0), ipu::error);
}

TEST_CASE("make_device_description validates a run-time architecture") {
  auto a = ipu::describe_architecture<ipu::mk2>();
  a.name = "broken";
  a.exchange_bytes_per_cycle = 0;
  try {
    (void)ipu::make_device_description(a, 2);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    CHECK(e.message() == "architecture figure exchange_bytes_per_cycle is 0");
    CHECK(e.location() == "architecture 'broken'");
  }
  a.exchange_bytes_per_cycle = 8;
  const auto d = ipu::make_device_description(a, 2);
  CHECK(d.arch.exchange_bytes_per_cycle == 8);
  CHECK(d.num_ipus == 2);
}

}  // namespace test_device_model
