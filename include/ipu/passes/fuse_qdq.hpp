#pragma once
// Quantized models in QDQ form, as PyTorch's and ONNX Runtime's quantization tools write them, keep
// every product in float between DequantizeLinear and QuantizeLinear ops:
//
//   xq -> DequantizeLinear --+
//   wq -> DequantizeLinear --+--> Conv (or MatMul) --> [Relu] --> QuantizeLinear --> yq
//   bq -> DequantizeLinear --+
//
// This pass runs each such product on the integers, as one QLinearConv or QLinearMatMul that reads
// xq and the 8-bit weights directly and the bias as int32. That is what the model stands for (its
// tool simulated the integer kernel in float), what PyTorch's quantized kernels and ONNX Runtime
// run, and what an 8-bit device would. It is not the float graph to rounding: the integer sum is
// exact and requantized once, where the float graph rounds each dequantized product, so an output
// may move by a quantization step. Hence it is not a default pass: ask for it before the others,
// `--passes fuse-qdq,default`. It must come before fold-constants, which would dequantize the
// weights; it folds everything but DequantizeLinear itself first (PyTorch computes bias zero
// points with ConstantOfShape and Cast).
//
// A match needs known 8-bit weights and float32 scales; one scale and zero point for x and for y
// (and for a MatMul's weights, or one per output column of 2-D weights; per output channel for a
// Conv's); a bias (Conv only) that is int32, dequantized with zero point 0 and scale x_scale times
// w_scale (float32 products, per channel), which is how QLinearConv reads its bias; the product's
// and the Relu's outputs read only by the next op of the pattern and not graph outputs, none of
// them a recomputation checkpoint, one recomputation mark for all; and a Relu only when y's zero
// point is its type's minimum, where Q(Relu(v)) = Q(v) exactly. Casts to the same type (PyTorch puts
// one between each QuantizeLinear and DequantizeLinear) are seen through. Anything else is left.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/passes/fold_constants.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

