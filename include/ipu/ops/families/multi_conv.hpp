#pragma once
// ai.graphcore MultiConv: independent convolutions planned together (PopART's aiGraphcore.multiconv,
// PopTorch's poptorch.MultiConv, PopLibs' poplin::multiconv).
//
//   MultiConv(X0, W0, [B0], X1, W1, [B1], ...) -> Y0, Y1, ...
//
// Inputs come in (X, W, B) triples, B optional (an omitted input; the last may be left off);
// output i is Conv(Xi, Wi, Bi). Each conv's group is read from its shapes (C / W's second
// dimension), as PopART does. The window attributes are the convs' own, concatenated in order:
//   strides, dilations    one value per spatial dimension of each conv (empty: all 1)
//   pads                  [begins..., ends...] of each conv (empty: no padding)
//   inDilations, outPads  PopART's input dilation and output padding: only the identity (1s, 0s)
//                         is taken; anything else is refused
// The planning options, one value per conv (empty: the defaults) or one for all:
//   availableMemoryProportions (floats, (0, 1]), partialsTypes ("float" / "half"),
//   planType ("parallel", the default, or "serial"), perConvReservedTiles (int, default 50),
//   cycleBackOff (float in [0, 1), default 0.1), enableConvDithering (0 only: the cost model has no
//   tile layout for dithering to move, so 1 is refused).
//
// Cost, after PopLibs' getMultiPlan (ConvPlan.cpp):
//   serial    each conv planned on every tile, one after another: the sum;
//   parallel  the convs side by side on disjoint tiles: the largest (by MACs) is planned on all
//             tiles less perConvReservedTiles for each other conv, then re-planned on the fewest
//             tiles that keep it within (1 + (n - 1) * cycleBackOff) of that; the smaller convs
//             take the fewest of the remaining tiles that keep them within the slowest so far;
//             the second largest takes what is left. The op takes as long as its slowest conv. When
//             a conv finds no tile left, PopLibs falls back to serial, and so does the model.
// Kernels: ipu/ops/kernels/multi_conv.hpp (each conv runs Conv's kernel).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/format.hpp"
#include "ipu/ops/cost_rules.hpp"
#include "ipu/ops/gradient_rules.hpp"
#include "ipu/ops/plan_annotations.hpp"
#include "ipu/ops/shape_rules.hpp"

