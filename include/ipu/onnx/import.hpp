#pragma once
// ONNX model -> graph IR, through ONNX's own protobuf classes, checker and shape inference.
//
// Steps, each failing with one ipu::error that says what and how to fix it:
//  1. parse (empty, truncated, corrupt and over-2-GB inputs are refused before protobuf sees them);
//  2. list every op the library does not implement (import_options::check_supported) at once;
//  3. check the opset (ai.onnx 1-17; 1-6 are first upgraded to 7 by ONNX's version converter,
//     upgrade.hpp), bind sequence and optional inputs (sequences.hpp), apply the input-shape map
//     and require static input shapes;
//  4. ONNX checker and strict shape inference on the model as exported, with the outputs of
//     PopART's ai.graphcore helper ops typed by the op table's shape rules (graphcore_ops.hpp);
//  5. normalise to the canonical opset-17 form (normalize.hpp); write PopART's ai.graphcore loss
//     nodes out as standard ops (graphcore_losses.hpp), and sequences and optionals as tensor ops
//     (sequences.hpp); check and infer again;
//  6. fold shape computations into constants until every shape is static (fold.hpp);
//  7. build the IR. Initializers become variables that share the parsed bytes (or the mapped
//     external-data file) instead of copying them; Constant nodes become constants.
//
// Conventions of the IR produced here:
//  - every ai.onnx op is recorded at opset 17 with opset-17 semantics;
//  - ONNX's Gradient op (ai.onnx.preview.training) is written out as the ops computing it
//    (gradient.hpp), PopART's ai.graphcore losses as the ops the Builder's losses build
//    (graphcore_losses.hpp); a model of other domains' ops only reads as importing ai.onnx opset 17;
//  - PopART's annotation attributes `__ipu_number`, `__pipeline_stage`, `__execution_phase` (and
//    `__block`) become op_node::where, and `__recompute_output_in_backward_pass` (PopART's
//    RecomputeType: 0 Undefined, 1 Checkpoint, as Builder::checkpointOutput writes, 2 Recompute, as
//    Builder::recomputeOutputInBackwardPass writes) becomes annotation::checkpoint or
//    annotation::recompute; Recomputed (3), which PopART gives only the clones its own backward
//    pass makes, is refused;
//  - a subgraph body (If branches, Loop / Scan bodies) lists its formal inputs, then the values it
//    reads from enclosing graphs ("captures"). The op carrying the body takes those same values as
//    extra trailing inputs, and its INT attribute `__captures` says how many there are, so kernels
//    bind a body's inputs positionally: formal values, then the op's trailing inputs.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/captures.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/onnx/attributes.hpp"
#include "ipu/onnx/checker.hpp"
#include "ipu/onnx/external_data.hpp"
#include "ipu/onnx/fold.hpp"
#include "ipu/onnx/gradient.hpp"
#include "ipu/onnx/graphcore_losses.hpp"
#include "ipu/onnx/graphcore_ops.hpp"
#include "ipu/onnx/normalize.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/onnx/proto_edit.hpp"
#include "ipu/onnx/sequences.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/onnx/types.hpp"
#include "ipu/onnx/unsupported.hpp"
#include "ipu/onnx/upgrade.hpp"
#include "ipu/onnx/value_dependence.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/ops/infer.hpp"

