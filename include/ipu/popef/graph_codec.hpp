#pragma once
// The graph IR <-> the pb::Graph message inside an Executable blob (popef.proto), without ONNX.
//
// Tensor and op ids are indices into the message's lists, so they come back exactly as written:
// an executable's plan refers to them by number. The top-level graph's weights are written without
// their bytes — those are the TensorData blob of the same name — and are bound back through a
// weight_source; constants, tensor attributes and nested graphs carry their bytes inline.
//
// Decoding trusts nothing: a message that passed a checksum can still have been crafted. Every id,
// enum, shape and data length is checked (sizes overflow-checked by tensor_info_from_proto), errors
// are ipu::error (popef) naming the tensor, op or attribute at fault, and the result is validated.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/attribute.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/popef.pb.h"

namespace ipu::popef {

/// Supplies the bytes of the top-level weight `name` (of type and shape `info`).
using weight_source = std::function<byte_buffer(const std::string& name, const tensor_info& info)>;

/// Nesting deeper than this (subgraphs of subgraphs...) is refused when decoding.
inline constexpr int max_graph_depth = 32;

namespace detail {

inline std::string as_string(const byte_buffer& b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

inline pb::TensorKind to_proto(tensor_kind k) noexcept { return static_cast<pb::TensorKind>(static_cast<int>(k) + 1); }

inline void to_proto(const constant_tensor& t, pb::ConstantTensor& out) {
  to_proto(t.info, *out.mutable_info());
  out.set_data(as_string(t.data));
}

inline void graph_to_proto(const graph& g, pb::Graph& out, bool top_level);

inline void to_proto(const attribute& a, pb::Attribute& out) {
  out.set_name(a.name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, float>) out.set_f(v);
        else if constexpr (std::is_same_v<T, std::int64_t>) out.set_i(v);
        else if constexpr (std::is_same_v<T, std::string>) out.set_s(v);
        else if constexpr (std::is_same_v<T, constant_tensor>) to_proto(v, *out.mutable_t());
        else if constexpr (std::is_same_v<T, subgraph>) graph_to_proto(*v.body, *out.mutable_g(), false);
        else if constexpr (std::is_same_v<T, std::vector<float>>) {
          auto& l = *out.mutable_floats()->mutable_values();
          l.Add(v.begin(), v.end());
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          auto& l = *out.mutable_ints()->mutable_values();
          l.Add(v.begin(), v.end());
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          auto& l = *out.mutable_strings();
          for (const auto& s : v) l.add_values(s);
        } else if constexpr (std::is_same_v<T, std::vector<constant_tensor>>) {
          auto& l = *out.mutable_tensors();
          for (const auto& t : v) to_proto(t, *l.add_values());
        } else {
          static_assert(std::is_same_v<T, std::vector<graph>>);
          auto& l = *out.mutable_graphs();
          for (const auto& sub : v) graph_to_proto(sub, *l.add_values(), false);
        }
      },
      a.value);
}

inline void graph_to_proto(const graph& g, pb::Graph& out, bool top_level) {
  out.set_name(g.name());
  for (const auto& t : g.tensors()) {
    auto& p = *out.add_tensors();
    p.set_name(t.name);
    to_proto(t.info, *p.mutable_info());
    p.set_kind(to_proto(t.kind));
    if (t.kind == tensor_kind::constant || (t.kind == tensor_kind::variable && !top_level)) p.set_data(as_string(t.data));
  }
  for (const auto& op : g.ops()) {
    auto& p = *out.add_ops();
    p.set_type(op.type);
    p.set_domain(op.domain);
    p.set_opset(op.opset);
    p.set_name(op.name);
    p.mutable_inputs()->Add(op.inputs.begin(), op.inputs.end());
    p.mutable_outputs()->Add(op.outputs.begin(), op.outputs.end());
    for (const auto& a : op.attributes) to_proto(a, *p.add_attributes());
    auto& w = *p.mutable_where();
    if (op.where.ipu) w.set_ipu(*op.where.ipu);
    if (op.where.stage) w.set_stage(*op.where.stage);
    if (op.where.phase) w.set_phase(*op.where.phase);
    w.set_block(op.where.block);
    w.set_checkpoint(op.where.checkpoint);
    w.set_recompute(op.where.recompute);
  }
  out.mutable_inputs()->Add(g.inputs().begin(), g.inputs().end());
  out.mutable_outputs()->Add(g.outputs().begin(), g.outputs().end());
  for (const auto& o : g.opset_imports()) {
    auto& p = *out.add_opset_imports();
    p.set_domain(o.domain);
    p.set_version(o.version);
  }
}

// --- decoding ----------------------------------------------------------------------------------

[[noreturn]] inline void bad_graph(const std::string& what, const std::string& where) {
  throw error(error_category::popef, what, where, "the file is damaged or was not written by ipu; export it again");
}

/// `bytes` as a buffer of exactly `info`'s size.
inline byte_buffer data_from_proto(const std::string& bytes, const tensor_info& info, const std::string& what,
                                   const std::string& where) {
  const auto need = static_cast<std::uint64_t>(info.num_bytes());
  if (bytes.size() != need)
    bad_graph(what + " " + to_string(info) + " needs " + std::to_string(need) + " bytes of data but holds " +
                  std::to_string(bytes.size()),
              where);
  return byte_buffer::copy(std::as_bytes(std::span(bytes.data(), bytes.size())));
}

inline constant_tensor constant_from_proto(const pb::ConstantTensor& p, const std::string& what,
                                           const std::string& where) {
  constant_tensor t;
  t.info = tensor_info_from_proto(p.info(), what, where);
  t.data = data_from_proto(p.data(), t.info, what, where);
  return t;
}

inline tensor_kind tensor_kind_from_proto(int v, const std::string& what, const std::string& where) {
  if (v < 1 || v > 4)
    throw error(error_category::popef,
                what + " has " + (v == 0 ? std::string("no kind") : "unknown kind " + std::to_string(v)), where,
                "the file is damaged or was written by a newer ipu");
  return static_cast<tensor_kind>(v - 1);
}

/// A tensor id read from the file: below `n`, or no_tensor when `omittable`.
inline tensor_id tensor_id_from_proto(std::uint32_t id, std::size_t n, bool omittable, const std::string& what,
                                      const std::string& where) {
  if (id == no_tensor && omittable) return id;
  if (id >= n)
    bad_graph(what + " is tensor id " + (id == no_tensor ? std::string("4294967295 (none)") : std::to_string(id)) +
                  " but the graph has " + std::to_string(n) + " tensors",
              where);
  return id;
}

inline graph graph_from_proto(const pb::Graph& p, const weight_source* weights, const std::string& where, int depth);

inline attribute attribute_from_proto(const pb::Attribute& p, const std::string& what, const std::string& where,
                                      int depth) {
  attribute a;
  a.name = p.name();
  const auto sub_where = [&](std::size_t i) { return where + ", " + what + " graph " + std::to_string(i); };
  switch (p.value_case()) {
    case pb::Attribute::kF: a.value = p.f(); break;
    case pb::Attribute::kI: a.value = static_cast<std::int64_t>(p.i()); break;
    case pb::Attribute::kS: a.value = p.s(); break;
    case pb::Attribute::kT: a.value = constant_from_proto(p.t(), what, where); break;
    case pb::Attribute::kG: a.value = subgraph{ipu::detail::box<graph>(graph_from_proto(p.g(), nullptr, sub_where(0), depth + 1))}; break;
    case pb::Attribute::kFloats: a.value = std::vector<float>(p.floats().values().begin(), p.floats().values().end()); break;
    case pb::Attribute::kInts:
      a.value = std::vector<std::int64_t>(p.ints().values().begin(), p.ints().values().end());
      break;
    case pb::Attribute::kStrings:
      a.value = std::vector<std::string>(p.strings().values().begin(), p.strings().values().end());
      break;
    case pb::Attribute::kTensors: {
      std::vector<constant_tensor> v;
      for (int i = 0; i < p.tensors().values_size(); ++i)
        v.push_back(constant_from_proto(p.tensors().values(i), what + " tensor " + std::to_string(i), where));
      a.value = std::move(v);
      break;
    }
    case pb::Attribute::kGraphs: {
      std::vector<graph> v;
      for (int i = 0; i < p.graphs().values_size(); ++i)
        v.push_back(graph_from_proto(p.graphs().values(i), nullptr, sub_where(static_cast<std::size_t>(i)), depth + 1));
      a.value = std::move(v);
      break;
    }
    default: bad_graph(what + " has no value (or one of a kind this ipu does not know)", where);
  }
  return a;
}

/// Decodes one graph; `weights` binds top-level weights (nullptr: a nested graph, data inline).
inline graph graph_from_proto(const pb::Graph& p, const weight_source* weights, const std::string& where, int depth) {
  if (depth > max_graph_depth)
    bad_graph("subgraphs are nested more than " + std::to_string(max_graph_depth) + " deep", where);
  graph out(p.name());
  const auto n = static_cast<std::size_t>(p.tensors_size());
  std::vector<tensor_id> inputs;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& t = p.tensors(static_cast<int>(i));
    const std::string what = "tensor " + std::to_string(i) + " '" + t.name() + "'";
    const auto info = tensor_info_from_proto(t.info(), what, where);
    const auto kind = tensor_kind_from_proto(t.kind(), what, where);
    byte_buffer data;
    if (kind == tensor_kind::variable && weights) {
      if (!t.data().empty()) bad_graph("weight " + what + " holds data inside the executable", where);
      data = (*weights)(t.name(), info);
      if (data.size() != info.num_bytes())
        throw error(error_category::popef,
                    "weight " + what + " " + to_string(info) + " needs " + std::to_string(info.num_bytes()) +
                        " bytes but " + std::to_string(data.size()) + " were given",
                    where, "the tensor data belongs to another model");
    } else if (kind == tensor_kind::variable || kind == tensor_kind::constant) {
      data = data_from_proto(t.data(), info, what, where);
    } else if (!t.data().empty()) {
      bad_graph(std::string(to_string(kind)) + " " + what + " holds data", where);
    }
    if (kind == tensor_kind::input) inputs.push_back(static_cast<tensor_id>(i));
    out.add_tensor(t.name(), info, kind, std::move(data));
  }
  std::vector<bool> produced(n, false);
  for (int i = 0; i < p.ops_size(); ++i) {
    const auto& o = p.ops(i);
    const std::string what = "op " + std::to_string(i) + " " + o.type() + (o.name().empty() ? "" : " '" + o.name() + "'");
    op_node op;
    op.type = o.type();
    op.domain = o.domain();
    op.opset = o.opset();
    op.name = o.name();
    for (int k = 0; k < o.inputs_size(); ++k)
      op.inputs.push_back(tensor_id_from_proto(o.inputs(k), n, true, what + " input " + std::to_string(k), where));
    for (int k = 0; k < o.outputs_size(); ++k) {
      const auto t = tensor_id_from_proto(o.outputs(k), n, false, what + " output " + std::to_string(k), where);
      if (out.tensor(t).kind != tensor_kind::intermediate)
        bad_graph(what + " writes " + std::string(to_string(out.tensor(t).kind)) + " tensor " + std::to_string(t), where);
      if (produced[t]) bad_graph(what + " writes tensor " + std::to_string(t) + ", which another op already writes", where);
      produced[t] = true;
      op.outputs.push_back(t);
    }
    for (int k = 0; k < o.attributes_size(); ++k)
      op.attributes.push_back(attribute_from_proto(
          o.attributes(k), what + " attribute '" + o.attributes(k).name() + "'", where, depth));
    const auto& w = o.where();
    if (w.has_ipu()) op.where.ipu = w.ipu();
    if (w.has_stage()) op.where.stage = w.stage();
    if (w.has_phase()) op.where.phase = w.phase();
    op.where.block = w.block();
    op.where.checkpoint = w.checkpoint();
    op.where.recompute = w.recompute();
    out.add_op(std::move(op));
  }
  if (!std::equal(p.inputs().begin(), p.inputs().end(), inputs.begin(), inputs.end()))
    bad_graph("the graph's input list does not match its " + std::to_string(inputs.size()) + " input tensors", where);
  for (int i = 0; i < p.outputs_size(); ++i)
    out.mark_output(tensor_id_from_proto(p.outputs(i), n, false, "graph output " + std::to_string(i), where));
  std::vector<opset_import> opsets;
  for (const auto& o : p.opset_imports()) opsets.push_back({o.domain(), o.version()});
  out.set_opset_imports(std::move(opsets));
  return out;
}

}  // namespace detail

