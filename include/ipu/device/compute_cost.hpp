#pragma once
// Compute cycles of matmuls, convolutions and element-wise ops, modelled from the architecture
// figures rather than fitted: how work is split over tiles, how full the AMP runs on each tile, what
// the operands cost to exchange, and the reduction when input channels are split. See
// docs/cost-model.md for the derivations.
//
// AMP geometry (per tile, per precision), from the local memory ports. Each cycle the AMP writes
// partial sums through the write port and reads the same number back plus new inputs through the
// read port:
//   partials per cycle  po = write_bytes_per_cycle / partial_bytes
//   inputs per cycle    pi = (read_bytes_per_cycle - po * partial_bytes) / input_bytes
//   output channels     nb = macs_per_cycle / pi          (each input feeds nb accumulators)
//   cycles per row      c  = ceil(nb / po)                 (the row's nb partials leave at po per cycle)
//   input channels      kb = pi * c                        (inputs consumed while they do)
//   weight block load   w  = ceil(kb * nb * input_bytes / load bytes per cycle)
// The weights go to the conv units with 64-bit loads (8 bytes a cycle) unless 128-bit loads (16,
// the whole read port) are asked for: PopLibs' ConvOptions::use128BitConvUnitLoad, false by default,
// which halves the target's coefficient-load bytes (ConvModel.cpp, addPartialCalcCycleEstimate).
// Mk2 FP16.16: po = 4, pi = 4, nb = 16, c = 4, kb = 16, w = 64 (32 with 128-bit loads), and
// kb * nb / c = 64 MACs per cycle.
//
// Tile cycles for a piece with g groups, r rows, k input channels, n output channels, p kernel
// positions, on W worker threads (each issues every W-th cycle, so a tile reaches its peak only with
// all W busy): one AMP vertex (vertex_cost.hpp) over K = ceil(k / kb) input blocks and
// N = ceil(n / nb) output blocks, each loading w weight cycles and streaming about W * ceil(r / W) * c
// cycles, plus PopLibs' supervisor and per-worker fixed costs. One kernel position: PopLibs'
// ConvPartial1x1Out. More: ConvPartialnx1, which repeats the weight load and the worker run per kernel
// position, pays per field row each worker touches, and needs a vertex zeroing the partials first;
// with a weight height h > 1 a block holds kb / h input channels of h kernel rows, so a kernel with
// few input channels (a first layer's 3) needs 1/h of the outer positions. The cheapest vertex wins.
// When input channels are split over s tiles, the partials are reduced in 1 to 3 stages (PopLibs'
// multi-stage reduce), each an exchange of (depth - 1) partials per output and a reduce vertex.
//
// Element-wise (vector) ops: one 64-bit result vector per cycle (the write port), vw = write bytes /
// element bytes elements; a vector needs max(ops, ceil(inputs * vw * bytes / read bytes), 1) cycles:
//   cycles = L + W * ceil(ceil(e / vw) / W) * per_vector
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/device/architecture.hpp"
#include "ipu/device/bsp.hpp"
#include "ipu/device/compute_shape.hpp"
#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/precision.hpp"
#include "ipu/device/tile_mapping.hpp"
#include "ipu/device/timing.hpp"
#include "ipu/device/vertex_cost.hpp"
#include "ipu/error.hpp"

namespace ipu {

/// The shape of one AMP pass at a precision (see the file comment for the derivation).
struct amp_geometry {
  std::uint32_t inputs_per_cycle = 1;
  std::uint32_t partials_per_cycle = 1;
  std::uint32_t in_channels_per_block = 1;   // kb
  std::uint32_t out_channels_per_block = 1;  // nb
  std::uint32_t cycles_per_row = 1;          // c
  std::uint32_t weight_load_cycles = 0;      // w

