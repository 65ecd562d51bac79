#pragma once
// The op table's graphcore family: PopART's ai.graphcore helper ops (opset 1), as PopTorch's
// poptorch.nop, ipu_print_tensor, dynamic_slice and dynamic_update and PopART's Builder
// (aiGraphcore.nop, printtensor, dynamicslice, dynamicupdate, dynamicadd, groupnormalization) build them:
//   Nop(x)                               x, an op the optimiser keeps (it is not a view: it copies)
//   PrintTensor(x)                       x; prints "title: [...]" when it runs (log::print).
//                                        title (string), print_gradient (0 / 1, default 1: the
//                                        gradient is printed too, titled "Gradient of <title>")
//   DynamicSlice(t, offset)              t[offset : offset + sizes] along `axes`
//   DynamicUpdate(t, offset, s)          t with that window replaced by s
//   DynamicAdd(t, offset, s)             t with s added into that window
//   GroupNormalization(x, scale, bias)   y, mean, inv std dev (each [N * num_groups]);
//                                        num_groups (required), epsilon (default 1e-5)
//   MultiConv(X0, W0, B0, X1, ...)       convolutions planned together (families/multi_conv.hpp)
//   CtcBeamSearchDecoder(log_probs, lengths)  CTC prefix beam search (families/ctc_decoder.hpp)
// Dynamic ops: `axes` and `sizes` are attributes, `offset` an integer tensor of one value per axis
// read at run time. An offset out of range is clamped to [0, dim - size] on each axis (as XLA's
// DynamicSlice does; PopLibs' documentation leaves it open), so a hostile offset never reads or
// writes outside the tensor. noOverlap (0 / 1) is PopART's promise that slices of one tensor do not
// overlap: as in PopART, it picks DynamicSlice's gradient, written into zeros with DynamicUpdate
// (noOverlap 1) or added into them with DynamicAdd (0). Kernels: ipu/ops/kernels/graphcore.hpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/ops/families/ctc_decoder.hpp"
#include "ipu/ops/families/multi_conv.hpp"
#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace op_families {
inline constexpr std::string_view graphcore_domain = "ai.graphcore";
}  // namespace op_families