namespace ipu::onnx {

struct import_options {
  /// Input name -> dimensions, fixing dynamic dimensions (PopART's inputShapeInfo, PopRT's
  /// --input_shape). A symbolic dimension fixed here is fixed wherever else it appears.
  std::map<std::string, std::vector<std::int64_t>, std::less<>> input_shapes;
  /// Sequence inputs: name -> the shape of each element, in order. Sequences are lowered to
  /// tensors at import (sequences.hpp), so a sequence input of N elements becomes the tensor inputs
  /// 'name[0]' ... 'name[N-1]', and its length is fixed here like a dynamic dimension.
  sequence_input_shapes sequence_inputs;
  /// Optional inputs given no value: they are no inputs of the imported graph, and
  /// OptionalHasElement on them is false. Optional inputs not listed here are present.
  std::set<std::string, std::less<>> absent_inputs;
  /// Inputs fixed to a value at import: each becomes a constant of the model and is no input of
  /// the imported graph, so what its value decides (an If's branch, a Loop's trip count, a
  /// sequence position, a Range's length; value_dependence.hpp) is settled. The value's type and
  /// shape must be those the model declares.
  std::map<std::string, host_tensor, std::less<>> input_values;
  /// Where external data files are looked up; by default the model file's directory.
  std::filesystem::path base_dir;
  /// Refuse models using ops that `registry` does not implement, listing all of them.
  bool check_supported = true;
  /// The ops that count as implemented; nullptr means ipu::default_op_registry().
  const op_registry* registry = nullptr;
  /// The most bytes a model may hold, its serialized form and its external data together. Checked
  /// before the model is parsed (from a file or bytes) and before external data is mapped, so a
  /// hostile model cannot make the importer allocate or map more. Raise it for bigger models.
  std::uint64_t max_model_bytes = std::uint64_t{8} << 30;
  /// The most bytes any one tensor of the imported graph (or of its If/Loop bodies) may hold, from
  /// the shapes the library inferred. Checked before anything is allocated for the tensor, so a
  /// small model declaring a huge tensor (ConstantOfShape, Expand, Tile, Range...) is an error
  /// naming it instead of an out-of-memory kill at run time. Raise it for bigger models.
  std::uint64_t max_tensor_bytes = std::uint64_t{4} << 30;
};

/// Attribute names carrying annotations and subgraph captures (see the file comment).
inline constexpr std::string_view attr_ipu = "__ipu_number";
inline constexpr std::string_view attr_stage = "__pipeline_stage";
inline constexpr std::string_view attr_phase = "__execution_phase";
inline constexpr std::string_view attr_block = "__block";
inline constexpr std::string_view attr_captures = "__captures";
inline constexpr std::string_view attr_recompute = "__recompute_output_in_backward_pass";

/// The marks PopART's RecomputeType gives a model's op.
enum class recompute_mark : std::uint8_t { undefined, checkpoint, recompute };

/// PopART's RecomputeType value in `__recompute_output_in_backward_pass`: 0 Undefined, 1 Checkpoint
/// (annotation::checkpoint), 2 Recompute (annotation::recompute). 3 Recomputed marks the copy of a
/// Recompute op that PopART's explicit recomputation puts in its backward pass, never an op of the
/// forward model that is imported here (the backward pass is built from it), so it is refused.
inline recompute_mark recompute_type(const ::onnx::AttributeProto& a, const std::string& where) {
  if (a.type() != ::onnx::AttributeProto::INT)
    throw error(error_category::onnx, "attribute " + std::string(attr_recompute) + " is not an INT", where,
                "PopART writes it as an INT RecomputeType (1 = Checkpoint, 2 = Recompute)");
  switch (a.i()) {
    case 0: return recompute_mark::undefined;  // as if absent
    case 1: return recompute_mark::checkpoint;
    case 2: return recompute_mark::recompute;
    case 3:
      throw error(error_category::onnx,
                  std::string(attr_recompute) + " = 3 (RecomputeType::Recomputed) marks a copy PopART made for its "
                      "backward pass; a model to import is the forward pass",
                  where, "mark the original op with 2 (Recompute) and export the model before PopART transforms it");
    default:
      throw error(error_category::onnx,
                  "attribute " + std::string(attr_recompute) + " has the value " + std::to_string(a.i()) +
                      ", which is no RecomputeType",
                  where, "use 0 (Undefined), 1 (Checkpoint) or 2 (Recompute)");
  }
}

namespace detail {

inline std::string dims_text(const ::onnx::TypeProto& t) {
  if (!t.has_tensor_type() || !t.tensor_type().has_shape()) return "(no shape)";
  std::string s = "[";
  bool first = true;
  for (const auto& d : t.tensor_type().shape().dim()) {
    if (!first) s += ',';
    first = false;
    if (d.has_dim_value()) s += std::to_string(d.dim_value());
    else if (d.has_dim_param() && !d.dim_param().empty()) s += d.dim_param();
    else s += '?';
  }
  return s + ']';
}

inline std::string shape_hint(const ::onnx::GraphProto& g, const std::unordered_set<std::string>& initializers) {
  std::string s = "fix the dynamic input dimensions with import_options::input_shapes (ipu --input-shape";
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) {
      s += " " + in.name() + "=d0,d1,...";
      break;
    }
  return s + ")";
}

/// Replaces the inputs in opt.input_values by Constant nodes holding their values.
inline void bind_input_values(::onnx::GraphProto& g, const import_options& opt) {
  if (opt.input_values.empty()) return;
  std::unordered_set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::string list;  // the inputs that can be fixed, for the errors
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) list += (list.empty() ? "'" : ", '") + in.name() + "'";
  google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
  for (const auto& entry : opt.input_values) {
    const auto& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    const auto& value = entry.second;
    const std::string where = "input_values['" + name + "']";
    if (opt.input_shapes.count(name))
      throw error(error_category::usage, "input '" + name + "' is given both a shape and a value", where,
                  "a value fixes the shape too: leave it out of input_shapes (--input-shape)");
    auto it = std::find_if(g.input().begin(), g.input().end(), [&](const ::onnx::ValueInfoProto& v) { return v.name() == name; });
    if (it == g.input().end() || initializers.count(name))
      throw error(error_category::usage, "'" + name + "' is not an input of the model", where,
                  "the model's inputs are " + (list.empty() ? std::string("none") : list));
    if (!it->type().has_tensor_type())
      throw error(error_category::usage, "input '" + name + "' is a sequence or an optional, not a tensor", where,
                  "give a sequence's element shapes (sequence_inputs, --sequence-input) and its elements as inputs");
    const auto& declared = it->type().tensor_type();
    const auto info = tensor_info(value.info());
    if (declared.elem_type() != to_onnx_type(info.type))
      throw error(error_category::usage,
                  "the value is " + to_string(info) + " but the model declares the element type " +
                      std::string(::onnx::TensorProto_DataType_Name(declared.elem_type())),
                  where, "give a value of the declared type");
    if (declared.has_shape()) {
      const auto& dims = declared.shape().dim();
      bool same = static_cast<std::size_t>(dims.size()) == info.shape.rank();
      for (int i = 0; same && i < dims.size(); ++i)
        same = !dims[i].has_dim_value() || dims[i].dim_value() == info.shape[static_cast<std::size_t>(i)];
      if (!same)
        throw error(error_category::usage, "the value is " + to_string(info) + " but the model declares " + dims_text(it->type()),
                    where, "give a value of the declared shape");
    }
    if (info.num_bytes() > opt.max_tensor_bytes)
      throw error(error_category::usage,
                  "the value holds " + std::to_string(info.num_bytes()) + " bytes, over max_tensor_bytes (" +
                      std::to_string(opt.max_tensor_bytes) + ")",
                  where, "raise max_tensor_bytes (--max-tensor-bytes)");
    *nodes.Add() = constant_node("input value " + name, name, to_tensor_proto(value, name));
  }
  google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto> inputs;
  for (auto& in : *g.mutable_input())
    if (!opt.input_values.count(in.name())) *inputs.Add() = std::move(in);
  g.mutable_input()->Swap(&inputs);
  for (auto& n : *g.mutable_node()) *nodes.Add() = std::move(n);
  g.mutable_node()->Swap(&nodes);
}