  /// The rate the geometry sustains: kb * nb / c (equals macs_per_cycle for the built-in chips).
  [[nodiscard]] constexpr std::uint64_t macs_per_cycle() const noexcept {
    return std::uint64_t{in_channels_per_block} * out_channels_per_block / cycles_per_row;
  }
  friend constexpr bool operator==(const amp_geometry&, const amp_geometry&) = default;
};

/// Bytes a cycle the supervisor loads into the conv units' weight registers: one ld64 (8 bytes) or
/// one ld128 (16), never more than the read port.
constexpr std::uint32_t conv_unit_load_bytes_per_cycle(const architecture_description& a,
                                                       bool use_128bit_conv_unit_load) noexcept {
  return std::max<std::uint32_t>(1, std::min<std::uint32_t>(a.local_read_bytes_per_cycle,
                                                            use_128bit_conv_unit_load ? 16 : 8));
}

constexpr amp_geometry amp_geometry_for(const architecture_description& a, precision p,
                                        bool use_128bit_conv_unit_load = false) {
  using ipu::ceil_div;
  ipu::require_ipu_figures(a, "amp_geometry_for");
  const std::uint32_t in_b = input_bytes(p), part_b = partials_bytes(p);
  amp_geometry g;
  g.partials_per_cycle = std::max<std::uint32_t>(1, a.local_write_bytes_per_cycle / part_b);
  const std::uint32_t partial_reads = g.partials_per_cycle * part_b;
  const std::uint32_t input_budget =
      a.local_read_bytes_per_cycle > partial_reads ? a.local_read_bytes_per_cycle - partial_reads : 0;
  g.inputs_per_cycle = std::max<std::uint32_t>(1, input_budget / in_b);
  g.out_channels_per_block = std::max<std::uint32_t>(1, a.macs_per_cycle(p) / g.inputs_per_cycle);
  g.cycles_per_row = static_cast<std::uint32_t>(ceil_div(g.out_channels_per_block, g.partials_per_cycle));
  g.in_channels_per_block = g.inputs_per_cycle * g.cycles_per_row;
  g.weight_load_cycles = static_cast<std::uint32_t>(
      ceil_div(std::uint64_t{g.in_channels_per_block} * g.out_channels_per_block * in_b,
               conv_unit_load_bytes_per_cycle(a, use_128bit_conv_unit_load)));
  return g;
}

/// The AMP vertices the planner chooses between (PopLibs' ConvVertexType candidates).
enum class amp_vertex : std::uint8_t {
  conv_1x1,  // ConvPartial1x1Out: one kernel position
  conv_nx1,  // ConvPartialnx1 after a zeroing vertex: more kernel positions
  slic,      // ConvPartial1xNSLIC: groups of few channels, 1x4 kernel windows
};

/// The vertex a tile's piece runs on, its configuration and its cycles.
struct amp_vertex_choice {
  amp_vertex vertex = amp_vertex::conv_1x1;
  std::uint32_t weight_height = 1;  // nx1: kernel rows one weight block holds, kb / h input channels each
  slic_config slic{};               // slic: its grouping and conv-unit chains
  std::uint64_t cycles = 0;
  friend constexpr bool operator==(const amp_vertex_choice&, const amp_vertex_choice&) = default;
};

/// The cheapest vertex for one tile's piece `work` (PopLibs' planner costs every candidate vertex
/// type and keeps the cheapest plan): its inner loops as the file comment derives them and its
/// fixed costs as PopLibs estimates them (vertex_cost.hpp). One kernel position: ConvPartial1x1Out.
/// More: ConvPartialnx1 and its zeroing vertex, at weight height 1 or, when the kernel's outermost
/// dimension has more than one row, at a height h dividing c (input-channel groups of kb / h, still
/// whole per-cycle loads), which folds h kernel rows into one weight block: ceil(rows / h) outer
/// positions and ceil(k / (kb / h)) input blocks. `use_128bit_conv_unit_load`: PopLibs' option of
/// that name (weight loads; a height of 4 always loads 64 bits). Convolutions with half inputs
/// (kernel_width > 0: PopLibs disables SLIC for fully connected layers) whose groups have at most 4
/// input and output channels on the tile, at innermost stride 1 or 2, may also take the SLIC vertex
/// on IPU2 and later when the conv units form chains of 4 (c = 4): PopLibs' groupings of 1 x 4,
/// 2 x 2, 4 x 1 channels (and 8 x 1, 16 x 1 with 16 half-partial units), on 2 chains, or 4 with 16
/// half-partial units.
constexpr amp_vertex_choice choose_amp_vertex(const architecture_description& a, precision p, const amp_problem& work,
                                              bool use_128bit_conv_unit_load = false) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  if (work.empty()) return {};
  const auto g = amp_geometry_for(a, p, use_128bit_conv_unit_load);
  const auto path = amp_code_path_for(p, g.out_channels_per_block);
  const std::uint64_t kb = g.in_channels_per_block, c = g.cycles_per_row;
  const std::uint64_t out_blocks = ceil_div(work.out_channels, g.out_channels_per_block);
  if (work.kernel_positions == 1)
    return {amp_vertex::conv_1x1, 1, {},
            amp_1x1_vertex_cycles(a, path, work.groups, ceil_div(work.in_channels, kb), out_blocks, work.rows, c,
                                  g.weight_load_cycles)};
  const std::uint64_t width =
      work.kernel_width == 0 || work.kernel_positions % work.kernel_width != 0 ? work.kernel_positions
                                                                                : work.kernel_width;
  const std::uint64_t outer = work.kernel_positions / width;
  const std::uint64_t zero =
      amp_zero_vertex_cycles(a, work.groups, out_blocks, work.rows, g.out_channels_per_block);
  amp_vertex_choice best{amp_vertex::conv_nx1, 1, {},
                         zero + amp_nx1_vertex_cycles(a, path, work.groups, ceil_div(work.in_channels, kb), out_blocks,
                                                      kernel_loops{outer, width}, work.rows, work.row_width, c,
                                                      g.weight_load_cycles)};
  // PopLibs' SLIC codelets are built for IPU2 on (__IPU_ARCH_VERSION__ >= 2).
  if (a.ipu_version != "ipu1" && input_bytes(p) == 2 && c == 4 && work.kernel_width != 0 &&
      work.stride_width <= 2) {
    const bool float_partials = partials_bytes(p) == 4;
    const bool sixteen = !float_partials && g.out_channels_per_block == 16;
    const std::uint64_t sub_kernels = mul_sat(ceil_div(width, slic_window_width), outer);
    const slic_config groupings[] = {{1, 4}, {2, 2}, {4, 1}, {8, 1}, {16, 1}};
    for (std::uint32_t chains : {4u, 2u}) {
      if (chains == 4 && !sixteen) continue;
      for (auto s : groupings) {
        if (s.conv_groups > 4 && !sixteen) continue;
        if (work.in_channels > s.channels || work.out_channels > s.channels) continue;
        s.chains = chains;
        const std::uint64_t cycles = slic_vertex_cycles(a, s, float_partials, work.groups, sub_kernels, work.rows,
                                                        work.row_width, std::max<std::uint64_t>(work.stride_width, 1));
        if (cycles < best.cycles) best = {amp_vertex::slic, 1, s, cycles};
      }
    }
  }
  const std::uint64_t height = work.kernel_height == 0 ? outer : work.kernel_height;
  if (height < 2 || outer % height != 0) return best;
  const std::uint64_t block_bytes = mul_sat(mul_sat(kb, g.out_channels_per_block), input_bytes(p));
  for (std::uint32_t h = 2; h <= c; ++h) {
    if (c % h != 0) continue;
    // PopLibs: height 4 shuffles its weights and cannot use 128-bit loads.
    const std::uint32_t full_load = conv_unit_load_bytes_per_cycle(a, use_128bit_conv_unit_load);
    const std::uint64_t load = h == 4 ? std::min<std::uint32_t>(full_load, 8) : full_load;
    const kernel_loops loops{mul_sat(ceil_div(height, h), outer / height), width};
    const std::uint64_t cycles =
        zero + amp_nx1_vertex_cycles(a, path, work.groups, ceil_div(work.in_channels, kb / h), out_blocks, loops,
                                     work.rows, work.row_width, c, ceil_div(block_bytes, load), h);
    if (cycles < best.cycles) best = {amp_vertex::conv_nx1, h, {}, cycles};
  }
  return best;
}

