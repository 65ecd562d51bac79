#pragma once
// The simulated IPU system a device manager hands out: an architecture, a number of physical IPUs,
// and the devices Poplar exposes on such a system. As `gc-info` lists them on an IPU-POD16, every
// IPU is a device on its own (ids 0..N-1); then come the aligned groups of 2 IPUs, of 4, of 8, ... up
// to 64, each size numbered after the previous one: on 16 IPUs, pairs are 16-23, quads 24-27,
// eights 28-29 and the whole system is 30. A group of 2k IPUs is made of two groups of k (its
// children), so a device is busy when any IPU under it is held.
//
// `IPU_SYSTEM=<arch>[:<ipus>]` (e.g. "mk2:16", "bow:64", "mk1:8") chooses the system at run time.
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/device/architecture.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// The most physical IPUs a simulated system may have (a bound of this simulator: one lock file per
/// IPU; the largest device is still 64 IPUs).
inline constexpr std::uint32_t max_system_ipus = 1024;

/// The environment variable that chooses the simulated system.
inline constexpr std::string_view ipu_system_variable = "IPU_SYSTEM";

/// One device of a system: `num_ipus` physical IPUs from `first_ipu` on.
struct device_slot {
  std::uint32_t id = 0;
  std::uint32_t first_ipu = 0;
  std::uint32_t num_ipus = 1;

  [[nodiscard]] constexpr bool contains_ipu(std::uint32_t ipu) const noexcept {
    return ipu >= first_ipu && ipu - first_ipu < num_ipus;
  }
  friend constexpr bool operator==(const device_slot&, const device_slot&) = default;
};

namespace detail::device {
/// The largest power of two <= n (n >= 1).
constexpr std::uint32_t floor_power_of_two(std::uint32_t n) noexcept {
  std::uint32_t p = 1;
  while (p <= n / 2) p *= 2;
  return p;
}
}  // namespace detail::device

/// A simulated system: `num_ipus` IPUs of `arch`, housed `ipus_per_machine` to a machine. Build one
/// with make_ipu_system or parse_ipu_system (they validate); the default is an IPU-POD16: 16 Mk2
/// IPUs in 4 IPU-M2000s.
struct ipu_system {
  architecture_description arch = describe_architecture<mk2>();
  std::uint32_t num_ipus = 16;
  std::uint32_t ipus_per_machine = 4;

  /// Machines (IPU-M2000s, Bow-2000s, C2 cards) the IPUs fill; the last may be partly filled.
  [[nodiscard]] constexpr std::uint32_t machines() const noexcept {
    return static_cast<std::uint32_t>(ipu::ceil_div(num_ipus, ipus_per_machine));
  }
  [[nodiscard]] constexpr std::uint32_t machine_of(std::uint32_t ipu) const noexcept {
    return ipus_per_machine == 0 ? 0 : ipu / ipus_per_machine;
  }

  /// IPUs of the largest device: the largest power of two the system holds, at most 64.
  [[nodiscard]] constexpr std::uint32_t largest_device_ipus() const noexcept {
    if (num_ipus == 0) return 0;
    const auto p = detail::device::floor_power_of_two(num_ipus);
    return p < max_ipus ? p : max_ipus;
  }
  /// How many devices of `size` IPUs the system exposes (0 when `size` is not a device size).
  [[nodiscard]] constexpr std::uint32_t devices_of_size(std::uint32_t size) const noexcept {
    if (size == 0 || !ipu::is_power_of_two(size) || size > largest_device_ipus()) return 0;
    return num_ipus / size;
  }
  /// The id of the first device of `size` IPUs (a valid size): sizes are numbered in increasing order.
  [[nodiscard]] constexpr std::uint32_t first_device_id(std::uint32_t size) const noexcept {
    std::uint32_t id = 0;
    for (std::uint32_t s = 1; s < size; s *= 2) id += devices_of_size(s);
    return id;
  }
  [[nodiscard]] constexpr std::uint32_t device_count() const noexcept {
    const auto largest = largest_device_ipus();
    return largest == 0 ? 0 : first_device_id(largest) + devices_of_size(largest);
  }

  /// The device with this id, or nullopt.
  [[nodiscard]] constexpr std::optional<device_slot> device(std::uint32_t id) const noexcept {
    std::uint32_t first_id = 0;
    for (std::uint32_t s = 1; s != 0 && s <= largest_device_ipus(); s *= 2) {
      const auto n = devices_of_size(s);
      if (id < first_id + n) return device_slot{id, (id - first_id) * s, s};
      first_id += n;
    }
    return std::nullopt;
  }
  /// The `index`-th device of `size` IPUs (it covers IPUs index*size ..), or nullopt.
  [[nodiscard]] constexpr std::optional<device_slot> device_of_size(std::uint32_t size,
                                                                    std::uint32_t index) const noexcept {
    if (index >= devices_of_size(size)) return std::nullopt;
    return device_slot{first_device_id(size) + index, index * size, size};
  }
  /// Every device of `size` IPUs, in id order (empty when `size` is not a device size).
  [[nodiscard]] constexpr std::vector<device_slot> devices_with(std::uint32_t size) const {
    std::vector<device_slot> out;
    for (std::uint32_t i = 0; i < devices_of_size(size); ++i) out.push_back(*device_of_size(size, i));
    return out;
  }
  /// The two devices of half the size that make up `d`; empty for a single IPU.
  [[nodiscard]] constexpr std::vector<std::uint32_t> children(const device_slot& d) const {
    if (d.num_ipus < 2) return {};
    const auto half = d.num_ipus / 2;
    const auto base = first_device_id(half) + d.first_ipu / half;
    return {base, base + 1};
  }

