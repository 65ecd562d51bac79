#pragma once
// ONNX AttributeProto <-> ipu::attribute. Graph-valued attributes are converted by a callback, so
// that the importer and exporter can recurse with their own scope.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/attribute.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/onnx/tensor.hpp"

namespace ipu::onnx {

namespace detail {
/// The kind an attribute holds: its `type`, or for very old models without one, the field set.
inline ::onnx::AttributeProto_AttributeType attribute_type(const ::onnx::AttributeProto& a) {
  if (a.type() != ::onnx::AttributeProto_AttributeType_UNDEFINED) return a.type();
  if (a.has_f()) return ::onnx::AttributeProto_AttributeType_FLOAT;
  if (a.has_i()) return ::onnx::AttributeProto_AttributeType_INT;
  if (a.has_s()) return ::onnx::AttributeProto_AttributeType_STRING;
  if (a.has_t()) return ::onnx::AttributeProto_AttributeType_TENSOR;
  if (a.has_g()) return ::onnx::AttributeProto_AttributeType_GRAPH;
  if (a.floats_size()) return ::onnx::AttributeProto_AttributeType_FLOATS;
  if (a.ints_size()) return ::onnx::AttributeProto_AttributeType_INTS;
  if (a.strings_size()) return ::onnx::AttributeProto_AttributeType_STRINGS;
  if (a.tensors_size()) return ::onnx::AttributeProto_AttributeType_TENSORS;
  if (a.graphs_size()) return ::onnx::AttributeProto_AttributeType_GRAPHS;
  return ::onnx::AttributeProto_AttributeType_UNDEFINED;
}
}  // namespace detail

/// Converts one attribute. `import_graph(const GraphProto&) -> ipu::graph` converts subgraphs;
/// `where` names the node for errors.
template <class ImportGraph>
attribute from_attribute_proto(const ::onnx::AttributeProto& a, const tensor_source& src, ImportGraph&& import_graph,
                               const std::string& where) {
  attribute out;
  out.name = a.name();
  const std::string label = "attribute '" + a.name() + "'";
  switch (detail::attribute_type(a)) {
    case ::onnx::AttributeProto_AttributeType_FLOAT: out.value = a.f(); break;
    case ::onnx::AttributeProto_AttributeType_INT: out.value = static_cast<std::int64_t>(a.i()); break;
    case ::onnx::AttributeProto_AttributeType_STRING: out.value = a.s(); break;
    case ::onnx::AttributeProto_AttributeType_TENSOR: out.value = to_constant_tensor(a.t(), src, label); break;
    case ::onnx::AttributeProto_AttributeType_GRAPH: out.value = subgraph{::ipu::detail::box<graph>(import_graph(a.g()))}; break;
    case ::onnx::AttributeProto_AttributeType_FLOATS:
      out.value = std::vector<float>(a.floats().begin(), a.floats().end());
      break;
    case ::onnx::AttributeProto_AttributeType_INTS:
      out.value = std::vector<std::int64_t>(a.ints().begin(), a.ints().end());
      break;
    case ::onnx::AttributeProto_AttributeType_STRINGS:
      out.value = std::vector<std::string>(a.strings().begin(), a.strings().end());
      break;
    case ::onnx::AttributeProto_AttributeType_TENSORS: {
      std::vector<constant_tensor> ts;
      for (const auto& t : a.tensors()) ts.push_back(to_constant_tensor(t, src, label));
      out.value = std::move(ts);
      break;
    }
    case ::onnx::AttributeProto_AttributeType_GRAPHS: {
      std::vector<graph> gs;
      for (const auto& g : a.graphs()) gs.push_back(import_graph(g));
      out.value = std::move(gs);
      break;
    }
    default:
      throw error(error_category::onnx,
                  label + " has kind " + ::onnx::AttributeProto_AttributeType_Name(detail::attribute_type(a)) +
                      ", which the library does not support",
                  where, "sparse tensors and type protos are not supported as attributes");
  }
  return out;
}

/// Converts one attribute back. `export_graph(const ipu::graph&) -> GraphProto` converts subgraphs.
template <class ExportGraph>
::onnx::AttributeProto to_attribute_proto(const attribute& a, ExportGraph&& export_graph) {
  ::onnx::AttributeProto p;
  p.set_name(a.name);
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, float>) {
          p.set_type(::onnx::AttributeProto_AttributeType_FLOAT);
          p.set_f(v);
        } else if constexpr (std::is_same_v<T, std::int64_t>) {
          p.set_type(::onnx::AttributeProto_AttributeType_INT);
          p.set_i(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          p.set_type(::onnx::AttributeProto_AttributeType_STRING);
          p.set_s(v);
        } else if constexpr (std::is_same_v<T, constant_tensor>) {
          p.set_type(::onnx::AttributeProto_AttributeType_TENSOR);
          *p.mutable_t() = to_tensor_proto(v);
        } else if constexpr (std::is_same_v<T, subgraph>) {
          p.set_type(::onnx::AttributeProto_AttributeType_GRAPH);
          *p.mutable_g() = export_graph(*v.body);
        } else if constexpr (std::is_same_v<T, std::vector<float>>) {
          p.set_type(::onnx::AttributeProto_AttributeType_FLOATS);
          for (auto x : v) p.add_floats(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) {
          p.set_type(::onnx::AttributeProto_AttributeType_INTS);
          for (auto x : v) p.add_ints(x);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          p.set_type(::onnx::AttributeProto_AttributeType_STRINGS);
          for (const auto& x : v) p.add_strings(x);
        } else if constexpr (std::is_same_v<T, std::vector<constant_tensor>>) {
          p.set_type(::onnx::AttributeProto_AttributeType_TENSORS);
          for (const auto& x : v) *p.add_tensors() = to_tensor_proto(x);
        } else {
          static_assert(std::is_same_v<T, std::vector<graph>>, "ipu: handle every attribute kind");
          p.set_type(::onnx::AttributeProto_AttributeType_GRAPHS);
          for (const auto& x : v) *p.add_graphs() = export_graph(x);
        }
      },
      a.value);
  return p;
}

}  // namespace ipu::onnx