/// Cycles one tile spends on its piece `work` of a matmul / convolution: the cheapest vertex's
/// (choose_amp_vertex).
constexpr std::uint64_t amp_tile_cycles(const architecture_description& a, precision p, const amp_problem& work,
                                        bool use_128bit_conv_unit_load = false) {
  return choose_amp_vertex(a, p, work, use_128bit_conv_unit_load).cycles;
}

/// Elements of `t` in one vector result: the write port's bytes per cycle / element size.
constexpr std::uint32_t vector_width(const architecture_description& a, data_type t) noexcept {
  return std::max<std::uint32_t>(1, a.local_write_bytes_per_cycle / static_cast<std::uint32_t>(size_of(t)));
}

/// Cycles for one tile to compute `elements` results of type `t`, each reading `inputs` operands of
/// type `t` and taking `ops_per_vector` vector instructions per result vector (file comment).
constexpr std::uint64_t vector_tile_cycles(const architecture_description& a, data_type t, std::uint64_t elements,
                                           std::uint32_t inputs, std::uint32_t ops_per_vector = 1) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  ipu::require_ipu_figures(a, "vector_tile_cycles");
  if (elements == 0) return 0;
  const std::uint64_t vw = vector_width(a, t);
  const std::uint64_t bytes = size_of(t);
  const std::uint64_t per_vector =
      std::max({std::uint64_t{ops_per_vector}, ceil_div(inputs * vw * bytes, a.local_read_bytes_per_cycle),
                ceil_div(vw * bytes, a.local_write_bytes_per_cycle), std::uint64_t{1}});
  const std::uint64_t w = a.worker_threads_per_tile;
  return a.memory_latency_cycles + mul_sat(w * ceil_div(ceil_div(elements, vw), w), per_vector);
}

