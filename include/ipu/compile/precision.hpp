#pragma once
// Precision conversion for compilation (PopRT's --precision): every F32 tensor of the model becomes
// F16 (or F16 becomes F32), weights and constants converted once and stored in the new type.
//
// The model's inputs and outputs keep their types: a Cast after each converted input and before
// each converted output does the conversion on the device, so the model is fed and read exactly as
// before. Cast targets, dtype attributes, tensor attributes and subgraphs (If / Loop bodies) follow.
// Constant scales of Resize / Upsample stay F32, as ONNX requires.
//
// 8-bit floats (PopRT's --precision fp8_weight / fp8) start from the F16 model and go further for
// the matrix-engine ops Conv (and FusedConv), MatMul and Gemm, as the IPU's FP8 matrix products do:
//
//   fp8_weight  Each float weight (a variable or constant, F16 after the conversion above) whose
//               every consumer takes it as a Conv weight (input 1) or a MatMul / Gemm operand (A or
//               B) is stored as F8143 with a per-tensor power-of-two scale: q = F8143(w * 2^k).
//               The rest of the model runs in F16; on the device Cast(q -> F16) * 2^-k restores
//               the weight (exactly: an F8143 value times a power of two is an F16 value). A weight
//               with another consumer stays F16, as do biases (Conv input 2, Gemm input C), so no
//               other op sees rounded numbers.
//   fp8         As fp8_weight, and every activation (a tensor computed or fed at run time) entering
//               Conv input 0 or a MatMul / Gemm operand is rounded through F8143 first:
//               Cast(Cast(Clip(x, -240, 240) -> F8143) -> F16). The product is still computed in
//               F16, which is what an FP8 x FP8 product accumulated in FP16 gives.
//
// The weight scale (Graphcore's "scale bias", the integer k with a tensor's value = stored * 2^-k):
// k is the largest integer with max|w| * 2^k <= 240, F8143's largest value, so the weight's largest
// magnitude lands in the format's top binade and as few small weights as possible fall into its
// subnormals or to zero; nothing can overflow (rounding a value <= 240 stays <= 240). k is kept in
// [-32, 24]: Graphcore's metadata holds scales from -32, and 2^-24 is the smallest F16 (the scale
// is multiplied in F16). An all-zero weight gets k = 0.
//
// Activations are rounded with scale 1 (k = 0), saturating at +-240 instead of turning into NaN:
// without calibration data the compiler cannot know an activation's range, and normalised
// activations (after BatchNorm / LayerNorm) are of order 1, which F8143's normal range [2^-7, 240]
// covers with its 3 mantissa bits.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/float8.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/half.hpp"

namespace ipu::popef {

namespace detail {

inline byte_buffer convert_floats(const byte_buffer& in, data_type from, data_type to) {
  const auto n = in.size() / size_of(from);
  std::vector<std::byte> out(n * size_of(to));
  if (from == data_type::F32 && to == data_type::F16) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto h = half(in.load<float>(i)).bits();
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    for (std::size_t i = 0; i < n; ++i) {
      const auto f = static_cast<float>(half::from_bits(in.load<std::uint16_t>(i)));
      std::memcpy(out.data() + 4 * i, &f, 4);
    }
  }
  return byte_buffer(std::move(out));
}

/// Op inputs ONNX requires to be float32 whatever the model's precision.
inline bool keeps_float32(const op_node& op, std::size_t input) {
  return op.domain.empty() && ((op.type == "Resize" && input == 2) || (op.type == "Upsample" && input == 1));
}

struct converter {
  data_type from;
  data_type to;

  [[nodiscard]] attribute convert_attribute(const attribute& a) const {
    attribute out = a;
    const auto from_code = onnx_code_of(from);
    const auto to_code = onnx_code_of(to);
    if (auto* i = std::get_if<std::int64_t>(&out.value)) {
      if ((a.name == "to" || a.name == "dtype") && *i == from_code) *i = to_code;
    } else if (auto* c = std::get_if<constant_tensor>(&out.value)) {
      if (c->info.type == from) *c = {{to, c->info.shape}, convert_floats(c->data, from, to)};
    } else if (auto* cs = std::get_if<std::vector<constant_tensor>>(&out.value)) {
      for (auto& t : *cs)
        if (t.info.type == from) t = {{to, t.info.shape}, convert_floats(t.data, from, to)};
    } else if (auto* g = std::get_if<subgraph>(&out.value)) {
      g->body = ipu::detail::box<graph>(convert(*g->body, false));
    } else if (auto* gs = std::get_if<std::vector<graph>>(&out.value)) {
      for (auto& s : *gs) s = convert(s, false);
    }
    return out;
  }

