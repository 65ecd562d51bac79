#pragma once
// ONNX's own model checker and shape inference, with their exceptions turned into ipu errors.
// <sys/mman.h> defines MAP_TYPE, which ONNX's parser.h uses as an enumerator; shield it.
#pragma push_macro("MAP_TYPE")
#undef MAP_TYPE
#include <onnx/checker.h>
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#pragma pop_macro("MAP_TYPE")

#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/ops/families/signal.hpp"
#include "ipu/shape.hpp"

namespace ipu::onnx {

/// Runs ONNX's checker on a whole model. Equivalent to onnx::checker::check_model, except that
/// external data is looked up in `model_dir` (the in-memory overload only knows the current
/// directory). `stage` says which import step ran it, for the message.
inline void check_model(const ::onnx::ModelProto& model, const std::filesystem::path& model_dir,
                        std::string_view stage = {}) {
  const std::string where = stage.empty() ? std::string("ONNX checker") : "ONNX checker, " + std::string(stage);
  try {
    if (!model.ir_version())
      throw error(error_category::onnx, "the model has no IR version, so it is not an ONNX model", where,
                  "the file may be truncated or not an ONNX model at all");
    if (model.ir_version() > ::onnx::IR_VERSION)
      throw error(error_category::onnx,
                  "the model's IR version " + std::to_string(model.ir_version()) + " is newer than the " +
                      std::to_string(static_cast<int>(::onnx::IR_VERSION)) + " this ONNX understands",
                  where, "export the model with an older ONNX (IR version <= 8, opset <= 17)");
    ::onnx::checker::CheckerContext ctx;
    ctx.set_ir_version(static_cast<int>(model.ir_version()));
    std::unordered_map<std::string, int> opsets;
    for (const auto& o : model.opset_import()) opsets[o.domain()] = static_cast<int>(o.version());
    if (model.ir_version() >= 3 && opsets.empty())
      throw error(error_category::onnx, "the model imports no opset", where, "add an opset_import for the ONNX domain");
    if (model.ir_version() < 3) {
      if (!opsets.empty())
        throw error(error_category::onnx, "a model with IR version < 3 cannot import opsets", where);
      opsets[""] = 1;
    }
    ctx.set_opset_imports(opsets);
    if (!model_dir.empty()) ctx.set_model_dir(model_dir.string());
    ::onnx::checker::LexicalScopeContext lex;
    ::onnx::checker::check_graph(model.graph(), ctx, lex);
    if (ctx.get_ir_version() >= 8) ::onnx::checker::check_model_local_functions(model, ctx, lex);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    throw error(error_category::onnx, "the model is not valid ONNX: " + detail::single_line(e.what()), where,
                "fix or re-export the model; Python's onnx.checker.check_model gives the same verdict");
  }
}

namespace detail {

inline std::string declared_dims(const ::onnx::TypeProto& t) {
  std::string s = "[";
  for (int i = 0; i < t.tensor_type().shape().dim_size(); ++i) {
    const auto& d = t.tensor_type().shape().dim(i);
    // Appended piece by piece: "," + std::string trips GCC 12's -Wrestrict in optimised builds.
    if (i) s += ',';
    s += d.has_dim_value() ? std::to_string(d.dim_value()) : std::string("?");
  }
  s += ']';
  return s;
}

/// When inference finds a declared shape (value_info or a graph output) that disagrees with what
/// the ops compute, ONNX names neither the tensor nor both shapes: infer again without the main
/// graph's declarations and say which declaration is wrong. Empty if none is found.
inline void guard_inference();

inline std::string declared_shape_disagreement(const ::onnx::ModelProto& model) {
  guard_inference();
  ::onnx::ModelProto bare = model;
  auto* g = bare.mutable_graph();
  g->clear_value_info();
  for (auto& o : *g->mutable_output())
    if (o.type().has_tensor_type()) o.mutable_type()->mutable_tensor_type()->clear_shape();
  try {
    const ::onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/0, /*data_prop=*/true);
    ::onnx::shape_inference::InferShapes(bare, ::onnx::OpSchemaRegistry::Instance(), options);
  } catch (const std::exception&) {
    return {};
  }
  std::unordered_map<std::string, const ::onnx::TypeProto*> inferred;
  for (const auto& v : bare.graph().value_info()) inferred.emplace(v.name(), &v.type());
  for (const auto& v : bare.graph().output()) inferred.emplace(v.name(), &v.type());
  auto disagree = [&](const ::onnx::ValueInfoProto& v, const char* where) -> std::string {
    auto it = inferred.find(v.name());
    if (it == inferred.end() || !v.type().has_tensor_type() || !v.type().tensor_type().has_shape() ||
        !it->second->has_tensor_type() || !it->second->tensor_type().has_shape())
      return {};
    const auto& a = v.type().tensor_type().shape();
    const auto& b = it->second->tensor_type().shape();
    bool differ = a.dim_size() != b.dim_size();
    for (int i = 0; !differ && i < a.dim_size(); ++i)
      differ = a.dim(i).has_dim_value() && b.dim(i).has_dim_value() && a.dim(i).dim_value() != b.dim(i).dim_value();
    if (!differ) return {};
    return "tensor '" + single_line(v.name()) + "' is declared " + declared_dims(v.type()) + " in the model's " + where +
           " but its producer computes " + declared_dims(*it->second);
  };
  for (const auto& v : model.graph().value_info())
    if (auto d = disagree(v, "value_info"); !d.empty()) return d;
  for (const auto& v : model.graph().output())
    if (auto d = disagree(v, "graph outputs"); !d.empty()) return d;
  return {};
}

/// ONNX's own shape inference for convolutions and pooling (1.13) trusts that the weights have the
/// input's rank and that the attribute lists have one entry per spatial dimension; a hostile model
/// that breaks either makes it read past its vectors. What is wrong with such a node, given the
/// ranks known of its input `x` and weights `w` (-1: unknown) and its attributes; empty when nothing
/// is. The first of the pair is the message, the second the hint.
template <class Attributes>
std::pair<std::string, std::string> convolution_problem(const std::string& node, int x, int w, const Attributes& attributes) {
  if (x >= 0 && x < 3)
    return {node + ": its input has rank " + std::to_string(x) +
                "; convolution and pooling take [N, C, spatial...], rank 3 or more",
            "give the input its batch and channel dimensions"};
  if (x >= 0 && w >= 0 && x != w)
    return {node + ": its input has rank " + std::to_string(x) + " but its weights rank " + std::to_string(w) +
                "; they must have the same rank",
            "reshape the input or the weights so that both are [N or M, C, spatial...]"};
  const int spatial = x >= 0 ? x - 2 : w >= 2 ? w - 2 : -1;
  for (const ::onnx::AttributeProto& a : attributes) {
    const bool per_dim = a.name() == "kernel_shape" || a.name() == "strides" || a.name() == "dilations" ||
                         a.name() == "output_padding";
    if (!per_dim && a.name() != "pads") continue;
    const int want = a.name() == "pads" ? 2 * spatial : spatial;
    if (spatial >= 0 && a.ints_size() != want)
      return {node + ": attribute '" + a.name() + "' has " + std::to_string(a.ints_size()) + " values; the input has " +
                  std::to_string(spatial) + " spatial dimensions, so it needs " + std::to_string(want),
              "give one value per spatial dimension (pads: a begin and an end each)"};
    for (const auto v : a.ints())
      if (v < (a.name() == "pads" || a.name() == "output_padding" ? 0 : 1) || v > (std::int64_t{1} << 31))
        return {node + ": attribute '" + a.name() + "' holds " + std::to_string(v) + ", out of range",
                "pads are at least 0, kernel sizes, strides and dilations at least 1, and none above 2^31"};
  }
  return {};
}

inline bool is_convolution(const std::string& op) {
  return op == "Conv" || op == "ConvTranspose" || op == "ConvInteger" || op == "QLinearConv";
}
inline bool is_pooling(const std::string& op) {
  return op == "MaxPool" || op == "AveragePool" || op == "LpPool" || op == "MaxUnpool";
}

/// Checks convolution_problem() wherever the ranks are known before inference (graph inputs,
/// initializers, declared value_info); guard_inference() covers the ranks inference finds.
inline void check_convolution_ranks(const ::onnx::GraphProto& graph, std::unordered_map<std::string, int> ranks,
                                    const std::string& where) {
  const auto note = [&](const ::onnx::ValueInfoProto& v) {
    if (v.type().has_tensor_type() && v.type().tensor_type().has_shape())
      ranks[v.name()] = v.type().tensor_type().shape().dim_size();
  };
  for (const auto& v : graph.input()) note(v);
  for (const auto& v : graph.value_info()) note(v);
  for (const auto& i : graph.initializer()) ranks[i.name()] = i.dims_size();
  const auto rank_of = [&](const ::onnx::NodeProto& n, int index) {
    if (index >= n.input_size() || n.input(index).empty()) return -1;
    const auto it = ranks.find(n.input(index));
    return it == ranks.end() ? -1 : it->second;
  };
  for (const auto& n : graph.node()) {
    const std::string& op = n.op_type();
    const bool conv = is_convolution(op);
    if ((conv || is_pooling(op)) && (n.domain().empty() || n.domain() == "ai.onnx")) {
      const std::string node = op + " node '" + single_line(n.name()) + "'";
      const int w = conv ? rank_of(n, op == "QLinearConv" ? 3 : 1) : -1;
      if (auto [message, hint] = convolution_problem(node, rank_of(n, 0), w, n.attribute()); !message.empty())
        throw error(error_category::onnx, message, where, hint);
    }
    const std::string node = op + " node '" + single_line(n.name()) + "'";
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_convolution_ranks(a.g(), ranks, where + ", a subgraph of " + node);
      for (const auto& g : a.graphs()) check_convolution_ranks(g, ranks, where + ", a subgraph of " + node);
    }
  }
}

