#pragma once
// What a codelet costs beyond its inner loop: the overheads between the AMP's peak and a real
// convolution / matmul vertex, and the vertices that reduce partial sums across tiles. The constants
// are those of the open-source PopLibs cycle estimators, which poplin's planner uses to choose plans
// (lib/poplin/PerformanceEstimation.hpp, ConvModel.cpp, ConvReducePlan.cpp); docs/cost-model.md lists
// each with its source. The per-row AMP rate c comes from the memory ports (compute_cost.hpp): where
// PopLibs writes `constant + (n - 3) * core` for n >= 3 rows, the model keeps the constant and
// replaces core with c, i.e. (constant - 3 core) + n c.
//
// A supervisor vertex starts its 6 workers and waits for them: a run costs W x the slowest worker,
// but never less than W x the fastest plus a tag (14 cycles for the 1x1 vertex, 9 for nx1; 0 for a
// worker with no work).
//
// Two AMP vertices (PopLibs picks by kernel): kernels of one position use ConvPartial1x1Out, whose
// workers each take one run of rows; larger kernels use ConvPartialnx1, whose supervisor loops over
// kernel rows and columns, reloading weights for each position, and whose workers pay per field row
// they touch (one work-list item each), after a zeroing vertex clears the partials.
//
// Reduction (ConvReduce): s partials per output are added in 1, 2 or 3 stages (2 from depth 16, 3
// from 125), each a superstep of its own with a reduce vertex of depth ~ s^(1/stages).
#include <algorithm>
#include <array>
#include <cstdint>

#include "ipu/constexpr_math.hpp"
#include "ipu/device/architecture.hpp"
#include "ipu/device/precision.hpp"

namespace ipu {

/// Which of PopLibs' AMP worker code paths a precision takes. conv_units: output channels per AMP
/// block (amp_geometry::out_channels_per_block).
struct amp_code_path {
  bool float_activations = false;
  bool float_partials = true;
  std::uint32_t conv_units = 16;

