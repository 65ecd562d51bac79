#include <doctest/doctest.h>

#include <string>

#include "ipu/device/transfer.hpp"

namespace test_transfer {

namespace {
constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
constexpr auto m2000 = ipu::ipu_model<ipu::mk2, 4>::description();
constexpr auto pod16 = ipu::ipu_model<ipu::mk2, 16>::description();

struct meshed : ipu::mk2 {
  static constexpr std::string_view name = "meshed";
  static constexpr ipu::link_topology topology = ipu::link_topology::fully_connected;
};
}  // namespace

TEST_CASE("an IPU-Link carries 128 Gibit/s per direction, 85% of it in a copy") {
  CHECK(ipu::raw_link_bytes_per_second(mk2) == doctest::Approx(128.0 * (1ull << 30) / 8));  // 17.18 GB/s
  CHECK(ipu::link_bytes_per_second(mk2) == doctest::Approx(0.85 * 17179869184.0));        // 14.60 GB/s
  // The datasheet's "320 GB/s" per IPU is 10 links x 2 directions x 16 GB/s, i.e. 128 Gbit/s decimal;
  // the poplibs parameter is binary (Gibit): 2^30 / 10^9 = 7.4% more.
  const double aggregate = 10 * 2 * ipu::raw_link_bytes_per_second(mk2);
  CHECK(aggregate / 320e9 == doctest::Approx(1.073741824));
}

TEST_CASE("ladder routes: 4 links to the partner, 2 up/down, 2 cross, routed beyond") {
  using ipu::link_route;
  CHECK(ipu::ipu_link_route(m2000, 0, 0) == link_route{0, 0});
  CHECK(ipu::ipu_link_route(m2000, 0, 1) == link_route{4, 1});  // partner on the rung
  CHECK(ipu::ipu_link_route(m2000, 3, 2) == link_route{4, 1});
  CHECK(ipu::ipu_link_route(m2000, 0, 2) == link_route{2, 1});  // up, same side
  CHECK(ipu::ipu_link_route(m2000, 3, 1) == link_route{2, 1});  // down
  CHECK(ipu::ipu_link_route(m2000, 0, 3) == link_route{2, 1});  // cross, the diagonal in the machine
  CHECK(ipu::ipu_link_route(m2000, 1, 2) == link_route{2, 1});
  // Next machine: IPU 2 (rung 1) and IPU 5 (rung 2) are diagonal but rungs 1 and 2 are not siblings,
  // so the copy goes up one rung and across it.
  CHECK(ipu::ipu_link_route(pod16, 2, 5) == link_route{2, 2});
  CHECK(ipu::ipu_link_route(pod16, 0, 14) == link_route{2, 7});
  CHECK(ipu::ipu_link_route(pod16, 0, 15) == link_route{2, 8});
}

TEST_CASE("IPU-Link copy time = bytes / (links x 14.6 GB/s)") {
  const double per_link = 0.85 * 128.0 * (1ull << 30) / 8;
  const std::uint64_t bytes = 100'000'000;
  CHECK(ipu::ipu_link_copy_seconds(m2000, 0, 1, bytes) == doctest::Approx(bytes / (4 * per_link)));
  CHECK(ipu::ipu_link_copy_seconds(m2000, 0, 2, bytes) == doctest::Approx(bytes / (2 * per_link)));
  CHECK(ipu::ipu_link_copy_seconds(m2000, 2, 2, bytes) == 0);
  // 1 MB to the partner: 1e6 / 58.41 GB/s = 17.12 us = 22683.9 -> 22684 cycles at 1.325 GHz.
  CHECK(ipu::ipu_link_copy_cycles(m2000, 0, 1, 1'000'000) == 22684);
}

TEST_CASE("a fully connected user topology splits the links evenly") {
  constexpr auto d = ipu::ipu_model<meshed, 4>::description();
  CHECK(ipu::ipu_link_route(d, 0, 3) == ipu::link_route{3, 1});  // 10 links / 3 peers
  CHECK(ipu::ipu_link_route(ipu::ipu_model<meshed, 16>::description(), 0, 9) == ipu::link_route{1, 1});
}

TEST_CASE("copies name the IPU that does not exist, or the device without links") {
  try {
    (void)ipu::ipu_link_route(m2000, 1, 4);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    CHECK(e.message() == "IPU 4 does not exist on a 4-IPU device");
    CHECK(e.location() == "IPU-Link copy 1 -> 4");
  }
  CHECK_THROWS_AS((void)ipu::ipu_link_route(ipu::cpu_device_description(2), 0, 1), ipu::error);
}

TEST_CASE("host streams and Streaming Memory, per IPU") {
  const auto mk1 = ipu::describe_architecture<ipu::mk1>();
  CHECK(ipu::host_transfer_seconds(mk2, 6'127'333'652) == doctest::Approx(1.0));
  CHECK(ipu::host_transfer_seconds(mk1, 1'000'000) == doctest::Approx(1e6 / (8e9 * 128 / 130 * 256 / 280)));
  // Minimum: one sync (Mk1 48 cycles at 1.6 GHz = 30 ns) + 256 B at 7.2017 GB/s (35.5 ns).
  CHECK(ipu::host_transfer_min_seconds(mk1) == doctest::Approx(30e-9 + 256 / (8e9 * 128 / 130 * 256 / 280)));
  CHECK(ipu::streaming_memory_seconds(mk2, 9'600'000'000) == doctest::Approx(1.0));
  // Host -> IPU: the IPU reads, and the data comes back in completions of one 64-byte RCB each with
  // a 12-byte header, LCRC and STP token (20 B): Mk1 7.877 GB/s x 64 / 84.
  static_assert(ipu::detail::device::pcie_read_efficiency == 64.0 / 84.0);
  CHECK(ipu::host_read_bytes_per_second(mk1) == doctest::Approx(8e9 * 128 / 130 * 64 / 84));
  CHECK(ipu::host_read_seconds(mk1, 1'000'000) == doctest::Approx(1e6 / (8e9 * 128 / 130 * 64 / 84)));
  CHECK(ipu::host_read_min_seconds(mk1) == doctest::Approx(30e-9 + (24 + 256) / (8e9 * 128 / 130 * 64 / 84)));
  // Mk2: the gateway's Gen4 x8 carries completions at 15.75 x 64 / 84 = 12.0 GB/s, more than the
  // quarter of 2 x 100 GbE each IPU gets, so reads run at the Ethernet share as writes do.
  CHECK(ipu::host_read_bytes_per_second(mk2) == mk2.host_bytes_per_second);
  // An architecture without a read figure streams both ways at its one host rate.
  auto custom = mk1;
  custom.host_read_bytes_per_second = 0;
  CHECK(ipu::host_read_bytes_per_second(custom) == custom.host_bytes_per_second);
  try {
    (void)ipu::streaming_memory_seconds(mk1, 1);
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    CHECK(e.message() == "architecture 'mk1' has no Streaming Memory");
    CHECK(e.hint().find("mk2") != std::string::npos);
  }
}

}  // namespace test_transfer
