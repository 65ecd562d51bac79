#pragma once
// Bulk-synchronous parallel costs: exchange phases, global syncs and whole supersteps.
//
//   exchange cycles = ceil(max bytes sent or received by any tile / exchange_bytes_per_cycle)
//                     + exchange_setup_cycles                (0 when no tile exchanges anything)
//   sync cycles     = ceil(sync_seconds_per_hop * clock_hz * hops * 2),  hops = 1 + numIPUs / 4
//   superstep       T = max over tiles(compute) + sync + exchange
//
// Parameters (ipu-spec, "Poplar/poplibs public model parameters"): exchange_bytes_per_cycle = 4,
// ~15 ns per sync hop, 4 IPUs per extra hop. The spec gives the exchange setup as "a fixed setup"
// without a value; the traits use one memory latency (6 cycles) as a lower bound (architecture.hpp).
#include <algorithm>
#include <cstdint>
#include <span>

#include "ipu/device/architecture.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/timing.hpp"

namespace ipu {

/// Cycles of one exchange phase in which no tile sends or receives more than `max_bytes_per_tile`.
constexpr std::uint64_t exchange_cycles(const architecture_description& a, std::uint64_t max_bytes_per_tile) {
  ipu::require_ipu_figures(a, "exchange_cycles");
  if (max_bytes_per_tile == 0) return 0;  // nothing to exchange: no exchange phase
  return ipu::ceil_div(max_bytes_per_tile, a.exchange_bytes_per_cycle) + a.exchange_setup_cycles;
}

/// Cycles of one exchange phase given the bytes each tile sends or receives (whichever is larger).
constexpr std::uint64_t exchange_cycles(const architecture_description& a,
                                        std::span<const std::uint64_t> bytes_per_tile) {
  std::uint64_t m = 0;
  for (auto b : bytes_per_tile) m = std::max(m, b);
  return exchange_cycles(a, m);
}

/// Hops of a global sync over `num_ipus` IPUs: 1 + num_ipus / ipus_per_sync_hop (integer division).
constexpr std::uint64_t sync_hops(const architecture_description& a, std::uint32_t num_ipus) {
  ipu::require_ipu_figures(a, "sync_hops");
  return 1 + num_ipus / a.ipus_per_sync_hop;
}

/// Cycles of a global sync: ceil(sync time per hop * clock * hops * 2), the 2 for the request and
/// the release travelling the hops. Exact integer arithmetic (picoseconds x Hz / 10^12), so figures
/// like Mk1's 15 ns x 1.6 GHz x 2 = 48 cycles do not round up on floating-point noise.
constexpr std::uint64_t sync_cycles(const architecture_description& a, std::uint32_t num_ipus) {
  using ipu::mul_sat;
  const std::uint64_t ps_cycles = mul_sat(mul_sat(a.sync_picoseconds_per_hop * 2, sync_hops(a, num_ipus)), a.clock_hz);
  return ipu::ceil_div(ps_cycles, 1'000'000'000'000ull);
}

constexpr std::uint64_t sync_cycles(const device_description& d) { return sync_cycles(d.arch, d.num_ipus); }

/// The three phases of one BSP superstep.
struct superstep {
  std::uint64_t compute_cycles = 0;   // the slowest tile's compute
  std::uint64_t sync_cycles = 0;
  std::uint64_t exchange_cycles = 0;
  [[nodiscard]] constexpr std::uint64_t total() const noexcept { return compute_cycles + sync_cycles + exchange_cycles; }
  friend constexpr bool operator==(const superstep&, const superstep&) = default;
};

/// T = max over tiles(compute) + sync + exchange.
constexpr std::uint64_t superstep_cycles(std::span<const std::uint64_t> compute_per_tile, std::uint64_t sync,
                                         std::uint64_t exchange) noexcept {
  std::uint64_t m = 0;
  for (auto c : compute_per_tile) m = std::max(m, c);
  return superstep{m, sync, exchange}.total();
}

/// A superstep on device `d`: per-tile compute cycles and per-tile exchanged bytes.
constexpr superstep make_superstep(const device_description& d, std::span<const std::uint64_t> compute_per_tile,
                                   std::span<const std::uint64_t> exchange_bytes_per_tile) {
  std::uint64_t m = 0;
  for (auto c : compute_per_tile) m = std::max(m, c);
  return superstep{m, sync_cycles(d), exchange_cycles(d.arch, exchange_bytes_per_tile)};
}

}  // namespace ipu