  /// Half inputs with 16 units share the float-partials code (PopLibs' commonHalfAndFloatPartialsCodePath).
  [[nodiscard]] constexpr bool common_path() const noexcept {
    return (!float_activations && conv_units == 16) || float_partials;
  }
  /// PopLibs' core cycles per row, the `core` the model replaces with c.
  [[nodiscard]] constexpr std::uint64_t core_cycles() const noexcept { return float_activations ? 8 : 4; }
  /// 1x1 worker-state retention: cycles saved per worker run, and the input-channel share of them.
  [[nodiscard]] constexpr std::uint64_t retention_saving() const noexcept {
    return !float_activations && (float_partials || conv_units == 16) ? 7 : 0;
  }
  [[nodiscard]] constexpr std::uint64_t retention_in_chan_saving() const noexcept {
    return retention_saving() == 0 ? 0 : 3;
  }
  friend constexpr bool operator==(const amp_code_path&, const amp_code_path&) = default;
};

constexpr amp_code_path amp_code_path_for(precision p, std::uint32_t conv_units) noexcept {
  return {input_bytes(p) == 4, partials_bytes(p) == 4, conv_units};
}

/// A supervisor's wait for its workers: W x the slowest, at least W x the fastest + tag.
constexpr std::uint64_t supervisor_worker_cycles(std::uint64_t workers, std::uint64_t slowest, std::uint64_t fastest,
                                                 std::uint64_t tag) noexcept {
  using ipu::mul_sat;
  return std::max(mul_sat(workers, slowest), mul_sat(workers, fastest) + tag);
}

inline constexpr std::uint64_t amp_1x1_worker_tag = 14;  // "tag cost to worker with min cycles"
inline constexpr std::uint64_t amp_nx1_worker_tag = 9;

/// Cycles of one ConvPartial1x1Out worker run over `n` rows at `c` cycles per row; `zeroing` on the
/// first input-channel block, whose partials start from zero. 0 rows: the worker has no work item.
constexpr std::uint64_t amp_1x1_worker_cycles(const amp_code_path& k, std::uint64_t n, bool zeroing,
                                              std::uint64_t c) noexcept {
  using ipu::mul_sat;
  if (n == 0) return 0;
  const std::uint64_t z = zeroing ? 1 : 0;
  const std::uint64_t zero_per_row = k.float_activations && k.conv_units == 16 ? 8 : k.float_partials ? 4 : 2;
  const std::uint64_t zero_rows = z * (2 + zero_per_row * n);  // the paths that zero in the worker
  const std::uint64_t common_end = zeroing ? 1 : 2;             // the common path's exit
  const std::uint64_t loop = mul_sat(n, c), core3 = 3 * k.core_cycles();
  std::uint64_t cycles = 0;
  if (k.float_activations) {
    cycles = n == 1 ? 47 + zero_rows : n == 2 ? 46 + zero_rows : 46 - core3 + zero_rows + loop;
  } else if (k.common_path()) {
    cycles = n == 1 ? 31 + common_end : n == 2 ? 40 + common_end : (zeroing ? 37 : 38) - core3 + loop;
  } else {
    cycles = n == 1 ? 39 + zero_rows : n == 2 ? 40 + zero_rows : 41 - core3 + zero_rows + loop;
  }
  return cycles - k.retention_saving();
}

/// Cycles of one ConvPartial1x1Out vertex (PopLibs getConvPartial1x1SupervisorCycleEstimate, 16- and
/// 32-bit inputs): `groups` groups, `in_blocks` input-channel blocks, `out_blocks` output-channel
/// blocks of one pass each, `rows` rows split evenly over the W workers, `c` cycles per row and
/// `weight_load` cycles to load a block's weights. The first input block zeroes its partials.
constexpr std::uint64_t amp_1x1_vertex_cycles(const architecture_description& a, const amp_code_path& k,
                                              std::uint64_t groups, std::uint64_t in_blocks, std::uint64_t out_blocks,
                                              std::uint64_t rows, std::uint64_t c, std::uint64_t weight_load) {
  using ipu::mul_sat;
  if (groups == 0 || in_blocks == 0 || out_blocks == 0 || rows == 0) return 0;
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  const std::uint64_t most = ipu::ceil_div(rows, w), least = rows / w;
  // PopLibs' small-n cases are not monotonic (2 rows can cost more than 3): compare both shares.
  auto run = [&](bool zeroing) {
    const auto x = amp_1x1_worker_cycles(k, most, zeroing, c), y = amp_1x1_worker_cycles(k, least, zeroing, c);
    return supervisor_worker_cycles(w, std::max(x, y), std::min(x, y), amp_1x1_worker_tag);
  };
  const std::uint64_t cp = k.common_path() ? 1 : 0;
  const std::uint64_t first_in = 10 + 1 + mul_sat(out_blocks, 19 - cp + 7 + weight_load + run(true));
  const std::uint64_t later_in = 15 - cp + 1 + mul_sat(out_blocks, 19 + 6 + weight_load + run(false));
  const std::uint64_t retention =
      mul_sat(w, k.retention_saving() + mul_sat(k.retention_in_chan_saving(), mul_sat(in_blocks, groups) - 1));
  return 50 + retention + mul_sat(groups, 12 + cp + mul_sat(in_blocks - 1, later_in) + first_in);
}

/// Cycles of one ConvPartialnx1 work-list item: a run of `n` output elements of one field row.
constexpr std::uint64_t amp_nx1_item_cycles(const amp_code_path& k, std::uint64_t n, std::uint64_t c) noexcept {
  using ipu::mul_sat;
  const bool hh16 = !k.float_activations && !k.float_partials && k.conv_units == 16;
  const bool hf8 = !k.float_activations && k.float_partials && k.conv_units == 8;
  std::uint64_t cycles = 3;  // the second pointer and stride
  if (n == 0) cycles += 17;
  else if (n == 1) cycles += k.float_activations ? 33 : 29;
  else if (n == 2) cycles += k.float_activations ? 44 : 33 + (hh16 || hf8 ? 1 : 0);
  else cycles += (k.float_activations ? 45 : 34) - 3 * k.core_cycles() + mul_sat(n, c);
  return cycles - 9;  // convnx1WorkerRetentionSavings
}

/// Cycles of one ConvPartialnx1 worker over output elements [begin, end) of a field whose rows hold
/// `row_width` elements (0: one row): one work-list item per row the range touches.
constexpr std::uint64_t amp_nx1_worker_cycles(const amp_code_path& k, std::uint64_t begin, std::uint64_t end,
                                              std::uint64_t row_width, std::uint64_t c) noexcept {
  using ipu::mul_sat;
  std::uint64_t cycles = 17 + (k.float_partials ? 0 : 1);
  if (begin >= end) return cycles;
  if (row_width == 0) return cycles + amp_nx1_item_cycles(k, end - begin, c);
  const std::uint64_t first_row = begin / row_width, last_row = (end - 1) / row_width;
  if (first_row == last_row) return cycles + amp_nx1_item_cycles(k, end - begin, c);
  cycles += amp_nx1_item_cycles(k, (first_row + 1) * row_width - begin, c);
  cycles += amp_nx1_item_cycles(k, end - last_row * row_width, c);
  return cycles + mul_sat(last_row - first_row - 1, amp_nx1_item_cycles(k, row_width, c));
}

/// PopLibs' zeroing vertex before an nx1 vertex (estimateZeroSupervisorCycles, which estimates float
/// partials): each worker clears 1/W of rows x out_channels_per_block per output block, 2 per cycle.
constexpr std::uint64_t amp_zero_vertex_cycles(const architecture_description& a, std::uint64_t groups,
                                               std::uint64_t out_blocks, std::uint64_t rows,
                                               std::uint64_t out_channels_per_block) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  const std::uint64_t per_worker = ceil_div(mul_sat(rows, out_channels_per_block), w);
  return mul_sat(mul_sat(w, mul_sat(groups, out_blocks)), ceil_div(per_worker, 2) + 14 - 9);
}