namespace detail::infer {

constexpr bool flag_attr(const infer_context& c, std::string_view name, bool fallback) {
  const auto v = c.attr_int(name, fallback ? 1 : 0);
  if (v != 0 && v != 1) throw c.fail(std::string(name) + " is " + std::to_string(v), "give 0 or 1");
  return v == 1;
}

constexpr std::vector<tensor_info> graphcore_nop(const infer_context& c) {
  only_attributes(c, {});
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> print_tensor(const infer_context& c) {
  only_attributes(c, {"title", "print_gradient"});
  (void)flag_attr(c, "print_gradient", true);
  return {same_as_input(c)};
}

/// The checked axes (in [0, rank)) and sizes of a dynamic op on `t`, with its offset input.
struct dynamic_window {
  std::vector<std::size_t> axes;
  std::vector<std::int64_t> sizes;
};
constexpr dynamic_window dynamic_window_of(const infer_context& c, const shape& t) {
  only_attributes(c, {"axes", "sizes", "noOverlap"});
  (void)flag_attr(c, "noOverlap", false);
  if (!c.has_attr("axes") || !c.has_attr("sizes"))
    throw c.fail(c.op().type + " needs the attributes axes and sizes", "give the axes to slice and a size for each");
  const auto axes = c.attr_ints("axes"), sizes = c.attr_ints("sizes");
  if (axes.empty() || axes.size() != sizes.size())
    throw c.fail("axes has " + std::to_string(axes.size()) + " values and sizes " + std::to_string(sizes.size()),
                 "give at least one axis and one size per axis");
  dynamic_window w;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = c.axis(axes[i], t.rank(), "axes value");
    if (std::find(w.axes.begin(), w.axes.end(), a) != w.axes.end())
      throw c.fail("axis " + std::to_string(a) + " appears twice in axes", "name each axis once");
    if (sizes[i] < 1 || sizes[i] > t[a])
      throw c.fail("size " + std::to_string(sizes[i]) + " of axis " + std::to_string(a) + " is outside [1, " +
                       std::to_string(t[a]) + "] (inputs " + c.describe_inputs() + ")",
                   "give each size between 1 and the axis' length");
    w.axes.push_back(a);
    w.sizes.push_back(sizes[i]);
  }
  const auto& off = c.input(1);
  if (!is_signed_integer(off.type) && !is_unsigned_integer(off.type))
    throw c.fail("offset is " + to_string(off) + ", not an integer tensor", "give the offsets as INT32, UINT32 or INT64");
  const bool ok = (off.shape.rank() == 1 && off.shape[0] == static_cast<std::int64_t>(axes.size())) ||
                  (off.shape.rank() == 0 && axes.size() == 1);
  if (!ok)
    throw c.fail("offset is " + to_string(off) + " for " + std::to_string(axes.size()) + " axes",
                 "give one offset per axis, as a 1-D tensor");
  return w;
}
constexpr shape window_shape(const shape& t, const dynamic_window& w) {
  auto d = t.dims();
  for (std::size_t i = 0; i < w.axes.size(); ++i) d[w.axes[i]] = w.sizes[i];
  return shape(std::move(d));
}

constexpr std::vector<tensor_info> dynamic_slice(const infer_context& c) {
  const auto& t = c.input(0);
  return {tensor_info{t.type, window_shape(t.shape, dynamic_window_of(c, t.shape))}};
}

/// DynamicUpdate and DynamicAdd: the slice must have the window's shape and t's type.
constexpr std::vector<tensor_info> dynamic_update(const infer_context& c) {
  const auto& t = c.input(0);
  const auto want = window_shape(t.shape, dynamic_window_of(c, t.shape));
  const auto& s = c.input(2);
  if (s.type != t.type || s.shape != want)
    throw c.fail("the slice is " + to_string(s) + " but the window is " + to_string(tensor_info{t.type, want}) +
                     " (inputs " + c.describe_inputs() + ")",
                 "give a slice of t's type with the sizes on `axes` and t's dimensions elsewhere");
  return {t};
}

constexpr std::vector<tensor_info> group_norm(const infer_context& c) {
  only_attributes(c, {"num_groups", "epsilon"});
  need_float(c, 0);
  need_rank(c, 0, 2, "X");
  const auto& x = c.input(0);
  if (!c.has_attr("num_groups")) throw c.fail("GroupNormalization needs num_groups", "give the number of groups");
  const auto g = c.attr_int("num_groups", 1), ch = x.shape[1];
  if (g < 1 || g > ch || ch % g != 0)  // g <= C also bounds N * g by the elements of X
    throw c.fail("num_groups " + std::to_string(g) + " does not divide the " + std::to_string(ch) + " channels of " +
                     to_string(x) + " into equal, non-empty groups",
                 "give a number of groups that divides the channels");
  if (!(c.attr_float("epsilon", 1e-5f) >= 0.0f)) throw c.fail("epsilon is negative or NaN", "give epsilon >= 0");
  for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
    if (c.input(i).type != x.type || c.in_shape(i) != shape{ch})
      throw c.fail(std::string(i == 1 ? "scale" : "bias") + " is " + to_string(c.input(i)) + "; it needs " +
                       std::string(to_string(x.type)) + "[" + std::to_string(ch) + "]",
                   "give one value per channel");
  }
  const tensor_info stats{x.type, shape{x.shape[0] * g}};  // <= the elements of x: 1 <= g <= C
  return {x, stats, stats};
}

}  // namespace detail::infer

namespace detail::cost_rules {
/// Nop and PrintTensor copy their input (PrintTensor also streams it to the host, which the model
/// does not charge to the IPU's step).
constexpr op_cost copy_pass(const op_cost_context& c) { return vector_pass(c, c.type(c.output()), c.output_elements(), 1, 1); }
/// DynamicSlice / DynamicUpdate / DynamicAdd move their output's bytes; DynamicAdd also adds the window.
constexpr op_cost dynamic_add(const op_cost_context& c) {
  op_cost r = data_movement(c);
  r += vector_pass(c, c.type(c.output()), c.input_elements(2), 2, 1);
  return r;
}
constexpr op_cost group_norm(const op_cost_context& c) {
  return normalisation(c, mul_sat(dim(c.input(0), 0), static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("num_groups", 1), 1))));
}
}  // namespace detail::cost_rules

