#include <doctest/doctest.h>

#include "ipu/device/architecture.hpp"

namespace test_architecture {

namespace {

// A user-defined architecture: a smaller GC200 variant, defined by overriding what differs.
struct half_gc200 : ipu::mk2 {
  static constexpr std::string_view name = "half_gc200";
  static constexpr std::string_view chip = "GC200-half";
  static constexpr std::uint32_t tiles_per_ipu = 736;
};

// A user-defined architecture written from scratch, with a fully connected link topology.
struct scratch_ipu {
  static constexpr std::string_view name = "scratch";
  static constexpr std::string_view chip = "SCR1";
  static constexpr std::string_view ipu_version = "scr1";
  static constexpr std::uint32_t tiles_per_ipu = 8;
  static constexpr std::uint32_t worker_threads_per_tile = 4;
  static constexpr std::uint64_t sram_bytes_per_tile = 4096;
  static constexpr std::uint64_t clock_hz = 1'000'000'000;
  static constexpr std::uint32_t macs_per_cycle_fp32 = 4;
  static constexpr std::uint32_t macs_per_cycle_fp16_16 = 16;
  static constexpr std::uint32_t macs_per_cycle_fp16_32 = 8;
  static constexpr std::uint32_t memory_latency_cycles = 2;
  static constexpr std::uint32_t local_read_bytes_per_cycle = 8;
  static constexpr std::uint32_t local_write_bytes_per_cycle = 4;
  static constexpr std::uint32_t exchange_bytes_per_cycle = 2;
  static constexpr std::uint32_t exchange_setup_cycles = 2;
  static constexpr std::uint32_t ipu_links = 3;
  static constexpr std::uint64_t link_bits_per_second = 8'000'000'000;
  static constexpr double link_efficiency = 1.0;
  static constexpr ipu::link_topology topology = ipu::link_topology::fully_connected;
  static constexpr std::uint32_t ladder_rung_links = 0;
  static constexpr std::uint32_t ladder_cross_links = 0;
  static constexpr std::uint32_t ladder_up_links = 0;
  static constexpr std::uint32_t ladder_down_links = 0;
  static constexpr double host_bytes_per_second = 1e9;
  static constexpr std::uint64_t streaming_memory_bytes = 0;
  static constexpr double streaming_memory_bytes_per_second = 0;
  static constexpr std::uint64_t sync_picoseconds_per_hop = 10'000;
  static constexpr std::uint32_t ipus_per_sync_hop = 2;
};

struct zero_clock : ipu::mk2 {
  static constexpr std::uint64_t clock_hz = 0;
};
struct missing_figures {
  static constexpr std::string_view name = "incomplete";
  static constexpr std::uint32_t tiles_per_ipu = 8;
};

constexpr std::uint64_t kib = 1024, mib = 1024 * 1024;

}  // namespace

static_assert(ipu::architecture<ipu::mk1>);
static_assert(ipu::architecture<ipu::mk2>);
static_assert(ipu::architecture<ipu::bow>);
static_assert(ipu::architecture<half_gc200>);
static_assert(ipu::architecture<scratch_ipu>);
static_assert(!ipu::architecture<zero_clock>, "unusable figures are rejected");
static_assert(!ipu::architecture<missing_figures>);
static_assert(!ipu::architecture<int>);

TEST_CASE("architecture traits hold the spec's figures") {
  CHECK(ipu::mk1::tiles_per_ipu == 1216);
  CHECK(ipu::mk2::tiles_per_ipu == 1472);
  CHECK(ipu::bow::tiles_per_ipu == 1472);
  CHECK(ipu::mk1::sram_bytes_per_tile == 256 * kib);
  CHECK(ipu::mk2::sram_bytes_per_tile == 624 * kib);
  CHECK(ipu::mk1::clock_hz == 1'600'000'000);
  CHECK(ipu::mk2::clock_hz == 1'325'000'000);
  CHECK(ipu::bow::clock_hz == 1'850'000'000);
  CHECK(ipu::mk2::macs_per_cycle_fp16_16 == 64);
  CHECK(ipu::mk2::macs_per_cycle_fp16_32 == 32);
  CHECK(ipu::mk2::macs_per_cycle_fp32 == 16);
  CHECK(ipu::mk1::macs_per_cycle_fp32 == 8);
  CHECK(ipu::mk1::macs_per_cycle_fp16_32 == 32);
  for (const auto& a : ipu::builtin_architectures) {
    CAPTURE(a.name);
    CHECK(a.worker_threads_per_tile == 6);
    CHECK(a.memory_latency_cycles == 6);
    CHECK(a.local_read_bytes_per_cycle == 16);
    CHECK(a.local_write_bytes_per_cycle == 8);
    CHECK(a.exchange_bytes_per_cycle == 4);
    CHECK(a.ipu_links == 10);
    CHECK(a.topology == ipu::link_topology::ladder);
    // The ladder: 4 rung links to the partner, 2 cross, 2 up, 2 down = all 10 links.
    CHECK(a.ladder_rung_links + a.ladder_cross_links + a.ladder_up_links + a.ladder_down_links == a.ipu_links);
    CHECK(ipu::invalid_figure(a).empty());
  }
}

TEST_CASE("SRAM per IPU: 304 MiB on Mk1, ~897 MiB (\"900 MB\") on Mk2 and Bow") {
  constexpr auto mk1 = ipu::describe_architecture<ipu::mk1>();
  constexpr auto mk2 = ipu::describe_architecture<ipu::mk2>();
  static_assert(mk1.sram_bytes_per_ipu() == 304 * mib);
  static_assert(mk2.sram_bytes_per_ipu() == 897 * mib);
  CHECK(ipu::describe_architecture<ipu::bow>().sram_bytes_per_ipu() == 897 * mib);
  // "900 MB" in the datasheet is decimal megabytes, rounded.
  CHECK(static_cast<double>(mk2.sram_bytes_per_ipu()) / 1e6 == doctest::Approx(940.6).epsilon(0.001));
}

TEST_CASE("host link and Streaming Memory rates are derived from the link standards") {
  // PCIe Gen3 x8: 8 GT/s x 8 lanes x 128/130 / 8 bits = 7.877 GB/s ("~7.9 GB/s raw"); TLPs of 256 B
  // payload carry 16 B header + 4 B LCRC + 4 B STP token: x 256 / 280 = 7.2017 GB/s.
  static_assert(ipu::detail::device::pcie_tlp_overhead_bytes == 24);
  static_assert(ipu::detail::device::pcie_tlp_efficiency(256) == 256.0 / 280.0);
  static_assert(ipu::detail::device::pcie_tlp_efficiency(128) == 128.0 / 152.0);
  CHECK(ipu::detail::device::pcie_bytes_per_second(8.0, 8) == doctest::Approx(7.8769e9).epsilon(1e-4));
  CHECK(ipu::mk1::host_bytes_per_second == doctest::Approx(7.2016e9).epsilon(1e-4));
  // IPU-M2000: 2 x 100 GbE at RoCEv2 efficiency 4096 / (4096 + 82) shared by 4 IPUs = 6.127 GB/s
  // each, below PCIe Gen4 x8 (15.75 GB/s raw, 14.40 after TLP overheads).
  static_assert(ipu::detail::device::roce_overhead_bytes == 82);
  CHECK(ipu::detail::device::m2000_machine::gateway_pcie_bytes_per_second == doctest::Approx(15.7538e9).epsilon(1e-4));
  CHECK(ipu::detail::device::pcie_effective_bytes_per_second(16.0, 8) == doctest::Approx(14.4034e9).epsilon(1e-4));
  CHECK(ipu::mk2::host_bytes_per_second == doctest::Approx(25e9 * 4096 / 4178 / 4));
  CHECK(ipu::bow::host_bytes_per_second == ipu::mk2::host_bytes_per_second);
  // 2 x DDR4-2400 (19.2 GB/s each) per machine, shared by 4 IPUs = 9.6 GB/s each.
  CHECK(ipu::detail::device::ddr4_dimm_bytes_per_second(2400) == doctest::Approx(19.2e9));
  CHECK(ipu::mk2::streaming_memory_bytes_per_second == doctest::Approx(9.6e9));
  // 448 GB per IPU-M2000, 256 GB per Bow-2000, 4 IPUs each; none on Mk1.
  CHECK(ipu::mk2::streaming_memory_bytes == 112'000'000'000ull);
  CHECK(ipu::bow::streaming_memory_bytes == 64'000'000'000ull);
  CHECK_FALSE(ipu::describe_architecture<ipu::mk1>().has_streaming_memory());
  CHECK(ipu::describe_architecture<ipu::mk2>().has_streaming_memory());
}

TEST_CASE("a user-defined architecture describes itself like the built-in ones") {
  constexpr auto h = ipu::describe_architecture<half_gc200>();
  static_assert(h.tiles_per_ipu == 736);
  static_assert(h.name == "half_gc200");
  static_assert(h.clock_hz == ipu::mk2::clock_hz, "inherited figures stay");
  static_assert(h.sram_bytes_per_ipu() == 736 * 624 * kib);
  constexpr auto s = ipu::describe_architecture<scratch_ipu>();
  CHECK(s.topology == ipu::link_topology::fully_connected);
  CHECK(s.macs_per_cycle(ipu::precision::fp16_32) == 8);
  CHECK(s.sram_bytes_per_ipu() == 8 * 4096);
}

TEST_CASE("invalid_figure names the first unusable figure") {
  auto a = ipu::describe_architecture<ipu::mk2>();
  CHECK(ipu::invalid_figure(a).empty());
  a.link_efficiency = 1.5;
  CHECK(ipu::invalid_figure(a) == "link_efficiency is not in (0, 1]");
  a = ipu::describe_architecture<ipu::mk2>();
  a.ladder_rung_links = 8;
  CHECK(ipu::invalid_figure(a) == "the ladder uses more links than ipu_links");
  a = ipu::describe_architecture<ipu::mk2>();
  a.tiles_per_ipu = 0;
  CHECK(ipu::invalid_figure(a) == "tiles_per_ipu is 0");
}

TEST_CASE("find_architecture accepts names, chips and targets, ignoring case") {
  CHECK(ipu::find_architecture("mk2")->tiles_per_ipu == 1472);
  CHECK(ipu::find_architecture("GC200")->name == "mk2");
  CHECK(ipu::find_architecture("ipu21")->name == "bow");
  CHECK(ipu::find_architecture("MK1")->chip == "GC2");
  CHECK(ipu::find_architecture("gc2")->name == "mk1");
  CHECK_FALSE(ipu::find_architecture("mk3").has_value());
  CHECK_FALSE(ipu::find_architecture("").has_value());
  static_assert(ipu::find_architecture("bow")->clock_hz == 1'850'000'000);
}

}  // namespace test_architecture