/// `e` naming the inputs of `g` that its tensor is computed from and that import_options::
/// input_values could fix: integer and bool tensors, whose values constant folding evaluates.
inline value_dependent_error with_dependent_inputs(const value_dependent_error& e, const ::onnx::GraphProto& g) {
  std::vector<std::string> inputs;
  std::string list;
  for (auto& name : inputs_computing(g, e.tensor())) {
    auto it = std::find_if(g.input().begin(), g.input().end(), [&](const ::onnx::ValueInfoProto& v) { return v.name() == name; });
    if (!it->type().has_tensor_type() || !is_int_type(it->type().tensor_type().elem_type())) continue;
    list += (list.empty() ? "'" : ", '") + name + "'";
    inputs.push_back(std::move(name));
  }
  if (inputs.empty()) return e;
  return value_dependent_error(e.tensor(), std::move(inputs), e.category(),
                               e.message() + ", from the value" + (inputs.size() > 1 ? "s of inputs " : " of input ") + list,
                               e.location(),
                               "import the model for given values: import_options::input_values (ipu --input-value "
                               "NAME=FILE; ipu run fixes them from its inputs)");
}

/// Applies the input-shape map to the main graph and checks that every input shape is static.
inline void apply_input_shapes(::onnx::GraphProto& g, const import_options& opt) {
  std::unordered_set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::string> names;
  for (const auto& in : g.input())
    if (!initializers.count(in.name())) names.push_back(in.name());

  std::map<std::string, std::int64_t> params;  // symbolic dimension -> value
  for (const auto& entry : opt.input_shapes) {
    const auto& name = entry.first;  // not a structured binding: clang 14 cannot capture one
    const auto& dims = entry.second;
    auto it = std::find_if(g.mutable_input()->begin(), g.mutable_input()->end(),
                           [&](const ::onnx::ValueInfoProto& v) { return v.name() == name; });
    if (it == g.mutable_input()->end() || initializers.count(name)) {
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "'" : ", '") + n + "'";
      throw error(error_category::usage, "input_shapes names '" + name + "', which is not an input of the model",
                  "graph '" + g.name() + "'", "the model's inputs are " + (list.empty() ? std::string("none") : list));
    }
    for (auto d : dims)
      if (d < 0)
        throw error(error_category::usage, "input_shapes gives '" + name + "' the negative dimension " + std::to_string(d),
                    "input '" + name + "'", "give every dimension as a non-negative size");
    if (!it->type().has_tensor_type())
      throw error(error_category::onnx, "input '" + name + "' is not a tensor", "graph '" + g.name() + "'");
    auto* tt = it->mutable_type()->mutable_tensor_type();
    if (tt->has_shape()) {
      const auto& old = tt->shape();
      if (static_cast<std::size_t>(old.dim_size()) != dims.size())
        throw error(error_category::usage,
                    "input_shapes gives '" + name + "' rank " + std::to_string(dims.size()) + " but the model declares " +
                        dims_text(it->type()),
                    "input '" + name + "'", "give one size per dimension");
      for (int i = 0; i < old.dim_size(); ++i) {
        const auto& d = old.dim(i);
        const auto want = dims[static_cast<std::size_t>(i)];
        if (d.has_dim_value() && d.dim_value() != want)
          throw error(error_category::usage,
                      "input_shapes gives '" + name + "' dimension " + std::to_string(i) + " = " + std::to_string(want) +
                          " but the model fixes it to " + std::to_string(d.dim_value()),
                      "input '" + name + "'", "only dynamic dimensions can be set; the model declares " + dims_text(it->type()));
        if (d.has_dim_param() && !d.dim_param().empty()) {
          auto [p, fresh] = params.emplace(d.dim_param(), want);
          if (!fresh && p->second != want)
            throw error(error_category::usage,
                        "input_shapes sets dimension '" + d.dim_param() + "' to both " + std::to_string(p->second) +
                            " and " + std::to_string(want),
                        "input '" + name + "'", "a named dimension must have one size throughout the model");
        }
      }
    }
    auto* shape = tt->mutable_shape();
    shape->clear_dim();
    for (auto d : dims) shape->add_dim()->set_dim_value(d);
  }
  // A named dimension fixed through one input is fixed everywhere it is used.
  auto substitute = [&](::onnx::ValueInfoProto& v) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) return;
    for (auto& d : *v.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim())
      if (d.has_dim_param())
        if (auto p = params.find(d.dim_param()); p != params.end()) d.set_dim_value(p->second);
  };
  if (!params.empty()) {
    for (auto& v : *g.mutable_input()) substitute(v);
    for (auto& v : *g.mutable_output()) substitute(v);
    for (auto& v : *g.mutable_value_info()) substitute(v);
  }
  for (const auto& in : g.input()) {
    if (initializers.count(in.name())) continue;
    const std::string where = "input '" + in.name() + "'";
    if (!in.type().has_tensor_type())
      throw error(error_category::onnx, "input '" + in.name() + "' is not a tensor (sequences, maps and optionals are not supported)",
                  "graph '" + g.name() + "'");
    const auto& tt = in.type().tensor_type();
    (void)data_type_from_onnx(tt.elem_type(), where);
    if (!tt.has_shape())
      throw error(error_category::shape, "input '" + in.name() + "' has no shape", "graph '" + g.name() + "'",
                  shape_hint(g, initializers));
    for (int i = 0; i < tt.shape().dim_size(); ++i)
      if (!tt.shape().dim(i).has_dim_value())
        throw error(error_category::shape,
                    "input '" + in.name() + "' has dynamic dimension " + std::to_string(i) + " in " + dims_text(in.type()),
                    "graph '" + g.name() + "'", shape_hint(g, initializers));
  }
}

