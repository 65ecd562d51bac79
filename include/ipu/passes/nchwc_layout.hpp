#pragma once
// Layout planning for convolutional nets, as ONNX Runtime's NCHWc transformer does: the host's
// fast convolutions (oneDNN's) work on channel-blocked data, and converting NCHW into it and back
// around every op cost MobileNetV2 as much as its arithmetic. So convolutions that feed each other
// run as ipu::NchwcConv on blocked data, with the elementwise ops between them:
//
//   x -> Conv -> Swish -> Conv -+-> Conv(Z) -> Softmax
//                               +------^
//   x -> ToNchwc -> NchwcConv -> Swish -> NchwcConv -+-> NchwcConv(Z) -> FromNchwc -> Softmax
//                                                    +-------^
//
// The ops that join a group: F32 2-D Conv and FusedConv; elementwise ops that map zeros to
// zero with all operands of the output's shape (Relu, LeakyRelu, Tanh, Neg, HardSwish, Add, Sub,
// Mul, ai.graphcore Swish), which compute the same on blocked data and keep the unused channels
// zero; Concat along the channels of inputs of whole blocks of channels (SqueezeNet's fire
// modules), which does too; 2-D MaxPool (without Indices), AveragePool and the global pools, as
// ipu::NchwcMaxPool / NchwcAveragePool (GoogLeNet's pools, a ResNet stem's); and the ops that
// scale each channel: inference BatchNormalization, as ipu::NchwcBatchNormalization (DenseNet's
// pre-activation), and Mul by one factor per image and channel, as ipu::NchwcScale
// (squeeze-and-excitation). Groups are joined through data (a convolution's X and Z, a batch
// normalisation's or scaling's X, the other ops' operands); a group with two convolutions or
// more runs blocked, a smaller one would pay the reorders for
// nothing. A tensor is blocked once (ToNchwc) however many ops of the group read it, and goes back
// to NCHW (FromNchwc) only when something outside the group reads it, or it is a graph output.
// Weights and biases stay as they are (the kernel reorders a constant weight once and keeps it).
//
// Which convolutions: 4-D F32 data, one group, one group per channel (depthwise), or groups of
// whole blocks of channels, non-negative pads. A convolution of fewer input channels than a block
// (an RGB stem) reads its input in NCHW and writes blocks: oneDNN has no fast kernel for it on
// blocked input (300 ms an image for MobileNetV2's stem), and a fast one for this. The block is 8
// channels (oneDNN's AVX2 layout) or 16 (its AVX-512 layout), by default whichever runs faster on
// the host that runs the pass (nchwc_host_block): the blocked graph, and so its results' last bits,
// can differ between hosts, and a compiled file keeps the block of the host that compiled it.
// Inference only: NchwcConv has no gradient.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/host_cpu.hpp"
#include "ipu/ops/nchwc_blocks.hpp"
#include "ipu/passes/pattern.hpp"
#include "ipu/passes/rewrite.hpp"