namespace detail::grad {

constexpr tensor_id add_graphcore(gradient_context& c, std::string_view type, std::vector<tensor_id> inputs,
                                  std::vector<attribute> attrs) {
  return c.add_n(type, std::move(inputs), std::move(attrs), 1, op_families::graphcore_domain).front();
}
constexpr std::vector<attribute> window_attributes(const gradient_context& c, bool no_overlap) {
  return {{"axes", c.attr_ints("axes")}, {"sizes", c.attr_ints("sizes")}, {"noOverlap", std::int64_t{no_overlap ? 1 : 0}}};
}

constexpr void print_tensor(gradient_context& c) {
  const auto dy = c.required_output_grad();
  if (c.attr_int("print_gradient", 1) == 0) return c.set_input_grad(0, dy);
  c.set_input_grad(0, add_graphcore(c, "PrintTensor", {dy},
                                    {{"title", "Gradient of " + c.attr_string("title", "")},
                                     {"print_gradient", std::int64_t{0}}}));
}
/// dT: dY written (noOverlap) or added into zeros at the same window.
constexpr void dynamic_slice(gradient_context& c) {
  const bool no_overlap = c.attr_int("noOverlap", 0) == 1;
  const auto t = c.input(0);
  c.set_input_grad(0, add_graphcore(c, no_overlap ? "DynamicUpdate" : "DynamicAdd",
                                    {zeros(c, t, c.shape_of(t)), c.input(1), c.required_output_grad()},
                                    window_attributes(c, no_overlap)));
}
/// dT: dY with the window zeroed (it was overwritten); dS: dY's window.
constexpr void dynamic_update(gradient_context& c) {
  const auto dy = c.required_output_grad(), s = c.input(2);
  if (c.wants(0))
    c.set_input_grad(0, add_graphcore(c, "DynamicUpdate", {dy, c.input(1), zeros(c, s, c.shape_of(s))},
                                      window_attributes(c, true)));
  if (c.wants(2)) c.set_input_grad(2, add_graphcore(c, "DynamicSlice", {dy, c.input(1)}, window_attributes(c, true)));
}
/// dT: dY; dS: dY's window.
constexpr void dynamic_add(gradient_context& c) {
  const auto dy = c.required_output_grad();
  c.set_input_grad(0, dy);
  if (c.wants(2)) c.set_input_grad(2, add_graphcore(c, "DynamicSlice", {dy, c.input(1)}, window_attributes(c, true)));
}
/// X [N, C, ...] seen as [N, G, C / G * spatial], normalised over its last axis; scale and bias per
/// channel (the rule of InstanceNormalization with groups of channels).
constexpr void group_norm(gradient_context& c) {
  refuse_statistics_gradients(c);
  const auto x = c.input(0), scale = c.input(1), dy = c.required_output_grad();
  const auto sx = c.shape_of(x);
  const auto groups = c.attr_int("num_groups", 1);
  const shape grouped{sx[0], groups, sx.num_elements() / std::max<std::int64_t>(sx[0] * groups, 1)};
  std::vector<std::int64_t> per_channel{sx[1]};  // [C, 1, ...]
  while (per_channel.size() + 1 < sx.rank()) per_channel.push_back(1);
  const std::vector<std::int64_t> last{2};
  const auto n = normalize(c, c.reshape(x, grouped), last, c.attr_float("epsilon", 1e-5f));
  const auto xhat = c.reshape(n.xhat, sx);
  if (c.wants(0)) {
    const auto dxhat = c.reshape(c.add("Mul", {dy, c.reshape(scale, shape(per_channel))}), grouped);
    c.set_input_grad(0, c.reshape(normalize_backward(c, n, dxhat, last), sx));
  }
  std::vector<std::int64_t> batch_and_spatial{0};
  for (std::size_t i = 2; i < sx.rank(); ++i) batch_and_spatial.push_back(static_cast<std::int64_t>(i));
  auto per_channel_sum = [&](tensor_id t, tensor_id like) {
    return c.reshape(c.add("ReduceSum", {t, c.ints(batch_and_spatial)}, {keepdims(false)}), c.shape_of(like));
  };
  if (c.wants(1)) c.set_input_grad(1, per_channel_sum(c.add("Mul", {dy, xhat}), scale));
  if (c.wants(2)) c.set_input_grad(2, per_channel_sum(dy, c.input(2)));
}

}  // namespace detail::grad

namespace op_families {

inline constexpr op_def graphcore[] = {
    // domain, type, shape rule, cost rule, flags, gradient rule
    {graphcore_domain, "Nop", detail::infer::graphcore_nop, detail::cost_rules::copy_pass, {}, detail::grad::identity},
    {graphcore_domain, "PrintTensor", detail::infer::print_tensor, detail::cost_rules::copy_pass, {},
     detail::grad::print_tensor},
    {graphcore_domain, "DynamicSlice", detail::infer::dynamic_slice, detail::cost_rules::data_movement, {},
     detail::grad::dynamic_slice},
    {graphcore_domain, "DynamicUpdate", detail::infer::dynamic_update, detail::cost_rules::data_movement, {},
     detail::grad::dynamic_update},
    {graphcore_domain, "DynamicAdd", detail::infer::dynamic_update, detail::cost_rules::dynamic_add, {},
     detail::grad::dynamic_add},
    {graphcore_domain, "GroupNormalization", detail::infer::group_norm, detail::cost_rules::group_norm, {},
     detail::grad::group_norm},
    {graphcore_domain, "MultiConv", detail::infer::multi_conv, detail::cost_rules::multi_conv, {},
     detail::grad::multi_conv},
    // No gradient: its outputs are counts and labels.
    {graphcore_domain, "CtcBeamSearchDecoder", detail::infer::ctc_beam_search_decoder,
     detail::cost_rules::ctc_beam_search_decoder, {}},
};

}  // namespace op_families
}  // namespace ipu