/// The kernel's shape as the nx1 vertex loops over it: `rows` outer positions (all but the innermost
/// kernel dimension) x `width` inner positions.
struct kernel_loops {
  std::uint64_t rows = 1;
  std::uint64_t width = 1;
};

/// Supervisor cycles to finish loading a weight block beyond the load itself, by weight height h
/// (the kernel rows one block holds): 15, 46, 60 for heights 1, 2, 4 (PopLibs
/// getConvPartialnx1SupervisorInnerLoopCycleEstimateHalfFloat), 20 h otherwise.
constexpr std::uint64_t amp_nx1_weight_height_cycles(std::uint64_t weight_height) noexcept {
  switch (weight_height) {
    case 1: return 15;
    case 2: return 46;
    case 4: return 60;
    default: return ipu::mul_sat(20, weight_height);
  }
}

/// Cycles of one ConvPartialnx1 vertex (PopLibs getConvPartialnx1SupervisorCycleEstimate, 16- and
/// 32-bit inputs): `in_blocks` counts input-channel blocks only; every kernel position reloads the
/// block's weights and reruns the workers. Rows are split evenly over the W workers, each paying per
/// field row of `row_width` it touches (the tile's rows start at a field row). `weight_height`: the
/// kernel rows one weight block holds; `kernel.rows` already counts the outer positions that remain.
constexpr std::uint64_t amp_nx1_vertex_cycles(const architecture_description& a, const amp_code_path& k,
                                              std::uint64_t groups, std::uint64_t in_blocks, std::uint64_t out_blocks,
                                              kernel_loops kernel, std::uint64_t rows, std::uint64_t row_width,
                                              std::uint64_t c, std::uint64_t weight_load,
                                              std::uint64_t weight_height = 1) {
  using ipu::mul_sat;
  if (groups == 0 || in_blocks == 0 || out_blocks == 0 || rows == 0 || kernel.rows == 0 || kernel.width == 0)
    return 0;
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  std::uint64_t slowest = 0, fastest = ~std::uint64_t{0};
  for (std::uint64_t i = 0; i < w; ++i) {
    const auto cyc = amp_nx1_worker_cycles(k, i * rows / w, (i + 1) * rows / w, row_width, c);
    slowest = std::max(slowest, cyc);
    fastest = std::min(fastest, cyc);
  }
  const std::uint64_t positions = mul_sat(kernel.rows, kernel.width);
  const std::uint64_t workers = mul_sat(positions, supervisor_worker_cycles(w, slowest, fastest, amp_nx1_worker_tag));
  // Per kernel position: the weight load, the height's further load cycles, and 3 to start.
  const std::uint64_t position = 17 - 5 + weight_load + amp_nx1_weight_height_cycles(weight_height) + 3;
  const std::uint64_t inner = mul_sat(kernel.rows, 14 + mul_sat(kernel.width, position)) + workers;
  const std::uint64_t zero_partials_retention = k.float_partials ? 9 : 10;
  const std::uint64_t fixed = 109 + w * 9 + w * zero_partials_retention;
  const std::uint64_t zero_loop = mul_sat(groups, mul_sat(out_blocks, 17) + (out_blocks - 1) * 6 + 1) +
                                  (groups - 1) * 6 + 1;
  const std::uint64_t loops = mul_sat(groups, 16 + mul_sat(in_blocks, 14 + mul_sat(out_blocks, 14 + inner)));
  return fixed + zero_loop + loops;
}

