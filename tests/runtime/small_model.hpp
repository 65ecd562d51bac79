#pragma once
// What the runtime suites share: the small model with two weights they run, and the comparison of
// an output with PyTorch's.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"

namespace runtime_test {

/// The weights small_model is built with.
inline const std::vector<float> w0{2.f, -1.f, 0.5f}, b0{1.f, 1.f, -4.f};

inline ipu::constant_tensor f32(const std::vector<float>& v) {
  return {{ipu::data_type::F32, ipu::shape{static_cast<std::int64_t>(v.size())}},
          ipu::byte_buffer::from_values(std::span<const float>(v))};
}

/// y = relu(x * w + b), z = y - x, for x: F32[3] named `input` and weights w = w0, b = b0; with
/// rows > 0, x is F32[rows, 3] (the weights broadcast over the rows: a batch dimension). `name`
/// names the graph.
inline ipu::graph small_model(const std::string& input = "x", std::int64_t rows = 0, const std::string& name = "small") {
  ipu::builder g(name);
  const auto x = g.add_input_tensor({ipu::data_type::F32, rows > 0 ? ipu::shape{rows, 3} : ipu::shape{3}}, input);
  const auto w = g.add_initialized_input(f32(w0), "w");
  const auto b = g.add_initialized_input(f32(b0), "b");
  const auto y = g.relu(g.add(g.mul(x, w, "m"), b, "s"), "y");
  const auto z = g.sub(y, x, "z");
  g.add_output(y);
  g.add_output(z);
  return std::move(g).build();
}

inline float relu(float v) { return v > 0 ? v : 0; }

/// max |got - want| over max |want| (at least 1e-6); infinite when the sizes differ.
inline double relative_difference(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
  double worst = 0, scale = 1e-6;
  for (std::size_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(got[i] - want[i])));
    scale = std::max(scale, static_cast<double>(std::fabs(want[i])));
  }
  return worst / scale;
}

}  // namespace runtime_test
