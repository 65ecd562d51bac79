#pragma once
// Small tools for rewriting ONNX graphs in place (used by normalisation and constant folding):
// fresh names, attribute access, constant nodes, and the types ONNX shape inference recorded.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/half.hpp"
#include "ipu/onnx/types.hpp"

namespace ipu::onnx::detail {

/// "Conv 'conv1'" or "Conv #3": how messages name a node.
inline std::string node_label(const ::onnx::NodeProto& n, int index = -1) {
  std::string s = n.op_type();
  if (!n.name().empty()) return s + " '" + n.name() + "'";
  if (index >= 0) return s + " #" + std::to_string(index);
  return s;
}

/// Every name used anywhere in a model (values and nodes, subgraphs included), so that new names
/// never collide.
class name_pool {
 public:
  explicit name_pool(const ::onnx::ModelProto& m) { add_graph(m.graph()); }

  /// A fresh name starting with `hint`.
  std::string make(std::string_view hint) {
    std::string base(hint.empty() ? std::string_view("ipu") : hint);
    if (used_.insert(base).second) return base;
    for (;;) {
      auto candidate = base + "_" + std::to_string(next_++);
      if (used_.insert(candidate).second) return candidate;
    }
  }

 private:
  void add_graph(const ::onnx::GraphProto& g) {
    for (const auto& v : g.input()) used_.insert(v.name());
    for (const auto& v : g.output()) used_.insert(v.name());
    for (const auto& v : g.value_info()) used_.insert(v.name());
    for (const auto& t : g.initializer()) used_.insert(t.name());
    for (const auto& n : g.node()) {
      used_.insert(n.name());
      for (const auto& o : n.output()) used_.insert(o);
      for (const auto& i : n.input()) used_.insert(i);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) add_graph(a.g());
        for (const auto& sub : a.graphs()) add_graph(sub);
      }
    }
  }
  std::unordered_set<std::string> used_;
  std::size_t next_ = 0;
};

// --- attributes ------------------------------------------------------------------------------------
inline const ::onnx::AttributeProto* find_attr(const ::onnx::NodeProto& n, std::string_view name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
inline std::int64_t attr_int(const ::onnx::NodeProto& n, std::string_view name, std::int64_t fallback) {
  auto* a = find_attr(n, name);
  return a ? a->i() : fallback;
}
inline float attr_float(const ::onnx::NodeProto& n, std::string_view name, float fallback) {
  auto* a = find_attr(n, name);
  return a ? a->f() : fallback;
}
inline std::string attr_string(const ::onnx::NodeProto& n, std::string_view name, std::string_view fallback) {
  auto* a = find_attr(n, name);
  return a ? a->s() : std::string(fallback);
}
inline std::vector<std::int64_t> attr_ints(const ::onnx::NodeProto& n, std::string_view name) {
  auto* a = find_attr(n, name);
  if (!a) return {};
  return {a->ints().begin(), a->ints().end()};
}
inline void remove_attr(::onnx::NodeProto& n, std::string_view name) {
  auto* attrs = n.mutable_attribute();
  for (int i = 0; i < attrs->size(); ++i)
    if (attrs->Get(i).name() == name) {
      attrs->erase(attrs->begin() + i);
      return;
    }
}
inline void set_attr(::onnx::NodeProto& n, std::string_view name, std::int64_t v) {
  remove_attr(n, name);
  auto* a = n.add_attribute();
  a->set_name(std::string(name));
  a->set_type(::onnx::AttributeProto_AttributeType_INT);
  a->set_i(v);
}
inline void set_attr(::onnx::NodeProto& n, std::string_view name, std::string_view v) {
  remove_attr(n, name);
  auto* a = n.add_attribute();
  a->set_name(std::string(name));
  a->set_type(::onnx::AttributeProto_AttributeType_STRING);
  a->set_s(std::string(v));
}

/// Sets input `i`, padding with omitted ("") inputs as needed.
inline void set_input(::onnx::NodeProto& n, int i, const std::string& name) {
  while (n.input_size() <= i) n.add_input("");
  n.set_input(i, name);
}

// --- tensors ----------------------------------------------------------------------------------------
inline ::onnx::TensorProto int64_tensor(std::span<const std::int64_t> values, bool scalar = false) {
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto_DataType_INT64);
  if (!scalar) t.add_dims(static_cast<std::int64_t>(values.size()));
  for (auto v : values) t.add_int64_data(v);
  return t;
}

