#pragma once
// Cycles <-> seconds, peak FLOP/s and ideal AMP cycles of an IPU architecture.
//
//   seconds      = cycles / clock_hz
//   cycles       = ceil(seconds * clock_hz)
//   peak FLOP/s  = tiles_per_ipu * clock_hz * macs_per_cycle(precision) * 2   (a MAC is 2 FLOPs)
//   ideal cycles = ceil(MACs / (macs_per_cycle(precision) * tiles))
//
// Parameters: tiles, clock and MACs per cycle per tile from the architecture traits (ipu-spec,
// "Architectures" table). Check: 1472 x 1.325 GHz x 64 x 2 = 249.7 TFLOP/s for Mk2 FP16.16.
#include <cstdint>
#include <string>
#include <string_view>

#include "ipu/device/architecture.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// The cost model needs a clock and tiles: the host CPU device has neither.
constexpr void require_ipu_figures(const architecture_description& a, std::string_view what) {
  if (a.clock_hz == 0 || a.tiles_per_ipu == 0)
    throw error(error_category::device,
                "the cost model has no figures for device '" + std::string(a.name) + "'",
                std::string(what), "estimate costs on an IPU architecture such as mk2");
}

constexpr double cycles_to_seconds(const architecture_description& a, std::uint64_t cycles) {
  ipu::require_ipu_figures(a, "cycles_to_seconds");
  return static_cast<double>(cycles) / static_cast<double>(a.clock_hz);
}

/// Whole cycles needed to cover `seconds` (rounded up).
constexpr std::uint64_t seconds_to_cycles(const architecture_description& a, double seconds) {
  ipu::require_ipu_figures(a, "seconds_to_cycles");
  return ipu::ceil_to_u64(seconds * static_cast<double>(a.clock_hz));
}

/// Peak FLOP/s of one IPU at `p`.
constexpr double peak_flops(const architecture_description& a, precision p) {
  ipu::require_ipu_figures(a, "peak_flops");
  return static_cast<double>(a.tiles_per_ipu) * static_cast<double>(a.clock_hz) *
         static_cast<double>(a.macs_per_cycle(p)) * 2.0;
}

/// Peak FLOP/s of all IPUs of a device.
constexpr double peak_flops(const device_description& d, precision p) {
  return peak_flops(d.arch, p) * d.num_ipus;
}

/// Cycles for `macs` multiply-accumulates if `tiles` tiles ran their AMP at the peak rate all the
/// time: the bound real kernels approach (compute_cost.hpp models how close they get).
constexpr std::uint64_t ideal_amp_cycles(const architecture_description& a, precision p, std::uint64_t macs,
                                         std::uint32_t tiles) {
  ipu::require_ipu_figures(a, "ideal_amp_cycles");
  const std::uint64_t per_cycle = std::uint64_t{a.macs_per_cycle(p)} * (tiles == 0 ? 1 : tiles);
  return ipu::ceil_div(macs, per_cycle);
}

}  // namespace ipu
