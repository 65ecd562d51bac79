#pragma once
// Control flow: If and Loop run their bodies through the context's subgraph runner (the device
// that runs the calling kernel). Outputs are preallocated with the IR's shapes, so a branch or a
// loop whose results have other shapes is an error rather than a reshape.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <variant>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

inline const graph& body_attr(const kernel_context& ctx, std::string_view name) {
  const attribute* a = ctx.op.find_attribute(name);
  const auto* g = a ? std::get_if<subgraph>(&a->value) : nullptr;
  if (!g) throw ctx.fail("missing graph attribute '" + std::string(name) + "'", "give the op its body graph");
  return *g->body;
}

inline subgraph_runner& runner(const kernel_context& ctx) {
  if (!ctx.subgraphs)
    throw ctx.fail("this device cannot run subgraphs", "run the model on a device that supports If / Loop");
  return *ctx.subgraphs;
}

/// Copies a body result into output `i`, which must have the same type and shape.
inline void store(const kernel_context& ctx, std::size_t i, const const_tensor_view& v) {
  const auto& out = ctx.outputs[i];
  if (out.info() != v.info())
    throw ctx.fail("output #" + std::to_string(i) + " is " + to_string(out.info()) + " in the IR but the body produced " +
                       to_string(v.info()),
                   "the body's result shapes must be known statically and match the op's outputs");
  if (out.info().num_bytes()) std::memcpy(out.data(), v.data(), out.info().num_bytes());
}

inline bool scalar_bool(const kernel_context& ctx, const const_tensor_view& v, std::string_view what) {
  if (v.info().type != data_type::BOOL || v.info().num_elements() != 1)
    throw ctx.fail(std::string(what) + " must be a one-element BOOL tensor, got " + to_string(v.info()), "fix the model");
  return *data_as<bool>(v);
}

inline void if_kernel(const kernel_context& ctx) {
  const bool cond = scalar_bool(ctx, ctx.input(0), "cond");
  const graph& body = body_attr(ctx, cond ? "then_branch" : "else_branch");
  const auto results = runner(ctx).run(body, {});
  if (results.size() != ctx.outputs.size())
    throw ctx.fail("the branch returned " + std::to_string(results.size()) + " values for " +
                       std::to_string(ctx.outputs.size()) + " outputs",
                   "both branches must return one value per output");
  for (std::size_t i = 0; i < results.size(); ++i) store(ctx, i, results[i].view());
}