/// A SLIC vertex configuration (PopLibs getConvVertexSLICCandidates, half inputs): `conv_groups`
/// groups of `channels` input and output channels each per pass, on `chains` chains of conv units
/// (4: all 16 units, one pass over the inputs; 2: 8 units, two passes), over 1x4 kernel windows.
struct slic_config {
  std::uint32_t conv_groups = 1;
  std::uint32_t channels = 4;
  std::uint32_t chains = 4;
  friend constexpr bool operator==(const slic_config&, const slic_config&) = default;
};

inline constexpr std::uint64_t slic_window_width = 4;

/// PopLibs' "half8Conv" SLIC code: 2 chains with half partials, which merges two output halves.
constexpr bool slic_half8(const slic_config& s, bool float_partials) noexcept {
  return s.chains == 2 && !float_partials;
}

/// Cycles of one SLIC work-list item: a run of `n` >= 1 output elements of one field row, at output
/// stride 1 or 2, `zeroing` on the first sub-kernel (PopLibs
/// getConvPartialSlicSupervisorInnerLoopCycleEstimateHalfFloat).
constexpr std::uint64_t slic_item_cycles(const slic_config& s, bool float_partials, std::uint64_t n, bool zeroing,
                                         std::uint64_t stride) noexcept {
  using ipu::mul_sat;
  const bool half8 = slic_half8(s, float_partials);
  const std::uint64_t threshold = half8 ? 6 : 5;  // below it, no loop
  std::uint64_t row = 0;
  if (stride == 1) {
    if (n < threshold) {
      // PopLibs sums 7 + 1 + (n - 1) + 2 + (4 - n) + 2 + (3 - (4 - n)) + 3 without zeroing: 17 + n.
      row = zeroing ? 13 + (n > 1 ? n : 0) : n == 1 ? 13 : 17 + n;
    } else {
      row = 15 + (n - 5) + (!zeroing && half8 ? 3 : 0);
    }
  } else {
    row = n < 3 ? 10 + (n == 1 ? 3 : 5) : 15 + mul_sat(2, n - 3);
  }
  if (float_partials) row -= 1;  // a dummy dual load moves the pointers
  return (half8 ? 9 : 10) + (zeroing ? 1 : 0) + (float_partials ? 3 : 0) + mul_sat(row, s.chains == 4 ? 1 : 2);
}

