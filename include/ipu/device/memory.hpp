#pragma once
// Per-tile memory accounting and the out-of-memory check.
//
// The caller (the scheduler) lists what each IPU holds as `memory_allocation`s: tensors (variables,
// constants, activations) with their tile mapping, and per-tile buffers (exchange buffers, code,
// op temporaries). `check_memory` adds them up per tile against the tile's SRAM, and temporaries
// against the available memory proportion; `require_memory_fits` turns a failure into an ipu::error
// (category memory) that names the IPU, the fullest tiles with their bytes by kind, the largest
// tensors on them, and what would help. Plain data in, plain data out, constexpr.
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/device/architecture.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/tile_mapping.hpp"
#include "ipu/error.hpp"

namespace ipu {

enum class memory_kind : std::uint8_t {
  variable,         // weights and optimiser state
  constant,
  activation,       // inputs and intermediate tensors
  exchange_buffer,  // receive buffers of exchanges
  code,             // codelets, vertex state, control program
  temporary,        // an op's scratch memory (bounded by the available memory proportion)
};

inline constexpr std::size_t num_memory_kinds = 6;
inline constexpr memory_kind all_memory_kinds[num_memory_kinds] = {
    memory_kind::variable,        memory_kind::constant, memory_kind::activation,
    memory_kind::exchange_buffer, memory_kind::code,     memory_kind::temporary};

constexpr std::string_view to_string(memory_kind k) noexcept {
  switch (k) {
    case memory_kind::variable: return "variable";
    case memory_kind::constant: return "constant";
    case memory_kind::activation: return "activation";
    case memory_kind::exchange_buffer: return "exchange buffer";
    case memory_kind::code: return "code";
    case memory_kind::temporary: return "temporary";
  }
  return "?";
}

/// Something held in the tile memory of one IPU: `mapping` spreads elements of `type` over the
/// IPU's tiles.
struct memory_allocation {
  std::string name;  // the tensor or op, shown in errors
  memory_kind kind = memory_kind::variable;
  data_type type = data_type::U8;
  std::uint32_t ipu = 0;
  linear_tile_mapping mapping{};

  [[nodiscard]] constexpr std::uint64_t bytes() const noexcept { return mapping.elements * size_of(type); }
  [[nodiscard]] constexpr std::uint64_t bytes_on_tile(std::uint32_t tile) const noexcept {
    return mapping.elements_on_tile(tile) * size_of(type);
  }
};

/// A tensor of `type` laid out by `mapping` on `ipu`.
constexpr memory_allocation tensor_allocation(std::string_view name, memory_kind kind, data_type type,
                                              std::uint32_t ipu, const linear_tile_mapping& mapping) {
  return memory_allocation{std::string(name), kind, type, ipu, mapping};
}

/// `bytes_per_tile` on each of `tiles` tiles from `first_tile` of `ipu` (buffers, code, temporaries).
constexpr memory_allocation per_tile_allocation(std::string_view name, memory_kind kind, std::uint32_t ipu,
                                                std::uint32_t first_tile, std::uint32_t tiles,
                                                std::uint64_t bytes_per_tile) {
  return memory_allocation{std::string(name), kind, data_type::U8, ipu, map_per_tile(bytes_per_tile, tiles, first_tile)};
}

/// A lower bound on the vertex state one op leaves on each tile it runs on: every worker thread runs
/// one vertex, whose state holds one 32-bit address per operand. Codelet instructions (shared by all
/// vertices of a type) and the control program are not in the spec; a caller with a profile adds
/// them as `code` allocations.
constexpr std::uint64_t vertex_state_bytes(const architecture_description& a, std::uint32_t operands) noexcept {
  return std::uint64_t{a.worker_threads_per_tile} * operands * 4;
}

struct memory_options {
  double available_memory_proportion = default_available_memory_proportion;
  std::size_t worst_tiles = 5;       // tiles named in the report and error
  std::size_t tensors_per_tile = 3;  // largest allocations named per tile
};

/// One tile's bytes by kind (indexed by memory_kind).
struct tile_memory {
  std::uint32_t tile = 0;
  std::array<std::uint64_t, num_memory_kinds> by_kind{};

