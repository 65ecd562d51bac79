#pragma once
// Small models for the planning tests, built with the graph builder (constexpr where it matters).
#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/sched/execution_strategy.hpp"

namespace plan_test {

/// Plan options with `bps` batches per step, the rest as default.
inline ipu::plan_options with_bps(std::uint64_t bps) {
  ipu::plan_options o;
  o.batches_per_step = bps;
  return o;
}

using ipu::data_type;
using ipu::tensor_id;

/// How each layer of `mlp` is annotated.
struct layer_annotation {
  std::optional<std::int64_t> ipu;
  std::optional<std::int64_t> stage;
  std::optional<std::int64_t> phase;
  std::string block;
};

/// An MLP of `layers` equal layers (MatMul + Relu) of width `width` on a [batch, width] input, each
/// layer annotated by `annotate(i)`. The annotations are set after the builder has validated the
/// graph, so they may break the rules (the planner, not the builder, is under test).
template <class Annotate>
constexpr ipu::graph mlp(int layers, std::int64_t width, std::int64_t batch, Annotate annotate) {
  ipu::builder b("mlp");
  auto x = b.add_input_tensor({data_type::F32, {batch, width}}, "x");
  for (int i = 0; i < layers; ++i) {
    // Names appended piece by piece (GCC 12 and string temporaries in constant evaluation).
    std::string wn = "w", mn = "mm", rn = "relu";
    wn += ipu::detail::decimal(static_cast<std::size_t>(i));
    mn += ipu::detail::decimal(static_cast<std::size_t>(i));
    rn += ipu::detail::decimal(static_cast<std::size_t>(i));
    auto w = b.add_initialized_input(
        ipu::make_constant<float>({width, width}, std::vector<float>(static_cast<std::size_t>(width * width), 0.5f)), wn);
    x = b.relu(b.matmul(x, w, mn), rn);
  }
  b.add_output(x);
  ipu::graph g = std::move(b).build();
  for (int i = 0; i < layers; ++i) {
    const layer_annotation a = annotate(i);
    for (int k = 0; k < 2; ++k) {  // the layer's MatMul and Relu
      auto& w = g.op(static_cast<ipu::op_id>(2 * i + k)).where;
      w.ipu = a.ipu;
      w.stage = a.stage;
      w.phase = a.phase;
      w.block = a.block;
    }
  }
  return g;
}

constexpr ipu::graph mlp(int layers, std::int64_t width, std::int64_t batch) {
  return mlp(layers, width, batch, [](int) { return layer_annotation{}; });
}

/// Layer i on IPU i / stage i.
constexpr ipu::graph pipelined_mlp(int layers, std::int64_t width, std::int64_t batch) {
  return mlp(layers, width, batch, [](int i) { return layer_annotation{i, i, std::nullopt, {}}; });
}

/// Layer i in block "b<i>" on IPU `ipus[i]` (no IPU when negative).
inline ipu::graph blocked_mlp(const std::vector<std::int64_t>& ipus, std::int64_t width = 16, std::int64_t batch = 4) {
  return mlp(static_cast<int>(ipus.size()), width, batch, [&](int i) {
    layer_annotation a;
    a.block = "b" + std::to_string(i);
    if (ipus[static_cast<std::size_t>(i)] >= 0) a.ipu = ipus[static_cast<std::size_t>(i)];
    return a;
  });
}

/// Runs `f` and returns the ipu::error it throws (failing the test when it throws nothing).
template <class F>
ipu::error error_of(F&& f) {
  try {
    f();
  } catch (const ipu::error& e) {
    return e;
  }
  FAIL("expected an ipu::error");
  return ipu::error(ipu::error_category::internal, "unreachable");
}

}  // namespace plan_test