/// Loop(M?, cond?, v_initial...) with body (iteration, cond, v...) -> (cond, v..., scan...).
/// Runs while (no M or i < M) and cond; scan outputs are stacked along a new first axis.
inline void loop_kernel(const kernel_context& ctx) {
  const graph& body = body_attr(ctx, "body");
  const bool has_m = ctx.has_input(0);
  const std::int64_t max_trips = has_m ? read_ints(ctx, ctx.inputs[0], "M").at(0) : 0;
  bool cond = ctx.has_input(1) ? scalar_bool(ctx, ctx.inputs[1], "cond") : true;
  const std::size_t n_carried = ctx.inputs.size() > 2 ? ctx.inputs.size() - 2 : 0;
  if (ctx.outputs.size() < n_carried)
    throw ctx.fail("Loop has fewer outputs than loop-carried values", "fix the model");
  const std::size_t n_scan = ctx.outputs.size() - n_carried;
  std::vector<host_tensor> carried;
  for (std::size_t i = 0; i < n_carried; ++i) carried.push_back(host_tensor::copy_of(ctx.input(2 + i)));
  std::vector<std::vector<host_tensor>> scans(n_scan);
  auto& run = runner(ctx);
  // Scan outputs have static shapes, so their first dimension bounds the iterations; a loop without
  // them is bounded by the context's max_loop_trips. Either way the bound is checked before the
  // iteration past it runs (a hostile M or condition neither hangs nor fills memory).
  std::int64_t bound = ctx.max_loop_trips;
  for (std::size_t k = 0; k < n_scan; ++k) {
    const auto& s = ctx.outputs[n_carried + k].info().shape;
    if (s.rank() == 0) throw ctx.fail("scan output #" + std::to_string(k) + " is a scalar in the IR", "fix the model");
    bound = std::min(bound, s[0]);
  }
  for (std::int64_t i = 0; (!has_m || i < max_trips) && cond; ++i) {
    if (i >= bound)
      throw ctx.fail(n_scan ? "the loop runs more than the " + std::to_string(bound) +
                                  " iterations its scan outputs hold in the IR"
                            : "the loop runs more than " + std::to_string(bound) + " iterations (the trip limit)",
                     n_scan ? "fix the scan outputs' shapes or the trip count" : "check the model's trip count and condition");
    auto iter = host_tensor::from<std::int64_t>(shape{}, {i});
    auto c = host_tensor::from<bool>(shape{}, {cond});
    std::vector<const_tensor_view> args{iter.view(), c.view()};
    for (const auto& t : carried) args.push_back(t.view());
    auto results = run.run(body, args);
    if (results.size() != 1 + n_carried + n_scan)
      throw ctx.fail("the body returned " + std::to_string(results.size()) + " values, expected " +
                         std::to_string(1 + n_carried + n_scan),
                     "the body returns cond, the loop-carried values, then the scan outputs");
    cond = scalar_bool(ctx, results[0].view(), "the body's condition output");
    for (std::size_t k = 0; k < n_carried; ++k) carried[k] = std::move(results[1 + k]);
    for (std::size_t k = 0; k < n_scan; ++k) scans[k].push_back(std::move(results[1 + n_carried + k]));
  }
  for (std::size_t k = 0; k < n_carried; ++k) store(ctx, k, carried[k].view());
  for (std::size_t k = 0; k < n_scan; ++k) {
    const auto& out = ctx.outputs[n_carried + k];
    const auto& parts = scans[k];
    std::vector<std::int64_t> dims{static_cast<std::int64_t>(parts.size())};
    if (!parts.empty()) {
      const auto& first = parts[0].info();
      for (const auto& p : parts)
        if (p.info() != first)
          throw ctx.fail("scan output #" + std::to_string(k) + " changes shape between iterations", "fix the body");
      dims.insert(dims.end(), first.shape.begin(), first.shape.end());
    } else {
      dims = out.info().shape.dims();  // no iterations: the IR's (empty) shape stands
      if (out.info().num_elements() != 0)
        throw ctx.fail("the loop ran no iterations but scan output #" + std::to_string(k) + " is " + to_string(out.info()),
                       "fix the output shape in the IR");
    }
    check_output_shape(ctx, n_carried + k, shape(dims));
    std::size_t at = 0;
    for (const auto& p : parts) {
      if (p.info().type != out.info().type) throw ctx.fail("scan output type differs from the IR", "fix the body");
      if (!p.bytes().empty()) std::memcpy(out.data() + at, p.data(), p.bytes().size());
      at += p.bytes().size();
    }
  }
}

/// The slice of `v` at index `i` of `axis`, with that axis removed.
inline host_tensor take_slice(const const_tensor_view& v, std::size_t axis, std::int64_t i) {
  const auto& s = v.info().shape;
  const auto st = s.strides();
  axis_tables t;
  std::int64_t base = i * st[axis];
  for (std::size_t k = 0; k < s.rank(); ++k) {
    if (k == axis) continue;
    t.dims.push_back(s[k]);
    auto tab = linear_table(s[k], 0, 1, st[k]);
    if (t.offsets.empty())
      for (auto& o : tab) o += base;  // the fixed index rides on the first remaining axis
    t.offsets.push_back(std::move(tab));
  }
  host_tensor out(tensor_info{v.info().type, shape(t.dims)});
  if (t.dims.empty()) {
    std::memcpy(out.data(), v.data() + static_cast<std::size_t>(base) * size_of(v.info().type), size_of(v.info().type));
    return out;
  }
  gather_axes(t, v.data(), out.data(), size_of(v.info().type));
  return out;
}

