#pragma once
// Models older than the oldest opset the normaliser reads (ai.onnx 1-6) are upgraded to it with
// ONNX's own version converter, whose adapters know every change between opsets (Add's `broadcast`
// and `consumed_inputs`, BatchNormalization's `is_test`, ...).
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/onnx_pb.h>
#include <onnx/version_converter/convert.h>
#pragma pop_macro("MAP_TYPE")

#include <cstdint>
#include <exception>
#include <map>
#include <set>
#include <string>

#include "ipu/error.hpp"
#include "ipu/onnx/checker.hpp"
#include "ipu/onnx/proto.hpp"

namespace ipu::onnx {

namespace detail {

/// The converter builds ONNX's in-memory graph, which dereferences whatever a graph output names:
/// an output that no node, input or initializer of its graph (or an enclosing one) defines crashes
/// it, and ONNX's checker lets such a model through. So every output is checked first.
inline void check_outputs_defined(const ::onnx::GraphProto& g, std::set<std::string> defined, const std::string& where) {
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  for (const auto& n : g.node()) defined.insert(n.output().begin(), n.output().end());
  for (const auto& v : g.output())
    if (!defined.count(v.name()))
      throw error(error_category::onnx, "graph '" + single_line(g.name()) + "' has the output '" + single_line(v.name()) +
                  "', which nothing in it defines", where, "name the output after a node output, input or initializer");
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_outputs_defined(a.g(), defined, where);
      for (const auto& sub : a.graphs()) check_outputs_defined(sub, defined, where);
    }
}

/// The converter's Gemm 6 -> 7 step reads M and N from A's and B's declared shapes as if both had
/// rank 2; a declaration of another rank makes it read past the end of the shape. Declared ranks
/// (inputs, outputs, value_info, initializers: what the converter's graph carries) are checked first.
inline void check_gemm_ranks(const ::onnx::GraphProto& g, std::map<std::string, int> ranks, const std::string& where) {
  const auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : g.input()) note(v);
  for (const auto& v : g.output()) note(v);
  for (const auto& v : g.value_info()) note(v);
  for (const auto& t : g.initializer()) ranks[t.name()] = t.dims_size();
  for (const auto& n : g.node()) {
    if (n.op_type() == "Gemm" && (n.domain().empty() || n.domain() == "ai.onnx"))
      for (int i = 0; i < 2 && i < n.input_size(); ++i)
        if (const auto it = ranks.find(n.input(i)); it != ranks.end() && it->second != 2)
          throw error(error_category::onnx,
                      "Gemm node '" + single_line(n.name()) + "': input " + (i == 0 ? "A" : "B") + " ('" +
                          single_line(n.input(i)) + "') is declared with rank " + std::to_string(it->second) +
                          "; Gemm multiplies matrices, rank 2",
                      where, "declare A and B as [rows, columns], or use MatMul");
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_gemm_ranks(a.g(), ranks, where);
      for (const auto& sub : a.graphs()) check_gemm_ranks(sub, ranks, where);
    }
  }
}

}  // namespace detail

/// Converts `model` in place from ai.onnx opset `from` to opset `to` with ONNX's version converter;
/// an ipu::error naming both opsets and the converter's reason if it cannot.
inline void upgrade_opset(::onnx::ModelProto& model, std::int64_t from, std::int64_t to) {
  const std::string where = "model graph '" + model.graph().name() + "'";
  const std::string fix = "re-export the model at ai.onnx opset " + std::to_string(to) +
                          " or later, or convert it with onnx.version_converter.convert_version first";
  detail::check_outputs_defined(model.graph(), {}, where);
  detail::check_gemm_ranks(model.graph(), {}, where);
  detail::check_graph_tensors(model.graph(), where);  // stored data and declared dimensions, as inference's
  detail::guard_inference();  // the converter infers shapes too
  try {
    ::onnx::ModelProto converted = ::onnx::version_conversion::ConvertVersion(model, static_cast<int>(to));
    model = std::move(converted);
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (what.size() > 600) what = what.substr(0, 600) + "...";
    throw error(error_category::onnx,
                "ONNX's version converter could not upgrade the model from ai.onnx opset " + std::to_string(from) +
                    " to " + std::to_string(to) + ": " + what,
                where, fix);
  }
}

}  // namespace ipu::onnx