namespace detail {

constexpr bool is_dequantize(const op_node& op) { return is_onnx_op(op, "DequantizeLinear"); }

/// `t` before any Casts to its own type.
inline tensor_id before_identity_casts(const graph& g, tensor_id t) {
  for (;;) {
    const auto p = g.tensor(t).producer;
    if (p == no_op || !is_onnx_op(g.op(p), "Cast") || g.op(p).inputs.size() != 1) return t;
    const auto in = g.op(p).inputs[0];
    if (in == no_tensor || g.tensor(in).info.type != g.tensor(t).info.type) return t;
    t = in;
  }
}

/// The known values of F32 tensor `t`.
inline std::optional<std::vector<float>> known_f32s(const graph& g, tensor_id t) {
  if (t == no_tensor || g.tensor(t).info.type != data_type::F32) return std::nullopt;
  const auto* d = known_data(g, t);
  const auto n = static_cast<std::size_t>(g.tensor(t).info.shape.num_elements());
  if (!d || d->size() != n * 4) return std::nullopt;
  std::vector<float> v(n);
  std::memcpy(v.data(), d->data(), n * 4);
  return v;
}

/// The known values of S8, U8 or S32 tensor `t`.
inline std::optional<std::vector<std::int64_t>> known_integers(const graph& g, tensor_id t) {
  if (t == no_tensor) return std::nullopt;
  const auto type = g.tensor(t).info.type;
  if (type != data_type::S8 && type != data_type::U8 && type != data_type::S32) return std::nullopt;
  const auto* d = known_data(g, t);
  const auto n = static_cast<std::size_t>(g.tensor(t).info.shape.num_elements());
  if (!d || d->size() != n * size_of(type)) return std::nullopt;
  std::vector<std::int64_t> v(n);
  for (std::size_t i = 0; i < n; ++i) {
    if (type == data_type::S8) v[i] = d->load<std::int8_t>(i);
    if (type == data_type::U8) v[i] = d->load<std::uint8_t>(i);
    if (type == data_type::S32) v[i] = d->load<std::int32_t>(i);
  }
  return v;
}

constexpr bool is_8bit_type(data_type t) { return t == data_type::S8 || t == data_type::U8; }

/// A DequantizeLinear's operands: the quantized tensor (before identity Casts), its scale and zero
/// point tensors (zero point no_tensor when omitted), their values and the op's axis.
struct dequantized {
  op_id op = no_op;
  tensor_id q = no_tensor, scale = no_tensor, zero = no_tensor;
  std::vector<float> scales;
  std::vector<std::int64_t> zeros;  // {0} when omitted
  std::int64_t axis = 1;
};

/// `t` as the output of a DequantizeLinear of an 8-bit tensor (or an int32 one when `int32`) with
/// known F32 scales and known zero points; nullopt otherwise.
inline std::optional<dequantized> dequantized_from(const graph& g, tensor_id t, bool int32 = false) {
  if (t == no_tensor) return std::nullopt;
  const auto p = g.tensor(t).producer;
  if (p == no_op || !is_dequantize(g.op(p))) return std::nullopt;
  const auto& op = g.op(p);
  if (op.inputs.size() < 2 || op.inputs.size() > 3 || op.inputs[0] == no_tensor) return std::nullopt;
  dequantized d;
  d.op = p;
  d.q = before_identity_casts(g, op.inputs[0]);
  const auto qt = g.tensor(d.q).info.type;
  if (int32 ? qt != data_type::S32 : !is_8bit_type(qt)) return std::nullopt;
  d.scale = op.inputs[1];
  const auto scales = known_f32s(g, d.scale);
  if (!scales || scales->empty()) return std::nullopt;
  d.scales = *scales;
  d.zeros = {0};
  if (op.inputs.size() == 3 && op.inputs[2] != no_tensor) {
    d.zero = op.inputs[2];
    const auto zeros = known_integers(g, d.zero);
    if (!zeros || zeros->empty() || g.tensor(d.zero).info.type != g.tensor(op.inputs[0]).info.type) return std::nullopt;
    d.zeros = *zeros;
  }
  d.axis = int_attribute(op, "axis", 1);
  const auto rank = static_cast<std::int64_t>(g.tensor(t).info.shape.rank());
  if (d.axis < 0) d.axis += rank;
  return d;
}

/// Whether `d` has one scale and one zero point.
inline bool per_tensor(const dequantized& d) { return d.scales.size() == 1 && d.zeros.size() == 1; }

/// Whether `d`'s scales and zero points are one each, or `n` each along axis `axis`.
inline bool per_tensor_or_axis(const dequantized& d, std::int64_t axis, std::int64_t n) {
  if (per_tensor(d)) return true;
  const auto count = [&](std::size_t s) { return s == 1 || static_cast<std::int64_t>(s) == n; };
  return d.axis == axis && count(d.scales.size()) && count(d.zeros.size());
}

/// The tail of a pattern: an optional Relu and the QuantizeLinear after it.
struct quantized_tail {
  op_id relu = no_op, quantize = no_op;
  tensor_id scale = no_tensor, zero = no_tensor;  // zero: no_tensor when omitted (uint8, 0)
};

/// The Relu-then-QuantizeLinear (or QuantizeLinear) that alone reads `y`, product op `product`'s
/// output; nullopt when there is none or it may not be fused (see the header).
inline std::optional<quantized_tail> quantized_tail_of(const graph& g, op_id product, const std::vector<bool>& is_output) {
  const auto& prod = g.op(product);
  if (prod.where.checkpoint) return std::nullopt;
  quantized_tail tail;
  auto next = sole_reader(g, prod.outputs[0], is_output);
  if (next != no_op && is_onnx_op(g.op(next), "Relu")) {
    const auto& relu = g.op(next);
    if (relu.outputs.size() != 1 || relu.where.checkpoint || relu.where.recompute != prod.where.recompute) return std::nullopt;
    tail.relu = next;
    next = sole_reader(g, relu.outputs[0], is_output);
  }
  if (next == no_op || !is_onnx_op(g.op(next), "QuantizeLinear")) return std::nullopt;
  const auto& q = g.op(next);
  const auto input = tail.relu == no_op ? prod.outputs[0] : g.op(tail.relu).outputs[0];
  if (q.inputs.size() < 2 || q.inputs[0] != input || q.outputs.size() != 1 || q.where.recompute != prod.where.recompute)
    return std::nullopt;
  const auto scale = known_f32s(g, q.inputs[1]);
  if (!scale || scale->size() != 1 || !(scale->front() != 0.0f)) return std::nullopt;
  std::int64_t zero = 0;
  if (q.inputs.size() == 3 && q.inputs[2] != no_tensor) {
    const auto zeros = known_integers(g, q.inputs[2]);
    if (!zeros || zeros->size() != 1) return std::nullopt;
    zero = zeros->front();
    tail.zero = q.inputs[2];
  }
  const auto out_type = g.tensor(q.outputs[0]).info.type;
  if (!is_8bit_type(out_type)) return std::nullopt;
  if (tail.relu != no_op && zero != (out_type == data_type::S8 ? -128 : 0)) return std::nullopt;
  tail.quantize = next;
  tail.scale = q.inputs[1];
  return tail;
}

/// A new scalar zero of 8-bit `type`, for an omitted zero point the fused op needs.
inline tensor_id zero_point_tensor(const graph& g, graph_rewrite& rw, std::string_view name, data_type type) {
  return rw.add_tensor(g, name, tensor_info{type, shape{}}, tensor_kind::constant,
                       byte_buffer(std::vector<std::byte>(1, std::byte{0})));
}

}  // namespace detail