/// An element-wise op over a tensor mapped linearly (grain: one vector) on `tiles` tiles (0: all
/// tiles of one IPU), operands mapped alike so nothing is exchanged.
struct vector_op_cost {
  linear_tile_mapping mapping;
  std::uint64_t cycles = 0;  // the fullest tile's
};

constexpr vector_op_cost elementwise_cost(const architecture_description& a, data_type t, std::uint64_t elements,
                                          std::uint32_t inputs, std::uint32_t ops_per_vector = 1,
                                          std::uint32_t tiles = 0) {
  ipu::require_ipu_figures(a, "elementwise_cost");
  const auto m = map_linearly(elements, tiles == 0 ? a.tiles_per_ipu : tiles, vector_width(a, t));
  return {m, vector_tile_cycles(a, t, m.max_elements_per_tile(), inputs, ops_per_vector)};
}

/// Options of the matmul / convolution planner.
struct amp_plan_options {
  std::uint32_t tiles = 0;  // tiles the op may use; 0: all tiles of one IPU
  double available_memory_proportion = default_available_memory_proportion;
  /// PopLibs' use128BitConvUnitLoad: load the AMP's weights 128 bits a cycle instead of 64 (the
  /// default, as in PopLibs).
  bool use_128bit_conv_unit_load = false;
};

/// The cost of a matmul / convolution split over tiles: one superstep that exchanges the operands to
/// the tiles and runs the AMP, and, when input channels are split, one that exchanges and reduces the
/// partial sums.
struct amp_plan {
  amp_problem problem;
  precision prec = precision::fp32;
  amp_partition parts;
  std::uint32_t tiles_used = 0;
  amp_problem tile_work;                       // the largest piece
  amp_vertex_choice vertex;                    // the vertex computing it
  std::uint64_t operand_bytes_per_tile = 0;    // received in the first exchange (after supertile sharing)
  std::uint64_t reduction_bytes_per_tile = 0;  // partials received in the reduction's exchanges
  superstep compute;                           // per serial pass
  superstep reduction;                         // per serial pass, all stages; zero without an input-channel split
  std::uint32_t reduction_stages = 0;          // supersteps in `reduction` (PopLibs' multi-stage reduce)
  std::uint64_t temporary_bytes_per_tile = 0;  // one pass's operand copies, partials and receive buffers
  std::uint64_t temporary_budget_per_tile = 0;
  std::uint64_t ideal_cycles = 0;              // MACs at peak on every available tile

  [[nodiscard]] constexpr bool fits_temporary_budget() const noexcept {
    return temporary_bytes_per_tile <= temporary_budget_per_tile;
  }
  [[nodiscard]] constexpr std::uint64_t total_cycles() const noexcept {
    return ipu::mul_sat(parts.serial_passes, compute.total() + reduction.total());
  }
  /// ideal / total: 1 would be the AMP at peak on every tile with nothing else to do.
  [[nodiscard]] constexpr double efficiency() const noexcept {
    const auto t = total_cycles();
    return t == 0 ? 1.0 : static_cast<double>(ideal_cycles) / static_cast<double>(t);
  }
};

namespace detail::device {
constexpr std::uint32_t checked_tiles(const architecture_description& a, const amp_plan_options& opts) {
  if (opts.tiles > a.tiles_per_ipu)
    throw error(error_category::usage,
                "an op may use at most the " + format_uint(a.tiles_per_ipu) + " tiles of one IPU, not " +
                    format_uint(opts.tiles),
                "matmul / convolution plan", "split the op across IPUs in the graph (sharding or pipelining)");
  check_available_memory_proportion(opts.available_memory_proportion, "matmul / convolution plan");
  return opts.tiles == 0 ? a.tiles_per_ipu : opts.tiles;
}
}  // namespace detail::device

