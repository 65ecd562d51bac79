#pragma once
// Devices a model runs on: `ipu::ipu_model<Arch, NumIpus>` (a simulated multi-IPU system),
// `ipu::cpu_device_model` (the host, without tiles or tile memory limits), the `device_model`
// concept they satisfy, and `device_description`, the same as plain run-time data for a device
// chosen at run time (`--device mk2 --ipus 4`).
#include <concepts>
#include <cstdint>
#include <string>
#include <string_view>

#include "ipu/device/architecture.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/error.hpp"

namespace ipu {

enum class device_kind : std::uint8_t {
  ipu,  // a simulated IPU system: tiles, tile memory, exchange, IPU-Links
  cpu,  // the host: no tiles and no tile memory limits
};

constexpr std::string_view to_string(device_kind k) noexcept {
  switch (k) {
    case device_kind::ipu: return "ipu";
    case device_kind::cpu: return "cpu";
  }
  return "?";
}

/// The most IPUs one device may have (PopTorch's limit).
inline constexpr std::uint32_t max_ipus = 64;

/// PopTorch reserves IPUs in powers of two, from 1 to 64.
constexpr bool valid_ipu_count(std::uint64_t n) noexcept {
  return n >= 1 && n <= max_ipus && ipu::is_power_of_two(n);
}

/// A device as plain data.
struct device_description {
  device_kind kind = device_kind::ipu;
  architecture_description arch{};
  /// IPUs of the device. For the CPU device, the number of IPUs a model's annotations may name
  /// (the host runs the work of all of them).
  std::uint32_t num_ipus = 1;

  /// False for the host: nothing is mapped to tiles and tile memory is not checked.
  [[nodiscard]] constexpr bool has_tile_limits() const noexcept { return kind == device_kind::ipu; }
  [[nodiscard]] constexpr std::uint64_t total_tiles() const noexcept {
    return has_tile_limits() ? std::uint64_t{arch.tiles_per_ipu} * num_ipus : 0;
  }
  [[nodiscard]] constexpr std::uint64_t total_sram_bytes() const noexcept {
    return has_tile_limits() ? arch.sram_bytes_per_ipu() * num_ipus : 0;
  }

  friend constexpr bool operator==(const device_description&, const device_description&) = default;
};

/// "2 x mk2 (GC200)", "cpu".
constexpr std::string to_string(const device_description& d) {
  if (d.kind == device_kind::cpu) return "cpu";
  return ipu::format_uint(d.num_ipus) + " x " + std::string(d.arch.name) + " (" +
         std::string(d.arch.chip) + ")";
}

/// The host CPU device: no architecture figures (the cost model does not time the host).
constexpr device_description cpu_device_description(std::uint32_t num_ipus = 1) noexcept {
  device_description d;
  d.kind = device_kind::cpu;
  d.arch.name = "cpu";
  d.arch.chip = "host";
  d.arch.ipu_version = "cpu";
  d.num_ipus = num_ipus;
  return d;
}

namespace detail::device {
constexpr void check_ipu_count(std::uint64_t n, std::string_view what) {
  if (!valid_ipu_count(n))
    throw error(error_category::device,
                format_uint(n) + " IPUs requested; a device has a power of two from 1 to 64 IPUs",
                "device " + std::string(what),
                "round the IPU count up to a power of two (as PopTorch's autoRoundNumIPUs does)");
}
}  // namespace detail::device

/// A device of `num_ipus` IPUs of a run-time architecture. Throws ipu::error (device) for an
/// unusable figure or IPU count.
constexpr device_description make_device_description(const architecture_description& arch,
                                                     std::uint32_t num_ipus = 1) {
  if (auto bad = invalid_figure(arch); !bad.empty())
    throw error(error_category::device, "architecture figure " + std::string(bad),
                "architecture '" + std::string(arch.name) + "'", "give every figure a positive value");
  detail::device::check_ipu_count(num_ipus, arch.name);
  return device_description{device_kind::ipu, arch, num_ipus};
}

/// A device chosen by name at run time: "mk1", "mk2", "bow" (or their chip / target names, see
/// find_architecture) or "cpu". Throws ipu::error (device) naming the accepted names.
constexpr device_description device_from_name(std::string_view name, std::uint32_t num_ipus = 1) {
  if (name == "cpu" || name == "CPU" || name == "host") {
    detail::device::check_ipu_count(num_ipus, name);
    return cpu_device_description(num_ipus);
  }
  if (auto arch = find_architecture(name)) return make_device_description(*arch, num_ipus);
  throw error(error_category::device, "unknown device '" + std::string(name) + "'", "device name",
              "use one of mk1, mk2, bow, cpu (or the chip names GC2, GC200, BOW, or ipu1, ipu2, ipu21)");
}

/// A compile-time device: an IPU system or the host, describing itself as device_description.
template <class D>
concept device_model = requires {
  { D::kind } -> std::convertible_to<device_kind>;
  { D::num_ipus } -> std::convertible_to<std::uint32_t>;
  { D::description() } -> std::same_as<device_description>;
};

/// `NumIpus` IPUs of architecture `Arch`, e.g. `ipu::ipu_model<ipu::mk2, 4>` for one IPU-M2000.
template <architecture Arch, std::uint32_t NumIpus = 1>
struct ipu_model {
  static_assert(NumIpus >= 1 && NumIpus <= max_ipus,
                "ipu: NumIpus must be between 1 and 64; split the model over at most 64 IPUs");
  static_assert(ipu::is_power_of_two(NumIpus),
                "ipu: NumIpus must be a power of two; round it up (PopTorch's autoRoundNumIPUs does so)");

  using arch_type = Arch;
  static constexpr device_kind kind = device_kind::ipu;
  static constexpr std::uint32_t num_ipus = NumIpus;
  static constexpr std::uint32_t tiles_per_ipu = Arch::tiles_per_ipu;
  static constexpr std::uint64_t total_tiles = std::uint64_t{Arch::tiles_per_ipu} * NumIpus;
  static constexpr std::uint64_t sram_bytes_per_tile = Arch::sram_bytes_per_tile;
  static constexpr std::uint64_t total_sram_bytes = total_tiles * sram_bytes_per_tile;

  static constexpr device_description description() noexcept {
    return device_description{device_kind::ipu, describe_architecture<Arch>(), NumIpus};
  }
};

/// The host CPU: runs a model without tiles, so no tile mapping and no tile memory limit.
struct cpu_device_model {
  static constexpr device_kind kind = device_kind::cpu;
  static constexpr std::uint32_t num_ipus = 1;
  static constexpr device_description description() noexcept { return cpu_device_description(); }
};

template <device_model D>
constexpr device_description describe_device() noexcept {
  return D::description();
}

}  // namespace ipu
