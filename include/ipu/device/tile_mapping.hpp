#pragma once
// Where data and work go on an IPU's tiles.
//
// - `map_linearly`: Poplar's linear mapping of a flat tensor over consecutive tiles, in whole grains
//   (e.g. one vector of 4 halves), with an optional minimum per tile.
// - `amp_partition`: how a matmul / convolution (an amp_problem) is split over tiles, by groups,
//   output rows, output channels and input channels; `tile_share` is the largest piece a tile gets,
//   `partition_tile` the tile a piece goes to.
// Plain data in, plain data out, usable in constant evaluation; the cost model (compute_cost.hpp)
// and the memory accounting (memory.hpp) build on it.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/device/compute_shape.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// Poplar's default proportion of tile memory an op's temporaries may use (the "available memory
/// proportion" PopTorch's set_available_memory overrides).
inline constexpr double default_available_memory_proportion = 0.6;

namespace detail::device {
constexpr void check_available_memory_proportion(double p, const char* where) {
  if (!(p > 0.0 && p <= 1.0))
    throw error(error_category::options,
                "available memory proportion " + format_fixed(p > 0.0 && p < 1e6 ? p : 0.0, 3) + " is not in (0, 1]",
                where, "pass a proportion of tile memory such as 0.6 (Poplar's default)");
}
}  // namespace detail::device

/// Elements [begin, end) of a tensor held by one tile.
struct tile_interval {
  std::uint32_t tile = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  friend constexpr bool operator==(const tile_interval&, const tile_interval&) = default;
};

/// A flat tensor of `elements` spread over consecutive tiles from `first_tile`: every used tile but
/// the last holds exactly `elements_per_tile` (a whole number of grains), the last the remainder.
struct linear_tile_mapping {
  std::uint64_t elements = 0;
  std::uint64_t grain = 1;
  std::uint32_t first_tile = 0;
  std::uint32_t tiles_used = 0;
  std::uint64_t elements_per_tile = 0;

  /// One past the last tile used.
  [[nodiscard]] constexpr std::uint32_t end_tile() const noexcept { return first_tile + tiles_used; }

  [[nodiscard]] constexpr std::uint64_t elements_on_tile(std::uint32_t tile) const noexcept {
    if (tile < first_tile || tile >= end_tile()) return 0;
    const std::uint64_t begin = std::uint64_t{tile - first_tile} * elements_per_tile;
    return std::min(elements, begin + elements_per_tile) - begin;
  }

  /// The most elements any tile holds.
  [[nodiscard]] constexpr std::uint64_t max_elements_per_tile() const noexcept {
    return std::min(elements, elements_per_tile);
  }

  /// The tile holding element `i` (i < elements).
  [[nodiscard]] constexpr std::uint32_t tile_of(std::uint64_t i) const noexcept {
    return first_tile + static_cast<std::uint32_t>(elements_per_tile == 0 ? 0 : i / elements_per_tile);
  }

  [[nodiscard]] constexpr std::vector<tile_interval> intervals() const {
    std::vector<tile_interval> r;
    r.reserve(tiles_used);
    for (std::uint32_t t = 0; t < tiles_used; ++t) {
      const std::uint64_t b = std::uint64_t{t} * elements_per_tile;
      r.push_back({first_tile + t, b, std::min(elements, b + elements_per_tile)});
    }
    return r;
  }

  friend constexpr bool operator==(const linear_tile_mapping&, const linear_tile_mapping&) = default;
};

/// Maps `elements` linearly over at most `tiles` tiles starting at `first_tile` (Poplar's
/// mapTensorLinearly): grains = ceil(elements / grain); each tile takes
/// max(ceil(grains / tiles), ceil(min_elements_per_tile / grain)) grains. A grain of 0 counts as 1.
/// Throws ipu::error (usage) for 0 tiles with elements to place.
constexpr linear_tile_mapping map_linearly(std::uint64_t elements, std::uint32_t tiles, std::uint64_t grain = 1,
                                           std::uint64_t min_elements_per_tile = 0, std::uint32_t first_tile = 0) {
  using ipu::ceil_div;
  if (grain == 0) grain = 1;
  linear_tile_mapping m{elements, grain, first_tile, 0, 0};
  if (elements == 0) return m;
  if (tiles == 0)
    throw error(error_category::usage,
                "cannot map " + ipu::format_uint(elements) + " elements onto 0 tiles", "map_linearly",
                "pass at least one tile");
  const std::uint64_t grains = ceil_div(elements, grain);
  const std::uint64_t grains_per_tile = std::max(ceil_div(grains, tiles), ceil_div(min_elements_per_tile, grain));
  m.elements_per_tile = grains_per_tile * grain;
  m.tiles_used = static_cast<std::uint32_t>(ceil_div(elements, m.elements_per_tile));
  return m;
}