namespace ipu::passes {

/// The block that runs fastest on this host, as measured (batch 4, one thread, blocks of 8 against
/// 16): 16 where the CPU has AVX-512 (F, VL, BW, DQ), for oneDNN's AVX-512 kernels, but on AMD's
/// Zen 4 (family 19h), whose AVX-512 executes as two 256-bit halves; 8 elsewhere.
///   - AMD Zen 5 (family 1Ah, full 512-bit units): ResNet-18 152 -> 93 ms, GoogLeNet 134 -> 77,
///     SqueezeNet 35 -> 21, MobileNetV2 31 -> 21, EfficientNet-B0 51 -> 42 in blocks of 16.
///   - AMD Zen 4: GoogLeNet 138 -> 214-236 ms and SqueezeNet 34-37 -> 55-62 in blocks of 16.
/// Intel's AVX-512 parts were not measured; ONNX Runtime blocks by 16 on them.
inline std::int64_t nchwc_host_block() noexcept {
  const host_cpu& cpu = this_host_cpu();
  return cpu.avx512 && !(cpu.amd && cpu.family == 0x19u) ? 16 : 8;
}

namespace detail {

/// Whether `channels` can be rounded up to whole blocks of any size the pass makes without overflow.
constexpr bool nchwc_blockable_channels(std::int64_t channels) {
  return nchwc_padded_channels(channels, nchwc_max_block) >= 0;
}

/// Whether op `op` is a convolution the blocked layout takes.
constexpr bool nchwc_convolution(const graph& g, const op_node& op, std::int64_t block) {
  const bool fused = op.domain == "com.microsoft" && op.type == "FusedConv";
  if (!(is_onnx_op(op, "Conv") || fused) || op.outputs.size() != 1 || op.inputs.size() < 2 ||
      op.inputs.size() > (fused ? 4u : 3u) || op.inputs[0] == no_tensor || op.inputs[1] == no_tensor)
    return false;
  const auto& x = g.tensor(op.inputs[0]).info;
  const auto& w = g.tensor(op.inputs[1]).info;
  const auto& y = g.tensor(op.outputs[0]).info;
  if (x.type != data_type::F32 || w.type != data_type::F32 || y.type != data_type::F32) return false;
  if (x.shape.rank() != 4 || w.shape.rank() != 4 || y.shape.rank() != 4) return false;
  for (const auto* s : {&x.shape, &w.shape, &y.shape})
    for (std::size_t i = 0; i < 4; ++i)
      if ((*s)[i] < 1) return false;
  for (std::size_t i = 2; i < op.inputs.size(); ++i)
    if (op.inputs[i] != no_tensor && g.tensor(op.inputs[i]).info.type != data_type::F32) return false;
  if (const auto* a = op.find_attribute("pads"))
    if (const auto* pads = std::get_if<std::vector<std::int64_t>>(&a->value))
      for (const auto p : *pads)
        if (p < 0) return false;
  std::int64_t group = 1;
  if (const auto* a = op.find_attribute("group"))
    if (const auto* v = std::get_if<std::int64_t>(&a->value)) group = *v;
  const std::int64_t c = x.shape[1], m = y.shape[1];
  if (!nchwc_blockable_channels(c) || !nchwc_blockable_channels(m)) return false;
  if (group < 1 || c % group != 0 || m % group != 0 || w.shape[1] * group != c) return false;
  return group == 1 || (group == c && m == c) || ((c / group) % block == 0 && (m / group) % block == 0);
}

/// Whether op `op` computes each output element from the same element of its inputs, all of the
/// output's 4-D F32 shape, and maps zeros to zero: it then runs on blocked data as it is, and
/// leaves the unused channels zero.
constexpr bool nchwc_elementwise(const graph& g, const op_node& op) {
  const bool zero_preserving = is_onnx_op(op, "Relu") || is_onnx_op(op, "LeakyRelu") || is_onnx_op(op, "Tanh") ||
                               is_onnx_op(op, "Neg") || is_onnx_op(op, "HardSwish") || is_onnx_op(op, "Add") ||
                               is_onnx_op(op, "Sub") || is_onnx_op(op, "Mul") ||
                               (op.domain == "ai.graphcore" && op.type == "Swish");
  if (!zero_preserving || op.outputs.size() != 1 || op.inputs.empty()) return false;
  const auto& y = g.tensor(op.outputs[0]).info;
  if (y.type != data_type::F32 || y.shape.rank() != 4 || !nchwc_blockable_channels(y.shape[1])) return false;
  for (const auto t : op.inputs)
    if (t == no_tensor || g.tensor(t).info != y) return false;  // no broadcasting
  return true;
}

/// Whether op `op` concatenates 4-D F32 data along the channels, each input of whole blocks of
/// them: each image's blocked input is then one contiguous run, as in NCHW, so Concat computes the
/// blocked output as it is (and no block holds unused channels).
constexpr bool nchwc_concat(const graph& g, const op_node& op, std::int64_t block) {
  if (!is_onnx_op(op, "Concat") || op.outputs.size() != 1 || op.inputs.empty()) return false;
  const auto* axis = op.find_attribute("axis");
  const auto* a = axis ? std::get_if<std::int64_t>(&axis->value) : nullptr;
  if (!a || (*a != 1 && *a != -3)) return false;
  const auto& y = g.tensor(op.outputs[0]).info;
  if (y.type != data_type::F32 || y.shape.rank() != 4) return false;
  for (const auto t : op.inputs) {
    if (t == no_tensor) return false;
    const auto& x = g.tensor(t).info;
    if (x.type != data_type::F32 || x.shape.rank() != 4 || x.shape[0] != y.shape[0] || x.shape[2] != y.shape[2] ||
        x.shape[3] != y.shape[3] || x.shape[1] < 1 || x.shape[1] % block != 0)
      return false;
  }
  return true;
}

/// Whether op `op` is a 2-D pooling the blocked layout takes: MaxPool without its Indices output,
/// AveragePool, GlobalMaxPool and GlobalAveragePool (as the 2-D windows of the whole plane), on 4-D
/// F32 data. The pool then runs as ipu::NchwcMaxPool / NchwcAveragePool.
constexpr bool nchwc_pool(const graph& g, const op_node& op) {
  const bool windowed = is_onnx_op(op, "MaxPool") || is_onnx_op(op, "AveragePool");
  if (!(windowed || is_onnx_op(op, "GlobalMaxPool") || is_onnx_op(op, "GlobalAveragePool"))) return false;
  if (op.inputs.size() != 1 || op.inputs[0] == no_tensor || op.outputs.empty() || op.outputs[0] == no_tensor)
    return false;
  for (std::size_t k = 1; k < op.outputs.size(); ++k)
    if (op.outputs[k] != no_tensor) return false;  // MaxPool's Indices address NCHW
  const auto& x = g.tensor(op.inputs[0]).info;
  const auto& y = g.tensor(op.outputs[0]).info;
  if (x.type != data_type::F32 || y.type != data_type::F32 || x.shape.rank() != 4 || y.shape.rank() != 4) return false;
  for (std::size_t i = 0; i < 4; ++i)
    if (x.shape[i] < 1 || y.shape[i] < 1) return false;
  if (windowed) {
    const auto* k = op.find_attribute("kernel_shape");
    const auto* kernel = k ? std::get_if<std::vector<std::int64_t>>(&k->value) : nullptr;
    if (!kernel || kernel->size() != 2) return false;
  }
  return nchwc_blockable_channels(x.shape[1]);
}

/// `op`, a pool nchwc_pool takes, as the blocked op of the same windows.
inline op_node nchwc_pool_op(const graph& g, const op_node& op, std::int64_t block) {
  op_node b = op;
  const bool max = op.type == "MaxPool" || op.type == "GlobalMaxPool";
  b.domain = "ipu";
  b.type = max ? "NchwcMaxPool" : "NchwcAveragePool";
  b.opset = 1;
  b.outputs.resize(1);
  const auto& x = g.tensor(op.inputs[0]).info.shape;
  b.attributes.clear();
  if (op.type.starts_with("Global")) {
    b.attributes.push_back({"kernel_shape", std::vector<std::int64_t>{x[2], x[3]}});
  } else {
    // MaxPool's storage_order orders only its Indices, which a blocked pool does not have.
    for (const auto& a : op.attributes)
      if (a.name != "storage_order") b.attributes.push_back(a);
  }
  b.attributes.push_back({"block", block});
  b.attributes.push_back({"channels", x[1]});
  return b;
}

/// Whether op `op` is an inference BatchNormalization of 4-D F32 data (DenseNet's before each
/// convolution), which runs as ipu::NchwcBatchNormalization.
constexpr bool nchwc_batch_norm(const graph& g, const op_node& op) {
  if (!is_onnx_op(op, "BatchNormalization") || op.inputs.size() != 5 || op.outputs.empty() ||
      op.outputs[0] == no_tensor)
    return false;
  for (std::size_t k = 1; k < op.outputs.size(); ++k)
    if (op.outputs[k] != no_tensor) return false;  // training outputs
  if (const auto* a = op.find_attribute("training_mode"))
    if (const auto* v = std::get_if<std::int64_t>(&a->value); !v || *v != 0) return false;
  for (const auto t : op.inputs)
    if (t == no_tensor) return false;
  const auto& x = g.tensor(op.inputs[0]).info;
  if (x.type != data_type::F32 || x.shape.rank() != 4 || g.tensor(op.outputs[0]).info != x) return false;
  for (std::size_t i = 0; i < 4; ++i)
    if (x.shape[i] < 1) return false;
  for (std::size_t k = 1; k < 5; ++k)
    if (g.tensor(op.inputs[k]).info != tensor_info{data_type::F32, shape{x.shape[1]}}) return false;
  return nchwc_blockable_channels(x.shape[1]);
}

/// Which operand of a Mul is X [N, C, H, W] when the other is S [N or 1, C, 1, 1], one factor per
/// image and channel (squeeze-and-excitation's rescaling), all F32: 0 or 1; -1 for any other Mul.
/// Such a Mul runs as ipu::NchwcScale(X, S).
constexpr int nchwc_scaled_operand(const graph& g, const op_node& op) {
  if (!is_onnx_op(op, "Mul") || op.inputs.size() != 2 || op.outputs.size() != 1 || op.inputs[0] == no_tensor ||
      op.inputs[1] == no_tensor)
    return -1;
  const auto& y = g.tensor(op.outputs[0]).info;
  if (y.type != data_type::F32 || y.shape.rank() != 4 || y.shape[2] * y.shape[3] <= 1) return -1;
  for (std::size_t i = 0; i < 4; ++i)
    if (y.shape[i] < 1) return -1;
  for (int k = 0; k < 2; ++k) {
    const auto& x = g.tensor(op.inputs[static_cast<std::size_t>(k)]).info;
    const auto& s = g.tensor(op.inputs[static_cast<std::size_t>(1 - k)]).info;
    if (x == y && s.type == data_type::F32 && s.shape.rank() == 4 && (s.shape[0] == 1 || s.shape[0] == y.shape[0]) &&
        s.shape[1] == y.shape[1] && s.shape[2] == 1 && s.shape[3] == 1 && nchwc_blockable_channels(y.shape[1]))
      return k;
  }
  return -1;
}

/// `op`, a BatchNormalization nchwc_batch_norm takes or a Mul nchwc_scaled_operand does, as its
/// blocked op (X first).
inline op_node nchwc_channel_op(const graph& g, const op_node& op, std::int64_t block) {
  op_node b = op;
  b.domain = "ipu";
  b.opset = 1;
  b.outputs.resize(1);
  b.attributes.clear();
  if (is_onnx_op(op, "BatchNormalization")) {
    b.type = "NchwcBatchNormalization";
    if (const auto* eps = op.find_attribute("epsilon")) b.attributes.push_back(*eps);
  } else {
    b.type = "NchwcScale";
    if (nchwc_scaled_operand(g, op) == 1) b.inputs = {op.inputs[1], op.inputs[0]};
  }
  b.attributes.push_back({"block", block});
  return b;
}

/// The inputs of blockable op `op` that are blocked data: a convolution's X (unless it has fewer
/// channels than a block: a stem reads NCHW, as oneDNN's fast kernels for it do) and Z; a batch
/// normalisation's X; a Mul's operand of the output's shape (not a per-channel factor); every
/// input of the other ops.
constexpr bool nchwc_data_input(const graph& g, const op_node& op, std::size_t k, std::int64_t block) {
  const bool conv = is_onnx_op(op, "Conv") || (op.domain == "com.microsoft" && op.type == "FusedConv");
  if (conv) {
    if (k == 0) return g.tensor(op.inputs[0]).info.shape[1] >= block;
    return k == 3;
  }
  if (is_onnx_op(op, "BatchNormalization")) return k == 0;
  if (is_onnx_op(op, "Mul")) return g.tensor(op.inputs[k]).info == g.tensor(op.outputs[0]).info;
  return true;
}

}  // namespace detail

/// `g` with each group of F32 2-D convolutions and the elementwise ops between them run on
/// channel-blocked data between ToNchwc and FromNchwc (see above), in blocks of `block` channels
/// (8 or 16; by default the host's fastest).
inline graph nchwc_layout(const graph& g, std::int64_t block = nchwc_host_block()) {
  if (!is_nchwc_block(block))
    throw error(error_category::usage, "a channel block of " + std::to_string(block), "nchwc-layout",
                "block channels by 8 or 16");
  enum class kind : unsigned char { none, conv, pool, channel, elementwise };
  std::vector<kind> role(g.num_ops(), kind::none);
  for (op_id i = 0; i < g.num_ops(); ++i) {
    const auto& op = g.op(i);
    role[i] = detail::nchwc_convolution(g, op, block) ? kind::conv
              : detail::nchwc_pool(g, op)      ? kind::pool
              : detail::nchwc_batch_norm(g, op) || detail::nchwc_scaled_operand(g, op) >= 0 ? kind::channel
              : detail::nchwc_elementwise(g, op) || detail::nchwc_concat(g, op, block)            ? kind::elementwise
                                                                                           : kind::none;
  }
  // Groups of blockable ops joined by data (union-find); a group runs blocked when it holds two
  // convolutions or more. Fewer would pay the reorders for nothing.
  std::vector<op_id> parent(g.num_ops());
  for (op_id i = 0; i < g.num_ops(); ++i) parent[i] = i;
  auto root = [&](op_id i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
  };
  for (op_id i = 0; i < g.num_ops(); ++i) {
    if (role[i] == kind::none) continue;
    const auto& op = g.op(i);
    for (std::size_t k = 0; k < op.inputs.size(); ++k) {
      if (op.inputs[k] == no_tensor || !detail::nchwc_data_input(g, op, k, block)) continue;
      const auto p = g.tensor(op.inputs[k]).producer;
      if (p != no_op && role[p] != kind::none) parent[root(p)] = root(i);
    }
  }
  std::vector<std::size_t> convolutions(g.num_ops(), 0);
  for (op_id i = 0; i < g.num_ops(); ++i)
    if (role[i] == kind::conv) ++convolutions[root(i)];
  std::vector<bool> blocked(g.num_ops(), false);
  bool any = false;
  for (op_id i = 0; i < g.num_ops(); ++i) {
    blocked[i] = role[i] != kind::none && convolutions[root(i)] >= 2;
    any = any || blocked[i];
  }
  if (!any) return g;
  const auto is_output = detail::output_mask(g);
  graph_rewrite rw(g);
  std::vector<tensor_id> blocked_of(g.num_tensors(), no_tensor);
  auto blocked_info = [&](tensor_id t) {
    const auto& s = g.tensor(t).info.shape;
    return tensor_info{data_type::F32, shape{s[0], nchwc_padded_channels(s[1], block), s[2], s[3]}};
  };
  for (op_id i = 0; i < g.num_ops(); ++i) {
    if (!blocked[i]) continue;
    const auto& op = g.op(i);
    annotation where = op.where;
    where.checkpoint = false;
    op_node b = role[i] == kind::pool      ? detail::nchwc_pool_op(g, op, block)
                : role[i] == kind::channel ? detail::nchwc_channel_op(g, op, block)
                                           : op;  // an elementwise op stays itself
    // b's input k is op's input source[k]: NchwcScale takes X first, whichever operand of Mul it was.
    std::vector<std::size_t> source(b.inputs.size());
    for (std::size_t k = 0; k < source.size(); ++k) source[k] = k;
    if (role[i] == kind::channel && detail::nchwc_scaled_operand(g, op) == 1) source = {1, 0};
    if (role[i] == kind::conv) {
      b.domain = "ipu";
      b.type = "NchwcConv";
      b.opset = 1;
      b.attributes.push_back({"block", block});
    }
    b.where = where;
    for (std::size_t k = 0; k < b.inputs.size(); ++k) {
      const auto t = b.inputs[k];
      if (t == no_tensor || !detail::nchwc_data_input(g, op, source[k], block)) continue;
      if (blocked_of[t] == no_tensor) {  // the first blocked reader makes the blocked copy
        blocked_of[t] = rw.add_tensor(g, g.tensor(t).name + "/nchwc", blocked_info(t));
        op_node to;
        to.domain = "ipu";
        to.type = "ToNchwc";
        to.opset = 1;
        to.name = g.tensor(t).name + "/ToNchwc";
        to.inputs = {t};
        to.outputs = {blocked_of[t]};
        to.attributes = {{"block", block}};
        to.where = where;
        rw.inserted.emplace_back(i, to);
      }
      b.inputs[k] = blocked_of[t];
    }
    const auto y = op.outputs[0];
    blocked_of[y] = rw.add_tensor(g, g.tensor(y).name + "/nchwc", blocked_info(y));
    b.outputs = {blocked_of[y]};
    rw.removed[i] = true;
    rw.inserted.emplace_back(i, b);
    // NCHW again for any reader that is not a blocked op taking it as data.
    bool plain_reader = is_output[y];
    for (const auto r : g.tensor(y).consumers) {
      const auto& reader = g.op(r);
      for (std::size_t k = 0; k < reader.inputs.size(); ++k)
        if (reader.inputs[k] == y && !(blocked[r] && detail::nchwc_data_input(g, reader, k, block))) plain_reader = true;
    }
    if (plain_reader) {
      op_node from;
      from.domain = "ipu";
      from.type = "FromNchwc";
      from.opset = 1;
      from.name = g.tensor(y).name + "/FromNchwc";
      from.inputs = {blocked_of[y]};
      from.outputs = {y};
      from.attributes = {{"block", block}, {"channels", g.tensor(y).info.shape[1]}};
      from.where = op.where;  // a checkpoint on the op's output stays on it
      rw.inserted.emplace_back(i, from);
    }
  }
  return apply(g, rw);
}

}  // namespace ipu::passes