/// The most dimensions a tensor may have. ONNX sets no limit, but a shape operand (Reshape's or
/// Expand's shape, ConstantOfShape's input, Resize's sizes) of length L makes ONNX's inference
/// build L dimensions: a hostile model declaring one of 2^32 entries exhausts memory inside libonnx.
inline constexpr std::int64_t max_rank = 64;

/// Refuses shape operands whose declared length (graph input, value_info or initializer) exceeds
/// max_rank, in the graph and its subgraphs, before ONNX's shape inference sees them.
inline void check_shape_operands(const ::onnx::GraphProto& graph, std::unordered_map<std::string, std::int64_t> lengths,
                                 const std::string& where) {
  const auto note = [&](const ::onnx::ValueInfoProto& v) {
    const auto& t = v.type().tensor_type();
    if (v.type().has_tensor_type() && t.has_shape() && t.shape().dim_size() == 1 && t.shape().dim(0).has_dim_value())
      lengths[v.name()] = t.shape().dim(0).dim_value();
  };
  for (const auto& v : graph.input()) note(v);
  for (const auto& v : graph.value_info()) note(v);
  for (const auto& i : graph.initializer())
    if (i.dims_size() == 1) lengths[i.name()] = i.dims(0);
  for (const auto& n : graph.node()) {
    int operand = -1;
    if (n.domain().empty() || n.domain() == "ai.onnx") {
      if (n.op_type() == "Reshape" || n.op_type() == "Expand") operand = 1;
      else if (n.op_type() == "ConstantOfShape") operand = 0;
      else if (n.op_type() == "Resize") operand = 3;
    }
    if (operand >= 0 && operand < n.input_size())
      if (const auto it = lengths.find(n.input(operand)); it != lengths.end() && it->second > max_rank)
        throw error(error_category::onnx,
                    n.op_type() + " node '" + single_line(n.name()) + "': its shape operand '" + single_line(it->first) +
                        "' has " + std::to_string(it->second) + " entries, so its output would have that many "
                        "dimensions; at most " + std::to_string(max_rank) + " are supported",
                    where, "give the shape operand one entry per output dimension");
    for (const auto& a : n.attribute()) {
      if (a.has_g()) check_shape_operands(a.g(), lengths, where);
      for (const auto& g : a.graphs()) check_shape_operands(g, lengths, where);
    }
  }
}