/// The bytes of `g`'s tensors stored as external data, as their types and shapes declare them.
inline std::uint64_t external_data_bytes(const ::onnx::GraphProto& g) {
  std::uint64_t total = 0;
  auto add = [&](const ::onnx::TensorProto& t) {
    if (!t.has_data_location() || t.data_location() != ::onnx::TensorProto_DataLocation_EXTERNAL) return;
    const auto n = tensor_proto_info(t, tensor_label(t, "external tensor")).num_bytes();  // each bounded by 2^50
    total = n > UINT64_MAX - total ? UINT64_MAX : total + n;
  };
  for (const auto& t : g.initializer()) add(t);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) add(a.t());
      for (const auto& t : a.tensors()) add(t);
      auto sub = [&](const ::onnx::GraphProto& body) {
        const auto b = external_data_bytes(body);
        total = b > UINT64_MAX - total ? UINT64_MAX : total + b;
      };
      if (a.has_g()) sub(a.g());
      for (const auto& body : a.graphs()) sub(body);
    }
  return total;
}

/// Refuses a graph input whose declared shape (all dimensions known) holds more than
/// import_options::max_tensor_bytes, before ONNX's inference builds anything from it.
inline void check_declared_input_bytes(const ::onnx::GraphProto& g, const import_options& opt, const std::string& where) {
  for (const auto& v : g.input()) {
    if (!v.type().has_tensor_type() || !v.type().tensor_type().has_shape()) continue;
    std::uint64_t bytes = static_cast<std::uint64_t>(std::max(tensor_element_layout(v.type().tensor_type().elem_type()).second, 1));
    bool known = true;
    for (const auto& d : v.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) {
        known = false;
        continue;
      }
      if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d.dim_value()), &bytes)) bytes = UINT64_MAX;
    }
    if (known && bytes > opt.max_tensor_bytes)
      throw error(error_category::shape,
                  "input '" + single_line(v.name()) + "' is declared " + dims_text(v.type()) + ", " + size_text(bytes) +
                      ", more than the " + size_text(opt.max_tensor_bytes) + " any one tensor may hold",
                  where, "if the model is trusted and the machine has the memory, raise import_options::max_tensor_bytes "
                  "(the ipu tool's --max-tensor-bytes); otherwise fix the input shapes");
  }
}

/// Refuses a graph (or If/Loop body) with a tensor of more than import_options::max_tensor_bytes.
inline void check_tensor_bytes(const graph& g, const import_options& opt, const std::string& where) {
  for (const auto& t : g.tensors())
    if (t.info.num_bytes() > opt.max_tensor_bytes)
      throw error(error_category::shape,
                  "tensor '" + single_line(t.name) + "' is " + to_string(t.info) + ", " + size_text(t.info.num_bytes()) +
                      ", more than the " + size_text(opt.max_tensor_bytes) + " any one tensor may hold",
                  where, "if the model is trusted and the machine has the memory, raise import_options::max_tensor_bytes "
                  "(the ipu tool's --max-tensor-bytes); otherwise fix the input shapes");
  for (const auto& op : g.ops())
    for_each_subgraph(op, [&](const graph& body) {
      check_tensor_bytes(body, opt, where + ", a subgraph of " + op.type + " node '" + single_line(op.name) + "'");
    });
}

/// Refuses a model of more than import_options::max_model_bytes (`serialized` bytes plus `external`).
inline void check_model_bytes(std::uint64_t serialized, std::uint64_t external, const import_options& opt,
                              const std::string& where) {
  const auto total = external > UINT64_MAX - serialized ? UINT64_MAX : serialized + external;
  if (total > opt.max_model_bytes)
    throw error(error_category::onnx,
                "the model holds " + detail::size_text(total) + " (" + std::to_string(serialized) + " serialized, " +
                    std::to_string(external) + " of external data), over the cap of " +
                    detail::size_text(opt.max_model_bytes),
                where, "if the model is trusted and fits in memory, raise import_options::max_model_bytes (the ipu tool's "
                "--max-model-bytes)");
}

/// Checks (and maps, once per file) external-data locations before ONNX's checker touches the file
/// system: a FIFO, a device or a file outside the model's folder is refused here.
inline void check_external_locations(const ::onnx::GraphProto& g, external_data_resolver& resolver) {
  auto check = [&](const ::onnx::TensorProto& t) {
    if (t.has_data_location() && t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL)
      for (const auto& kv : t.external_data())
        if (kv.key() == "location") (void)resolver.open(kv.value(), t.name());
  };
  for (const auto& t : g.initializer()) check(t);
  for (const auto& n : g.node())
    for (const auto& a : n.attribute()) {
      if (a.has_t()) check(a.t());
      for (const auto& t : a.tensors()) check(t);
      if (a.has_g()) check_external_locations(a.g(), resolver);
      for (const auto& sub : a.graphs()) check_external_locations(sub, resolver);
    }
}

