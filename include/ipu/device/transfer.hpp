#pragma once
// Off-tile transfers: IPU-to-IPU copies over IPU-Links, host streams and Streaming Memory.
//
//   link bytes/s       = link_bits_per_second / 8 * link_efficiency      (per link, per direction)
//   IPU-Link copy time = bytes / (links used between the two IPUs * link bytes/s)
//   IPU -> host time   = bytes / host_bytes_per_second                   (posted writes, after overheads)
//   host -> IPU time   = bytes / host_read_bytes_per_second              (read completions, after overheads)
//   host minimum time  = one sync + one max-payload PCIe TLP (a read adds its request TLP)
//   Streaming Memory   = bytes / streaming_memory_bytes_per_second       (per IPU)
//
// Parameters (ipu-spec): 128 Gibit/s per link per direction at 85% efficiency, 10 links in a ladder
// (4 rung links to the partner IPU, 2 cross, 2 up, 2 down); host and Streaming Memory rates per IPU
// are derived in architecture.hpp (PCIe line coding, 2 x 100 GbE, 2 x DDR4-2400 per 4 IPUs).
#include <algorithm>
#include <cstdint>
#include <string>

#include "ipu/device/architecture.hpp"
#include "ipu/device/bsp.hpp"
#include "ipu/format.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/timing.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// Raw rate of one IPU-Link in one direction, bytes per second.
constexpr double raw_link_bytes_per_second(const architecture_description& a) noexcept {
  return static_cast<double>(a.link_bits_per_second) / 8.0;
}

/// Rate a copy achieves on one IPU-Link in one direction (raw rate x efficiency).
constexpr double link_bytes_per_second(const architecture_description& a) noexcept {
  return raw_link_bytes_per_second(a) * a.link_efficiency;
}

/// How a copy between two IPUs travels: the links of the narrowest step and the steps taken.
struct link_route {
  std::uint32_t links = 0;  // parallel links at the bottleneck (0: same IPU, nothing to copy)
  std::uint32_t hops = 0;   // IPU-to-IPU steps
  friend constexpr bool operator==(const link_route&, const link_route&) = default;
};

/// The route of a copy from IPU `from` to IPU `to` of device `d` (see link_topology). On a ladder a
/// copy uses the direct links when the IPUs are neighbours (partner on the rung, the same side of the
/// next rung, or the diagonal of the sibling rung); otherwise it travels along its side and crosses a
/// rung, limited by the narrowest step. Throws ipu::error (usage) for an IPU outside the device.
constexpr link_route ipu_link_route(const device_description& d, std::uint32_t from, std::uint32_t to) {
  using ipu::format_uint;
  if (from >= d.num_ipus || to >= d.num_ipus)
    throw error(error_category::usage,
                "IPU " + format_uint(std::max(from, to)) + " does not exist on a " + format_uint(d.num_ipus) +
                    "-IPU device",
                "IPU-Link copy " + format_uint(from) + " -> " + format_uint(to), "number IPUs from 0");
  if (from == to) return {};
  const auto& a = d.arch;
  if (d.kind != device_kind::ipu || a.ipu_links == 0)
    throw error(error_category::device, "device '" + std::string(a.name) + "' has no IPU-Links",
                "IPU-Link copy " + format_uint(from) + " -> " + format_uint(to),
                "use an IPU architecture with IPU-Links, or keep the model on one IPU");
  if (a.topology == link_topology::fully_connected)
    return {std::max<std::uint32_t>(1, a.ipu_links / (d.num_ipus - 1)), 1};

  const std::uint32_t r1 = from / 2, r2 = to / 2;
  const bool same_side = from % 2 == to % 2;
  const std::uint32_t dr = r1 > r2 ? r1 - r2 : r2 - r1;
  const std::uint32_t vertical = std::min(a.ladder_up_links, a.ladder_down_links);
  if (dr == 0) return {a.ladder_rung_links, 1};
  if (dr == 1 && same_side) return {vertical, 1};
  // Routed: along the side, plus one rung crossing when the sides differ.
  const link_route routed{same_side ? vertical : std::min(vertical, a.ladder_rung_links), dr + (same_side ? 0u : 1u)};
  if (dr == 1 && (r1 ^ 1u) == r2 && a.ladder_cross_links >= routed.links) return {a.ladder_cross_links, 1};
  return routed;
}

/// Seconds to copy `bytes` from IPU `from` to IPU `to` (0 for the same IPU).
constexpr double ipu_link_copy_seconds(const device_description& d, std::uint32_t from, std::uint32_t to,
                                       std::uint64_t bytes) {
  const auto route = ipu_link_route(d, from, to);
  if (route.links == 0 || bytes == 0) return 0;
  return static_cast<double>(bytes) / (route.links * link_bytes_per_second(d.arch));
}

constexpr std::uint64_t ipu_link_copy_cycles(const device_description& d, std::uint32_t from, std::uint32_t to,
                                             std::uint64_t bytes) {
  return seconds_to_cycles(d.arch, ipu_link_copy_seconds(d, from, to, bytes));
}

/// Seconds to stream `bytes` between the host and one IPU.
constexpr double host_transfer_seconds(const architecture_description& a, std::uint64_t bytes) {
  ipu::require_ipu_figures(a, "host_transfer_seconds");
  return static_cast<double>(bytes) / a.host_bytes_per_second;
}

/// Rate of host -> IPU streams, which the IPU reads from host memory (PCIe read completions).
constexpr double host_read_bytes_per_second(const architecture_description& a) noexcept {
  return a.host_read_bytes_per_second > 0 ? a.host_read_bytes_per_second : a.host_bytes_per_second;
}

/// Seconds to stream `bytes` from the host to one IPU.
constexpr double host_read_seconds(const architecture_description& a, std::uint64_t bytes) {
  ipu::require_ipu_figures(a, "host_read_seconds");
  return static_cast<double>(bytes) / host_read_bytes_per_second(a);
}

/// The least time a host transfer can take: the global sync that starts every host exchange (one
/// IPU, bsp.hpp) and one maximum-size PCIe payload at the host rate. A lower bound: host-side
/// software and DMA set-up are not in any public figure and are not modelled.
constexpr double host_transfer_min_seconds(const architecture_description& a) {
  return cycles_to_seconds(a, sync_cycles(a, 1)) + host_transfer_seconds(a, detail::device::pcie_max_payload_bytes);
}

/// The least time a host -> IPU transfer can take: the sync, then a read request out (a 24-byte TLP
/// with no data) and one maximum-size payload back, both counted at the read rate. A lower bound as
/// host_transfer_min_seconds is.
constexpr double host_read_min_seconds(const architecture_description& a) {
  return cycles_to_seconds(a, sync_cycles(a, 1)) +
         host_read_seconds(a, detail::device::pcie_tlp_overhead_bytes + detail::device::pcie_max_payload_bytes);
}

/// Seconds to move `bytes` between one IPU and its share of Streaming Memory. Throws ipu::error
/// (device) when the architecture has no Streaming Memory (Mk1).
constexpr double streaming_memory_seconds(const architecture_description& a, std::uint64_t bytes) {
  ipu::require_ipu_figures(a, "streaming_memory_seconds");
  if (!a.has_streaming_memory())
    throw error(error_category::device, "architecture '" + std::string(a.name) + "' has no Streaming Memory",
                "streaming memory transfer",
                "keep the tensors on chip (more IPUs, pipelining) or use an architecture with Streaming Memory "
                "(mk2, bow)");
  return static_cast<double>(bytes) / a.streaming_memory_bytes_per_second;
}

}  // namespace ipu