/// How many values of a TensorProto's typed field, and how many bytes of raw_data, hold one
/// element of `type`: {field values, raw bytes}; {0, 0} for types without a fixed size.
inline std::pair<int, int> tensor_element_layout(int type) {
  using T = ::onnx::TensorProto;
  switch (type) {
    case T::COMPLEX64: return {2, 8};
    case T::COMPLEX128: return {2, 16};
    case T::DOUBLE: case T::INT64: case T::UINT64: return {1, 8};
    case T::FLOAT: case T::INT32: case T::UINT32: return {1, 4};
    case T::INT16: case T::UINT16: case T::FLOAT16: case T::BFLOAT16: return {1, 2};
    case T::INT8: case T::UINT8: case T::BOOL: return {1, 1};
    default: return {0, 0};
  }
}

/// ONNX's shape inference reads constant tensors (initializers, Constant values) with ParseData,
/// which copies as many bytes as the dims say from raw_data whatever its length, and indexes the
/// typed fields without bounds: a hostile model crashes it. So every stored tensor's data is
/// checked against its dims and type first, in every graph and subgraph.
inline void check_tensor_data(const ::onnx::TensorProto& t, const std::string& label, const std::string& where) {
  const std::string name = label + " '" + single_line(t.name()) + "'";
  for (const auto d : t.dims())
    if (d < 0)
      throw error(error_category::onnx, name + " has the negative dimension " + std::to_string(d), where,
                  "stored tensors have known, non-negative dimensions");
  const auto elements = shape(std::vector<std::int64_t>(t.dims().begin(), t.dims().end())).num_elements();
  if (t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) return;  // sized when it is read
  const auto [per_value, bytes] = tensor_element_layout(t.data_type());
  const auto mismatch = [&](std::uint64_t have, std::string_view field, std::uint64_t want) {
    throw error(error_category::onnx, name + " has " + std::to_string(have) + " " + std::string(field) + " but its dims " +
                "and type need " + std::to_string(want), where, "the tensor is truncated or its dims are wrong");
  };
  const auto n = static_cast<std::uint64_t>(elements);
  if (t.has_raw_data()) {
    if (bytes > 0 && t.raw_data().size() != n * static_cast<std::uint64_t>(bytes))
      mismatch(t.raw_data().size(), "bytes of raw_data", n * static_cast<std::uint64_t>(bytes));
    return;
  }
  using T = ::onnx::TensorProto;
  std::uint64_t values = 0;
  std::string_view field;
  switch (t.data_type()) {
    case T::FLOAT: case T::COMPLEX64: values = static_cast<std::uint64_t>(t.float_data_size()); field = "float_data"; break;
    case T::DOUBLE: case T::COMPLEX128: values = static_cast<std::uint64_t>(t.double_data_size()); field = "double_data"; break;
    case T::INT64: values = static_cast<std::uint64_t>(t.int64_data_size()); field = "int64_data"; break;
    case T::UINT32: case T::UINT64: values = static_cast<std::uint64_t>(t.uint64_data_size()); field = "uint64_data"; break;
    case T::STRING: values = static_cast<std::uint64_t>(t.string_data_size()); field = "string_data"; break;
    default: values = static_cast<std::uint64_t>(t.int32_data_size()); field = "int32_data"; break;
  }
  const std::uint64_t want = n * static_cast<std::uint64_t>(std::max(per_value, 1));
  if (values != want) mismatch(values, std::string(field) + " values", want);
}