inline bool is_onnx_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

/// Whether any node of `g` or of its subgraphs is an ai.onnx op.
inline bool uses_onnx_domain(const ::onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (is_onnx_domain(n.domain())) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && uses_onnx_domain(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (uses_onnx_domain(sub)) return true;
    }
  }
  return false;
}

/// Names a graph reads but does not define (its captures), in first-use order.
inline std::vector<std::string> free_names(const ::onnx::GraphProto& g) {
  std::unordered_set<std::string> defined;
  for (const auto& v : g.input()) defined.insert(v.name());
  for (const auto& t : g.initializer()) defined.insert(t.name());
  std::vector<std::string> out;
  std::unordered_set<std::string> seen;
  auto use = [&](const std::string& n) {
    if (!n.empty() && !defined.count(n) && seen.insert(n).second) out.push_back(n);
  };
  for (const auto& n : g.node()) {
    for (const auto& i : n.input()) use(i);
    for (const auto& a : n.attribute()) {
      if (a.has_g())
        for (const auto& f : free_names(a.g())) use(f);
      for (const auto& sub : a.graphs())
        for (const auto& f : free_names(sub)) use(f);
    }
    for (const auto& o : n.output()) defined.insert(o);
  }
  for (const auto& o : g.output()) use(o.name());
  return out;
}

class graph_builder {
 public:
  graph_builder(std::shared_ptr<::onnx::ModelProto> model, external_data_resolver& resolver)
      : model_(std::move(model)), resolver_(resolver) {
    for (const auto& o : model_->opset_import())
      opsets_.push_back({is_onnx_domain(o.domain()) ? std::string() : o.domain(), o.version()});
  }

  graph build() {
    auto free = free_names(model_->graph());
    if (!free.empty())
      throw error(error_category::onnx, "tensor '" + free.front() + "' is used but never defined",
                  "graph '" + model_->graph().name() + "'", "the model is malformed; export it again");
    return build_graph(model_->graph(), nullptr, {});
  }

 private:
  struct scope {
    const scope* parent = nullptr;
    graph* g = nullptr;
    std::unordered_map<std::string, tensor_id> ids;
    const type_scope* types = nullptr;
  };

  [[nodiscard]] std::int64_t opset_of(const std::string& domain) const {
    for (const auto& o : opsets_)
      if (o.domain == domain) return o.version;
    return 0;
  }

  static tensor_id lookup(const scope& s, const std::string& name, const std::string& user) {
    auto it = s.ids.find(name);
    if (it != s.ids.end()) return it->second;
    throw error(error_category::onnx, "tensor '" + name + "' used by " + user + " is not defined",
                "graph '" + s.g->name() + "'", "the model is malformed; export it again");
  }

  /// The static type of a value from the types shape inference recorded.
  static tensor_info static_info(const type_scope& types, const std::string& name, const std::string& what,
                                 const std::string& graph_name) {
    const auto* t = types.find(name);
    const std::string where = "graph '" + graph_name + "'";
    if (!t || !t->has_tensor_type() || t->tensor_type().elem_type() == 0)
      throw error(error_category::shape, "the type of " + what + " is unknown after shape inference", where,
                  "ONNX cannot infer this op's outputs; give them in the model's value_info");
    const auto type = data_type_from_onnx(t->tensor_type().elem_type(), what);
    // import_model names the inputs a shape depends on (value_dependence.hpp).
    if (!t->tensor_type().has_shape())
      throw value_dependent_error(name, {}, error_category::shape, "the shape of " + what + " is unknown after shape inference",
                                  where, "fix the model's input shapes with import_options::input_shapes, or give the shape in value_info");
    std::vector<std::int64_t> dims;
    for (const auto& d : t->tensor_type().shape().dim()) {
      if (!d.has_dim_value())
        throw value_dependent_error(name, {}, error_category::shape,
                                    "the shape of " + what + " is dynamic after shape inference: " + dims_text(*t), where,
                                    "fix the model's input shapes with import_options::input_shapes (ipu --input-shape)");
      dims.push_back(d.dim_value());
    }
    return {type, shape(std::move(dims))};
  }

  graph build_graph(const ::onnx::GraphProto& gp, const scope* parent, const std::vector<std::string>& captures) {
    graph g(gp.name());
    g.set_opset_imports(opsets_);
    const type_scope types(gp, parent ? parent->types : nullptr);
    scope s{parent, &g, {}, &types};
    const tensor_source src{model_, &resolver_};

    std::unordered_set<std::string> initializers;
    for (const auto& t : gp.initializer()) initializers.insert(t.name());
    for (const auto& in : gp.input()) {
      if (initializers.count(in.name())) continue;  // IR < 4 lists weights as inputs too
      s.ids[in.name()] = g.add_tensor(in.name(), static_info(types, in.name(), "input '" + in.name() + "'", gp.name()),
                                      tensor_kind::input);
    }
    for (const auto& name : captures) {
      const auto outer = lookup(*parent, name, "subgraph '" + gp.name() + "'");
      s.ids[name] = g.add_tensor(name, parent->g->tensor(outer).info, tensor_kind::input);
    }
    for (const auto& t : gp.initializer()) {
      auto c = to_constant_tensor(t, src, "initializer");
      s.ids[t.name()] = g.add_tensor(t.name(), c.info, tensor_kind::variable, std::move(c.data));
    }
    for (int i = 0; i < gp.node_size(); ++i) add_node(gp.node(i), i, s);
    for (const auto& o : gp.output()) g.mark_output(lookup(s, o.name(), "the graph outputs"));
    validate(g);
    check_shape_rules(g, "graph '" + gp.name() + "'");
    return g;
  }