namespace ipu {
namespace detail::multi_conv {

inline constexpr std::int64_t default_reserved_tiles = 50;  // PopLibs' MultiPlanOptions defaults
inline constexpr float default_cycle_back_off = 0.1f;

/// Convolutions of a MultiConv with `num_inputs` inputs: (X, W, B) triples, the last B optional.
constexpr std::size_t count(std::size_t num_inputs) noexcept { return (num_inputs + 2) / 3; }

template <class T>
constexpr const T* attr_as(const op_node& op, std::string_view name) {
  if (const auto* a = op.find_attribute(name)) return std::get_if<T>(&a->value);
  return nullptr;
}
constexpr std::vector<std::int64_t> ints_of(const op_node& op, std::string_view name) {
  const auto* v = attr_as<std::vector<std::int64_t>>(op, name);
  return v ? *v : std::vector<std::int64_t>{};
}

/// Conv i as an ordinary Conv op: named "<name>/conv<i>", the triple's inputs, output i, its slice
/// of the window attributes, `group`, and its available memory proportion as the plan annotation.
/// `spatial` holds every conv's number of spatial dimensions (the attributes' layout).
constexpr op_node part(const op_node& op, std::size_t i, const std::vector<std::size_t>& spatial, std::int64_t group) {
  std::size_t at = 0;
  for (std::size_t k = 0; k < i; ++k) at += spatial[k];
  const auto r = spatial[i];
  const auto slice = [](const std::vector<std::int64_t>& v, std::size_t from, std::size_t n) {
    return std::vector<std::int64_t>(v.begin() + static_cast<std::ptrdiff_t>(from),
                                     v.begin() + static_cast<std::ptrdiff_t>(from + n));
  };
  op_node p;
  p.type = "Conv";
  p.opset = 11;
  p.name = op.name + "/conv" + format_uint(i);
  p.where = op.where;
  for (std::size_t k = 0; k < 3; ++k) p.inputs.push_back(3 * i + k < op.inputs.size() ? op.inputs[3 * i + k] : no_tensor);
  if (i < op.outputs.size()) p.outputs.push_back(op.outputs[i]);
  if (const auto s = ints_of(op, "strides"); !s.empty()) p.attributes.push_back({"strides", slice(s, at, r)});
  if (const auto d = ints_of(op, "dilations"); !d.empty()) p.attributes.push_back({"dilations", slice(d, at, r)});
  if (const auto pads = ints_of(op, "pads"); !pads.empty()) p.attributes.push_back({"pads", slice(pads, 2 * at, 2 * r)});
  p.attributes.push_back({"group", group});
  if (const auto* amp = attr_as<std::vector<float>>(op, "availableMemoryProportions"); amp && !amp->empty())
    p.attributes.push_back({std::string(attr_available_memory_proportion), (*amp)[amp->size() == 1 ? 0 : i]});
  return p;
}

/// The group of a conv of X [N, C, ...] by W [M, C / group, ...] (0 when the shapes give none).
constexpr std::int64_t group_of(const shape& x, const shape& w) {
  if (x.rank() < 2 || w.rank() < 2 || w[1] <= 0 || x[1] % w[1] != 0) return 0;
  return x[1] / w[1];
}

/// Conv i's partials type, F32 unless partialsTypes says "half".
constexpr data_type partials_of(const op_node& op, std::size_t i) {
  const auto* p = attr_as<std::vector<std::string>>(op, "partialsTypes");
  if (!p || p->empty()) return data_type::F32;
  return (*p)[p->size() == 1 ? 0 : i] == "half" ? data_type::F16 : data_type::F32;
}

}  // namespace detail::multi_conv

namespace detail::infer {

constexpr std::vector<tensor_info> multi_conv(const infer_context& c) {
  namespace mc = detail::multi_conv;
  only_attributes(c, {"strides", "pads", "dilations", "inDilations", "outPads", "availableMemoryProportions",
                      "partialsTypes", "planType", "perConvReservedTiles", "cycleBackOff", "enableConvDithering"});
  const auto n = mc::count(c.num_inputs());
  if (c.num_inputs() < 2 || c.num_inputs() % 3 == 1)
    throw c.fail("MultiConv has " + std::to_string(c.num_inputs()) + " inputs",
                 "give (X, W, B) for each convolution, B optional (an empty input name)");
  if (c.num_outputs() != n)
    throw c.fail("MultiConv has " + std::to_string(n) + " convolutions but " + std::to_string(c.num_outputs()) +
                     " outputs",
                 "give one output per convolution");
  std::vector<std::size_t> spatial(n);
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    need_rank(c, 3 * i, 3, "X");
    spatial[i] = c.in_shape(3 * i).rank() - 2;
    total += spatial[i];
  }
  const auto sized = [&](std::string_view name, std::size_t want, std::int64_t identity) {
    const auto v = c.attr_ints(name);
    if (!v.empty() && v.size() != want)
      throw c.fail(std::string(name) + " has " + std::to_string(v.size()) + " values; the convolutions need " +
                       std::to_string(want),
                   "give each convolution's values in order, or none");
    if (identity >= 0)
      for (auto x : v)
        if (x != identity)
          throw c.fail(std::string(name) + " holds " + std::to_string(x) + "; only " + std::to_string(identity) +
                           " is supported",
                       "write the input dilation or output padding as a separate Pad or ConvTranspose");
  };
  sized("strides", total, -1);
  sized("dilations", total, -1);
  sized("pads", 2 * total, -1);
  sized("inDilations", total, 1);
  sized("outPads", 2 * total, 0);
  const auto per_conv = [&](std::string_view name, std::size_t size) {
    if (size != 0 && size != 1 && size != n)
      throw c.fail(std::string(name) + " has " + std::to_string(size) + " values for " + std::to_string(n) +
                       " convolutions",
                   "give one value per convolution, one for all, or none");
  };
  const auto amp = c.attr_floats("availableMemoryProportions");
  per_conv("availableMemoryProportions", amp.size());
  for (auto a : amp)
    if (!(a > 0.0f && a <= 1.0f))
      throw c.fail("an available memory proportion is " + std::to_string(a), "give each in (0, 1]");
  const auto* partials = mc::attr_as<std::vector<std::string>>(c.op(), "partialsTypes");
  if (c.has_attr("partialsTypes") && !partials)
    throw c.fail("partialsTypes is not a list of strings", "give \"float\" or \"half\" per convolution");
  per_conv("partialsTypes", partials ? partials->size() : 0);
  if (partials)
    for (const auto& p : *partials)
      if (p != "float" && p != "half")
        throw c.fail("partials type '" + p + "' is neither \"float\" nor \"half\"", "give \"float\" or \"half\"");
  const auto dither = c.attr_ints("enableConvDithering");
  per_conv("enableConvDithering", dither.size());
  for (auto d : dither)
    if (d != 0)
      throw c.fail("enableConvDithering is set; the cost model has no tile layout for dithering to change",
                   "leave enableConvDithering unset or 0");
  const auto plan = c.attr_string("planType", "parallel");
  if (plan != "parallel" && plan != "serial")
    throw c.fail("planType '" + plan + "' is neither \"parallel\" nor \"serial\"", "give \"parallel\" or \"serial\"");
  if (c.attr_int("perConvReservedTiles", mc::default_reserved_tiles) < 1)
    throw c.fail("perConvReservedTiles is below 1", "reserve at least one tile per convolution");
  const auto back_off = c.attr_float("cycleBackOff", mc::default_cycle_back_off);
  if (!(back_off >= 0.0f && back_off < 1.0f))
    throw c.fail("cycleBackOff is " + std::to_string(back_off), "give a proportion in [0, 1)");