  /// The device of `num_ipus` IPUs of this system's architecture as plain data.
  [[nodiscard]] constexpr device_description description(std::uint32_t device_ipus) const noexcept {
    return device_description{device_kind::ipu, arch, device_ipus};
  }

  friend constexpr bool operator==(const ipu_system&, const ipu_system&) = default;
};

/// IPUs per machine when none is given: Mk1 C2 cards hold 2 IPUs; IPU-M2000 and Bow-2000 machines
/// (and, by default, a user's architecture) hold 4.
constexpr std::uint32_t default_ipus_per_machine(const architecture_description& arch) noexcept {
  return arch.ipu_version == "ipu1" ? 2 : 4;
}

/// A validated system; `ipus_per_machine` 0 takes default_ipus_per_machine. Throws ipu::error
/// (device) for an unusable architecture or IPU count.
constexpr ipu_system make_ipu_system(const architecture_description& arch, std::uint32_t num_ipus,
                                     std::uint32_t ipus_per_machine = 0) {
  if (auto bad = invalid_figure(arch); !bad.empty())
    throw error(error_category::device, "architecture figure " + std::string(bad),
                "simulated system of architecture '" + std::string(arch.name) + "'",
                "give every figure a positive value");
  if (num_ipus == 0 || num_ipus > max_system_ipus)
    throw error(error_category::device, "a simulated system of " + ipu::format_uint(num_ipus) + " IPUs",
                "simulated " + std::string(arch.name) + " system",
                "give it 1 to " + ipu::format_uint(max_system_ipus) +
                    " IPUs, e.g. IPU_SYSTEM=" + std::string(arch.name) + ":16");
  ipu_system s;
  s.arch = arch;
  s.num_ipus = num_ipus;
  s.ipus_per_machine = ipus_per_machine == 0 ? default_ipus_per_machine(arch) : ipus_per_machine;
  return s;
}

/// A system of a compile-time architecture, e.g. `make_ipu_system<ipu::bow>(64)`.
template <architecture Arch>
constexpr ipu_system make_ipu_system(std::uint32_t num_ipus, std::uint32_t ipus_per_machine = 0) {
  return make_ipu_system(describe_architecture<Arch>(), num_ipus, ipus_per_machine);
}

/// Parses "<arch>[:<ipus>]": an architecture name as find_architecture accepts it ("mk2", "GC200",
/// "ipu21"...) and a number of IPUs (16 when omitted). `source` names the text in errors.
constexpr ipu_system parse_ipu_system(std::string_view spec, std::string_view source = ipu_system_variable) {
  auto fail = [&](const std::string& what) -> error {
    return error(error_category::device, what, std::string(source) + "='" + std::string(spec) + "'",
                 "write <arch>[:<ipus>], e.g. mk2:16; architectures: mk1, mk2, bow (or GC2, GC200, BOW, ipu1, "
                 "ipu2, ipu21)");
  };
  const auto colon = spec.find(':');
  const auto name = spec.substr(0, colon);
  const auto arch = find_architecture(name);
  if (!arch) throw fail("unknown architecture '" + std::string(name) + "'");
  std::uint32_t ipus = 16;
  if (colon != std::string_view::npos) {
    const auto count = spec.substr(colon + 1);
    if (count.empty() || count.size() > 9) throw fail("'" + std::string(count) + "' is not a number of IPUs");
    std::uint32_t n = 0;
    for (char c : count) {
      if (c < '0' || c > '9') throw fail("'" + std::string(count) + "' is not a number of IPUs");
      n = n * 10 + static_cast<std::uint32_t>(c - '0');
    }
    ipus = n;
  }
  if (ipus == 0 || ipus > max_system_ipus)
    throw fail("a simulated system has 1 to " + ipu::format_uint(max_system_ipus) + " IPUs, not " +
               ipu::format_uint(ipus));
  return make_ipu_system(*arch, ipus);
}

/// The system IPU_SYSTEM names, or the default IPU-POD16 of Mk2 when it is unset or empty.
inline ipu_system ipu_system_from_environment() {
  const char* v = std::getenv(std::string(ipu_system_variable).c_str());
  if (v == nullptr || *v == '\0') return ipu_system{};
  return parse_ipu_system(v);
}

/// "16 x mk2 (GC200) in 4 machines".
constexpr std::string to_string(const ipu_system& s) {
  const auto machines = s.machines();
  return ipu::format_uint(s.num_ipus) + " x " + std::string(s.arch.name) + " (" + std::string(s.arch.chip) +
         ") in " + ipu::format_uint(machines) + (machines == 1 ? " machine" : " machines");
}

}  // namespace ipu