  /// Converts `g`; with `keep_io` the graph's inputs and outputs keep their types through Casts.
  [[nodiscard]] graph convert(const graph& g, bool keep_io) const {
    graph out(g.name());
    out.set_opset_imports(g.opset_imports());
    std::unordered_set<tensor_id> keep;  // constants that stay in `from`
    for (const auto& op : g.ops())
      for (std::size_t i = 0; i < op.inputs.size(); ++i)
        if (op.inputs[i] != no_tensor && keeps_float32(op, i) && g.tensor(op.inputs[i]).kind != tensor_kind::intermediate)
          keep.insert(op.inputs[i]);
    std::unordered_set<tensor_id> outputs(g.outputs().begin(), g.outputs().end());

    std::vector<tensor_id> map(g.num_tensors(), no_tensor);
    std::vector<op_node> casts_in, casts_out;
    std::vector<tensor_id> out_ids(g.outputs().size(), no_tensor);
    auto cast = [&](tensor_id in, tensor_id result, data_type type, const std::string& name) {
      op_node c;
      c.type = "Cast";
      c.opset = g.opset_version() ? g.opset_version() : 17;
      c.name = name;
      c.inputs = {in};
      c.outputs = {result};
      c.attributes.push_back({"to", onnx_code_of(type)});
      return c;
    };
    for (tensor_id t = 0; t < g.num_tensors(); ++t) {
      const auto& n = g.tensor(t);
      const bool converts = n.info.type == from && !keep.count(t);
      const tensor_info converted{converts ? to : n.info.type, n.info.shape};
      if (!converts) {
        map[t] = out.add_tensor(n.name, n.info, n.kind, n.data);
      } else if (n.kind == tensor_kind::input && keep_io) {
        const auto original = out.add_tensor(n.name, n.info, tensor_kind::input);
        map[t] = out.add_tensor(n.name + "::" + std::string(ipu::to_string(to)), converted);
        casts_in.push_back(cast(original, map[t], to, n.name + "::cast"));
      } else if (n.has_data()) {
        map[t] = out.add_tensor(n.name, converted, n.kind, convert_floats(n.data, from, to));
      } else if (keep_io && outputs.count(t) && n.kind == tensor_kind::intermediate) {
        // The op computes in the new type into a renamed tensor; a Cast restores the output's type.
        map[t] = out.add_tensor(n.name + "::" + std::string(ipu::to_string(to)), converted);
        const auto restored = out.add_tensor(n.name, n.info);
        casts_out.push_back(cast(map[t], restored, from, n.name + "::cast"));
        for (std::size_t i = 0; i < g.outputs().size(); ++i)
          if (g.outputs()[i] == t) out_ids[i] = restored;
      } else {
        map[t] = out.add_tensor(n.name, converted, n.kind);
      }
    }
    for (auto& c : casts_in) out.add_op(std::move(c));
    for (const auto& op : g.ops()) {
      op_node o = op;
      for (auto& t : o.inputs)
        if (t != no_tensor) t = map[t];
      for (auto& t : o.outputs) t = map[t];
      for (auto& a : o.attributes) a = convert_attribute(a);
      out.add_op(std::move(o));
    }
    for (auto& c : casts_out) out.add_op(std::move(c));
    for (std::size_t i = 0; i < g.outputs().size(); ++i)
      out.mark_output(out_ids[i] != no_tensor ? out_ids[i] : map[g.outputs()[i]]);
    return out;
  }
};

}  // namespace detail

/// What --precision fp8_weight / fp8 convert to F8143 beyond the F16 conversion (see the top).
enum class float8_mode : std::uint8_t { none, weights, weights_and_activations };

constexpr std::string_view to_string(float8_mode m) noexcept {
  switch (m) {
    case float8_mode::none: return "none";
    case float8_mode::weights: return "fp8_weight";
    case float8_mode::weights_and_activations: return "fp8";
  }
  return "?";
}