/// The cost of `p` on `d` under a given partition (balanced first): per serial pass, and in total
/// passes x per-pass supersteps (each pass costed as the problem serial_pass returns).
/// Operands: each tile needs its input block (g x input rows x k) and weight block
/// (g x positions x k x n); it already holds its linear share of both operands, and a supertile pair
/// sharing a block receives it once, halving that block's cost per tile. Partials (input channels
/// split s ways): each tile reduces 1/s of its g x rows x n partials, receiving s - 1 partials for
/// each. Throws ipu::error for a partition needing more tiles than available, more tiles than an IPU
/// has (usage) or an available memory proportion outside (0, 1] (options).
constexpr amp_plan evaluate_amp_partition(const device_description& d, const amp_problem& p, precision prec,
                                          amp_partition parts, const amp_plan_options& opts = {}) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  const auto& a = d.arch;
  ipu::require_ipu_figures(a, "evaluate_amp_partition");
  const std::uint32_t tiles_available = detail::device::checked_tiles(a, opts);
  amp_plan plan;
  plan.problem = p;
  plan.prec = prec;
  plan.temporary_budget_per_tile =
      static_cast<std::uint64_t>(opts.available_memory_proportion * static_cast<double>(a.sram_bytes_per_tile));
  plan.ideal_cycles = ideal_amp_cycles(a, prec, p.macs(), tiles_available);
  if (p.empty()) return plan;

  parts = balanced(p, parts);
  if (parts.tiles() > tiles_available)
    throw error(error_category::usage,
                "the partition needs " + ipu::format_uint(parts.tiles()) + " tiles but " +
                    ipu::format_uint(tiles_available) + " are available",
                "matmul / convolution plan", "split the dimensions into fewer parts");
  plan.parts = parts;
  plan.tiles_used = static_cast<std::uint32_t>(std::min<std::uint64_t>(parts.tiles(), 0xFFFFFFFFu));
  const auto w = tile_share(p, parts);
  plan.tile_work = w;

  const std::uint64_t in_b = input_bytes(prec), part_b = partials_bytes(prec);
  const std::uint64_t input_block = mul_sat(mul_sat(mul_sat(w.groups, w.input_rows), w.in_channels), in_b);
  const std::uint64_t weight_block =
      mul_sat(mul_sat(mul_sat(mul_sat(w.groups, w.kernel_positions), w.in_channels), w.out_channels), in_b);
  const amp_problem pass = serial_pass(p, parts);
  const std::uint64_t operands_total =
      mul_sat(mul_sat(mul_sat(pass.groups, pass.input_rows), pass.in_channels), in_b) +
      mul_sat(mul_sat(mul_sat(mul_sat(pass.groups, pass.kernel_positions), pass.in_channels), pass.out_channels), in_b);
  const std::uint64_t owned = ceil_div(operands_total, plan.tiles_used);
  const std::uint64_t needed = input_block + weight_block;
  std::uint64_t received = needed > owned ? needed - owned : 0;
  // Supertiles: neighbours in the chosen tile order receive the same block.
  const std::uint64_t shared = parts.rows_innermost ? (parts.rows >= 2 ? weight_block : 0)
                                                    : (parts.out_channels >= 2 ? input_block : 0);
  received -= std::min(received, shared / 2);
  plan.operand_bytes_per_tile = received;

  const std::uint64_t sync = sync_cycles(d);
  plan.vertex = choose_amp_vertex(a, prec, w, opts.use_128bit_conv_unit_load);
  plan.compute = superstep{plan.vertex.cycles, sync, exchange_cycles(a, received)};

  std::uint64_t partial_temps = 0;
  if (parts.in_channels >= 2) {
    // Each stage is a superstep: receive (depth - 1) partials per output, add them. Intermediate
    // stages write partials; the last writes the output type. The single-input vertex needs the
    // outputs in whole accumulator loops and the received partials under 1/16 of the tile's memory.
    const std::uint64_t s = parts.in_channels;
    const std::uint64_t partials = mul_sat(mul_sat(w.groups, w.rows), w.out_channels);
    const auto stages = reduce_stages(ceil_div(partials, s), s);
    const bool float_partials = part_b == 4;
    std::uint64_t largest = 0;
    for (std::size_t i = 0; i < stages.size() && stages[i].depth > 1; ++i) {
      const bool last = i + 1 == stages.size() || stages[i + 1].depth <= 1;
      const std::uint64_t bytes = mul_sat(mul_sat(stages[i].depth - 1, stages[i].outputs), part_b);
      const bool single = stages[i].outputs % (float_partials ? 4 : 8) == 0 && bytes < a.sram_bytes_per_tile / 16;
      plan.reduction.compute_cycles += reduce_vertex_cycles(a, float_partials, last ? in_b == 4 : float_partials,
                                                            stages[i].outputs, stages[i].depth, single);
      plan.reduction.sync_cycles += sync;
      plan.reduction.exchange_cycles += exchange_cycles(a, bytes);
      plan.reduction_bytes_per_tile += bytes;
      largest = std::max(largest, bytes);
      ++plan.reduction_stages;
    }
    partial_temps = mul_sat(partials, part_b) + largest;
  }
  if (plan.vertex.vertex == amp_vertex::slic) {
    // The SLIC vertex's extra output buffer: its partials over the group blocks, + 200 bytes
    // (PopLibs ConvModel.cpp, addConvTempMemoryEstimate).
    const std::uint64_t partials = mul_sat(mul_sat(mul_sat(w.groups, w.rows), w.out_channels), part_b);
    partial_temps += ceil_div(partials, ceil_div(w.groups, plan.vertex.slic.conv_groups)) + 200;
  }
  plan.temporary_bytes_per_tile = needed + partial_temps;
  return plan;
}