/// Cycles of one SLIC worker over output elements [begin, end) of a field of `row_width`-element
/// rows (0: one row): its preamble, then one item per row the range touches.
constexpr std::uint64_t slic_worker_cycles(const slic_config& s, bool float_partials, std::uint64_t begin,
                                           std::uint64_t end, std::uint64_t row_width, bool zeroing,
                                           std::uint64_t stride) noexcept {
  using ipu::mul_sat;
  const bool half8 = slic_half8(s, float_partials);
  // Worker id, output pointers, input pointer, work list (load, unpack, base, / 3), flags.
  std::uint64_t cycles = 2 + (half8 ? 2 : 3) + 1 + 2 + 4 + 2 + 2 + 1 + (half8 ? 1 : 0);
  if (s.conv_groups > 4) cycles += 4;  // the group index and 3 pointers
  cycles += half8 ? 2 : 0;              // the decision to merge the outputs
  auto item = [&](std::uint64_t n) { return slic_item_cycles(s, float_partials, n, zeroing, stride); };
  if (begin >= end) return cycles;
  if (row_width == 0) return cycles + item(end - begin);
  const std::uint64_t first_row = begin / row_width, last_row = (end - 1) / row_width;
  if (first_row == last_row) return cycles + item(end - begin);
  cycles += item((first_row + 1) * row_width - begin) + item(end - last_row * row_width);
  return cycles + mul_sat(last_row - first_row - 1, item(row_width));
}

/// One run of the SLIC workers over `rows` output elements split evenly: W x the slowest, and on
/// the zeroing pass of the half8 code, the copy merging its two outputs (2 + 2 per element).
constexpr std::uint64_t slic_workers_cycles(const architecture_description& a, const slic_config& s,
                                            bool float_partials, std::uint64_t rows, std::uint64_t row_width,
                                            bool zeroing, std::uint64_t stride) {
  using ipu::mul_sat;
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  std::uint64_t slowest = 0;
  for (std::uint64_t i = 0; i < w; ++i)
    slowest = std::max(slowest, slic_worker_cycles(s, float_partials, i * rows / w, (i + 1) * rows / w, row_width,
                                                   zeroing, stride));
  const std::uint64_t merge = zeroing && slic_half8(s, float_partials) ? 2 + mul_sat(2, rows) : 0;
  return mul_sat(w, slowest) + merge;
}

/// Cycles to load one SLIC weight block (PopLibs getConvPartialSlicSupervisorWeightLoadCycleEstimate,
/// half inputs): 4 channels of one group load directly; smaller channel groups are first rearranged
/// by the workers; then 16 ld64putcs.
constexpr std::uint64_t slic_weight_load_cycles(const architecture_description& a, const slic_config& s) noexcept {
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  std::uint64_t cycles = 0;
  if (s.channels == 4) {
    cycles = 6 + 6 + 6;  // brnzdec, put CCCSLOAD, bri
  } else {
    const std::uint64_t per_worker = (s.conv_groups == 2 ? 12 : 10) + (s.conv_groups > 4 ? 1 : 0);
    cycles = 9 + 6 + per_worker * w + 6;  // pointers, runall, the workers' rearrangement, sync
  }
  return cycles + 16;
}