/// The scale exponent k of a weight whose largest magnitude is `max_abs`: the largest integer with
/// max_abs * 2^k <= 240, in [-32, 24]; 0 for 0 (and for a NaN or infinite maximum, which no scale
/// can bring into range).
inline int float8_scale_exponent(float max_abs) {
  if (!(max_abs > 0.0f) || !std::isfinite(max_abs)) return 0;
  constexpr double largest = 240.0;  // float8_143::max()
  int k = 0;
  // ldexp is exact, so the comparisons are of exact values.
  while (k > -32 && std::ldexp(static_cast<double>(max_abs), k) > largest) --k;
  while (k < 24 && std::ldexp(static_cast<double>(max_abs), k + 1) <= largest) ++k;
  return k;
}

namespace detail {

/// Which inputs of `op` a matrix-engine product reads: Conv's (and FusedConv's) data and weight,
/// MatMul's and Gemm's A and B (not biases).
inline bool is_product_operand(const op_node& op, std::size_t input) {
  if (op.domain == "com.microsoft" && op.type == "FusedConv") return input <= 1;
  if (op.domain == "ipu" && op.type == "NchwcConv") return input <= 1;  // X blocked: rounding is elementwise
  if (!op.domain.empty()) return false;
  if (op.type == "Conv") return input <= 1;
  if (op.type == "MatMul" || op.type == "Gemm") return input <= 1;
  return false;
}

struct float8_converter {
  const graph& g;
  float8_mode mode;
  std::int64_t opset;
  graph out;
  std::vector<tensor_id> map;         // g's tensors in out
  std::vector<tensor_id> product_in;  // what product operands read instead (no_tensor: the same)

  op_node make(std::string type, std::string name, std::vector<tensor_id> in, tensor_id result) const {
    op_node o;
    o.type = std::move(type);
    o.opset = opset;
    o.name = std::move(name);
    o.inputs = std::move(in);
    o.outputs = {result};
    return o;
  }

  tensor_id scalar(const std::string& name, float v) {
    const auto h = half(v).bits();
    return out.add_tensor(name, {data_type::F16, shape{}}, tensor_kind::constant,
                          byte_buffer::from_values(std::span<const std::uint16_t>(&h, 1)));
  }

  /// Stores weight `t` (F16 data) as F8143 and returns the F16 tensor the device restores.
  tensor_id convert_weight(tensor_id t) {
    const auto& n = g.tensor(t);
    const auto count = n.data.size() / 2;
    std::vector<float> w(count);
    float max_abs = 0;
    for (std::size_t i = 0; i < count; ++i) {
      w[i] = static_cast<float>(half::from_bits(n.data.load<std::uint16_t>(i)));
      if (std::isfinite(w[i])) max_abs = std::max(max_abs, std::fabs(w[i]));
    }
    const int k = float8_scale_exponent(max_abs);
    std::vector<std::uint8_t> q(count);
    for (std::size_t i = 0; i < count; ++i)
      q[i] = float8_143::from_float(std::ldexp(w[i], k), float8_overflow::saturate);
    // The stored weight keeps the name: it is the model's weight, 1 byte an element.
    map[t] = out.add_tensor(n.name, {data_type::F8143, n.info.shape}, n.kind,
                            byte_buffer::from_values(std::span<const std::uint8_t>(q)));
    const auto widened = out.add_tensor(n.name + "::F16", {data_type::F16, n.info.shape});
    auto cast = make("Cast", n.name + "::cast", {map[t]}, widened);
    cast.attributes.push_back({"to", onnx_code_of(data_type::F16)});
    out.add_op(std::move(cast));
    if (k == 0) return widened;
    const auto s = scalar(n.name + "::scale", static_cast<float>(std::ldexp(1.0, -k)));
    const auto restored = out.add_tensor(n.name + "::scaled", {data_type::F16, n.info.shape});
    out.add_op(make("Mul", n.name + "::unscale", {widened, s}, restored));
    return restored;
  }