inline void check_graph_tensors(const ::onnx::GraphProto& graph, const std::string& where);

inline void check_node_tensors(const ::onnx::NodeProto& n, const std::string& where) {
  const std::string node = n.op_type() + " node '" + single_line(n.name()) + "'";
  for (const auto& a : n.attribute()) {
    const std::string attr = "attribute '" + single_line(a.name()) + "' of " + node + ", tensor";
    if (a.has_t()) check_tensor_data(a.t(), attr, where);
    for (const auto& t : a.tensors()) check_tensor_data(t, attr, where);
    if (a.has_sparse_tensor()) {
      check_tensor_data(a.sparse_tensor().values(), attr, where);
      check_tensor_data(a.sparse_tensor().indices(), attr, where);
    }
    if (a.has_g()) check_graph_tensors(a.g(), where + ", a subgraph of " + node);
    for (const auto& g : a.graphs()) check_graph_tensors(g, where + ", a subgraph of " + node);
  }
}

/// A declared dimension below 0 (ONNX writes unknown sizes as dim_param or leaves them out) makes
/// ONNX's inference index shapes backwards (GatherND read data's dimension -6: the fuzzer's find).
inline void check_declared_type(const ::onnx::TypeProto& t, const std::string& name, const std::string& where) {
  if (t.has_tensor_type() && t.tensor_type().has_shape())
    for (const auto& d : t.tensor_type().shape().dim())
      if (d.has_dim_value() && d.dim_value() < 0)
        throw error(error_category::onnx, "'" + single_line(name) + "' is declared with the dimension " +
                    std::to_string(d.dim_value()), where,
                    "declare sizes of 0 or more; write an unknown size as a dim_param or leave it out");
  if (t.has_sequence_type()) check_declared_type(t.sequence_type().elem_type(), name, where);
  if (t.has_optional_type()) check_declared_type(t.optional_type().elem_type(), name, where);
  if (t.has_map_type()) check_declared_type(t.map_type().value_type(), name, where);
}

