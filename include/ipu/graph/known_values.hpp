#pragma once
// Values of a graph known before it runs: a constant's or initializer's bytes, or a Constant op's
// value. Rewrites (training-mode Dropout, pattern fusion) read their scalars this way: a value
// computed at run time is not known, and the rewrite does not apply.
#include <cstdint>
#include <optional>
#include <variant>

#include "ipu/byte_buffer.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/half.hpp"

namespace ipu {

/// The bytes of tensor `t` of `g` when they are known before running; nullptr otherwise.
constexpr const byte_buffer* known_data(const graph& g, tensor_id t) {
  const auto& n = g.tensor(t);
  if (n.has_data()) return &n.data;
  if (n.producer == no_op) return nullptr;
  const auto& p = g.op(n.producer);
  if (p.type != "Constant" || !(p.domain.empty() || p.domain == "ai.onnx")) return nullptr;
  if (const auto* a = p.find_attribute("value"))
    if (const auto* v = std::get_if<constant_tensor>(&a->value)) return &v->data;
  return nullptr;
}

/// The value of `t` when it is a known F16, F32 or F64 tensor of one element; nullopt otherwise.
constexpr std::optional<double> known_float_scalar(const graph& g, tensor_id t) {
  const auto& info = g.tensor(t).info;
  const auto* d = known_data(g, t);
  if (!d || info.shape.num_elements() != 1 || d->size() != size_of(info.type)) return std::nullopt;
  switch (info.type) {
    case data_type::F64: return d->load<double>(0);
    case data_type::F32: return static_cast<double>(d->load<float>(0));
    case data_type::F16: return static_cast<double>(static_cast<float>(d->load<half>(0)));
    default: return std::nullopt;
  }
}

}  // namespace ipu
