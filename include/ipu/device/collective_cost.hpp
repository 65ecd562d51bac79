#pragma once
// Gradient all-reduce across replicas: a ring over IPU-Links inside a pod and, for replicas over
// several pods, a ring over the gateway links between them (reduce-scatter in the pod, all-reduce
// of each IPU's share across the pods, all-gather in the pod: the hierarchy Graphcore's PopDist
// uses, and the bandwidth-optimal one on these links).
//
//   ring all-reduce of B bytes over R members = 2 (R - 1) / R x B / ring bytes/s + 2 (R - 1) syncs
//
// IPU j of every replica holds the same weights, so the replicas' IPU j form one ring (at stride
// `ipus_per_replica` through the device). On a ladder (IPU-M2000 / Bow-2000 and the IPU-Fabric of
// a pod, ipu-spec "IPU-Link model"):
//  - one IPU per replica: the ring runs up one side of the ladder and down the other, so every hop
//    is between neighbours; the bottleneck is the narrowest hop (the 2 up/down links);
//  - k IPUs per replica: each ring stays on one side of the ladder, hops of k/2 rungs; the return
//    hop uses the opposite direction of the same links (links are full duplex: figures are per
//    direction), and the k/2 rings on the same side share its vertical links.
// Fully connected user topologies: ipu_links / (n - 1) links between every pair, no sharing.
//
// Gateway links (replicas over pods): each machine (4 IPUs) reaches the others through its gateway's
// 2 x 100 GbE (ipu-spec, IPU-M2000 host link row; the IPU-M2000 datasheet names them GW-Links), so
// an IPU gets a quarter of 25 GB/s when all four reduce at once. No efficiency factor is applied
// (ipu-spec gives none for Ethernet). Mk1 (C2 cards in a host) has no gateway.
#include <algorithm>
#include <cstdint>
#include <string>

#include "ipu/device/architecture.hpp"
#include "ipu/device/bsp.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/timing.hpp"
#include "ipu/device/transfer.hpp"
#include "ipu/error.hpp"
#include "ipu/format.hpp"

namespace ipu {

/// IPUs one pod joins with IPU-Links (an IPU-POD64; also the largest Poplar device).
inline constexpr std::uint32_t ipus_per_pod = 64;

/// Gateway Ethernet of one IPU-M2000 / Bow-2000 machine, bytes per second: 2 x 100 Gbit/s.
inline constexpr double gateway_bytes_per_second_per_machine = 2 * 100e9 / 8;
inline constexpr std::uint32_t ipus_per_gateway = 4;

struct all_reduce_cost {
  std::uint32_t replicas_per_pod = 1;
  std::uint32_t pods = 1;
  std::uint32_t ring_links = 0;   // links per direction at the ring's bottleneck
  std::uint32_t link_sharing = 1; // rings sharing those links
  double link_seconds = 0;        // IPU-Link part (reduce-scatter + all-gather in the pod)
  double gateway_seconds = 0;     // across pods
  std::uint64_t sync_cycles = 0;  // one sync per ring step
  std::uint64_t cycles = 0;       // total, at the architecture's clock
  friend constexpr bool operator==(const all_reduce_cost&, const all_reduce_cost&) = default;
};

/// Cost of all-reducing `bytes` (the gradients one IPU holds) across `replicas` replicas of
/// `ipus_per_replica` IPUs each. Throws ipu::error (usage) for replicas that do not fill whole pods
/// when they span several, and (device) for an architecture without IPU-Links or gateways.
constexpr all_reduce_cost ring_all_reduce_cost(const architecture_description& a, std::uint32_t ipus_per_replica,
                                               std::uint32_t replicas, std::uint64_t bytes) {
  require_ipu_figures(a, "ring_all_reduce_cost");
  const std::string where = "all-reduce over " + format_uint(replicas) + " replicas of " + format_uint(ipus_per_replica) +
                            " IPU" + (ipus_per_replica == 1 ? "" : "s");
  if (ipus_per_replica == 0 || replicas == 0 || !is_power_of_two(ipus_per_replica) || ipus_per_replica > ipus_per_pod)
    throw error(error_category::usage, "a replica of " + format_uint(ipus_per_replica) + " IPUs", where,
                "give each replica a power of two from 1 to 64 IPUs");
  all_reduce_cost r;
  if (replicas == 1 || bytes == 0) return r;
  const std::uint64_t total = std::uint64_t{ipus_per_replica} * replicas;
  r.replicas_per_pod = total <= ipus_per_pod ? replicas : ipus_per_pod / ipus_per_replica;
  if (total > ipus_per_pod && total % ipus_per_pod != 0)
    throw error(error_category::usage,
                format_uint(total) + " IPUs span more than one pod of " + format_uint(ipus_per_pod) + " but do not fill whole pods",
                where, "use a number of replicas whose IPUs are a multiple of 64");
  r.pods = static_cast<std::uint32_t>(replicas / r.replicas_per_pod);
  if (r.pods > 1 && a.ipu_version == "ipu1")
    throw error(error_category::device, "Mk1 systems (C2 cards) have no gateway links between pods", where,
                "keep the replicas within 64 IPUs, or use mk2 or bow");
  const std::uint32_t rp = r.replicas_per_pod;
  const double link_rate = link_bytes_per_second(a);
  if (rp > 1) {
    // Members of IPU 0's ring in one pod, in ring order.
    const std::uint32_t pod_ipus = static_cast<std::uint32_t>(std::min<std::uint64_t>(total, ipus_per_pod));
    const device_description pod{device_kind::ipu, a, pod_ipus};
    std::uint32_t links = ~0u;
    auto hop = [&](std::uint32_t from, std::uint32_t to) { links = std::min(links, ipu_link_route(pod, from, to).links); };
    if (a.topology == link_topology::ladder && ipus_per_replica == 1) {
      // Up the even side, down the odd side, back across the first rung.
      for (std::uint32_t i = 0; i + 2 < pod_ipus; i += 2) hop(i, i + 2);
      hop(pod_ipus - 2, pod_ipus - 1);
      for (std::uint32_t i = pod_ipus - 1; i >= 3; i -= 2) hop(i, i - 2);
      if (pod_ipus > 2) hop(1, 0);
    } else {
      for (std::uint32_t j = 0; j + 1 < rp; ++j) hop(j * ipus_per_replica, (j + 1) * ipus_per_replica);
      if (a.topology == link_topology::ladder && ipus_per_replica > 2) r.link_sharing = ipus_per_replica / 2;
    }
    r.ring_links = links;
    const double ring_rate = links * link_rate / r.link_sharing;
    const double share = static_cast<double>(rp - 1) / rp * static_cast<double>(bytes);
    // Inside the pod: reduce-scatter and all-gather, each (Rp - 1) / Rp of the bytes.
    r.link_seconds = 2 * share / ring_rate;
    r.sync_cycles = 2 * std::uint64_t{rp - 1} * ipu::sync_cycles(a, pod_ipus);
  }
  if (r.pods > 1) {
    const double per_ipu = gateway_bytes_per_second_per_machine / ipus_per_gateway;
    const double shard = static_cast<double>(bytes) / rp;
    r.gateway_seconds = 2.0 * (r.pods - 1) / r.pods * shard / per_ipu;
    r.sync_cycles += 2 * std::uint64_t{r.pods - 1} * ipu::sync_cycles(a, ipus_per_pod);
  }
  r.cycles = seconds_to_cycles(a, r.link_seconds + r.gateway_seconds) + r.sync_cycles;
  return r;
}

}  // namespace ipu