/// Cycles of one ConvPartial1xNSLIC vertex (PopLibs getConvPartialSlicSupervisorOuterLoopCycleEstimate
/// HalfFloat, half inputs): `groups` conv groups in ceil(groups / conv_groups) group blocks,
/// `sub_kernels` 1x4 kernel windows, `rows` output elements per group (field rows of `row_width`)
/// at innermost output stride `stride` (1 or 2). The first sub-kernel zeroes the partials itself, so
/// no zeroing vertex runs. As PopLibs estimates, the sub-kernel loop's supervisor cycles are counted
/// once, not per group block.
constexpr std::uint64_t slic_vertex_cycles(const architecture_description& a, const slic_config& s,
                                           bool float_partials, std::uint64_t groups, std::uint64_t sub_kernels,
                                           std::uint64_t rows, std::uint64_t row_width, std::uint64_t stride) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  if (groups == 0 || sub_kernels == 0 || rows == 0 || s.conv_groups == 0) return 0;
  const bool half8 = slic_half8(s, float_partials);
  auto brnzdec = [](std::uint64_t n) { return mul_sat(6, n - 1) + 1; };  // a 6-cycle stall but the last
  const std::uint64_t group_blocks = ceil_div(groups, s.conv_groups);
  const std::uint64_t load = slic_weight_load_cycles(a, s);
  const std::uint64_t zeroing = slic_workers_cycles(a, s, float_partials, rows, row_width, true, stride);
  std::uint64_t later = slic_workers_cycles(a, s, float_partials, rows, row_width, false, stride);
  std::uint64_t group_body = half8 ? 12 : 15, sub_kernel_body = 0;
  if (s.conv_groups <= 4) {
    // Output pointer swap, work list pointer, zeroing flag, runall, sync, next weights.
    sub_kernel_body = load + (half8 ? 0 : 3) + 2 + (half8 ? 0 : 1) + 6 + 1 + 6 + 1;
  } else {
    const std::uint64_t strides = s.conv_groups / 4;
    const std::uint64_t stride_body = load + 6 + 1 + 6 + 2 + 6;  // runall, sync, weights pointer
    sub_kernel_body = mul_sat(stride_body, strides) + brnzdec(strides) + 2 + 2 + 6 + 3 + 2;
    group_body += 2 + 6;  // the group counter on the stack
    later = mul_sat(later, strides);
  }
  return (half8 ? 25 : 28) + mul_sat(group_body, group_blocks) + brnzdec(group_blocks) +
         mul_sat(sub_kernel_body, sub_kernels) + brnzdec(sub_kernels) + mul_sat(group_blocks, zeroing) +
         mul_sat(mul_sat(group_blocks, sub_kernels - 1), later);
}

/// PopLibs' reduce-vertex estimate (getReduceCycleEstimate) for `outputs` elements of `depth`
/// partials each (depth < 2: nothing to add). The single-input vertex reads one contiguous block of
/// partials (usable when outputs is a multiple of the accumulator width and the partials fit its
/// memory budget); the multi-input one follows a pointer per partial. acc = 4 F32 / 8 F16 outputs per
/// loop; the 64-bit data path loads 8 bytes a cycle.
constexpr std::uint64_t reduce_vertex_cycles(const architecture_description& a, bool float_partials, bool float_output,
                                             std::uint64_t outputs, std::uint64_t depth, bool single_input = false) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  if (outputs == 0 || depth <= 1) return 0;
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  const std::uint64_t acc = float_partials ? 4 : 8;
  const std::uint64_t per_load = float_partials ? 2 : 4;
  if (single_input) {
    // One partial is the destination's own: depth - 1 are read.
    const std::uint64_t loop = acc / std::min(acc, per_load);
    const std::uint64_t overhead = float_partials ? (float_output ? 8 : 7) : (float_output ? 10 : 9);
    const std::uint64_t loops = ceil_div(outputs / acc, w);
    return mul_sat(w, 20 + mul_sat(loops, mul_sat(loop, depth - 1) + overhead)) + 33;
  }
  const std::uint64_t loop = acc / std::min(acc, per_load) + 1;  // + 1: the next pointer
  std::uint64_t loops = outputs / acc;
  for (std::uint64_t bit = 1; bit < acc; bit *= 2)
    if ((outputs & bit) != 0) ++loops;  // the tail: one shorter loop per set low bit
  std::uint64_t cycles = 32, per_worker = loops / w;
  if (loops % w != 0) {
    if ((outputs & (acc - 1)) != 0) cycles += mul_sat(2, depth) + (float_partials ? 13 : 11);
    else ++per_worker;
  }
  const std::uint64_t per_loop = float_output ? (float_partials ? 7 : 9) : (float_partials ? 6 : 8);
  return mul_sat(w, cycles + mul_sat(per_worker, mul_sat(loop, depth) + per_loop));
}

