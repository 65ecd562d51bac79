#pragma once
// Kernel of ai.graphcore MultiConv (ops/families/multi_conv.hpp): each convolution runs Conv's own
// kernel on its (X, W, B) triple, so a MultiConv gives the bits of its convs run one by one. Each
// conv keeps its own op_cache (oneDNN's reordered weights) inside the MultiConv's.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ipu/ops/families/multi_conv.hpp"
#include "ipu/ops/kernels/conv.hpp"
#include "ipu/ops/kernel.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::math_ops {

/// What a MultiConv keeps between runs: one cache per convolution.
struct multi_conv_caches {
  std::vector<op_cache> convs;
};

inline void multi_conv_kernel(const kernel_context& ctx) {
  namespace mc = detail::multi_conv;
  const auto n = mc::count(ctx.inputs.size());
  if (ctx.inputs.size() < 2 || ctx.inputs.size() % 3 == 1 || ctx.outputs.size() != n)
    throw ctx.fail("MultiConv has " + std::to_string(ctx.inputs.size()) + " inputs and " +
                       std::to_string(ctx.outputs.size()) + " outputs",
                   "give (X, W, B) for each convolution and one output per convolution");
  std::vector<std::size_t> spatial(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = ctx.input(3 * i).info().shape;  // a copy: input() returns a view by value
    if (x.rank() < 3) throw ctx.fail("convolution #" + std::to_string(i) + "'s X has rank " + std::to_string(x.rank()));
    spatial[i] = x.rank() - 2;
  }
  multi_conv_caches* caches = nullptr;
  if (ctx.cache) {
    // Only this kernel writes a MultiConv's cache, so the slot holds this type.
    if (!ctx.cache->prepared) {
      auto made = std::make_shared<multi_conv_caches>();
      made->convs.resize(n);
      ctx.cache->prepared = made;
    }
    caches = static_cast<multi_conv_caches*>(ctx.cache->prepared.get());
    if (caches->convs.size() != n) caches->convs.assign(n, op_cache{});
  }
  for (std::size_t i = 0; i < n; ++i) {
    const auto x = ctx.input(3 * i), w = ctx.input(3 * i + 1);
    const auto group = mc::group_of(x.info().shape, w.info().shape);
    if (group < 1)
      throw ctx.fail("convolution #" + std::to_string(i) + ": X " + to_string(x.info()) + " and W " +
                         to_string(w.info()) + " give no group",
                     "W is [M, C / group, k...] for X [N, C, ...]");
    const auto node = mc::part(ctx.op, i, spatial, group);
    const const_tensor_view in[3] = {x, w, ctx.has_input(3 * i + 2) ? ctx.inputs[3 * i + 2] : const_tensor_view{}};
    std::uint64_t constant = 0;
    for (std::size_t k = 0; k < 3; ++k)
      if (ctx.input_is_constant(3 * i + k)) constant |= std::uint64_t{1} << k;
    const kernel_context one{node,
                             std::span<const const_tensor_view>(in, 3),
                             ctx.outputs.subspan(i, 1),
                             ctx.parallel_for,
                             ctx.subgraphs,
                             ctx.max_loop_trips,
                             ctx.random,
                             caches ? &caches->convs[i] : nullptr,
                             constant};
    conv_kernel(one);
  }
}

inline void register_multi_conv_kernels(op_registry& r) { r.add({"ai.graphcore", "MultiConv", &multi_conv_kernel, true}); }

}  // namespace ipu::detail::math_ops