/// Two declarations of one tensor agree: same kind of type, same element type and rank, and the
/// same size wherever both give one.
inline bool declared_alike(const ::onnx::TypeProto& a, const ::onnx::TypeProto& b) {
  if (a.value_case() != b.value_case()) return false;
  if (!a.has_tensor_type()) return true;
  const auto& x = a.tensor_type();
  const auto& y = b.tensor_type();
  if (x.elem_type() != 0 && y.elem_type() != 0 && x.elem_type() != y.elem_type()) return false;
  if (!x.has_shape() || !y.has_shape()) return true;
  if (x.shape().dim_size() != y.shape().dim_size()) return false;
  for (int i = 0; i < x.shape().dim_size(); ++i) {
    const auto& p = x.shape().dim(i);
    const auto& q = y.shape().dim(i);
    if (p.has_dim_value() && q.has_dim_value() && p.dim_value() != q.dim_value()) return false;
  }
  return true;
}

inline std::string declared_type_text(const ::onnx::TypeProto& t) {
  if (!t.has_tensor_type()) return "as a non-tensor value";
  const auto type = t.tensor_type().elem_type();
  return "as " + (type ? ::onnx::TensorProto_DataType_Name(type) : std::string("?")) + " " +
         (t.tensor_type().has_shape() ? declared_dims(t) : std::string("of unknown shape"));
}

/// A tensor declared more than once (graph inputs, outputs, value_info) must be declared alike.
/// ONNX's inference lets a graph output's declaration hide a value_info of the same name, so a
/// contradictory value_info was never checked, and the importer sized the tensor from it: the
/// fuzzer's find, where a Neg wrote past a buffer of the declared size.
inline void check_declared_alike(const ::onnx::GraphProto& graph, const std::string& where) {
  std::unordered_map<std::string, std::pair<const ::onnx::TypeProto*, const char*>> first;
  const auto note = [&](const ::onnx::ValueInfoProto& v, const char* list) {
    if (!v.has_type()) return;
    const auto [it, fresh] = first.try_emplace(v.name(), &v.type(), list);
    if (fresh || declared_alike(*it->second.first, v.type())) return;
    throw error(error_category::onnx,
                "tensor '" + single_line(v.name()) + "' is declared " + declared_type_text(*it->second.first) +
                    " in the model's " + it->second.second + " but " + declared_type_text(v.type()) + " in its " + list,
                where,
                "declare each tensor alike wherever it appears, or once (onnx.shape_inference.infer_shapes writes the "
                "shapes the ops compute)");
  };
  for (const auto& v : graph.input()) note(v, "graph inputs");
  for (const auto& v : graph.output()) note(v, "graph outputs");
  for (const auto& v : graph.value_info()) note(v, "value_info");
}

inline void check_graph_tensors(const ::onnx::GraphProto& graph, const std::string& where) {
  check_declared_alike(graph, where);
  for (const auto& v : graph.input()) check_declared_type(v.type(), v.name(), where);
  for (const auto& v : graph.output()) check_declared_type(v.type(), v.name(), where);
  for (const auto& v : graph.value_info()) check_declared_type(v.type(), v.name(), where);
  for (const auto& t : graph.initializer()) check_tensor_data(t, "initializer", where);
  for (const auto& s : graph.sparse_initializer()) {
    check_tensor_data(s.values(), "sparse initializer values", where);
    check_tensor_data(s.indices(), "sparse initializer indices", where);
  }
  for (const auto& n : graph.node()) check_node_tensors(n, where);
}