  /// Rounds activation `t` (in out) through F8143, saturating; returns the rounded F16 tensor.
  tensor_id round_activation(tensor_id t) {
    const auto n = out.tensor(t);  // a copy: adding tensors below moves out's tensors
    const auto lo = scalar(n.name + "::f8min", -240.0f);
    const auto hi = scalar(n.name + "::f8max", 240.0f);
    const auto clipped = out.add_tensor(n.name + "::clipped", n.info);
    auto clip = make("Clip", n.name + "::saturate", {t, lo, hi}, clipped);
    clip.opset = std::max<std::int64_t>(opset, 13);  // min and max as inputs
    out.add_op(std::move(clip));
    const auto narrow = out.add_tensor(n.name + "::F8143", {data_type::F8143, n.info.shape});
    auto to8 = make("Cast", n.name + "::to_f8", {clipped}, narrow);
    to8.attributes.push_back({"to", onnx_code_of(data_type::F8143)});
    out.add_op(std::move(to8));
    const auto back = out.add_tensor(n.name + "::rounded", n.info);
    auto to16 = make("Cast", n.name + "::from_f8", {narrow}, back);
    to16.attributes.push_back({"to", onnx_code_of(data_type::F16)});
    out.add_op(std::move(to16));
    return back;
  }

  graph run() {
    out = graph(g.name());
    out.set_opset_imports(g.opset_imports());
    map.assign(g.num_tensors(), no_tensor);
    product_in.assign(g.num_tensors(), no_tensor);
    std::unordered_set<tensor_id> outputs(g.outputs().begin(), g.outputs().end());
    // A weight converts when every use of it is a product operand (and it is not an output).
    auto only_product_operand = [&](tensor_id t) {
      if (outputs.count(t) || g.tensor(t).consumers.empty()) return false;
      for (const auto c : g.tensor(t).consumers) {
        const auto& op = g.op(c);
        for (std::size_t i = 0; i < op.inputs.size(); ++i)
          if (op.inputs[i] == t && !is_product_operand(op, i)) return false;
      }
      return true;
    };
    std::vector<tensor_id> weights;
    for (tensor_id t = 0; t < g.num_tensors(); ++t) {
      const auto& n = g.tensor(t);
      if (n.has_data() && n.info.type == data_type::F16 && only_product_operand(t))
        weights.push_back(t);
      else
        map[t] = out.add_tensor(n.name, n.info, n.kind, n.data);
    }
    for (const auto t : weights) product_in[t] = convert_weight(t);
    for (const auto& op : g.ops()) {
      op_node o = op;
      for (std::size_t i = 0; i < o.inputs.size(); ++i) {
        const auto t = o.inputs[i];
        if (t == no_tensor) continue;
        if (is_product_operand(op, i) && product_in[t] == no_tensor && mode == float8_mode::weights_and_activations &&
            !g.tensor(t).has_data() && g.tensor(t).info.type == data_type::F16)
          product_in[t] = round_activation(map[t]);
        o.inputs[i] = is_product_operand(op, i) && product_in[t] != no_tensor ? product_in[t] : map[t];
      }
      for (auto& t : o.outputs) t = map[t];
      out.add_op(std::move(o));
    }
    for (const auto t : g.outputs()) out.mark_output(map[t]);
    return std::move(out);
  }
};

}  // namespace detail

/// `g` (already in F16: convert_precision) with its product weights, and under
/// float8_mode::weights_and_activations the activations entering products, in F8143 as the top of
/// this file says. The model's inputs and outputs keep their types. A model without Conv / MatMul
/// / Gemm is returned unchanged: there is nothing to convert, and the F16 model is what fp8 gives.
inline graph convert_float8(const graph& g, float8_mode mode) {
  if (mode == float8_mode::none) return g;
  const auto opset = g.opset_version() ? g.opset_version() : 17;
  return detail::float8_converter{g, mode, opset, {}, {}, {}}.run();
}

/// `g` with its float tensors in `precision` (F16 or F32); inputs and outputs keep their types.
inline graph convert_precision(const graph& g, data_type precision) {
  if (precision != data_type::F16 && precision != data_type::F32)
    throw error(error_category::usage, "precision must be F16 or F32, not " + std::string(ipu::to_string(precision)),
                "graph '" + g.name() + "'", "use --precision fp16 or fp32");
  const auto from = precision == data_type::F16 ? data_type::F32 : data_type::F16;
  return detail::converter{from, precision}.convert(g, true);
}

}  // namespace ipu::popef