/// `g` with each Conv and MatMul between DequantizeLinear and QuantizeLinear ops (see the header)
/// replaced by QLinearConv / QLinearMatMul on the quantized tensors.
inline graph fuse_qdq(const graph& source) {
  using namespace detail;
  constant_folding_options keep_dequantize;
  keep_dequantize.keep = is_dequantize;
  const graph g = fold_constants(source, keep_dequantize);
  const auto is_output = output_mask(g);
  graph_rewrite rw(g);
  rw.drop_unread_variables = true;
  std::size_t fused = 0;
  for (op_id id = 0; id < g.num_ops(); ++id) {
    const auto& prod = g.op(id);
    const bool conv = is_onnx_op(prod, "Conv"), matmul = is_onnx_op(prod, "MatMul");
    if ((!conv && !matmul) || prod.inputs.size() < 2 || prod.outputs.size() != 1 || rw.removed[id]) continue;
    if (matmul && prod.inputs.size() != 2) continue;
    const auto x = dequantized_from(g, prod.inputs[0]);
    const auto w = dequantized_from(g, prod.inputs[1]);
    if (!x || !w || !per_tensor(*x) || !known_data(g, w->q) || g.tensor(prod.inputs[1]).info.type != data_type::F32)
      continue;
    const auto& ws = g.tensor(w->q).info.shape;
    if (ws.rank() < (conv ? 3u : 1u)) continue;
    // Per output channel (a Conv's axis 0) or per output column (2-D MatMul weights' axis 1).
    const auto out_axis = conv ? 0 : static_cast<std::int64_t>(ws.rank()) - 1;
    if (!((conv || ws.rank() == 2) ? per_tensor_or_axis(*w, out_axis, ws[static_cast<std::size_t>(out_axis)]) : per_tensor(*w)))
      continue;
    std::optional<dequantized> b;
    const bool has_bias = conv && prod.inputs.size() > 2 && prod.inputs[2] != no_tensor;
    if (has_bias) {
      b = dequantized_from(g, prod.inputs[2], true);
      if (!b || !known_data(g, b->q)) continue;
      const auto m = ws[0];
      bool bias_ok = g.tensor(b->q).info.shape == shape{m} && (b->scales.size() == 1 || static_cast<std::int64_t>(b->scales.size()) == m);
      for (auto z : b->zeros) bias_ok = bias_ok && z == 0;
      for (std::int64_t c = 0; bias_ok && c < m; ++c) {
        const auto i = static_cast<std::size_t>(c);
        const float want = x->scales[0] * w->scales[w->scales.size() == 1 ? 0 : i];
        bias_ok = b->scales[b->scales.size() == 1 ? 0 : i] == want;
      }
      if (!bias_ok) continue;
    }
    const auto tail = quantized_tail_of(g, id, is_output);
    if (!tail) continue;
    const auto& q = g.op(tail->quantize);
    op_node op;
    op.type = conv ? "QLinearConv" : "QLinearMatMul";
    op.opset = 10;
    name_fused_op(op, q, op.type, fused);
    auto zero_or_new = [&](tensor_id zero, tensor_id of, const char* what) {
      if (zero != no_tensor) return zero;
      return zero_point_tensor(g, rw, g.tensor(of).name + what, g.tensor(of).info.type);
    };
    op.inputs = {x->q, x->scale, zero_or_new(x->zero, x->q, ":zero_point"), w->q, w->scale,
                 zero_or_new(w->zero, w->q, ":zero_point"), tail->scale,
                 zero_or_new(tail->zero, q.outputs[0], ":zero_point")};
    if (has_bias) op.inputs.push_back(b->q);
    op.outputs = {q.outputs[0]};
    if (conv) op.attributes = prod.attributes;
    op.where = q.where;
    rw.removed[id] = rw.removed[tail->quantize] = true;
    if (tail->relu != no_op) rw.removed[tail->relu] = true;
    rw.inserted.emplace_back(tail->quantize, op);
    ++fused;
  }
  if (fused == 0) return source;
  // DequantizeLinear ops, and the Casts before them, that only fused ops read go with them.
  for (bool more = true; more;) {
    more = false;
    for (op_id id = 0; id < g.num_ops(); ++id) {
      const auto& op = g.op(id);
      const bool cast = is_onnx_op(op, "Cast") && op.inputs.size() == 1 && op.outputs.size() == 1 &&
                        op.inputs[0] != no_tensor && g.tensor(op.inputs[0]).info.type == g.tensor(op.outputs[0]).info.type;
      if (rw.removed[id] || (!is_dequantize(op) && !cast) || op.outputs.size() != 1 || is_output[op.outputs[0]]) continue;
      const auto& readers = g.tensor(op.outputs[0]).consumers;
      if (readers.empty() || !std::all_of(readers.begin(), readers.end(), [&](op_id r) { return rw.removed[r]; })) continue;
      rw.removed[id] = true;
      more = true;
    }
  }
  return apply(g, rw);
}

}  // namespace ipu::passes