/// Runs `check` (which throws ::onnx::InferenceError to refuse) before ONNX's own inference of
/// every version of op `name`. The registry owns its schemas as mutable objects and hands out
/// const pointers only.
template <class Check>
void check_before_inference(const std::string& name, Check check) {
  for (int version = std::numeric_limits<int>::max(); version >= 1;) {
    const auto* schema = ::onnx::OpSchemaRegistry::Schema(name, version, "");
    if (schema == nullptr) break;
    auto original = schema->GetTypeAndShapeInferenceFunction();
    if (original)
      const_cast<::onnx::OpSchema*>(schema)->TypeAndShapeInferenceFunction([check, original](::onnx::InferenceContext& ctx) {
        check(ctx);
        original(ctx);
      });
    version = schema->since_version() - 1;
  }
}

/// Runs `fix` after ONNX's own inference of every version of op `name` (to correct what it wrote).
template <class Fix>
void fix_after_inference(const std::string& name, Fix fix) {
  for (int version = std::numeric_limits<int>::max(); version >= 1;) {
    const auto* schema = ::onnx::OpSchemaRegistry::Schema(name, version, "");
    if (schema == nullptr) break;
    auto original = schema->GetTypeAndShapeInferenceFunction();
    if (original)
      const_cast<::onnx::OpSchema*>(schema)->TypeAndShapeInferenceFunction([fix, original](::onnx::InferenceContext& ctx) {
        original(ctx);
        fix(ctx);
      });
    version = schema->since_version() - 1;
  }
}

/// The value of a scalar INT64 / INT32 tensor inference was handed, or nullopt when it cannot be
/// read here (external data, say): the shape is then left unknown.
inline std::optional<std::int64_t> scalar_int_data(const ::onnx::TensorProto& t) {
  if (t.dims_size() != 0) return std::nullopt;
  if (t.data_type() == ::onnx::TensorProto_DataType_INT64) {
    if (t.int64_data_size() == 1) return t.int64_data(0);
    std::int64_t v = 0;
    if (t.raw_data().size() == sizeof v) {
      std::memcpy(&v, t.raw_data().data(), sizeof v);
      return v;
    }
  } else if (t.data_type() == ::onnx::TensorProto_DataType_INT32) {
    if (t.int32_data_size() == 1) return t.int32_data(0);
    std::int32_t v = 0;
    if (t.raw_data().size() == sizeof v) {
      std::memcpy(&v, t.raw_data().data(), sizeof v);
      return v;
    }
  }
  return std::nullopt;
}

/// STFT's output shape by the spec (the library's rule, ops/families/signal.hpp), or none when a
/// size is not known. ONNX 1.12 reads onesided's default as 0 (the schema says 1) and counts the
/// frames from the onesided bin count, so every shape it computes for STFT is wrong.
inline void correct_stft_inference(::onnx::InferenceContext& ctx) {
  if (ctx.getNumOutputs() < 1 || ctx.getOutputType(0) == nullptr) return;
  auto* out = ctx.getOutputType(0)->mutable_tensor_type();
  out->clear_shape();
  const auto present = [&](std::size_t i) { return i < ctx.getNumInputs() && ctx.getInputType(i) != nullptr; };
  const auto dims_of = [&](std::size_t i) -> std::optional<std::vector<std::int64_t>> {
    const auto& t = *ctx.getInputType(i);
    if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return std::nullopt;
    std::vector<std::int64_t> d;
    for (const auto& x : t.tensor_type().shape().dim()) {
      if (!x.has_dim_value() || x.dim_value() < 0) return std::nullopt;
      d.push_back(x.dim_value());
    }
    return d;
  };
  const auto value_of = [&](std::size_t i) -> std::optional<std::int64_t> {
    const auto* t = ctx.getInputData(i);
    return t ? scalar_int_data(*t) : std::nullopt;
  };
  if (!present(0) || !present(1)) return;
  const auto signal = dims_of(0);
  const auto step = value_of(1);
  if (!signal || !step) return;
  std::optional<shape> window;
  if (present(2)) {
    const auto w = dims_of(2);
    if (!w) return;
    window = shape(*w);
  }
  std::optional<std::int64_t> frame_length;
  if (present(3) && !(frame_length = value_of(3))) return;
  const auto* onesided = ctx.getAttribute("onesided");
  const auto fail = [](const std::string& what, const std::string& fix) {
    return ::onnx::InferenceError("[ShapeInferenceError] STFT node: " + what + "; " + fix);
  };
  const auto dims = stft_output_shape(shape(*signal), *step, window ? &*window : nullptr, frame_length,
                                      onesided == nullptr || onesided->i() != 0, fail);
  for (const auto d : dims) out->mutable_shape()->add_dim()->set_dim_value(d);
}