  std::vector<tensor_info> out;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& x = c.in_shape(3 * i);
    const auto& w = c.in_shape(3 * i + 1);
    const auto group = mc::group_of(x, w);
    if (group < 1)
      throw c.fail("convolution #" + std::to_string(i) + ": X " + to_string(c.input(3 * i)) + " and W " +
                       to_string(c.input(3 * i + 1)) + " give no group (C is not a multiple of W's second dimension)",
                   "W is [M, C / group, k...] for X [N, C, ...]");
    if (mc::partials_of(c.op(), i) == data_type::F16 && c.in_type(3 * i) == data_type::F32)
      throw c.fail("convolution #" + std::to_string(i) + " is F32 but its partials type is \"half\"",
                   "PopLibs accumulates F32 convolutions in F32: give \"float\", or convert the model to F16");
    auto node = mc::part(c.op(), i, spatial, group);
    node.outputs.clear();
    const infer_input in[3] = {infer_input{&c.input(3 * i), nullptr}, infer_input{&c.input(3 * i + 1), nullptr},
                               c.has_input(3 * i + 2) ? infer_input{&c.input(3 * i + 2), nullptr} : infer_input{}};
    const infer_context one(node, std::span<const infer_input>(in, 3), 1);
    out.push_back(conv(one).front());
  }
  return out;
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// The conv ops of a MultiConv in the model (their tensors the MultiConv's).
constexpr std::vector<op_node> multi_conv_parts(const op_cost_context& c) {
  namespace mc = detail::multi_conv;
  const auto n = mc::count(c.num_inputs());
  std::vector<std::size_t> spatial(n);
  for (std::size_t i = 0; i < n; ++i) spatial[i] = c.input(3 * i).shape.rank() - 2;
  std::vector<op_node> parts;
  for (std::size_t i = 0; i < n; ++i)
    parts.push_back(mc::part(*c.op, i, spatial, mc::group_of(c.input(3 * i).shape, c.input(3 * i + 1).shape)));
  return parts;
}

/// Convs side by side on disjoint tiles: the cost of the slowest, with every conv's tiles and MACs.
constexpr op_cost side_by_side(const std::vector<op_cost>& costs) {
  op_cost r;
  std::uint64_t tiles = 0;
  for (const auto& k : costs) {
    if (k.cycles() > r.cycles()) {
      r.compute_cycles = k.compute_cycles;
      r.exchange_cycles = k.exchange_cycles;
      r.sync_cycles = k.sync_cycles;
    }
    tiles += k.tiles;
    r.temporary_bytes_per_tile = std::max(r.temporary_bytes_per_tile, k.temporary_bytes_per_tile);
    r.macs += k.macs;
    r.fits_temporary_budget = r.fits_temporary_budget && k.fits_temporary_budget;
  }
  r.tiles = static_cast<std::uint32_t>(std::min<std::uint64_t>(tiles, ~std::uint32_t{0}));
  return r;
}

/// MultiConv's plan (see the header comment): serial, or PopLibs' parallel plan.
constexpr op_cost multi_conv(const op_cost_context& c) {
  namespace mc = detail::multi_conv;
  const auto parts = multi_conv_parts(c);
  const auto n = parts.size();
  const auto on = [&](std::size_t i, std::uint32_t tiles) {
    op_cost_context one = c;
    one.op = &parts[i];
    one.options.partials_type = mc::partials_of(*c.op, i);
    one.options.tiles = tiles;
    return conv(one);
  };
  const auto all = c.tiles();
  op_cost serial;
  const auto serial_plan = [&] {
    for (std::size_t i = 0; i < n; ++i) serial += on(i, all);
    return serial;
  };
  if (c.string_attr("planType") == "serial" || n == 0) return serial_plan();

  // Smallest to largest by MACs (index order among equals).
  std::vector<std::uint64_t> macs(n);
  for (std::size_t i = 0; i < n; ++i) {
    op_cost_context one = c;
    one.op = &parts[i];
    macs[i] = conv_shape_of(one).macs();
  }
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return macs[a] < macs[b]; });

  auto reserved = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("perConvReservedTiles", mc::default_reserved_tiles), 1));
  if (all < n * reserved) reserved = std::max<std::uint64_t>(1, all / n);
  const float back_off_attr = [&] {
    if (const auto* a = c.op->find_attribute("cycleBackOff"))
      if (const auto* v = std::get_if<float>(&a->value)) return *v;
    return mc::default_cycle_back_off;
  }();
  const double back_off = 1.0 + static_cast<double>(n - 1) * static_cast<double>(back_off_attr);
  // The fewest tiles in [1, most] on which conv i takes at most `limit` cycles (most when none
  // does); cycles fall as tiles grow, so a bisection finds it, and the answer is checked.
  const auto fewest = [&](std::size_t i, std::uint64_t most, double limit) {
    std::uint64_t lo = 1, hi = most;
    while (lo < hi) {
      const auto mid = lo + (hi - lo) / 2;
      if (static_cast<double>(on(i, static_cast<std::uint32_t>(mid)).cycles()) <= limit) hi = mid;
      else lo = mid + 1;
    }
    const auto k = on(i, static_cast<std::uint32_t>(lo));
    return static_cast<double>(k.cycles()) <= limit ? k : on(i, static_cast<std::uint32_t>(most));
  };

  std::vector<op_cost> costs(n);
  std::uint64_t reserved_left = (n - 1) * reserved;
  if (all <= reserved_left) return serial_plan();
  const auto largest = order.back();
  const auto fastest = on(largest, static_cast<std::uint32_t>(all - reserved_left));
  costs[largest] = fewest(largest, all - reserved_left, static_cast<double>(fastest.cycles()) * back_off);
  std::uint64_t start = std::max<std::uint32_t>(costs[largest].tiles, 1);
  if (n == 1) return costs[largest];
  reserved_left -= reserved;
  auto reference = costs[largest].cycles();
  for (std::size_t k = 0; k + 2 < n; ++k) {
    const auto i = order[k];
    if (all <= start + reserved_left) return serial_plan();
    costs[i] = fewest(i, all - start - reserved_left, static_cast<double>(reference));
    reference = std::max(reference, costs[i].cycles());
    reserved_left -= reserved;
    start += std::max<std::uint32_t>(costs[i].tiles, 1);
  }
  if (all <= start) return serial_plan();
  costs[order[n - 2]] = on(order[n - 2], static_cast<std::uint32_t>(all - start));
  return side_by_side(costs);
}

}  // namespace detail::cost_rules

namespace detail::grad {

/// Each conv's gradients, by Conv's rule on its own inputs; a conv whose output nothing reads gets none.
constexpr void multi_conv(gradient_context& c) {
  namespace mc = detail::multi_conv;
  const auto n = mc::count(c.num_inputs());
  std::vector<std::size_t> spatial(n);
  for (std::size_t i = 0; i < n; ++i) spatial[i] = c.shape_of(c.input(3 * i)).rank() - 2;
  for (std::size_t i = 0; i < n; ++i) {
    const auto dy = c.output_grad(i);
    if (dy == no_tensor) continue;
    const auto x = c.input(3 * i), w = c.input(3 * i + 1);
    const auto node = mc::part(c.op(), i, spatial, mc::group_of(c.shape_of(x), c.shape_of(w)));
    conv_input_grads(c, node, {3 * i, 3 * i + 1, 3 * i + 2}, dy);
  }
}

}  // namespace detail::grad
}  // namespace ipu
