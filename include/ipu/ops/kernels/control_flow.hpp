#pragma once
// Control flow: If and Loop run their bodies through the context's subgraph runner (the device
// that runs the calling kernel). Outputs are preallocated with the IR's shapes, so a branch or a
// loop whose results have other shapes is an error rather than a reshape.
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
  for (std::int64_t i = 0; (!has_m || i < max_trips) && cond; ++i) {
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

inline void register_control_flow(op_registry& r) {
  r.add({"", "If", if_kernel});
  r.add({"", "Loop", loop_kernel});
}

}  // namespace ipu::detail::tensor_ops