/// The graph as a message; the top-level weights' bytes are left out (see the file comment).
inline pb::Graph graph_to_proto(const graph& g) {
  pb::Graph out;
  detail::graph_to_proto(g, out, true);
  return out;
}

/// The graph of `p`, each top-level weight bound to `weights(name, info)`, ids as in `p`, checked
/// with ipu::validate and against the op table's shape rules (kernels size their buffers from the
/// tensors' infos, which the file only claims). Throws ipu::error (popef) naming what is wrong and
/// where.
inline graph graph_from_proto(const pb::Graph& p, const weight_source& weights, const std::string& where) {
  graph out = detail::graph_from_proto(p, &weights, where, 0);
  try {
    validate(out);
    check_shape_rules(out, "the executable's graph");
  } catch (const error& e) {
    if (e.category() == error_category::popef) throw;
    throw error(error_category::popef, "the executable's graph is not valid: " + e.message(),
                where + (e.location().empty() ? "" : ", " + e.location()),
                "the file is damaged or was not written by ipu; export it again");
  }
  return out;
}

/// The graph of an Executable message, as graph_from_proto; refuses one without a graph.
inline graph graph_from_executable(const pb::Executable& e, const weight_source& weights, const std::string& where) {
  if (!e.has_graph())
    throw error(error_category::popef, "the executable holds no graph", where,
                "the file is damaged or was written by an older ipu; export it again");
  return graph_from_proto(e.graph(), weights, where);
}

}  // namespace ipu::popef