  void add_constant(const ::onnx::NodeProto& n, const std::string& label, scope& s) {
    const tensor_source src{model_, &resolver_};
    if (n.output_size() != 1 || n.attribute_size() != 1)
      throw error(error_category::onnx, "a Constant node needs one output and one value attribute", label);
    const auto& a = n.attribute(0);
    constant_tensor c;
    const auto& name = a.name();
    if (name == "value") {
      c = to_constant_tensor(a.t(), src, "Constant value");
    } else if (name == "value_float") {
      // Info and data are set one at a time: a braced temporary whose data may throw while its
      // shape is built makes GCC 12 report the shape as maybe-uninitialized at -O2 and above.
      const float f = a.f();
      c.info = {data_type::F32, {}};
      c.data = byte_buffer::from_values(std::span(&f, 1));
    } else if (name == "value_floats") {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      c.info = {data_type::F32, shape{static_cast<std::int64_t>(v.size())}};
      c.data = byte_buffer::from_values(std::span<const float>(v));
    } else if (name == "value_int") {
      const std::int64_t x = a.i();
      c.info = {data_type::S64, {}};
      c.data = byte_buffer::from_values(std::span(&x, 1));
    } else if (name == "value_ints") {
      std::vector<std::int64_t> v(a.ints().begin(), a.ints().end());
      c.info = {data_type::S64, shape{static_cast<std::int64_t>(v.size())}};
      c.data = byte_buffer::from_values(std::span<const std::int64_t>(v));
    } else if (name == "value_string" || name == "value_strings") {
      const bool one = name == "value_string";
      auto held = std::make_shared<host_tensor>(
          tensor_info{data_type::STRING, one ? shape{} : shape{static_cast<std::int64_t>(a.strings_size())}});
      if (one) held->set_string(0, a.s());
      for (int i = 0; !one && i < a.strings_size(); ++i) held->set_string(static_cast<std::size_t>(i), a.strings(i));
      c.info = held->info();
      c.data = byte_buffer::share(held, held->data(), held->bytes().size());
    } else {
      throw error(error_category::onnx, "Constant attribute '" + name + "' is not supported", label,
                  "sparse constants have no ipu equivalent: give the value as a dense tensor");
    }
    s.ids[n.output(0)] = s.g->add_tensor(n.output(0), c.info, tensor_kind::constant, std::move(c.data));
  }

  void add_node(const ::onnx::NodeProto& n, int index, scope& s) {
    const std::string label = "node " + node_label(n, index);
    const std::string domain = is_onnx_domain(n.domain()) ? std::string() : n.domain();
    if (domain.empty() && n.op_type() == "Constant") return add_constant(n, label, s);
    if (domain == op_families::training_domain && n.op_type() == "Gradient") return add_gradient(n, label, s);

    op_node op;
    op.type = n.op_type();
    op.domain = domain;
    op.opset = opset_of(domain);
    op.name = n.name();
    for (const auto& in : n.input()) op.inputs.push_back(in.empty() ? no_tensor : lookup(s, in, label));

    // Values the node's subgraphs read from enclosing graphs become extra inputs (file comment).
    std::vector<std::string> captures;
    for (const auto& a : n.attribute()) {
      auto add = [&](const ::onnx::GraphProto& g) {
        for (auto& f : free_names(g))
          if (std::find(captures.begin(), captures.end(), f) == captures.end()) captures.push_back(std::move(f));
      };
      if (a.has_g()) add(a.g());
      for (const auto& sub : a.graphs()) add(sub);
    }
    const tensor_source src{model_, &resolver_};
    auto import_graph = [&](const ::onnx::GraphProto& body) { return build_graph(body, &s, captures); };
    for (const auto& a : n.attribute()) {
      const auto& name = a.name();
      if (name == attr_ipu) op.where.ipu = a.i();
      else if (name == attr_stage) op.where.stage = a.i();
      else if (name == attr_phase) op.where.phase = a.i();
      else if (name == attr_block) op.where.block = a.s();
      else if (name == attr_recompute) {
        const auto r = recompute_type(a, label);
        op.where.checkpoint = r == recompute_mark::checkpoint;
        op.where.recompute = r == recompute_mark::recompute;
      }
      else op.attributes.push_back(from_attribute_proto(a, src, import_graph, label));
    }
    if (!captures.empty()) {
      for (const auto& c : captures) op.inputs.push_back(lookup(s, c, label));
      op.attributes.push_back({std::string(attr_captures), static_cast<std::int64_t>(captures.size())});
    }
    for (int i = 0; i < n.output_size(); ++i) {
      const auto& out = n.output(i);
      const std::string what = "tensor '" + out + "' (output " + std::to_string(i) + " of " + label + ")";
      s.ids[out] = s.g->add_tensor(out, static_info(*s.types, out, what, s.g->name()));
      op.outputs.push_back(s.ids[out]);
    }
    s.g->add_op(std::move(op));
  }