/// `bytes_per_tile` on each of `tiles` consecutive tiles (buffers, code, temporaries): a linear
/// mapping of bytes with one grain per tile.
constexpr linear_tile_mapping map_per_tile(std::uint64_t bytes_per_tile, std::uint32_t tiles,
                                           std::uint32_t first_tile = 0) noexcept {
  if (bytes_per_tile == 0 || tiles == 0) return {0, 1, first_tile, 0, 0};
  return {bytes_per_tile * tiles, bytes_per_tile, first_tile, tiles, bytes_per_tile};
}

/// How many parts each dimension of an amp_problem is split into; parts.tiles() tiles are used.
struct amp_partition {
  std::uint64_t groups = 1;
  std::uint64_t rows = 1;
  std::uint64_t out_channels = 1;
  std::uint64_t in_channels = 1;
  /// Tile order: true puts row parts on neighbouring tiles (they share a weight block), false puts
  /// output-channel parts there (they share an input block). Supertiles exploit the sharing.
  bool rows_innermost = false;
  /// Sequential passes (poplibs' serial split, PopTorch's serializedMatMul): the problem is cut into
  /// this many pieces along rows (`serial_over_rows`) or output channels, computed one after the
  /// other on the same tiles, so each pass needs less temporary memory.
  std::uint64_t serial_passes = 1;
  bool serial_over_rows = false;

  [[nodiscard]] constexpr std::uint64_t tiles() const noexcept { return groups * rows * out_channels * in_channels; }
  friend constexpr bool operator==(const amp_partition&, const amp_partition&) = default;
};

/// The part of `p` one serial pass of `parts` computes (dimensions rounded up); `p` itself for one pass.
constexpr amp_problem serial_pass(const amp_problem& p, const amp_partition& parts) noexcept {
  using ipu::ceil_div;
  amp_problem r = p;
  if (parts.serial_passes <= 1) return r;
  if (parts.serial_over_rows) {
    r.rows = ceil_div(p.rows, parts.serial_passes);
    r.input_rows = ceil_div(p.input_rows, parts.serial_passes);
  } else {
    r.out_channels = ceil_div(p.out_channels, parts.serial_passes);
  }
  return r;
}

/// Drops parts that would be empty: splitting 10 rows 4 ways gives pieces of 3, so only 4 parts
/// (3+3+3+1) are real, while 10 rows 8 ways gives pieces of 2, so 5 parts. p -> ceil(D / ceil(D / p)).
constexpr amp_partition balanced(const amp_problem& p, amp_partition parts) noexcept {
  using ipu::ceil_div;
  auto fix = [](std::uint64_t dim, std::uint64_t n) {
    if (dim == 0) return std::uint64_t{1};
    n = std::clamp<std::uint64_t>(n, 1, dim);
    return ceil_div(dim, ceil_div(dim, n));
  };
  parts.serial_passes = fix(parts.serial_over_rows ? p.rows : p.out_channels, parts.serial_passes);
  const amp_problem pass = serial_pass(p, parts);
  parts.groups = fix(pass.groups, parts.groups);
  parts.rows = fix(pass.rows, parts.rows);
  parts.out_channels = fix(pass.out_channels, parts.out_channels);
  parts.in_channels = fix(pass.in_channels, parts.in_channels);
  return parts;
}

/// The largest piece of `p` one tile computes in one pass under `parts` (dimensions rounded up).
constexpr amp_problem tile_share(const amp_problem& whole, const amp_partition& parts) noexcept {
  using ipu::ceil_div;
  const amp_problem p = serial_pass(whole, parts);
  return amp_problem{ceil_div(p.groups, parts.groups),         ceil_div(p.rows, parts.rows),
                     ceil_div(p.in_channels, parts.in_channels), ceil_div(p.out_channels, parts.out_channels),
                     p.kernel_positions,                         ceil_div(p.input_rows, parts.rows),
                     p.kernel_width,                             p.row_width,
                     p.kernel_height,                            p.stride_width};
}

/// Coordinates of one piece of a partitioned amp_problem.
struct amp_piece {
  std::uint64_t group = 0, row = 0, out_channel = 0, in_channel = 0;
};

/// The tile (counted from the first tile of the op) computing `piece`: groups outermost, then input
/// channel parts, then rows and output channels in the order `rows_innermost` chooses.
constexpr std::uint64_t partition_tile(const amp_partition& parts, const amp_piece& piece) noexcept {
  std::uint64_t t = piece.group * parts.in_channels + piece.in_channel;
  if (parts.rows_innermost) return (t * parts.out_channels + piece.out_channel) * parts.rows + piece.row;
  return (t * parts.rows + piece.row) * parts.out_channels + piece.out_channel;
}

/// Part counts worth trying for a dimension of size `dim` with at most `max_parts` parts: the powers
/// of two below min(dim, max_parts), and min(dim, max_parts) itself (filling the tiles).
constexpr std::vector<std::uint64_t> partition_candidates(std::uint64_t dim, std::uint64_t max_parts) {
  const std::uint64_t top = std::max<std::uint64_t>(1, std::min(dim, max_parts));
  std::vector<std::uint64_t> r;
  for (std::uint64_t p = 1; p < top; p *= 2) r.push_back(p);
  r.push_back(top);
  return r;
}

}  // namespace ipu
