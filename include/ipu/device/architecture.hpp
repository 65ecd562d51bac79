#pragma once
// IPU architectures: compile-time traits (ipu::mk1, ipu::mk2, ipu::bow), the `architecture` concept a
// user satisfies to describe another chip, and `architecture_description`, the same figures as plain
// run-time data (for an architecture chosen by a command-line flag).
//
// Every figure comes from docs/ipu-spec (Graphcore datasheets, the IPU programmer's guide and the
// model parameters of the public poplibs source); figures the spec does not state are derived from
// ones it does, and each derivation is written next to the value. Nothing here is fitted to measured
// benchmarks: those are kept aside to validate the cost model.
#include <concepts>
#include <cstdint>
#include <optional>
#include <string_view>
#include <type_traits>

#include "ipu/device/precision.hpp"

namespace ipu {

/// How the IPU-Links of a multi-IPU system are wired.
enum class link_topology : std::uint8_t {
  /// IPU-M2000 / C2: IPUs 2r and 2r+1 form rung r; each IPU has `ladder_rung_links` to its partner on
  /// the rung, `ladder_up_links` / `ladder_down_links` to the same side of rung r+1 / r-1, and
  /// `ladder_cross_links` to the other side of its sibling rung (r xor 1, i.e. the diagonal IPU in
  /// the same 4-IPU machine).
  ladder,
  /// Every IPU has ipu_links / (num_ipus - 1) links to every other IPU (for user architectures).
  fully_connected,
};

constexpr std::string_view to_string(link_topology t) noexcept {
  switch (t) {
    case link_topology::ladder: return "ladder";
    case link_topology::fully_connected: return "fully_connected";
  }
  return "?";
}

/// Figures of one IPU architecture as plain data. `name`, `chip` and `ipu_version` must point to
/// storage that outlives the description (string literals, or an architecture type's members).
struct architecture_description {
  std::string_view name;         // "mk2"
  std::string_view chip;         // "GC200"
  std::string_view ipu_version;  // PopRT / PopEF target name, "ipu2"

  // --- tiles ---------------------------------------------------------------------------------
  std::uint32_t tiles_per_ipu = 0;
  std::uint32_t worker_threads_per_tile = 0;
  std::uint64_t sram_bytes_per_tile = 0;
  std::uint64_t clock_hz = 0;

  // --- compute: multiply-accumulates per cycle per tile on the AMP -----------------------------
  std::uint32_t macs_per_cycle_fp32 = 0;
  std::uint32_t macs_per_cycle_fp16_16 = 0;
  std::uint32_t macs_per_cycle_fp16_32 = 0;

  // --- tile-local memory ---------------------------------------------------------------------
  std::uint32_t memory_latency_cycles = 0;
  std::uint32_t local_read_bytes_per_cycle = 0;
  std::uint32_t local_write_bytes_per_cycle = 0;

  // --- on-chip exchange ----------------------------------------------------------------------
  std::uint32_t exchange_bytes_per_cycle = 0;
  std::uint32_t exchange_setup_cycles = 0;

  // --- IPU-Links -----------------------------------------------------------------------------
  std::uint32_t ipu_links = 0;
  std::uint64_t link_bits_per_second = 0;  // per link, per direction, raw
  double link_efficiency = 0;              // fraction of the raw rate a copy achieves
  link_topology topology = link_topology::ladder;
  std::uint32_t ladder_rung_links = 0;
  std::uint32_t ladder_cross_links = 0;
  std::uint32_t ladder_up_links = 0;
  std::uint32_t ladder_down_links = 0;

  // --- host and Streaming Memory (per IPU) ---------------------------------------------------
  double host_bytes_per_second = 0;       // IPU -> host: posted PCIe writes
  double host_read_bytes_per_second = 0;  // host -> IPU, which the IPU reads; 0: host_bytes_per_second
  std::uint64_t streaming_memory_bytes = 0;  // 0: the architecture has no Streaming Memory
  double streaming_memory_bytes_per_second = 0;

  // --- global synchronisation ----------------------------------------------------------------
  std::uint64_t sync_picoseconds_per_hop = 0;
  std::uint32_t ipus_per_sync_hop = 0;

