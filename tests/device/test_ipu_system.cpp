#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "ipu/device/ipu_system.hpp"

namespace test_ipu_system {

namespace {
constexpr ipu::ipu_system pod16{};

constexpr bool same_slot(std::optional<ipu::device_slot> s, std::uint32_t id, std::uint32_t first, std::uint32_t n) {
  return s && *s == ipu::device_slot{id, first, n};
}

template <class F>
bool device_error(F f, std::string_view needle) {
  try {
    f();
  } catch (const ipu::error& e) {
    return e.category() == ipu::error_category::device && std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}
}  // namespace

// An IPU-POD16 lists 31 devices: 16 single IPUs, 8 pairs, 4 quads, 2 eights and the whole system.
static_assert(pod16.arch == ipu::describe_architecture<ipu::mk2>());
static_assert(pod16.num_ipus == 16 && pod16.machines() == 4);
static_assert(pod16.device_count() == 16 + 8 + 4 + 2 + 1);
static_assert(pod16.first_device_id(2) == 16 && pod16.first_device_id(4) == 24 && pod16.first_device_id(8) == 28 &&
              pod16.first_device_id(16) == 30);
static_assert(same_slot(pod16.device(0), 0, 0, 1));
static_assert(same_slot(pod16.device(15), 15, 15, 1));
static_assert(same_slot(pod16.device(16), 16, 0, 2));
static_assert(same_slot(pod16.device(23), 23, 14, 2));
static_assert(same_slot(pod16.device(24), 24, 0, 4));
static_assert(same_slot(pod16.device(27), 27, 12, 4));
static_assert(same_slot(pod16.device(29), 29, 8, 8));
static_assert(same_slot(pod16.device(30), 30, 0, 16));
static_assert(!pod16.device(31));
static_assert(same_slot(pod16.device_of_size(4, 2), 26, 8, 4));
static_assert(!pod16.device_of_size(4, 4));
static_assert(!pod16.device_of_size(3, 0), "3 is not a device size");

TEST_CASE("children of a group are the two halves one size down") {
  CHECK(pod16.children(*pod16.device(0)).empty());
  CHECK(pod16.children(*pod16.device(16)) == std::vector<std::uint32_t>{0, 1});
  CHECK(pod16.children(*pod16.device(23)) == std::vector<std::uint32_t>{14, 15});
  CHECK(pod16.children(*pod16.device(24)) == std::vector<std::uint32_t>{16, 17});
  CHECK(pod16.children(*pod16.device(27)) == std::vector<std::uint32_t>{22, 23});
  CHECK(pod16.children(*pod16.device(29)) == std::vector<std::uint32_t>{26, 27});
  CHECK(pod16.children(*pod16.device(30)) == std::vector<std::uint32_t>{28, 29});
  // Every child covers exactly one half of its parent's IPUs.
  for (std::uint32_t id = 16; id < pod16.device_count(); ++id) {
    const auto d = *pod16.device(id);
    const auto c = pod16.children(d);
    REQUIRE(c.size() == 2);
    CHECK(*pod16.device(c[0]) == ipu::device_slot{c[0], d.first_ipu, d.num_ipus / 2});
    CHECK(*pod16.device(c[1]) == ipu::device_slot{c[1], d.first_ipu + d.num_ipus / 2, d.num_ipus / 2});
  }
}

TEST_CASE("systems that are not a power of two expose only aligned groups that fit") {
  constexpr auto six = ipu::make_ipu_system<ipu::mk2>(6);
  static_assert(six.largest_device_ipus() == 4);
  static_assert(six.device_count() == 6 + 3 + 1);
  static_assert(same_slot(six.device(8), 8, 4, 2));
  static_assert(same_slot(six.device(9), 9, 0, 4));
  static_assert(!six.device(10));
  static_assert(six.machines() == 2);
  static_assert(six.machine_of(5) == 1);
  CHECK(six.devices_with(8).empty());
  CHECK(six.devices_with(2).size() == 3);
}

TEST_CASE("a device has at most 64 IPUs however big the system") {
  constexpr auto pod128 = ipu::make_ipu_system<ipu::bow>(128);
  static_assert(pod128.largest_device_ipus() == 64);
  static_assert(pod128.device_count() == 128 + 64 + 32 + 16 + 8 + 4 + 2);
  static_assert(same_slot(pod128.device(pod128.device_count() - 1), pod128.device_count() - 1, 64, 64));
  CHECK(pod128.devices_of_size(128) == 0);
}

TEST_CASE("Mk1 systems are C2 cards of 2 IPUs") {
  constexpr auto s = ipu::make_ipu_system<ipu::mk1>(8);
  static_assert(s.ipus_per_machine == 2 && s.machines() == 4);
  static_assert(ipu::make_ipu_system<ipu::mk1>(8, 4).ipus_per_machine == 4, "an explicit machine size wins");
}

TEST_CASE("parse_ipu_system reads arch and IPU count") {
  static_assert(ipu::parse_ipu_system("mk2:16") == pod16);
  static_assert(ipu::parse_ipu_system("mk2") == pod16, "16 IPUs when the count is omitted");
  static_assert(ipu::parse_ipu_system("GC200:4").num_ipus == 4);
  static_assert(ipu::parse_ipu_system("ipu21:64").arch.name == "bow");
  static_assert(ipu::parse_ipu_system("Mk1:2").arch.name == "mk1");
  CHECK(device_error([] { (void)ipu::parse_ipu_system("mk9:4"); }, "unknown architecture 'mk9'"));
  CHECK(device_error([] { (void)ipu::parse_ipu_system("mk2:"); }, "is not a number of IPUs"));
  CHECK(device_error([] { (void)ipu::parse_ipu_system("mk2:x4"); }, "'x4' is not a number of IPUs"));
  CHECK(device_error([] { (void)ipu::parse_ipu_system("mk2:0"); }, "not 0"));
  CHECK(device_error([] { (void)ipu::parse_ipu_system("mk2:2048"); }, "not 2048"));
  // The error says where the text came from and what the format is.
  CHECK(device_error([] { (void)ipu::parse_ipu_system("nope", "--system"); }, "--system='nope'"));
  CHECK(device_error([] { (void)ipu::parse_ipu_system("nope"); }, "<arch>[:<ipus>]"));
  CHECK(device_error([] { (void)ipu::make_ipu_system<ipu::mk2>(0); }, "IPU_SYSTEM=mk2:16"));
}

TEST_CASE("IPU_SYSTEM chooses the system and defaults to an IPU-POD16 of Mk2") {
  ::unsetenv("IPU_SYSTEM");
  CHECK(ipu::ipu_system_from_environment() == pod16);
  ::setenv("IPU_SYSTEM", "bow:8", 1);
  const auto s = ipu::ipu_system_from_environment();
  CHECK(s.arch.name == "bow");
  CHECK(s.num_ipus == 8);
  ::setenv("IPU_SYSTEM", "", 1);
  CHECK(ipu::ipu_system_from_environment() == pod16);
  ::setenv("IPU_SYSTEM", "mk3:8", 1);
  CHECK(device_error([] { (void)ipu::ipu_system_from_environment(); }, "IPU_SYSTEM='mk3:8'"));
  ::unsetenv("IPU_SYSTEM");
}

TEST_CASE("to_string of a system") {
  CHECK(ipu::to_string(pod16) == "16 x mk2 (GC200) in 4 machines");
  CHECK(ipu::to_string(ipu::make_ipu_system<ipu::mk1>(2)) == "2 x mk1 (GC2) in 1 machine");
}

}  // namespace test_ipu_system
