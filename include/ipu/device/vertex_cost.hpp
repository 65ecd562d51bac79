#pragma once
// What a codelet costs beyond its inner loop: the overheads between the AMP's peak and a real
// convolution / matmul vertex, and the vertex that reduces partial sums across tiles. The constants
// are the fixed terms of the open-source PopLibs cycle estimators (lib/poplin/PerformanceEstimation.hpp,
// which poplin's planner uses to choose plans); docs/cost-model.md lists each with its source.
//
// AMP vertex (PopLibs' 1x1 "ConvPartial1x1Out" supervisor estimate, the vertex a matmul uses):
//   vertex  = supervisor_setup + g * (per_group + K * (per_in_group + N * (per_out_group + per_pass
//             + weight_load + W * (worker_setup + ceil(r / W) * c))))
// with g groups, K = kernel positions x input-channel blocks, N output-channel blocks, r rows, W
// workers, c AMP cycles per row and weight_load the block's weight load (amp_geometry). A worker's
// setup is PopLibs' per-worklist-item constant minus the rows it covers (their estimate: 37 + 4 (n - 3)
// minus 7 retained-state cycles for 16-bit inputs; 46 + 8 (n - 3) for 32-bit inputs). Kernel
// positions are costed as more input-channel blocks (the nx1 vertex loops over them the same way).
//
// Reduce vertex (PopLibs' getReduceCycleEstimate, multi-input path): each worker takes
// ceil(ceil(out / acc) / W) loops of acc outputs (acc = 4 F32 partials, 8 F16); one loop costs
// (acc / partials per 64-bit load + 1) cycles per partial plus a per-loop constant, and every worker
// pays a setup:
//   reduce  = W * (reduce_worker_setup + ceil(ceil(out / acc) / W) * (cycles_per_partial * depth + per_loop))
#include <cstdint>

#include "ipu/constexpr_math.hpp"
#include "ipu/device/architecture.hpp"
#include "ipu/device/precision.hpp"

namespace ipu {

/// Fixed cycles of an AMP convolution / matmul vertex (PopLibs 1x1 supervisor estimate).
struct amp_vertex_overheads {
  std::uint32_t supervisor_setup = 50;  // supervisorNonloopOverhead
  std::uint32_t per_group = 13;         // 12 + 1 (common half/float-partials path) per conv group
  std::uint32_t per_in_group = 15;      // 15 - 1 + excessInChanOverhead 1, per input-channel group
  std::uint32_t per_out_group = 19;     // per output-channel group
  std::uint32_t per_pass = 7;           // outPassesOverhead, per output pass (before the weight load)
  std::uint32_t worker_setup = 18;      // worker cycles per work item beyond its rows
  friend constexpr bool operator==(const amp_vertex_overheads&, const amp_vertex_overheads&) = default;
};

/// The overheads at precision `p`: 16-bit inputs take the half path (37 - 3 x 4 - 7 retained = 18
/// worker cycles), 32-bit inputs the float path (46 - 3 x 8 = 22, no retention savings).
constexpr amp_vertex_overheads amp_overheads(precision p) noexcept {
  amp_vertex_overheads o;
  if (p == precision::fp32) o.worker_setup = 22;
  return o;
}

/// Cycles of one AMP vertex over `groups` groups, `in_blocks` input-channel blocks (x kernel
/// positions), `out_blocks` output-channel blocks, each block `rows` rows (see the file comment).
constexpr std::uint64_t amp_vertex_cycles(const architecture_description& a, precision p, std::uint64_t groups,
                                          std::uint64_t in_blocks, std::uint64_t out_blocks, std::uint64_t rows,
                                          std::uint64_t cycles_per_row, std::uint64_t weight_load_cycles) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  if (groups == 0 || in_blocks == 0 || out_blocks == 0 || rows == 0) return 0;
  const auto o = amp_overheads(p);
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  const std::uint64_t workers = mul_sat(w, o.worker_setup + mul_sat(ceil_div(rows, w), cycles_per_row));
  const std::uint64_t block = o.per_out_group + o.per_pass + weight_load_cycles + workers;
  const std::uint64_t in_group = o.per_in_group + mul_sat(out_blocks, block);
  return o.supervisor_setup + mul_sat(groups, o.per_group + mul_sat(in_blocks, in_group));
}

/// The fixed terms of PopLibs' reduce estimate (getReduceCycleEstimate, multi-input path).
struct reduce_vertex_overheads {
  std::uint32_t worker_setup = 32;
  std::uint32_t per_loop = 7;  // + cycles per partial x depth; 7 F32 -> F32, 6 F32 -> F16, 9 F16 -> F32, 8 F16 -> F16
  friend constexpr bool operator==(const reduce_vertex_overheads&, const reduce_vertex_overheads&) = default;
};

constexpr reduce_vertex_overheads reduce_overheads(bool float_partials, bool float_output) noexcept {
  reduce_vertex_overheads o;
  o.per_loop = float_partials ? (float_output ? 7u : 6u) : (float_output ? 9u : 8u);
  return o;
}

/// Cycles of a vertex adding `depth` partials of `outputs` elements each (depth 1: a copy is not
/// needed, 0 cycles). Partials are the precision's partials type, the output its input type. The
/// 64-bit data path loads 8 bytes a cycle; one loop handles acc outputs (4 F32, 8 F16).
constexpr std::uint64_t reduce_vertex_cycles(const architecture_description& a, precision p, std::uint64_t outputs,
                                             std::uint64_t depth) {
  using ipu::ceil_div;
  using ipu::mul_sat;
  if (outputs == 0 || depth <= 1) return 0;
  const bool float_partials = partials_bytes(p) == 4, float_output = input_bytes(p) == 4;
  const std::uint64_t acc = float_partials ? 4 : 8;
  const std::uint64_t per_load = 8 / partials_bytes(p);
  const std::uint64_t per_partial = acc / (acc < per_load ? acc : per_load) + 1;  // + 1: the next pointer
  const auto o = reduce_overheads(float_partials, float_output);
  const std::uint64_t w = a.worker_threads_per_tile == 0 ? 1 : a.worker_threads_per_tile;
  const std::uint64_t loops = ceil_div(ceil_div(outputs, acc), w);
  return mul_sat(w, o.worker_setup + mul_sat(loops, mul_sat(per_partial, depth) + o.per_loop));
}

}  // namespace ipu