  /// Gradient (ai.onnx.preview.training) becomes the ops computing its outputs (gradient.hpp). Only
  /// its common form is expanded: its inputs are the very tensors xs and zs name (ONNX also allows
  /// other values, which would mean recomputing y from them), and y is computed before it.
  void add_gradient(const ::onnx::NodeProto& n, const std::string& label, scope& s) {
    std::vector<std::string> xs, zs;
    std::string y;
    for (const auto& a : n.attribute()) {
      if (a.name() == "xs") xs.assign(a.strings().begin(), a.strings().end());
      else if (a.name() == "zs") zs.assign(a.strings().begin(), a.strings().end());
      else if (a.name() == "y") y = a.s();
    }
    if (xs.empty() || y.empty())
      throw error(error_category::onnx, "a Gradient node needs the attributes xs and y", label,
                  "name the tensors to differentiate (xs) and the tensor differentiated (y)");
    if (static_cast<std::size_t>(n.input_size()) != xs.size() + zs.size())
      throw error(error_category::onnx,
                  "Gradient has " + std::to_string(n.input_size()) + " inputs for " + std::to_string(xs.size()) +
                      " xs and " + std::to_string(zs.size()) + " zs",
                  label, "give one input per name of xs, then of zs");
    for (int i = 0; i < n.input_size(); ++i) {
      const auto& named = static_cast<std::size_t>(i) < xs.size() ? xs[static_cast<std::size_t>(i)]
                                                                  : zs[static_cast<std::size_t>(i) - xs.size()];
      if (n.input(i) != named)
        throw error(error_category::onnx,
                    "Gradient input #" + std::to_string(i) + " is '" + n.input(i) + "', not '" + named +
                        "': the gradient at values other than the graph's own is not supported",
                    label, "feed the Gradient node the tensors its xs and zs name");
    }
    if (static_cast<std::size_t>(n.output_size()) > xs.size())
      throw error(error_category::onnx,
                  "Gradient has " + std::to_string(n.output_size()) + " outputs for " + std::to_string(xs.size()) + " xs",
                  label, "give at most one output per name of xs");
    const auto y_at = s.ids.find(y);
    if (y_at == s.ids.end())
      throw error(error_category::onnx, "Gradient's y '" + y + "' is not computed before the Gradient node", label,
                  "place the Gradient node after the node computing y, in the same graph");
    std::vector<tensor_id> x_ids;
    for (const auto& x : xs) x_ids.push_back(lookup(s, x, label));
    const auto grads = add_onnx_gradient(*s.g, y_at->second, x_ids, label);
    for (int i = 0; i < n.output_size(); ++i) {
      const auto& out = n.output(i);
      if (out.empty()) continue;  // that gradient is not wanted
      const auto i_u = static_cast<std::size_t>(i);
      const auto info = s.g->tensor(x_ids[i_u]).info;
      if (grads[i_u] == no_tensor) {  // y does not depend on this x
        s.ids[out] = s.g->add_tensor(out, info, tensor_kind::constant,
                                     byte_buffer(std::vector<std::byte>(info.num_bytes(), std::byte{0})));
        continue;
      }
      // An Identity gives the gradient the output's name.
      op_node id;
      id.type = "Identity";
      id.name = (n.name().empty() ? std::string("Gradient") : n.name()) + "/" + out;
      id.inputs = {grads[i_u]};
      s.ids[out] = s.g->add_tensor(out, info);
      id.outputs = {s.ids[out]};
      s.g->add_op(std::move(id));
    }
  }

  std::shared_ptr<::onnx::ModelProto> model_;
  external_data_resolver& resolver_;
  std::vector<opset_import> opsets_;
};

}  // namespace detail

namespace detail {

inline graph import_in_place(std::shared_ptr<::onnx::ModelProto> model, const import_options& options) {
  auto& m = *model;
  if (!m.has_graph() || m.ir_version() <= 0)
    throw error(error_category::onnx, "the data parsed, but it holds no ONNX model (no IR version or graph)", {},
                "the file is truncated or is not an ONNX model");
  if (options.check_supported) check_supported_ops(m, options.registry ? *options.registry : default_op_registry());

  // A model of other domains' ops only (ONNX's optimizer tests import just ai.onnx.preview.training)
  // has no ai.onnx op to normalise: it is read as importing the canonical opset.
  if (m.ir_version() >= 3 && m.opset_import_size() > 0 && detail::onnx_opset(m) == 0 &&
      !detail::uses_onnx_domain(m.graph())) {
    auto* o = m.add_opset_import();
    o->set_domain("");
    o->set_version(canonical_opset);
  }
  auto version = detail::onnx_opset(m);
  // Opsets 1-6 are first upgraded to the oldest the normaliser reads, by ONNX's converter.
  if (m.ir_version() >= 3 && version >= 1 && version < oldest_opset) {
    check_model(m, options.base_dir, "model as given, before upgrading its opset");
    upgrade_opset(m, version, oldest_opset);
    version = detail::onnx_opset(m);
  }
  if (m.ir_version() >= 3 && (version < oldest_opset || version > canonical_opset))
    throw error(error_category::onnx,
                version == 0 ? std::string("the model does not import the ai.onnx opset")
                             : "the model uses ai.onnx opset " + std::to_string(version) + "; opsets 1 to " +
                                   std::to_string(canonical_opset) + " are supported",
                "model graph '" + m.graph().name() + "'", "re-export the model at an opset from 1 to 17");
  detail::bind_input_values(*m.mutable_graph(), options);
  detail::bind_structured_inputs(m, options.sequence_inputs, options.absent_inputs);
  detail::apply_input_shapes(*m.mutable_graph(), options);
  detail::check_declared_input_bytes(m.graph(), options, "model graph '" + detail::single_line(m.graph().name()) + "'");
  detail::check_model_bytes(m.ByteSizeLong(), detail::external_data_bytes(m.graph()), options,
                            "model graph '" + m.graph().name() + "'");

  external_data_resolver resolver = options.base_dir.empty() ? external_data_resolver()
                                                             : external_data_resolver(options.base_dir);
  detail::check_external_locations(m.graph(), resolver);
  check_model(m, options.base_dir, "model as given");
  infer_shapes_with_graphcore_ops(m, "opset " + std::to_string(version));
  normalize_model(m);
  if (detail::has_graphcore_losses(m.graph())) {
    infer_shapes(m, "opset 17, typing the inputs of the ai.graphcore losses");
    write_out_graphcore_losses(m);
  }
  if (detail::uses_sequences(m)) {
    infer_shapes(m, "opset 17, before lowering sequences and optionals");
    lower_sequences(m);
    infer_shapes(m, "opset 17, after lowering sequences and optionals");  // types the new outputs
  }
  check_model(m, options.base_dir, "after normalising to opset 17");
  // Folding and inference feed each other; each round folds at least one more node or stops.
  for (int round = 0;; ++round) {
    infer_shapes(m, round == 0 ? "opset 17" : "after constant folding");
    if (fold_constants(m) == 0) break;
  }
  auto g = detail::graph_builder(std::move(model), resolver).build();
  detail::check_tensor_bytes(g, options, "model graph '" + detail::single_line(g.name()) + "'");
  return g;
}

}  // namespace detail