/// Scan (opset 9+): N state variables and M scan inputs; the body maps (states, slices) to
/// (states, scan output elements), which are stacked along each output's scan axis.
inline void scan_kernel(const kernel_context& ctx) {
  const graph& body = body_attr(ctx, "body");
  const auto m = static_cast<std::size_t>(ctx.attr_int("num_scan_inputs", 0));
  if (m == 0 || m > ctx.inputs.size()) throw ctx.fail("num_scan_inputs is out of range", "fix the model");
  const std::size_t n = ctx.inputs.size() - m;
  if (ctx.outputs.size() < n) throw ctx.fail("Scan has fewer outputs than state variables", "fix the model");
  const std::size_t k_out = ctx.outputs.size() - n;
  auto per_input = [&](std::string_view name, std::size_t count) {
    auto v = ctx.attr_ints(name);
    if (v.empty()) v.assign(count, 0);
    if (v.size() != count) throw ctx.fail(std::string(name) + " has the wrong length", "give one entry per scan input/output");
    return v;
  };
  const auto in_axes = per_input("scan_input_axes", m), in_dirs = per_input("scan_input_directions", m);
  const auto out_axes = per_input("scan_output_axes", k_out), out_dirs = per_input("scan_output_directions", k_out);
  std::int64_t steps = -1;
  std::vector<std::size_t> axis(m);
  for (std::size_t j = 0; j < m; ++j) {
    const shape s = ctx.input(n + j).info().shape;
    axis[j] = normalize_axis(ctx, in_axes[j], s.rank());
    if (steps >= 0 && s[axis[j]] != steps) throw ctx.fail("scan inputs differ in sequence length", "fix the inputs");
    steps = s[axis[j]];
  }
  std::vector<host_tensor> state;
  for (std::size_t i = 0; i < n; ++i) state.push_back(host_tensor::copy_of(ctx.input(i)));
  std::vector<std::vector<host_tensor>> scans(k_out);
  auto& run = runner(ctx);
  for (std::int64_t t = 0; t < steps; ++t) {
    std::vector<host_tensor> slices;
    for (std::size_t j = 0; j < m; ++j)
      slices.push_back(take_slice(ctx.inputs[n + j], axis[j], in_dirs[j] ? steps - 1 - t : t));
    std::vector<const_tensor_view> args;
    for (const auto& s : state) args.push_back(s.view());
    for (const auto& s : slices) args.push_back(s.view());
    auto results = run.run(body, args);
    if (results.size() != n + k_out)
      throw ctx.fail("the body returned " + std::to_string(results.size()) + " values, expected " + std::to_string(n + k_out),
                     "the body returns the states, then the scan output elements");
    for (std::size_t i = 0; i < n; ++i) state[i] = std::move(results[i]);
    for (std::size_t k = 0; k < k_out; ++k) scans[k].push_back(std::move(results[n + k]));
  }
  for (std::size_t i = 0; i < n; ++i) store(ctx, i, state[i].view());
  for (std::size_t k = 0; k < k_out; ++k) {
    const auto& out = ctx.outputs[n + k];
    if (scans[k].empty()) {
      if (out.info().num_elements() != 0) throw ctx.fail("no scan steps but a non-empty scan output", "fix the IR");
      continue;
    }
    const auto& elem = scans[k][0].info();
    const std::size_t a = normalize_axis(ctx, out_axes[k], elem.shape.rank() + 1);
    std::vector<std::int64_t> dims = elem.shape.dims();
    dims.insert(dims.begin() + static_cast<std::ptrdiff_t>(a), steps);
    check_output_shape(ctx, n + k, shape(dims));
    if (out.info().type != elem.type) throw ctx.fail("scan output type differs from the IR", "fix the body");
    std::int64_t outer = 1;
    for (std::size_t d = 0; d < a; ++d) outer *= elem.shape[d];
    const std::size_t chunk = outer ? elem.num_bytes() / static_cast<std::size_t>(outer) : 0;
    for (std::int64_t t = 0; t < steps; ++t) {
      const auto& r = scans[k][static_cast<std::size_t>(t)];
      if (r.info() != elem) throw ctx.fail("scan output changes shape between steps", "fix the body");
      const std::int64_t pos = out_dirs[k] ? steps - 1 - t : t;
      for (std::int64_t o = 0; o < outer && chunk; ++o)
        std::memcpy(out.data() + (static_cast<std::size_t>(o * steps + pos)) * chunk,
                    r.data() + static_cast<std::size_t>(o) * chunk, chunk);
    }
  }
}

inline void register_control_flow(op_registry& r) {
  r.add({"", "Scan", scan_kernel});
  r.add({"", "If", if_kernel});
  r.add({"", "Loop", loop_kernel});
}

}  // namespace ipu::detail::tensor_ops