/// The same checks at inference time, with the ranks inference has found so far (a Conv reading a
/// Reshape's output, say): ONNX's inference functions of the convolution and pooling ops, every
/// version, are wrapped once per process so that a bad node fails inference with ONNX's own
/// InferenceError before the original function reads past its vectors.
inline void guard_inference() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (const char* op : {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MaxPool", "AveragePool", "LpPool",
                           "MaxUnpool"}) {
      const std::string name = op;
      const bool conv = is_convolution(name);
      const int weights = name == "QLinearConv" ? 3 : 1;
      check_before_inference(name, [name, conv, weights](::onnx::InferenceContext& ctx) {
        const auto rank = [&](std::size_t i) {
          if (i >= ctx.getNumInputs()) return -1;
          const auto* t = ctx.getInputType(i);
          if (t == nullptr || !t->has_tensor_type() || !t->tensor_type().has_shape()) return -1;
          return t->tensor_type().shape().dim_size();
        };
        std::vector<::onnx::AttributeProto> attributes;
        for (const char* a : {"kernel_shape", "strides", "dilations", "output_padding", "pads"})
          if (const auto* p = ctx.getAttribute(a)) attributes.push_back(*p);
        const auto [message, hint] =
            convolution_problem(name + " node", rank(0), conv ? rank(static_cast<std::size_t>(weights)) : -1, attributes);
        if (!message.empty()) throw ::onnx::InferenceError("[ShapeInferenceError] " + message + "; " + hint);
      });
    }
    // GatherND's inference (1.13) trusts batch_dims to be 0 or more: a negative one makes it
    // copy data's dimension -1 (the fuzzer's find, a crash inside libonnx).
    check_before_inference("GatherND", [](::onnx::InferenceContext& ctx) {
      if (const auto* a = ctx.getAttribute("batch_dims"); a != nullptr && a->i() < 0)
        throw ::onnx::InferenceError("[ShapeInferenceError] GatherND node: batch_dims " + std::to_string(a->i()) +
                                     " is negative; it counts leading dimensions shared by data and indices, from 0");
    });
    fix_after_inference("STFT", correct_stft_inference);
  });
}

}  // namespace detail

/// Runs ONNX shape inference in its strictest mode: node-level inference errors are errors, input
/// and output types are checked, and shape data is propagated through Shape-like ops. Inferred
/// types land in the graphs' value_info.
inline void infer_shapes(::onnx::ModelProto& model, std::string_view stage = {}) {
  const std::string where =
      stage.empty() ? std::string("ONNX shape inference") : "ONNX shape inference, " + std::string(stage);
  detail::check_graph_tensors(model.graph(), where);
  for (const auto& f : model.functions())
    for (const auto& n : f.node()) detail::check_node_tensors(n, where + ", function '" + detail::single_line(f.name()) + "'");
  detail::check_convolution_ranks(model.graph(), {}, where);
  detail::check_shape_operands(model.graph(), {}, where);
  detail::guard_inference();
  try {
    const ::onnx::ShapeInferenceOptions options(/*check_type=*/true, /*strict_mode=*/1, /*data_prop=*/true);
    std::unordered_map<std::string, ::onnx::TensorShapeProto> generated;
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(), options, &generated);
  } catch (const error&) {
    throw;
  } catch (const std::exception& e) {
    const std::string what = e.what();
    if (what.find("existing shape differ") != std::string::npos)
      if (auto d = detail::declared_shape_disagreement(model); !d.empty())
        throw error(error_category::shape, d, where,
                    "the declaration is wrong: correct it or delete it (onnx.shape_inference.infer_shapes writes the "
                    "shapes the ops compute), or check the input shapes you gave");
    throw error(error_category::shape, "shape inference failed: " + detail::single_line(what), where,
                "the model's shapes or types are inconsistent; check the input shapes you gave");
  }
}

}  // namespace ipu::onnx