  [[nodiscard]] constexpr std::uint32_t macs_per_cycle(precision p) const noexcept {
    switch (p) {
      case precision::fp32: return macs_per_cycle_fp32;
      case precision::fp16_16: return macs_per_cycle_fp16_16;
      case precision::fp16_32: return macs_per_cycle_fp16_32;
    }
    return 0;
  }
  [[nodiscard]] constexpr std::uint64_t sram_bytes_per_ipu() const noexcept {
    return sram_bytes_per_tile * tiles_per_ipu;
  }
  [[nodiscard]] constexpr bool has_streaming_memory() const noexcept { return streaming_memory_bytes > 0; }

  friend constexpr bool operator==(const architecture_description&, const architecture_description&) = default;
};

/// The first figure of `a` that cannot describe a real chip, or an empty view when all are usable.
/// The cost model divides by these figures, so they must be positive.
constexpr std::string_view invalid_figure(const architecture_description& a) noexcept {
  if (a.name.empty()) return "name is empty";
  if (a.tiles_per_ipu == 0) return "tiles_per_ipu is 0";
  if (a.worker_threads_per_tile == 0) return "worker_threads_per_tile is 0";
  if (a.sram_bytes_per_tile == 0) return "sram_bytes_per_tile is 0";
  if (a.clock_hz == 0) return "clock_hz is 0";
  if (a.macs_per_cycle_fp32 == 0 || a.macs_per_cycle_fp16_16 == 0 || a.macs_per_cycle_fp16_32 == 0)
    return "a macs_per_cycle figure is 0";
  if (a.local_read_bytes_per_cycle == 0 || a.local_write_bytes_per_cycle == 0)
    return "local memory bandwidth is 0";
  if (a.exchange_bytes_per_cycle == 0) return "exchange_bytes_per_cycle is 0";
  if (a.ipu_links > 0 && a.link_bits_per_second == 0) return "link_bits_per_second is 0";
  if (!(a.link_efficiency > 0.0 && a.link_efficiency <= 1.0)) return "link_efficiency is not in (0, 1]";
  if (a.topology == link_topology::ladder &&
      a.ladder_rung_links + a.ladder_cross_links + a.ladder_up_links + a.ladder_down_links > a.ipu_links)
    return "the ladder uses more links than ipu_links";
  if (!(a.host_bytes_per_second > 0.0)) return "host_bytes_per_second is not positive";
  if (a.streaming_memory_bytes > 0 && !(a.streaming_memory_bytes_per_second > 0.0))
    return "streaming_memory_bytes_per_second is not positive";
  if (a.ipus_per_sync_hop == 0) return "ipus_per_sync_hop is 0";
  return {};
}

namespace detail::device {

// Link-layer arithmetic shared by the traits below, so that each derivation is written once.
inline constexpr double gbit = 1e9;
/// PCIe Gen3 and Gen4 use 128b/130b line coding: 128 payload bits per 130 transferred.
inline constexpr double pcie_128b130b = 128.0 / 130.0;
/// Raw PCIe payload rate of `lanes` lanes at `gt_per_s` gigatransfers per second, in bytes/s.
constexpr double pcie_bytes_per_second(double gt_per_s, unsigned lanes) noexcept {
  return gt_per_s * gbit * lanes * pcie_128b130b / 8.0;
}
/// PCIe transaction-layer efficiency (PCI Express Base Specification 3.0: TLP format 2.2, LCRC 3.5,
/// Gen3 framing tokens 4.2.2): a stream is a run of posted memory-write TLPs, each carrying at most
/// the Max_Payload_Size and adding a 4-DW header (64-bit addresses, 16 B), a 4-B LCRC and a 4-B STP
/// token (which from Gen3 also holds the sequence number). ACK and flow-control DLLPs travel the
/// other way, so they do not share the data direction's bandwidth.
inline constexpr unsigned pcie_max_payload_bytes = 256;  // the usual server root-port MPS
inline constexpr unsigned pcie_tlp_overhead_bytes = 16 + 4 + 4;
constexpr double pcie_tlp_efficiency(unsigned payload = pcie_max_payload_bytes) noexcept {
  return payload == 0 ? 0.0 : static_cast<double>(payload) / static_cast<double>(payload + pcie_tlp_overhead_bytes);
}
/// Reads (the IPU fetching host memory) come back as completion TLPs (Base Specification 3.0, 2.2.9
/// and 2.3.1.1): a 3-DW header (12 B) plus LCRC and STP token, each carrying the data up to one Read
/// Completion Boundary, 64 B for a root complex that does not combine them (RCB field, 7.8.7). The
/// read requests travel the other way.
inline constexpr unsigned pcie_read_completion_bytes = 64;
inline constexpr unsigned pcie_completion_overhead_bytes = 12 + 4 + 4;
inline constexpr double pcie_read_efficiency =
    static_cast<double>(pcie_read_completion_bytes) / (pcie_read_completion_bytes + pcie_completion_overhead_bytes);
/// PCIe payload rate after line coding and TLP overhead.
constexpr double pcie_effective_bytes_per_second(double gt_per_s, unsigned lanes) noexcept {
  return pcie_bytes_per_second(gt_per_s, lanes) * pcie_tlp_efficiency();
}
/// RoCEv2 over Ethernet (IEEE 802.3 framing; InfiniBand Architecture Spec. annex A17): a 4096-byte
/// path-MTU payload per packet plus preamble/SFD 8, MAC header 14, FCS 4, inter-packet gap 12,
/// IPv4 20, UDP 8, InfiniBand BTH 12 and ICRC 4 bytes.
inline constexpr unsigned roce_payload_bytes = 4096;
inline constexpr unsigned roce_overhead_bytes = 8 + 14 + 4 + 12 + 20 + 8 + 12 + 4;
inline constexpr double roce_efficiency =
    static_cast<double>(roce_payload_bytes) / (roce_payload_bytes + roce_overhead_bytes);
/// DDR4 DIMMs have a 64-bit (8-byte) data bus: bytes/s = transfers/s x 8.
constexpr double ddr4_dimm_bytes_per_second(double mega_transfers_per_s) noexcept {
  return mega_transfers_per_s * 1e6 * 8.0;
}
constexpr double min(double a, double b) noexcept { return a < b ? a : b; }

/// Everything about the IPU-M2000 / Bow-2000 machines that the Mk2 and Bow traits share.
struct m2000_machine {
  static constexpr unsigned ipus = 4;  // "448 GB per IPU-M2000 (4 IPUs)"
  // Host traffic enters the machine over 2 x 100 GbE (RoCE) and reaches each IPU over the
  // gateway's PCIe Gen4 x8: with all four IPUs streaming, each gets the smaller of a quarter of
  // the Ethernet rate (6.25 GB/s) and its PCIe link (15.75 GB/s).
  static constexpr double ethernet_bytes_per_second = 2 * 100 * gbit / 8.0;
  static constexpr double gateway_pcie_bytes_per_second = pcie_bytes_per_second(16.0, 8);  // Gen4: 16 GT/s
  // Both after their protocol overheads (RoCEv2 framing, PCIe TLPs).
  static constexpr double host_bytes_per_second_per_ipu =
      min(ethernet_bytes_per_second * roce_efficiency / ipus, pcie_effective_bytes_per_second(16.0, 8));
  // Host -> IPU: the IPU reads through the gateway, whose PCIe link carries read completions.
  static constexpr double host_read_bytes_per_second_per_ipu =
      min(ethernet_bytes_per_second * roce_efficiency / ipus, gateway_pcie_bytes_per_second * pcie_read_efficiency);
  // Streaming Memory: 2 x DDR4-2400 DIMMs per machine = 2 x 19.2 GB/s = 38.4 GB/s, shared by four
  // IPUs -> 9.6 GB/s each when all stream at once (phased execution moves weights on every IPU
  // together), below the 15.75 GB/s PCIe Gen4 x8 path from the gateway to each IPU.
  static constexpr unsigned dimms = 2;
  static constexpr double ddr_bytes_per_second = dimms * ddr4_dimm_bytes_per_second(2400.0);
  static constexpr double streaming_bytes_per_second_per_ipu =
      min(ddr_bytes_per_second / ipus, gateway_pcie_bytes_per_second);
};

/// The parts the three Graphcore generations share: tile memory system, exchange, IPU-Links and sync.
struct graphcore_common {
  static constexpr std::uint32_t worker_threads_per_tile = 6;
  static constexpr std::uint32_t memory_latency_cycles = 6;
  static constexpr std::uint32_t local_read_bytes_per_cycle = 16;
  static constexpr std::uint32_t local_write_bytes_per_cycle = 8;
  static constexpr std::uint32_t exchange_bytes_per_cycle = 4;  // poplibs exchangeBytesPerCycle
  // The spec gives "a fixed setup" without a number. The lower bound used here: the first word a
  // tile sends must first be loaded from its memory, one memory latency (6 cycles).
  static constexpr std::uint32_t exchange_setup_cycles = memory_latency_cycles;
  static constexpr std::uint32_t ipu_links = 10;
  static constexpr std::uint64_t link_bits_per_second = 128ull << 30;  // 128 Gibit/s per direction
  static constexpr double link_efficiency = 0.85;
  static constexpr link_topology topology = link_topology::ladder;
  static constexpr std::uint32_t ladder_rung_links = 4;
  static constexpr std::uint32_t ladder_cross_links = 2;
  static constexpr std::uint32_t ladder_up_links = 2;
  static constexpr std::uint32_t ladder_down_links = 2;
  static constexpr std::uint64_t sync_picoseconds_per_hop = 15'000;  // ~15 ns per hop
  static constexpr std::uint32_t ipus_per_sync_hop = 4;              // hops = 1 + numIPUs / 4
};

}  // namespace detail::device

/// Mk1 IPU, GC2 (C2 PCIe cards).
struct mk1 : detail::device::graphcore_common {
  static constexpr std::string_view name = "mk1";
  static constexpr std::string_view chip = "GC2";
  static constexpr std::string_view ipu_version = "ipu1";
  static constexpr std::uint32_t tiles_per_ipu = 1216;
  static constexpr std::uint64_t sram_bytes_per_tile = 256 * 1024;
  static constexpr std::uint64_t clock_hz = 1'600'000'000;
  static constexpr std::uint32_t macs_per_cycle_fp32 = 8;
  static constexpr std::uint32_t macs_per_cycle_fp16_32 = 32;
  // The spec lists no 16-bit-partials rate for GC2 ("—"). FP16.16 cannot be slower than FP16.32
  // (the same products, rounded to 16 bits), so the model runs it at the FP16.32 rate.
  static constexpr std::uint32_t macs_per_cycle_fp16_16 = macs_per_cycle_fp16_32;
  // One PCIe Gen3 x8 link per IPU: 8 GT/s x 8 lanes x 128/130 / 8 = 7.88 GB/s ("~7.9 GB/s raw"),
  // x 256 / 280 for the TLP overheads = 7.20 GB/s.
  static constexpr double host_bytes_per_second = detail::device::pcie_effective_bytes_per_second(8.0, 8);
  // Host -> IPU arrives as read completions: 7.88 GB/s x 64 / 84 = 6.00 GB/s.
  static constexpr double host_read_bytes_per_second =
      detail::device::pcie_bytes_per_second(8.0, 8) * detail::device::pcie_read_efficiency;
  static constexpr std::uint64_t streaming_memory_bytes = 0;  // none
  static constexpr double streaming_memory_bytes_per_second = 0;
};

/// Mk2 IPU, GC200 (IPU-M2000, IPU-POD).
struct mk2 : detail::device::graphcore_common {
  static constexpr std::string_view name = "mk2";
  static constexpr std::string_view chip = "GC200";
  static constexpr std::string_view ipu_version = "ipu2";
  static constexpr std::uint32_t tiles_per_ipu = 1472;
  static constexpr std::uint64_t sram_bytes_per_tile = 624 * 1024;
  static constexpr std::uint64_t clock_hz = 1'325'000'000;
  static constexpr std::uint32_t macs_per_cycle_fp32 = 16;
  static constexpr std::uint32_t macs_per_cycle_fp16_16 = 64;
  static constexpr std::uint32_t macs_per_cycle_fp16_32 = 32;  // half the FP16.16 rate (spec: inferred)
  static constexpr double host_bytes_per_second = detail::device::m2000_machine::host_bytes_per_second_per_ipu;
  static constexpr double host_read_bytes_per_second =
      detail::device::m2000_machine::host_read_bytes_per_second_per_ipu;
  // 448 GB per IPU-M2000, shared by its 4 IPUs.
  static constexpr std::uint64_t streaming_memory_bytes = 448'000'000'000ull / detail::device::m2000_machine::ipus;
  static constexpr double streaming_memory_bytes_per_second =
      detail::device::m2000_machine::streaming_bytes_per_second_per_ipu;
};

/// Bow IPU (Bow-2000): a GC200 die at a higher clock, in a machine built like the IPU-M2000.
struct bow : detail::device::graphcore_common {
  static constexpr std::string_view name = "bow";
  static constexpr std::string_view chip = "BOW";
  static constexpr std::string_view ipu_version = "ipu21";
  static constexpr std::uint32_t tiles_per_ipu = 1472;
  static constexpr std::uint64_t sram_bytes_per_tile = 624 * 1024;
  static constexpr std::uint64_t clock_hz = 1'850'000'000;
  static constexpr std::uint32_t macs_per_cycle_fp32 = 16;
  static constexpr std::uint32_t macs_per_cycle_fp16_16 = 64;
  static constexpr std::uint32_t macs_per_cycle_fp16_32 = 32;
  // Host link "as Mk2".
  static constexpr double host_bytes_per_second = detail::device::m2000_machine::host_bytes_per_second_per_ipu;
  static constexpr double host_read_bytes_per_second =
      detail::device::m2000_machine::host_read_bytes_per_second_per_ipu;
  // 256 GB per Bow-2000 (4 IPUs). The spec does not restate the DIMM speed for Bow; the model keeps
  // the IPU-M2000 gateway's 2 x DDR4-2400, as it does for the host link.
  static constexpr std::uint64_t streaming_memory_bytes = 256'000'000'000ull / detail::device::m2000_machine::ipus;
  static constexpr double streaming_memory_bytes_per_second =
      detail::device::m2000_machine::streaming_bytes_per_second_per_ipu;
};

namespace detail::device {
template <class A>
constexpr architecture_description describe_unchecked() noexcept {
  architecture_description d;
  d.name = A::name;
  d.chip = A::chip;
  d.ipu_version = A::ipu_version;
  d.tiles_per_ipu = A::tiles_per_ipu;
  d.worker_threads_per_tile = A::worker_threads_per_tile;
  d.sram_bytes_per_tile = A::sram_bytes_per_tile;
  d.clock_hz = A::clock_hz;
  d.macs_per_cycle_fp32 = A::macs_per_cycle_fp32;
  d.macs_per_cycle_fp16_16 = A::macs_per_cycle_fp16_16;
  d.macs_per_cycle_fp16_32 = A::macs_per_cycle_fp16_32;
  d.memory_latency_cycles = A::memory_latency_cycles;
  d.local_read_bytes_per_cycle = A::local_read_bytes_per_cycle;
  d.local_write_bytes_per_cycle = A::local_write_bytes_per_cycle;
  d.exchange_bytes_per_cycle = A::exchange_bytes_per_cycle;
  d.exchange_setup_cycles = A::exchange_setup_cycles;
  d.ipu_links = A::ipu_links;
  d.link_bits_per_second = A::link_bits_per_second;
  d.link_efficiency = A::link_efficiency;
  d.topology = A::topology;
  d.ladder_rung_links = A::ladder_rung_links;
  d.ladder_cross_links = A::ladder_cross_links;
  d.ladder_up_links = A::ladder_up_links;
  d.ladder_down_links = A::ladder_down_links;
  d.host_bytes_per_second = A::host_bytes_per_second;
  if constexpr (requires { A::host_read_bytes_per_second; }) d.host_read_bytes_per_second = A::host_read_bytes_per_second;
  d.streaming_memory_bytes = A::streaming_memory_bytes;
  d.streaming_memory_bytes_per_second = A::streaming_memory_bytes_per_second;
  d.sync_picoseconds_per_hop = A::sync_picoseconds_per_hop;
  d.ipus_per_sync_hop = A::ipus_per_sync_hop;
  return d;
}
}  // namespace detail::device

/// A type describing an IPU architecture with static constexpr figures (see ipu::mk2 for the list
/// and units). The simplest way to define one is to derive from a built-in architecture and
/// override what differs:
///
///     struct my_ipu : ipu::mk2 {
///       static constexpr std::string_view name = "my_ipu";
///       static constexpr std::uint32_t tiles_per_ipu = 1024;
///     };
///     static_assert(ipu::architecture<my_ipu>);
///
/// All figures must be usable (see invalid_figure): the cost model divides by them.
template <class A>
concept architecture = requires {
  { A::name } -> std::convertible_to<std::string_view>;
  { A::chip } -> std::convertible_to<std::string_view>;
  { A::ipu_version } -> std::convertible_to<std::string_view>;
  { A::tiles_per_ipu } -> std::convertible_to<std::uint32_t>;
  { A::worker_threads_per_tile } -> std::convertible_to<std::uint32_t>;
  { A::sram_bytes_per_tile } -> std::convertible_to<std::uint64_t>;
  { A::clock_hz } -> std::convertible_to<std::uint64_t>;
  { A::macs_per_cycle_fp32 } -> std::convertible_to<std::uint32_t>;
  { A::macs_per_cycle_fp16_16 } -> std::convertible_to<std::uint32_t>;
  { A::macs_per_cycle_fp16_32 } -> std::convertible_to<std::uint32_t>;
  { A::memory_latency_cycles } -> std::convertible_to<std::uint32_t>;
  { A::local_read_bytes_per_cycle } -> std::convertible_to<std::uint32_t>;
  { A::local_write_bytes_per_cycle } -> std::convertible_to<std::uint32_t>;
  { A::exchange_bytes_per_cycle } -> std::convertible_to<std::uint32_t>;
  { A::exchange_setup_cycles } -> std::convertible_to<std::uint32_t>;
  { A::ipu_links } -> std::convertible_to<std::uint32_t>;
  { A::link_bits_per_second } -> std::convertible_to<std::uint64_t>;
  { A::link_efficiency } -> std::convertible_to<double>;
  { A::topology } -> std::convertible_to<link_topology>;
  { A::ladder_rung_links } -> std::convertible_to<std::uint32_t>;
  { A::ladder_cross_links } -> std::convertible_to<std::uint32_t>;
  { A::ladder_up_links } -> std::convertible_to<std::uint32_t>;
  { A::ladder_down_links } -> std::convertible_to<std::uint32_t>;
  { A::host_bytes_per_second } -> std::convertible_to<double>;
  { A::streaming_memory_bytes } -> std::convertible_to<std::uint64_t>;
  { A::streaming_memory_bytes_per_second } -> std::convertible_to<double>;
  { A::sync_picoseconds_per_hop } -> std::convertible_to<std::uint64_t>;
  { A::ipus_per_sync_hop } -> std::convertible_to<std::uint32_t>;
} && invalid_figure(detail::device::describe_unchecked<A>()).empty();

/// The figures of a compile-time architecture as run-time data.
template <architecture A>
constexpr architecture_description describe_architecture() noexcept {
  return detail::device::describe_unchecked<A>();
}

/// The built-in architectures, in generation order.
inline constexpr architecture_description builtin_architectures[] = {
    describe_architecture<mk1>(), describe_architecture<mk2>(), describe_architecture<bow>()};

/// Finds a built-in architecture by name ("mk1", "mk2", "bow"), chip ("GC2", "GC200", "BOW") or
/// target ("ipu1", "ipu2", "ipu21"), ignoring case; nullopt when none matches.
constexpr std::optional<architecture_description> find_architecture(std::string_view name) noexcept {
  auto iequal = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
      if (lower(a[i]) != lower(b[i])) return false;
    }
    return true;
  };
  for (const auto& a : builtin_architectures)
    if (iequal(name, a.name) || iequal(name, a.chip) || iequal(name, a.ipu_version)) return a;
  return std::nullopt;
}

}  // namespace ipu