/// Chooses the partition of `p` over the available tiles with the fewest cycles among those whose
/// temporaries fit the available memory proportion (ties: fewer tiles). Candidates: per dimension the
/// powers of two and the fill-the-tiles count (partition_candidates), both tile orders. When nothing
/// fits in one pass, it serialises like poplibs: 2, 4, 8... passes over rows or output channels,
/// stopping at the first pass count with a fitting plan. If even single-row, single-channel passes do
/// not fit, it returns the plan with the least temporary memory, for which fits_temporary_budget() is
/// false.
constexpr amp_plan plan_amp(const device_description& d, const amp_problem& p, precision prec,
                            const amp_plan_options& opts = {}) {
  ipu::require_ipu_figures(d.arch, "plan_amp");
  const std::uint64_t tiles = detail::device::checked_tiles(d.arch, opts);
  if (p.empty()) return evaluate_amp_partition(d, p, prec, {}, opts);
  std::optional<amp_plan> best_fit, least_memory;
  auto better = [](const amp_plan& x, const amp_plan& y) {
    if (x.total_cycles() != y.total_cycles()) return x.total_cycles() < y.total_cycles();
    if (x.tiles_used != y.tiles_used) return x.tiles_used < y.tiles_used;
    return x.temporary_bytes_per_tile < y.temporary_bytes_per_tile;
  };
  auto search = [&](std::uint64_t passes, bool over_rows) {
    const amp_problem pass = serial_pass(p, amp_partition{1, 1, 1, 1, false, passes, over_rows});
    for (auto pg : partition_candidates(pass.groups, tiles))
      for (auto pk : partition_candidates(pass.in_channels, tiles / pg))
        for (auto pn : partition_candidates(pass.out_channels, tiles / (pg * pk)))
          for (auto pr : partition_candidates(pass.rows, tiles / (pg * pk * pn)))
            for (bool rows_inner : {false, true}) {
              const auto plan = evaluate_amp_partition(
                  d, p, prec, amp_partition{pg, pr, pn, pk, rows_inner, passes, over_rows}, opts);
              if (plan.fits_temporary_budget()) {
                if (!best_fit || better(plan, *best_fit)) best_fit = plan;
              } else if (!least_memory || plan.temporary_bytes_per_tile < least_memory->temporary_bytes_per_tile ||
                         (plan.temporary_bytes_per_tile == least_memory->temporary_bytes_per_tile &&
                          better(plan, *least_memory))) {
                least_memory = plan;
              }
            }
  };
  search(1, false);
  const std::uint64_t longest = std::max(p.rows, p.out_channels);
  for (std::uint64_t passes = 2; !best_fit && passes < 2 * longest; passes *= 2) {
    if (passes / 2 < p.rows) search(passes, true);
    if (passes / 2 < p.out_channels) search(passes, false);
  }
  return best_fit ? *best_fit : *least_memory;
}

constexpr amp_plan plan_matmul(const device_description& d, const matmul_shape& s, precision prec,
                               const amp_plan_options& opts = {}) {
  return plan_amp(d, to_amp_problem(s), prec, opts);
}

constexpr amp_plan plan_conv(const device_description& d, const conv_shape& s, precision prec,
                             const amp_plan_options& opts = {}) {
  return plan_amp(d, to_amp_problem(s), prec, opts);
}

}  // namespace ipu