/// Imports a parsed model. The model is rewritten in place (normalised, shapes inferred, constants
/// folded) and kept alive by the returned graph's weights, which share its bytes.
inline graph import_model(std::shared_ptr<::onnx::ModelProto> model, const import_options& options = {}) {
  const auto kept = model;  // the model as far as it got, to trace a value_dependent_error back
  try {
    return detail::import_in_place(std::move(model), options);
  } catch (const value_dependent_error& e) {
    if (!e.inputs().empty()) throw;
    throw detail::with_dependent_inputs(e, kept->graph());
  }
}

/// Imports `model` for the values a run will give its inputs (`values`, by name), fixing an input
/// to its value (import_options::input_values) only when the importer reports that a shape or a
/// sequence's structure depends on it; `bound`, when given, receives the names fixed. The imported
/// graph has no such input: a run with other values must import again.
inline graph import_model_given_inputs(const ::onnx::ModelProto& model, import_options options,
                                       const std::map<std::string, host_tensor, std::less<>>& values,
                                       std::vector<std::string>* bound = nullptr) {
  for (;;) {  // each round fixes at least one more input, or ends
    try {
      auto g = import_model(std::make_shared<::onnx::ModelProto>(model), options);
      if (bound) {
        bound->clear();
        for (const auto& entry : options.input_values) bound->push_back(entry.first);
      }
      return g;
    } catch (const value_dependent_error& e) {
      bool more = false;
      for (const auto& name : e.inputs())
        if (auto it = values.find(name); it != values.end() && !options.input_values.count(name)) {
          options.input_values.emplace(name, it->second);
          more = true;
        }
      if (!more) throw;
    }
  }
}

/// Imports a model from serialized bytes. External data needs import_options::base_dir.
inline graph load_model_from_bytes(std::string_view bytes, const import_options& options = {}) {
  detail::check_model_bytes(bytes.size(), 0, options, "model bytes");
  auto model = std::make_shared<::onnx::ModelProto>();
  parse_proto(*model, bytes, "ONNX model", "model bytes");
  return import_model(std::move(model), options);
}

namespace detail {

/// Reads the model file at `path` and hands it to `import` with options whose base_dir defaults to
/// the file's directory; errors name the file.
template <class Import>
graph import_file(const std::filesystem::path& path, const import_options& options, Import import) {
  auto located = [&](const error& e) { return path.string() + (e.location().empty() ? "" : ": " + e.location()); };
  try {
    std::error_code ec;
    if (const auto size = std::filesystem::file_size(path, ec); !ec) check_model_bytes(size, 0, options, path.string());
    auto model = std::make_shared<::onnx::ModelProto>();
    read_proto_file(*model, path, "ONNX model");
    import_options opt = options;
    if (opt.base_dir.empty()) {
      opt.base_dir = path.parent_path();
      if (opt.base_dir.empty()) opt.base_dir = ".";
    }
    return import(std::move(model), opt);
  } catch (const value_dependent_error& e) {
    if (e.location().find(path.string()) != std::string::npos) throw;
    throw value_dependent_error(e.tensor(), e.inputs(), e.category(), e.message(), located(e), e.hint());
  } catch (const error& e) {
    if (e.location().find(path.string()) != std::string::npos) throw;
    throw error(e.category(), e.message(), located(e), e.hint());
  }
}

}  // namespace detail

/// Imports a model file; external data is looked up next to it unless options.base_dir says else.
inline graph load_model(const std::filesystem::path& path, const import_options& options = {}) {
  return detail::import_file(path, options, [](std::shared_ptr<::onnx::ModelProto> m, const import_options& o) {
    return import_model(std::move(m), o);
  });
}

/// import_model_given_inputs for a model file.
inline graph load_model_given_inputs(const std::filesystem::path& path, const import_options& options,
                                     const std::map<std::string, host_tensor, std::less<>>& values,
                                     std::vector<std::string>* bound = nullptr) {
  return detail::import_file(path, options, [&](std::shared_ptr<::onnx::ModelProto> m, const import_options& o) {
    return import_model_given_inputs(*m, o, values, bound);
  });
}

}  // namespace ipu::onnx