/// The reduce vertex at precision `p`: partials in its partials type, the output in its input type.
constexpr std::uint64_t reduce_vertex_cycles(const architecture_description& a, precision p, std::uint64_t outputs,
                                             std::uint64_t depth, bool single_input = false) {
  return reduce_vertex_cycles(a, partials_bytes(p) == 4, input_bytes(p) == 4, outputs, depth, single_input);
}

/// PopLibs' multi-stage reduction plan (ConvReducePlan.cpp, enableMultiStageReduce on by default):
/// the intermediate depths, at most 2; stages = 1 below depth 16, 2 below 125, else 3. Each
/// intermediate depth is floor(depth^((n-1)/n)) or one more, whichever needs fewer messages per tile
/// (depth / next + the rest of the plan's).
struct reduce_stage_plan {
  std::array<std::uint64_t, 2> depths{};
  std::uint32_t count = 0;  // intermediate stages; the final stage reduces what they leave
  friend constexpr bool operator==(const reduce_stage_plan&, const reduce_stage_plan&) = default;
};

namespace detail::device {
/// floor(d^((n-1)/n)) for n = 2, 3: the largest x with x^n <= d^(n-1), exactly.
constexpr std::uint64_t reduce_root(std::uint64_t d, std::uint32_t n) noexcept {
  const std::uint64_t target = n == 2 ? d : d * d;
  std::uint64_t x = 0;
  auto pow = [n](std::uint64_t v) { return n == 2 ? v * v : v * v * v; };
  while (pow(x + 1) <= target) ++x;
  return x;
}
struct reduce_plan_cost {
  reduce_stage_plan plan;
  double messages = 0;
};
constexpr reduce_plan_cost reduce_plan(std::uint64_t depth, std::uint32_t stages) noexcept {
  if (stages <= 1) return {{}, static_cast<double>(depth)};
  const std::uint64_t down = std::max<std::uint64_t>(1, reduce_root(depth, stages));
  auto with = [&](std::uint64_t next) {
    auto r = reduce_plan(next, stages - 1);
    r.messages += static_cast<double>(depth) / static_cast<double>(next);
    reduce_stage_plan p;
    p.depths[0] = next;
    for (std::uint32_t i = 0; i < r.plan.count; ++i) p.depths[i + 1] = r.plan.depths[i];
    p.count = r.plan.count + 1;
    return reduce_plan_cost{p, r.messages};
  };
  const auto a = with(down), b = with(down + 1);
  return a.messages < b.messages ? a : b;
}
}  // namespace detail::device

constexpr reduce_stage_plan multi_stage_reduce_plan(std::uint64_t depth) noexcept {
  const std::uint32_t stages = depth >= 125 ? 3 : depth >= 16 ? 2 : 1;
  return detail::device::reduce_plan(depth, stages).plan;
}

/// One stage of a reduction on one tile: the outputs it writes and the partials each adds.
struct reduce_stage {
  std::uint64_t outputs = 0;
  std::uint64_t depth = 0;
  friend constexpr bool operator==(const reduce_stage&, const reduce_stage&) = default;
};

/// The stages reducing `depth` partials of which each tile finally keeps `outputs` (PopLibs
/// estimateConvReduceCycles): a stage of depth ceil(remaining / next) per planned depth, then one for
/// what remains. At most 3 stages; unused entries are zero.
constexpr std::array<reduce_stage, 3> reduce_stages(std::uint64_t outputs, std::uint64_t depth) noexcept {
  using ipu::ceil_div;
  std::array<reduce_stage, 3> r{};
  if (depth <= 1 || outputs == 0) return r;
  const auto plan = multi_stage_reduce_plan(depth);
  std::uint64_t remaining = depth, size = ipu::mul_sat(outputs, depth);
  std::uint32_t n = 0;
  for (std::uint32_t i = 0; i < plan.count; ++i) {
    const std::uint64_t d = ceil_div(remaining, plan.depths[i]);
    remaining = ceil_div(remaining, d);
    size = ceil_div(size, d);
    r[n++] = {size, d};
  }
  if (remaining > 1) r[n] = {ceil_div(size, remaining), remaining};
  return r;
}

}  // namespace ipu
