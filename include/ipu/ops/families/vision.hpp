#pragma once
// The op table's vision family: NonMaxSuppression, RoiAlign and GridSample. A row holds what the
// library knows about an op: shape rule, cost rule, flags and the slot for its gradient rule; the
// host kernels sit beside it, in ipu/ops/kernels/vision.hpp. The family's shape and cost rules
// live here rather than in the shared rule files since only these rows use them. No shape rule for
// NonMaxSuppression: how many boxes it selects depends on the scores, so importers and builders
// give its output shape.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {

namespace detail::infer {

/// RoiAlign: X [N, C, H, W], rois [R, 4], batch_indices [R] -> [R, C, output_height, output_width].
constexpr std::vector<tensor_info> roi_align(const infer_context& c) {
  need_exact_rank(c, 0, 4, "X [N, C, H, W]");
  need_exact_rank(c, 1, 2, "rois [num_rois, 4]");
  need_exact_rank(c, 2, 1, "batch_indices [num_rois]");
  need_float(c, 0);
  same_type(c, 0, 1);
  const auto& x = c.in_shape(0);
  const auto& rois = c.in_shape(1);
  if (rois[1] != 4 || c.in_shape(2)[0] != rois[0])
    throw c.fail("rois must be [num_rois, 4] and batch_indices [num_rois] (inputs " + c.describe_inputs() + ")",
                 "give one [x1, y1, x2, y2] box and one batch index per region");
  const auto h = c.attr_int("output_height", 1), w = c.attr_int("output_width", 1);
  if (h < 1 || w < 1)
    throw c.fail("output_height and output_width must be at least 1, got " + std::to_string(h) + " and " +
                     std::to_string(w),
                 "give positive output sizes");
  return {tensor_info{c.in_type(0), shape{rois[0], x[1], h, w}}};
}

/// GridSample: X [N, C, D1..Dr], grid [N, O1..Or, r] -> [N, C, O1..Or], for r of 1 to 3.
constexpr std::vector<tensor_info> grid_sample(const infer_context& c) {
  need_rank(c, 0, 3, "X [N, C, D1, ..., Dr]");
  need_float(c, 0);
  need_float(c, 1);
  const auto& x = c.in_shape(0);
  const auto& g = c.in_shape(1);
  const auto r = x.rank() - 2;
  if (r > 3)
    throw c.fail("X " + to_string(c.input(0)) + " has " + std::to_string(r) +
                     " spatial axes; GridSample samples 1 to 3 (as the ONNX reference)",
                 "reshape X to at most 3 spatial axes ([N, C, D, H, W])");
  if (g.rank() != r + 2 || g[0] != x[0] || g[g.rank() - 1] != static_cast<shape::dim_type>(r))
    throw c.fail("grid must be [N, O1, ..., Or, r] for X of r spatial axes (inputs " + c.describe_inputs() + ")",
                 "give the grid the batch of X, one axis per spatial axis of X and r coordinates per point");
  dims out{x[0], x[1]};
  for (std::size_t k = 1; k + 1 < g.rank(); ++k) out.push_back(g[k]);
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// NonMaxSuppression: per batch and class, a sort of the scores (log2 n compare-and-select passes)
/// and the greedy IoU test of each candidate against the boxes selected so far (about ten
/// instructions per pair); the declared output says how many boxes are selected in all.
constexpr op_cost non_max_suppression(const op_cost_context& c) {
  const auto n = dim(c.input(1), 2);
  const auto lists = mul_sat(dim(c.input(1), 0), dim(c.input(1), 1));
  const auto selected_per_list = lists ? ceil_div(dim(c.output(), 0), lists) : 0;
  const auto log_n = static_cast<std::uint64_t>(std::bit_width(n));
  const auto ops = std::min<std::uint64_t>(log_n + 10 * std::max<std::uint64_t>(selected_per_list, 1), 1u << 16);
  op_cost r = vector_pass(c, data_type::F32, c.input_elements(1), 2, static_cast<std::uint32_t>(ops));
  r += data_movement(c);
  return r;
}

/// RoiAlign: per output, a bilinear tap (four multiply-adds) per sampling point of its bin; an
/// adaptive grid (sampling_ratio 0) is bounded by the input's size over the output's. Each tile
/// receives the part of the feature map its regions cover (the pooling rule's share).
constexpr op_cost roi_align(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto ratio = c.int_attr("sampling_ratio", 0);
  const auto oh = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("output_height", 1), 1));
  const auto ow = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("output_width", 1), 1));
  const auto gh = ratio > 0 ? static_cast<std::uint64_t>(ratio) : std::max<std::uint64_t>(ceil_div(dim(x, 2), oh), 1);
  const auto gw = ratio > 0 ? static_cast<std::uint64_t>(ratio) : std::max<std::uint64_t>(ceil_div(dim(x, 3), ow), 1);
  const auto ops = std::min<std::uint64_t>(mul_sat(mul_sat(gh, gw), 4), 1u << 16);
  return vector_pass(c, c.type(x), c.output_elements(), 4, static_cast<std::uint32_t>(ops),
                     ceil_div(costed_bytes(x, c.options), c.tiles()));
}

/// GridSample: per output, its taps (1 nearest, 2^r linear, 4^r cubic over r spatial axes), a
/// multiply-add each, plus the coordinate arithmetic; the taps read anywhere in X, so each tile
/// receives its share of X (the pooling rule's estimate; the grid decides the real traffic).
constexpr op_cost grid_sample(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto r = x.shape.rank() > 2 ? x.shape.rank() - 2 : 1;
  const auto mode = c.string_attr("mode");
  const std::uint64_t per_axis = mode == "nearest" ? 1 : mode == "cubic" || mode == "bicubic" ? 4 : 2;
  std::uint64_t taps = 1;
  for (std::size_t k = 0; k < r; ++k) taps = mul_sat(taps, per_axis);
  const auto ops = std::min<std::uint64_t>(taps + 4 * r, 1u << 16);
  return vector_pass(c, c.type(x), c.output_elements(), 2, static_cast<std::uint32_t>(ops),
                     ceil_div(costed_bytes(x, c.options), c.tiles()));
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def vision[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "NonMaxSuppression", {}, detail::cost_rules::non_max_suppression, {}},
    {"", "RoiAlign", detail::infer::roi_align, detail::cost_rules::roi_align, {}},
    {"", "GridSample", detail::infer::grid_sample, detail::cost_rules::grid_sample, {}},
};

}  // namespace op_families

}  // namespace ipu
