#pragma once
// Batch normalisation in inference folded into the Conv or Gemm before it: BN computes
// (y - mean) * s + bias with s = scale / sqrt(var + epsilon) per channel, and y is linear in the
// weights, so the op before can compute it directly with
//   Conv:  W'[c] = W[c] * s[c],                    B'[c] = (B[c] - mean[c]) * s[c] + bias[c]
//   Gemm:  op(B)'[:, c] = op(B)[:, c] * s[c],      C'[c] = (beta C[c] - mean[c]) * s[c] + bias[c], beta' = 1
// One op and one pass over the activations fewer per BN. The new weights are computed in double
// and rounded once to the model's type, so outputs change only by rounding (the tests hold them
// within 1e-5 of the unfolded graph). PyTorch's own export folds this in eval mode; models from
// other exporters, or exported in training mode and evaluated, still have the pair.
//
// A fold needs the Conv / Gemm output read by the BN alone (and no graph output), every weight and
// statistic known before running, float types alike, BN in inference (no training_mode, only its
// Y output), and for Gemm a 2-D output with C absent or per column. The folded weights are new
// constants named after the old ones; the old ones go when nothing else reads them.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/half.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

namespace detail {

/// `v` rounded to `type` (F16, F32 or F64), as tensor bytes held by a shared block, so that copies
/// of the graph share them.
inline byte_buffer rounded(const std::vector<double>& v, data_type type) {
  auto held = std::make_shared<std::vector<std::byte>>(v.size() * size_of(type));
  auto& out = *held;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (type == data_type::F64) std::memcpy(out.data() + 8 * i, &v[i], 8);
    if (type == data_type::F32) {
      const auto x = static_cast<float>(v[i]);
      std::memcpy(out.data() + 4 * i, &x, 4);
    }
    if (type == data_type::F16) {
      const half x(static_cast<float>(v[i]));
      std::memcpy(out.data() + 2 * i, &x, 2);
    }
  }
  const auto* data = out.data();
  return byte_buffer::share(std::move(held), data, out.size());
}

}  // namespace detail

/// `g` with each inference BatchNormalization that follows a Conv or Gemm folded into it.
inline graph fold_batch_normalization(const graph& g) {
  std::vector<bool> is_output(g.num_tensors(), false);
  for (auto t : g.outputs()) is_output[t] = true;
  graph_rewrite rw(g);
  rw.drop_unread_variables = true;
  bool any = false;
  for (op_id bn_id = 0; bn_id < g.num_ops(); ++bn_id) {
    const auto& bn = g.op(bn_id);
    if (bn.type != "BatchNormalization" || !(bn.domain.empty() || bn.domain == "ai.onnx") || bn.inputs.size() != 5 ||
        bn.outputs.empty() || detail::int_attribute(bn, "training_mode", 0) != 0)
      continue;
    bool extra_outputs = false;
    for (std::size_t i = 1; i < bn.outputs.size(); ++i) extra_outputs = extra_outputs || bn.outputs[i] != no_tensor;
    const auto y = bn.inputs[0];
    if (extra_outputs || y == no_tensor || is_output[y] || g.tensor(y).consumers.size() != 1) continue;
    const auto producer = g.tensor(y).producer;
    if (producer == no_op || rw.removed[producer]) continue;
    const auto& op = g.op(producer);
    const bool conv = op.type == "Conv", gemm = op.type == "Gemm";
    if (!(op.domain.empty() || op.domain == "ai.onnx") || !(conv || gemm) || op.outputs.size() != 1 || op.inputs.size() < 2)
      continue;
    const auto type = g.tensor(y).info.type;
    const auto& out_shape = g.tensor(y).info.shape;
    if (out_shape.rank() < 2 || (gemm && out_shape.rank() != 2)) continue;
    const auto channels = static_cast<std::size_t>(out_shape[1]);
    auto scale = detail::known_doubles(g, bn.inputs[1]), bias = detail::known_doubles(g, bn.inputs[2]);
    auto mean = detail::known_doubles(g, bn.inputs[3]), var = detail::known_doubles(g, bn.inputs[4]);
    auto w = detail::known_doubles(g, op.inputs[1]);
    if (!scale || !bias || !mean || !var || !w || scale->size() != channels || bias->size() != channels ||
        mean->size() != channels || var->size() != channels || g.tensor(op.inputs[1]).info.type != type)
      continue;
    const tensor_id c_in = op.inputs.size() > 2 ? op.inputs[2] : no_tensor;
    std::vector<double> c(channels, 0.0);
    if (c_in != no_tensor) {
      auto known_c = detail::known_doubles(g, c_in);
      if (!known_c || g.tensor(c_in).info.type != type) continue;
      const auto& cs = g.tensor(c_in).info.shape;
      if (known_c->size() == 1 && gemm) c.assign(channels, known_c->front());
      else if (known_c->size() == channels && cs.rank() >= 1 && static_cast<std::size_t>(cs[cs.rank() - 1]) == channels)
        c = *known_c;
      else continue;  // a Gemm's C per row or per element is not per channel
    }
    const double epsilon = detail::float_attribute(bn, "epsilon", 1e-5f);
    std::vector<double> s(channels);
    for (std::size_t k = 0; k < channels; ++k) s[k] = (*scale)[k] / std::sqrt((*var)[k] + epsilon);
    const auto& w_shape = g.tensor(op.inputs[1]).info.shape;
    op_node folded = op;
    if (conv) {
      if (w_shape.rank() < 1 || static_cast<std::size_t>(w_shape[0]) != channels) continue;
      const auto per = w->size() / channels;
      for (std::size_t k = 0; k < channels; ++k)
        for (std::size_t i = 0; i < per; ++i) (*w)[k * per + i] *= s[k];
    } else {
      if (w_shape.rank() != 2) continue;
      const bool trans_b = detail::int_attribute(op, "transB", 0) != 0;
      const auto rows = static_cast<std::size_t>(w_shape[0]), cols = static_cast<std::size_t>(w_shape[1]);
      if ((trans_b ? rows : cols) != channels) continue;
      for (std::size_t r = 0; r < rows; ++r)
        for (std::size_t k = 0; k < cols; ++k) (*w)[r * cols + k] *= s[trans_b ? r : k];
      const double beta = detail::float_attribute(op, "beta", 1.0f);
      for (auto& x : c) x *= beta;
      std::erase_if(folded.attributes, [](const attribute& a) { return a.name == "beta"; });
    }
    std::vector<double> b(channels);
    for (std::size_t k = 0; k < channels; ++k) b[k] = (c[k] - (*mean)[k]) * s[k] + (*bias)[k];
    const auto& w_node = g.tensor(op.inputs[1]);
    folded.inputs.resize(3);
    folded.inputs[1] = rw.add_tensor(g, w_node.name + ":bn_folded", w_node.info, tensor_kind::constant,
                                     detail::rounded(*w, type));
    const std::string b_name = c_in != no_tensor ? g.tensor(c_in).name + ":bn_folded" : bn.name + ":folded_bias";
    folded.inputs[2] = rw.add_tensor(g, b_name, tensor_info{type, shape{static_cast<std::int64_t>(channels)}},
                                     tensor_kind::constant, detail::rounded(b, type));
    folded.outputs = {bn.outputs[0]};
    rw.removed[producer] = rw.removed[bn_id] = true;
    rw.inserted.emplace_back(bn_id, folded);
    any = true;
  }
  if (!any) return g;
  return apply(g, rw);
}

}  // namespace ipu::passes