  [[nodiscard]] constexpr std::uint64_t bytes(memory_kind k) const noexcept { return by_kind[static_cast<std::size_t>(k)]; }
  [[nodiscard]] constexpr std::uint64_t total() const noexcept {
    std::uint64_t t = 0;
    for (auto b : by_kind) t += b;
    return t;
  }
};

struct ipu_memory_report {
  std::uint32_t ipu = 0;
  std::uint64_t tile_capacity = 0;           // SRAM per tile
  std::uint64_t temporary_budget = 0;        // available memory proportion x SRAM per tile
  std::uint64_t total_bytes = 0;             // all tiles of the IPU
  std::uint32_t tiles_over_capacity = 0;
  std::uint32_t tiles_over_temporary_budget = 0;
  std::vector<tile_memory> worst_tiles;      // fullest first (by total, or by temporaries when only
                                             // the temporary budget is exceeded)
  [[nodiscard]] constexpr bool fits() const noexcept {
    return tiles_over_capacity == 0 && tiles_over_temporary_budget == 0;
  }
};

struct memory_report {
  std::vector<ipu_memory_report> ipus;  // one per IPU; empty for the host device
  [[nodiscard]] constexpr bool fits() const noexcept {
    return std::all_of(ipus.begin(), ipus.end(), [](const ipu_memory_report& r) { return r.fits(); });
  }
};

namespace detail::device {
constexpr void check_allocation(const device_description& d, const memory_allocation& a) {
  if (a.ipu >= d.num_ipus)
    throw error(error_category::usage,
                "'" + a.name + "' is placed on IPU " + format_uint(a.ipu) + " of a " + format_uint(d.num_ipus) +
                    "-IPU device",
                "memory accounting", "place it on an IPU from 0 to " + format_uint(d.num_ipus - 1));
  if (a.mapping.end_tile() > d.arch.tiles_per_ipu)
    throw error(error_category::usage,
                "'" + a.name + "' is mapped up to tile " + format_uint(a.mapping.end_tile() - 1) + " but an IPU has " +
                    format_uint(d.arch.tiles_per_ipu) + " tiles",
                "memory accounting", "map it onto tiles 0 to " + format_uint(d.arch.tiles_per_ipu - 1));
}
}  // namespace detail::device

/// Bytes on every tile of `ipu`, by kind. Throws ipu::error (usage) for an allocation outside the device.
constexpr std::vector<tile_memory> tile_usage(const device_description& d, std::span<const memory_allocation> allocations,
                                              std::uint32_t ipu) {
  std::vector<tile_memory> tiles(d.has_tile_limits() ? d.arch.tiles_per_ipu : 0);
  for (std::uint32_t t = 0; t < tiles.size(); ++t) tiles[t].tile = t;
  for (const auto& a : allocations) {
    if (!d.has_tile_limits()) break;
    detail::device::check_allocation(d, a);
    if (a.ipu != ipu) continue;
    const auto k = static_cast<std::size_t>(a.kind);
    for (std::uint32_t t = a.mapping.first_tile; t < a.mapping.end_tile(); ++t) tiles[t].by_kind[k] += a.bytes_on_tile(t);
  }
  return tiles;
}

/// Checks every tile of every IPU: total bytes <= SRAM per tile, temporaries <= available memory
/// proportion x SRAM per tile. The host device has no tile limits: its report is empty and fits.
constexpr memory_report check_memory(const device_description& d, std::span<const memory_allocation> allocations,
                                     const memory_options& opts = {}) {
  memory_report report;
  if (!d.has_tile_limits()) return report;
  detail::device::check_available_memory_proportion(opts.available_memory_proportion, "memory check");
  const std::uint64_t capacity = d.arch.sram_bytes_per_tile;
  const auto budget = static_cast<std::uint64_t>(opts.available_memory_proportion * static_cast<double>(capacity));
  for (std::uint32_t ipu = 0; ipu < d.num_ipus; ++ipu) {
    auto tiles = tile_usage(d, allocations, ipu);
    ipu_memory_report r{ipu, capacity, budget, 0, 0, 0, {}};
    for (const auto& t : tiles) {
      r.total_bytes += t.total();
      if (t.total() > capacity) ++r.tiles_over_capacity;
      if (t.bytes(memory_kind::temporary) > budget) ++r.tiles_over_temporary_budget;
    }
    const bool by_temporaries = r.tiles_over_capacity == 0 && r.tiles_over_temporary_budget > 0;
    auto key = [by_temporaries](const tile_memory& t) {
      return by_temporaries ? t.bytes(memory_kind::temporary) : t.total();
    };
    const auto n = std::min(opts.worst_tiles, tiles.size());
    std::partial_sort(tiles.begin(), tiles.begin() + static_cast<std::ptrdiff_t>(n), tiles.end(),
                      [&](const tile_memory& x, const tile_memory& y) {
                        return key(x) != key(y) ? key(x) > key(y) : x.tile < y.tile;
                      });
    tiles.resize(n);
    r.worst_tiles = std::move(tiles);
    report.ipus.push_back(std::move(r));
  }
  return report;
}

/// What an out-of-memory ipu::error says, as data (so it can be checked at compile time).
struct out_of_memory_details {
  std::string message;
  std::string location;
  std::string hint;
};

/// The error content for the first IPU of `report` that does not fit (empty strings if all fit).
constexpr out_of_memory_details describe_out_of_memory(const device_description& d,
                                                       std::span<const memory_allocation> allocations,
                                                       const memory_report& report, const memory_options& opts = {}) {
  using ipu::format_bytes;
  using ipu::format_uint;
  out_of_memory_details out;
  const ipu_memory_report* bad = nullptr;
  std::vector<std::uint32_t> others;
  for (const auto& r : report.ipus) {
    if (r.fits()) continue;
    if (bad == nullptr) bad = &r;
    else others.push_back(r.ipu);
  }
  if (bad == nullptr) return out;
  const auto& r = *bad;
  const bool over_capacity = r.tiles_over_capacity > 0;

  out.location += "IPU " + format_uint(r.ipu) + " of " + to_string(d);
  std::string& m = out.message;
  if (over_capacity) {
    m += "out of memory: " + format_uint(r.tiles_over_capacity) + " of " + format_uint(d.arch.tiles_per_ipu) +
        " tiles need more than the " + format_bytes(r.tile_capacity) + " of a tile; the IPU holds " +
        format_bytes(r.total_bytes) + " of its " + format_bytes(d.arch.sram_bytes_per_ipu());
  } else {
    m += "out of temporary memory: " + format_uint(r.tiles_over_temporary_budget) + " of " +
        format_uint(d.arch.tiles_per_ipu) + " tiles need more temporary memory than the " +
        format_bytes(r.temporary_budget) + " the available memory proportion (" +
        ipu::format_fixed(opts.available_memory_proportion, 2) + ") leaves per tile";
  }

  // The fullest tiles, their bytes by kind, and the largest allocations on them.
  bool f32_on_worst = false, activations_on_worst = false;
  std::uint64_t activation_bytes = 0, temporary_bytes = 0, worst_total = 0;
  m += ". Fullest tiles:";
  for (std::size_t i = 0; i < r.worst_tiles.size(); ++i) {
    const auto& t = r.worst_tiles[i];
    if (over_capacity ? t.total() <= r.tile_capacity : t.bytes(memory_kind::temporary) <= r.temporary_budget) break;
    if (i == 0) {
      worst_total = t.total();
      activation_bytes = t.bytes(memory_kind::activation);
      temporary_bytes = t.bytes(memory_kind::temporary);
    }
    m += (i == 0 ? " tile " : "; tile ") + format_uint(t.tile) + ": " + format_bytes(t.total()) + " (";
    bool first = true;
    for (auto k : all_memory_kinds) {
      if (t.bytes(k) == 0) continue;
      m += (first ? "" : ", ") + std::string(to_string(k)) + " " + format_uint(t.bytes(k));
      first = false;
    }
    m += ")";
    // (bytes on the tile, allocation index); ties keep the caller's order.
    std::vector<std::pair<std::uint64_t, std::size_t>> on_tile;
    for (std::size_t ai = 0; ai < allocations.size(); ++ai) {
      const auto& a = allocations[ai];
      if (a.ipu != r.ipu) continue;
      const auto b = a.bytes_on_tile(t.tile);
      if (b == 0) continue;
      on_tile.emplace_back(b, ai);
      if (a.type == data_type::F32 && a.kind != memory_kind::code) f32_on_worst = true;
      if (a.kind == memory_kind::activation) activations_on_worst = true;
    }
    std::sort(on_tile.begin(), on_tile.end(),
              [](const auto& x, const auto& y) { return x.first != y.first ? x.first > y.first : x.second < y.second; });
    if (on_tile.size() > opts.tensors_per_tile) on_tile.resize(opts.tensors_per_tile);
    for (std::size_t j = 0; j < on_tile.size(); ++j) {
      const auto& a = allocations[on_tile[j].second];
      // Appended piece by piece: GCC 12 cannot constant-evaluate a conditional between string temporaries.
      m += j == 0 ? ", largest: '" : ", '";
      m += a.name;
      m += "' " + format_uint(on_tile[j].first) + " B (";
      m += to_string(a.kind);
      if (a.kind != memory_kind::code && a.type != data_type::U8) {
        m += ' ';
        m += to_string(a.type);
      }
      m += ')';
    }
  }
  if (!others.empty()) {
    m += ". IPU";
    m += others.size() > 1 ? "s " : " ";
    for (std::size_t i = 0; i < others.size(); ++i) m += (i ? ", " : "") + format_uint(others[i]);
    m += " also do";
    m += others.size() > 1 ? "" : "es";
    m += " not fit";
  }

  // What would help, most effective first.
  std::string& h = out.hint;
  if (over_capacity) {
    const std::uint64_t per_ipu = d.arch.sram_bytes_per_ipu();
    if (r.total_bytes > per_ipu) {
      // If every IPU were this full, the model would need this many IPUs (rounded to a power of two).
      const std::uint64_t need =
          ipu::ceil_div(ipu::mul_sat(r.total_bytes, d.num_ipus), per_ipu);
      std::uint64_t ipus = 1;
      while (ipus < need) ipus *= 2;
      h += "this IPU's data is " + format_uint(r.total_bytes * 100 / per_ipu) +
          "% of an IPU's memory, so a model loading every IPU alike needs at least " + format_uint(ipus) +
          " IPUs; try: ";
    } else {
      h += "the IPU has room in total but its tiles are unevenly used: spread the largest tensors over more tiles; "
          "or try: ";
    }
    h += "more IPUs (ShardedExecution, or PipelinedExecution with more blocks); pipelining, to split the layers "
         "across IPUs";
    if (d.arch.has_streaming_memory())
      h += "; phased execution (SerialPhasedExecution / ParallelPhasedExecution), to keep weights in Streaming "
           "Memory between phases";
    if (f32_on_worst) h += "; lower precision (FP16 halves the F32 tensors on these tiles)";
    if (activations_on_worst)
      h += "; a smaller batch (activations are " + format_uint(worst_total == 0 ? 0 : activation_bytes * 100 / worst_total) +
           "% of the fullest tile)";
    // Temporaries are sized by the available memory proportion, not by what else the tile holds:
    // a lower proportion makes the planner serialise the op into smaller passes.
    if (worst_total != 0 && temporary_bytes * 5 >= worst_total)
      h += "; a lower available memory proportion (poptorch.set_available_memory; temporaries are " +
           format_uint(temporary_bytes * 100 / worst_total) + "% of the fullest tile)";
  } else {
    h += "raise the available memory proportion (poptorch.set_available_memory), serialise the matmul "
        "(poptorch.serializedMatMul) or use a smaller batch";
  }
  return out;
}

/// Throws ipu::error (memory) when `allocations` do not fit on device `d` (describe_out_of_memory).
constexpr void require_memory_fits(const device_description& d, std::span<const memory_allocation> allocations,
                                   const memory_options& opts = {}) {
  const auto report = check_memory(d, allocations, opts);
  if (report.fits()) return;
  auto details = describe_out_of_memory(d, allocations, report, opts);
  throw error(error_category::memory, std::move(details.message), std::move(details.location), std::move(details.hint));
}

}  // namespace ipu
