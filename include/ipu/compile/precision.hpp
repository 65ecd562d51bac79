#pragma once
// Precision conversion for compilation (PopRT's --precision): every F32 tensor of the model becomes
// F16 (or F16 becomes F32), weights and constants converted once and stored in the new type.
//
// The model's inputs and outputs keep their types: a Cast after each converted input and before
// each converted output does the conversion on the device, so the model is fed and read exactly as
// before. Cast targets, dtype attributes, tensor attributes and subgraphs (If / Loop bodies) follow.
// Constant scales of Resize / Upsample stay F32, as ONNX requires.
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
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

/// `g` with its float tensors in `precision` (F16 or F32); inputs and outputs keep their types.
inline graph convert_precision(const graph& g, data_type precision) {
  if (precision != data_type::F16 && precision != data_type::F32)
    throw error(error_category::usage, "precision must be F16 or F32, not " + std::string(ipu::to_string(precision)),
                "graph '" + g.name() + "'", "use --precision fp16 or fp32");
  const auto from = precision == data_type::F16 ? data_type::F32 : data_type::F16;
  return detail::converter{from, precision}.convert(g, true);
}

}  // namespace ipu::popef