/// A scalar of ONNX element type `type` holding `v` (for Clip bounds and Pad values).
inline ::onnx::TensorProto scalar_tensor(std::int32_t type, double v, std::string_view what) {
  ::onnx::TensorProto t;
  t.set_data_type(type);
  switch (type) {
    case ::onnx::TensorProto_DataType_FLOAT: t.add_float_data(static_cast<float>(v)); break;
    case ::onnx::TensorProto_DataType_DOUBLE: t.add_double_data(v); break;
    case ::onnx::TensorProto_DataType_FLOAT16: t.add_int32_data(half(static_cast<float>(v)).bits()); break;
    case ::onnx::TensorProto_DataType_INT8:
    case ::onnx::TensorProto_DataType_INT16:
    case ::onnx::TensorProto_DataType_INT32:
    case ::onnx::TensorProto_DataType_UINT8:
    case ::onnx::TensorProto_DataType_UINT16: t.add_int32_data(static_cast<std::int32_t>(v)); break;
    case ::onnx::TensorProto_DataType_INT64: t.add_int64_data(static_cast<std::int64_t>(v)); break;
    case ::onnx::TensorProto_DataType_UINT32:
    case ::onnx::TensorProto_DataType_UINT64: t.add_uint64_data(static_cast<std::uint64_t>(v)); break;
    default:
      throw error(error_category::onnx, std::string(what) + " on element type " + onnx_type_name(type) +
                                            " cannot be rewritten to its opset-17 form",
                  {}, "export the model at opset 11 or later");
  }
  return t;
}

/// A Constant node producing `output`.
inline ::onnx::NodeProto constant_node(const std::string& name, const std::string& output, ::onnx::TensorProto value) {
  ::onnx::NodeProto c;
  c.set_op_type("Constant");
  c.set_name(name);
  c.add_output(output);
  auto* a = c.add_attribute();
  a->set_name("value");
  a->set_type(::onnx::AttributeProto_AttributeType_TENSOR);
  *a->mutable_t() = std::move(value);
  return c;
}

// --- types recorded by shape inference ---------------------------------------------------------------
/// Value name -> type for one graph, falling back to the enclosing graphs' scopes.
class type_scope {
 public:
  type_scope(const ::onnx::GraphProto& g, const type_scope* parent) : parent_(parent) {
    // ONNX's inference reads the declarations in this order, a later one hiding an earlier one of
    // the same name, and checks (and completes) only the one it keeps: keep the same one.
    for (const auto& v : g.input()) add(v);
    for (const auto& v : g.value_info()) add(v);
    for (const auto& v : g.output()) add(v);
    for (const auto& t : g.initializer()) {
      auto& ty = initializer_types_[t.name()];
      auto* tt = ty.mutable_tensor_type();
      tt->set_elem_type(t.data_type());
      auto* s = tt->mutable_shape();
      for (auto d : t.dims()) s->add_dim()->set_dim_value(d);
      types_.emplace(t.name(), &ty);
    }
  }

  [[nodiscard]] const ::onnx::TypeProto* find(const std::string& name) const {
    auto it = types_.find(name);
    if (it != types_.end()) return it->second;
    return parent_ ? parent_->find(name) : nullptr;
  }

  /// Element type of a tensor value (0 when unknown).
  [[nodiscard]] std::int32_t elem_type(const std::string& name) const {
    auto* t = find(name);
    return t && t->has_tensor_type() ? t->tensor_type().elem_type() : 0;
  }

  /// Rank when known.
  [[nodiscard]] std::optional<std::int64_t> rank(const std::string& name) const {
    auto* t = find(name);
    if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return std::nullopt;
    return t->tensor_type().shape().dim_size();
  }

  /// All dimensions when every one is a known value.
  [[nodiscard]] std::optional<std::vector<std::int64_t>> static_shape(const std::string& name) const {
    auto* t = find(name);
    if (!t || !t->has_tensor_type() || !t->tensor_type().has_shape()) return std::nullopt;
    std::vector<std::int64_t> dims;
    for (const auto& d : t->tensor_type().shape().dim()) {
      if (!d.has_dim_value()) return std::nullopt;
      dims.push_back(d.dim_value());
    }
    return dims;
  }

 private:
  void add(const ::onnx::ValueInfoProto& v) {
    if (v.has_type()) types_[v.name()] = &v.type();
  }
  const type_scope* parent_;
  std::unordered_map<std::string, const ::onnx::TypeProto*> types_;
  std::unordered_map<std::string, ::onnx::TypeProto> initializer_types_;
};

}  // namespace ipu::onnx::detail
