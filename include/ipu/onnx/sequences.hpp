#pragma once
// Sequences and optionals, lowered to tensors at import.
//
// The library plans static graphs (as Poplar compiles them): every tensor has one shape, known
// before the first step. A sequence whose length and element shapes are known when the model is
// imported is therefore a list of tensors, and an optional whose presence is known is either its
// value or nothing. The importer resolves them symbolically and writes the model out as tensor ops:
//   SequenceEmpty / SequenceConstruct / SequenceInsert / SequenceErase   bookkeeping only
//   SequenceAt        Identity of the element        SequenceLength   a constant
//   ConcatFromSequence  Concat (Unsqueeze first for new_axis)
//   SplitToSequence   Split (Squeeze after it when keepdims = 0)
//   SequenceMap       its body, once per element
//   Optional / OptionalHasElement / OptionalGetElement   the value, a constant, the value
//   Identity, and If with a constant condition, pass sequences and optionals through;
//   Loop carrying a sequence (or reading one) is unrolled when its trip count is a constant.
// Positions (SequenceAt, SequenceInsert, SequenceErase, split sizes) must be constants. What
// depends on run-time values (a sequence built by a Loop of run-time trip count, an If of run-time
// condition returning a sequence) throws a value_dependent_error (value_dependence.hpp): the model
// is then imported for given values of the inputs it depends on (import_options::input_values).
//
// At the model's boundary (import_options): a sequence input 'x' given N element shapes becomes
// the tensor inputs 'x[0]' ... 'x[N-1]', in place of 'x'; an optional input is its value when
// present (a tensor input of the same name, or a sequence as above) and no input when listed as
// absent. A sequence output 'y' of N elements becomes the outputs 'y[0]' ... 'y[N-1]'; an optional
// output is its value, or no output when it is empty.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/fold.hpp"
#include "ipu/onnx/proto_edit.hpp"
#include "ipu/onnx/value_dependence.hpp"

namespace ipu::onnx {

/// Sequence inputs: name -> the shape of each element, in order.
using sequence_input_shapes = std::map<std::string, std::vector<std::vector<std::int64_t>>, std::less<>>;

/// The ops the importer lowers to tensor ops (above) instead of running them.
inline bool is_lowered_sequence_op(std::string_view type) {
  for (std::string_view t : {"SequenceEmpty", "SequenceConstruct", "SequenceInsert", "SequenceErase", "SequenceAt",
                             "SequenceLength", "ConcatFromSequence", "SplitToSequence", "SequenceMap", "Optional",
                             "OptionalHasElement", "OptionalGetElement"})
    if (type == t) return true;
  return false;
}

/// The most elements a lowered sequence may have, and the most iterations an unrolled Loop may
/// run: each becomes tensors and nodes of the imported graph.
inline constexpr std::int64_t max_sequence_elements = 1 << 16;
/// The most nodes lowering may write, so that nested maps and loops of a hostile model cannot
/// multiply into an out-of-memory kill.
inline constexpr std::size_t max_lowered_nodes = std::size_t{1} << 20;

/// Name of element `i` of the sequence value `name` at the model's boundary.
inline std::string sequence_element_name(std::string_view name, std::size_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

namespace detail {

inline bool is_structured(const ::onnx::TypeProto& t) { return t.has_sequence_type() || t.has_optional_type(); }

inline bool graph_uses_lowered_ops(const ::onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if ((n.domain().empty() || n.domain() == "ai.onnx") && is_lowered_sequence_op(n.op_type())) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && graph_uses_lowered_ops(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (graph_uses_lowered_ops(sub)) return true;
    }
  }
  return false;
}

/// Whether the model needs lowering: lowered ops anywhere, or sequences / optionals at its boundary.
inline bool uses_sequences(const ::onnx::ModelProto& m) {
  for (const auto& v : m.graph().input())
    if (is_structured(v.type())) return true;
  for (const auto& v : m.graph().output())
    if (is_structured(v.type())) return true;
  return graph_uses_lowered_ops(m.graph());
}

inline std::string dims_string(const std::vector<std::int64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

/// A tensor input `name` of element type `elem` and shape `dims`, checked against the shape the
/// model declares for it (`declared`, when it has one).
inline ::onnx::ValueInfoProto bound_tensor_input(const std::string& name, const ::onnx::TypeProto_Tensor& declared,
                                                 const std::vector<std::int64_t>& dims, const std::string& where) {
  for (auto d : dims)
    if (d < 0)
      throw error(error_category::usage, "the element shape " + dims_string(dims) + " has a negative dimension", where,
                  "give every dimension as a non-negative size");
  if (declared.has_shape()) {
    const auto& s = declared.shape();
    if (static_cast<std::size_t>(s.dim_size()) != dims.size())
      throw error(error_category::usage,
                  "the element shape " + dims_string(dims) + " has rank " + std::to_string(dims.size()) +
                      " but the model declares rank " + std::to_string(s.dim_size()),
                  where, "give each element the rank the model declares");
    for (int i = 0; i < s.dim_size(); ++i)
      if (s.dim(i).has_dim_value() && s.dim(i).dim_value() != dims[static_cast<std::size_t>(i)])
        throw error(error_category::usage,
                    "the element shape " + dims_string(dims) + " has dimension " + std::to_string(i) + " = " +
                        std::to_string(dims[static_cast<std::size_t>(i)]) + " but the model fixes it to " +
                        std::to_string(s.dim(i).dim_value()),
                    where, "give each element the shape the model declares");
  }
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* tt = v.mutable_type()->mutable_tensor_type();
  tt->set_elem_type(declared.elem_type());
  auto* shape = tt->mutable_shape();
  for (auto d : dims) shape->add_dim()->set_dim_value(d);
  return v;
}

inline void rename_free_uses(::onnx::GraphProto& g, const std::function<std::string(const std::string&)>& rename);

/// Renames the values `g`'s nodes read and its outputs name; in subgraphs, the values they read
/// from outside themselves.
inline void rename_uses(::onnx::GraphProto& g, const std::function<std::string(const std::string&)>& rename) {
  for (auto& n : *g.mutable_node()) {
    for (auto& in : *n.mutable_input())
      if (!in.empty()) in = rename(in);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) rename_free_uses(*a.mutable_g(), rename);
      for (auto& sub : *a.mutable_graphs()) rename_free_uses(sub, rename);
    }
  }
  for (auto& o : *g.mutable_output()) o.set_name(rename(o.name()));
}

/// Renames the uses of outer values inside a subgraph (names it defines itself hide them).
inline void rename_free_uses(::onnx::GraphProto& g, const std::function<std::string(const std::string&)>& rename) {
  std::unordered_map<std::string, bool> own;
  for (const auto& v : g.input()) own[v.name()] = true;
  for (const auto& t : g.initializer()) own[t.name()] = true;
  for (const auto& n : g.node())
    for (const auto& o : n.output()) own[o] = true;
  rename_uses(g, [&](const std::string& name) { return own.count(name) ? name : rename(name); });
}

/// Replaces the main graph's sequence and optional inputs by tensor inputs (file comment): a
/// SequenceConstruct (or SequenceEmpty) and an Optional node rebuild the value, which lowering then
/// resolves. Every name in `shapes` and `absent` must be such an input.
inline void bind_structured_inputs(::onnx::ModelProto& m, const sequence_input_shapes& shapes,
                                   const std::set<std::string, std::less<>>& absent) {
  auto& g = *m.mutable_graph();
  const std::string graph_where = "graph '" + g.name() + "'";
  std::set<std::string, std::less<>> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::string> structured;
  for (const auto& in : g.input())
    if (!initializers.count(in.name()) && is_structured(in.type())) structured.push_back(in.name());
  auto refuse_option = [&](const std::string& name, std::string_view option, std::string_view what) {
    std::string list;
    for (const auto& n : structured) list += (list.empty() ? "'" : ", '") + n + "'";
    throw error(error_category::usage,
                std::string(option) + " names '" + name + "', which is not " + std::string(what) + " of the model",
                graph_where, "the model's sequence and optional inputs are " + (list.empty() ? std::string("none") : list));
  };
  auto find_input = [&](const std::string& name) -> const ::onnx::ValueInfoProto* {
    for (const auto& in : g.input())
      if (in.name() == name && !initializers.count(name)) return &in;
    return nullptr;
  };
  for (const auto& [name, elems] : shapes) {
    const auto* in = find_input(name);
    const bool ok = in && (in->type().has_sequence_type() ||
                           (in->type().has_optional_type() && in->type().optional_type().elem_type().has_sequence_type()));
    if (!ok) refuse_option(name, "sequence_inputs", "a sequence input");
  }
  for (const auto& name : absent) {
    const auto* in = find_input(name);
    if (!in || !in->type().has_optional_type()) refuse_option(name, "absent_inputs", "an optional input");
  }
  if (structured.empty()) return;

  name_pool pool(m);
  std::vector<::onnx::ValueInfoProto> inputs;
  std::vector<::onnx::NodeProto> prologue;
  std::vector<std::pair<std::string, std::string>> renames;  // optional tensor inputs: uses -> fresh
  // Element tensors of sequence input `name`, as inputs, and the node rebuilding the sequence.
  auto bind_sequence = [&](const std::string& name, const ::onnx::TypeProto_Sequence& seq, const std::string& output) {
    const std::string where = "sequence input '" + name + "'";
    if (!seq.elem_type().has_tensor_type())
      throw error(error_category::onnx, "input '" + name + "' is a sequence of non-tensors", graph_where,
                  "only sequences of tensors are supported");
    const auto& elem = seq.elem_type().tensor_type();
    (void)data_type_from_onnx(elem.elem_type(), where);
    const auto it = shapes.find(name);
    if (it == shapes.end())
      throw error(error_category::usage, "input '" + name + "' is a sequence whose length and element shapes are not given",
                  graph_where,
                  "give them with import_options::sequence_inputs (ipu --sequence-input " + name +
                      "=D0,D1:D0,D1:..., one shape per element); the library plans static graphs, so a sequence's "
                      "length is fixed at import like a dynamic dimension");
    ::onnx::NodeProto node;
    node.set_name(pool.make(name + "/bind"));
    node.add_output(output);
    if (it->second.empty()) {
      node.set_op_type("SequenceEmpty");
      auto* a = node.add_attribute();
      a->set_name("dtype");
      a->set_type(::onnx::AttributeProto_AttributeType_INT);
      a->set_i(elem.elem_type());
    } else {
      node.set_op_type("SequenceConstruct");
      for (std::size_t i = 0; i < it->second.size(); ++i) {
        const auto element = sequence_element_name(name, i);
        if (pool.make(element) != element)
          throw error(error_category::onnx, "the name '" + element + "' for element " + std::to_string(i) +
                                                " of sequence input '" + name + "' is already used in the model",
                      graph_where, "rename the model's value '" + element + "'");
        inputs.push_back(bound_tensor_input(element, elem, it->second[i], where + ", element " + std::to_string(i)));
        node.add_input(element);
      }
    }
    prologue.push_back(std::move(node));
  };
  for (const auto& in : g.input()) {
    const auto& name = in.name();
    if (initializers.count(name) || !is_structured(in.type())) {
      inputs.push_back(in);
      continue;
    }
    if (in.type().has_sequence_type()) {
      bind_sequence(name, in.type().sequence_type(), name);
      continue;
    }
    const auto& inner = in.type().optional_type().elem_type();
    ::onnx::NodeProto opt;
    opt.set_op_type("Optional");
    opt.set_name(pool.make(name + "/bind"));
    opt.add_output(name);
    if (absent.count(name)) {
      auto* a = opt.add_attribute();
      a->set_name("type");
      a->set_type(::onnx::AttributeProto_AttributeType_TYPE_PROTO);
      *a->mutable_tp() = inner;
    } else if (inner.has_tensor_type()) {
      // The tensor keeps the input's name; the graph's uses read the Optional wrapping it.
      const auto fresh = pool.make(name + "/optional");
      renames.emplace_back(name, fresh);
      *opt.mutable_output(0) = fresh;
      opt.add_input(name);
      ::onnx::ValueInfoProto t;
      t.set_name(name);
      *t.mutable_type() = inner;
      inputs.push_back(std::move(t));
    } else if (inner.has_sequence_type()) {
      const auto seq = pool.make(name + "/sequence");
      bind_sequence(name, inner.sequence_type(), seq);
      opt.add_input(seq);
    } else {
      throw error(error_category::onnx, "input '" + name + "' is an optional of neither a tensor nor a sequence",
                  graph_where, "only optional tensors and optional sequences of tensors are supported");
    }
    prologue.push_back(std::move(opt));
  }
  if (!renames.empty()) {
    auto rename = [&](const std::string& n) {
      for (const auto& [from, to] : renames)
        if (n == from) return to;
      return n;
    };
    // A graph output naming the input itself now names the wrapped value too.
    rename_uses(g, rename);
  }
  g.clear_input();
  for (auto& v : inputs) *g.add_input() = std::move(v);
  google::protobuf::RepeatedPtrField<::onnx::NodeProto> nodes;
  for (auto& n : prologue) *nodes.Add() = std::move(n);
  for (auto& n : *g.mutable_node()) *nodes.Add() = std::move(n);
  g.mutable_node()->Swap(&nodes);
}

/// The symbolic evaluation writing sequences and optionals out as tensor ops (file comment).
class sequence_lowering {
 public:
  explicit sequence_lowering(::onnx::ModelProto& m) : m_(m), pool_(m) {}

  void run() {
    auto& g = *m_.mutable_graph();
    graph_where_ = "graph '" + g.name() + "'";
    for (const auto& t : g.initializer())
      if (auto v = decode_int(t)) ints_[t.name()] = std::move(*v);
    types_.emplace_back(g, nullptr);
    scopes_.emplace_back();
    std::vector<::onnx::NodeProto> out;
    for (const auto& n : g.node()) lower(n, out);
    // Graph outputs: tensors keep their names, sequences become one output per element.
    std::vector<::onnx::ValueInfoProto> outputs;
    for (const auto& o : g.output()) {
      const auto v = resolve(o.name());
      const std::string where = "graph output '" + o.name() + "'";
      if (v.k == value::kind::none) continue;  // an empty optional: no output
      auto emit = [&](const std::string& from, const std::string& name, std::int32_t elem) {
        if (from != name) out.push_back(identity(from, name));
        ::onnx::ValueInfoProto t;
        t.set_name(name);
        if (elem) t.mutable_type()->mutable_tensor_type()->set_elem_type(elem);
        outputs.push_back(std::move(t));
      };
      const auto* declared = &o.type();
      if (declared->has_optional_type()) declared = &declared->optional_type().elem_type();
      if (v.k == value::kind::tensor) {
        if (declared->has_sequence_type())
          throw error(error_category::onnx, "the model declares a sequence but computes a tensor", where, "fix the model");
        if (o.type().has_tensor_type() && v.tensor == o.name()) outputs.push_back(o);
        else emit(v.tensor, o.name(), declared->has_tensor_type() ? declared->tensor_type().elem_type() : 0);
        continue;
      }
      if (!declared->has_sequence_type())
        throw error(error_category::onnx, "the model declares a tensor but computes a sequence", where, "fix the model");
      const std::int32_t elem = declared->sequence_type().elem_type().has_tensor_type()
                                    ? declared->sequence_type().elem_type().tensor_type().elem_type()
                                    : 0;
      for (std::size_t i = 0; i < v.elems.size(); ++i) {
        const auto name = sequence_element_name(o.name(), i);
        if (pool_.make(name) != name)
          throw error(error_category::onnx, "the name '" + name + "' for element " + std::to_string(i) + " of " + where +
                                                " is already used in the model",
                      graph_where_, "rename the model's value '" + name + "'");
        emit(v.elems[i], name, elem);
      }
    }
    g.clear_node();
    for (auto& n : out) *g.add_node() = std::move(n);
    g.clear_output();
    for (auto& o : outputs) *g.add_output() = std::move(o);
    // Declarations of sequence and optional values are stale now; inference redoes the rest.
    google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto> kept;
    for (auto& v : *g.mutable_value_info())
      if (!is_structured(v.type())) *kept.Add() = std::move(v);
    g.mutable_value_info()->Swap(&kept);
  }

 private:
  /// A value during lowering: a tensor (by the name holding it), a sequence of tensors, or an
  /// empty optional. An optional holding a value is that value.
  struct value {
    enum class kind { tensor, sequence, none } k = kind::tensor;
    std::string tensor;
    std::vector<std::string> elems;
  };

  [[nodiscard]] value resolve(const std::string& name) const {
    for (auto s = scopes_.rbegin(); s != scopes_.rend(); ++s)
      if (auto it = s->find(name); it != s->end()) return it->second;
    return {value::kind::tensor, name, {}};
  }
  [[nodiscard]] bool is_sequence_or_none(const std::string& name) const {
    return !name.empty() && resolve(name).k != value::kind::tensor;
  }
  void bind(const std::string& name, value v) { scopes_.back()[name] = std::move(v); }

  /// The tensor `name` holds; an error naming `user` when it is a sequence or an empty optional.
  std::string tensor_of(const std::string& name, const std::string& user) const {
    const auto v = resolve(name);
    if (v.k == value::kind::sequence)
      throw error(error_category::onnx, "'" + name + "' is a sequence, but " + user + " takes a tensor there",
                  graph_where_, "fix the model");
    if (v.k == value::kind::none)
      throw error(error_category::onnx, "'" + name + "' is an empty optional, but " + user + " needs its value",
                  graph_where_, "give the optional a value (import_options::absent_inputs, ipu --absent-input, lists the inputs given none)");
    return v.tensor;
  }

  std::vector<std::string> sequence_of(const std::string& name, const std::string& user) const {
    const auto v = resolve(name);
    if (v.k != value::kind::sequence)
      throw error(error_category::onnx,
                  "'" + name + "' is " + (v.k == value::kind::none ? "an empty optional" : "a tensor") + ", but " + user +
                      " takes a sequence there",
                  graph_where_, "fix the model");
    return v.elems;
  }

  /// The value of an integer tensor known at import (initializers, Constant nodes, values this
  /// lowering computed).
  const int_tensor* known(const std::string& name) const {
    auto it = ints_.find(name);
    return it == ints_.end() ? nullptr : &it->second;
  }

  std::int64_t known_scalar(const std::string& name, const std::string& what, const std::string& user) const {
    const auto* v = known(tensor_of(name, user));
    if (!v)
      throw value_dependent_error(name, {}, error_category::onnx,
                                  what + " of " + user + " ('" + name + "') is computed at run time", graph_where_,
                                  "sequences are lowered to tensors at import, so their positions and lengths must be "
                                  "constants");
    if (v->values.size() != 1)
      throw error(error_category::onnx, what + " of " + user + " ('" + name + "') is not a scalar", graph_where_,
                  "give a scalar (or one-element) tensor");
    return v->values[0];
  }

  ::onnx::NodeProto identity(const std::string& from, const std::string& to) {
    ::onnx::NodeProto n;
    n.set_op_type("Identity");
    n.set_name(pool_.make(to + "/identity"));
    n.add_input(from);
    n.add_output(to);
    return n;
  }

  std::string constant(std::vector<std::int64_t> values, bool scalar, std::int32_t type, const std::string& hint,
                       std::vector<::onnx::NodeProto>& out) {
    int_tensor v;
    v.type = type;
    if (!scalar) v.dims = {static_cast<std::int64_t>(values.size())};
    v.values = std::move(values);
    const auto name = pool_.make(hint);
    out.push_back(constant_node(pool_.make(hint + "/constant"), name, encode_int(v)));
    ints_[name] = std::move(v);
    return name;
  }

  /// The output name a node writes: its own at the top level, a fresh one inside an inlined body
  /// (bodies are copied once per element or iteration).
  std::string output_name(const std::string& name) {
    if (scopes_.size() == 1) return name;
    auto fresh = pool_.make(name);
    bind(name, {value::kind::tensor, fresh, {}});
    return fresh;
  }

  static std::int64_t position(std::int64_t pos, std::int64_t size, bool end_ok, const std::string& user,
                               const std::string& where) {
    const std::int64_t lo = -size, hi = end_ok ? size : size - 1;
    if (pos < lo || pos > hi)
      throw error(error_category::onnx,
                  "position " + std::to_string(pos) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                      "] for a sequence of " + std::to_string(size) + " elements in " + user,
                  where, "fix the model's position");
    return pos < 0 ? pos + size : pos;
  }

  bool involves_structured(const ::onnx::NodeProto& n) const {
    for (const auto& i : n.input())
      if (is_sequence_or_none(i)) return true;
    for (const auto& o : n.output())
      if (const auto* t = types_.back().find(o); t && is_structured(*t)) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && graph_involves_structured(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (graph_involves_structured(sub)) return true;
    }
    return false;
  }
  bool graph_involves_structured(const ::onnx::GraphProto& g) const {
    if (graph_uses_lowered_ops(g)) return true;
    for (const auto& v : g.input())
      if (is_structured(v.type())) return true;
    for (const auto& v : g.output())
      if (is_structured(v.type())) return true;
    for (const auto& n : g.node()) {
      for (const auto& i : n.input())
        if (is_sequence_or_none(i)) return true;
      for (const auto& a : n.attribute()) {
        if (a.has_g() && graph_involves_structured(a.g())) return true;
        for (const auto& sub : a.graphs())
          if (graph_involves_structured(sub)) return true;
      }
    }
    return false;
  }

  void lower(const ::onnx::NodeProto& n, std::vector<::onnx::NodeProto>& out) {
    const std::string user = "node " + node_label(n);
    if (out.size() > max_lowered_nodes)
      throw error(error_category::onnx,
                  "lowering the model's sequences writes more than " + std::to_string(max_lowered_nodes) + " nodes",
                  graph_where_, "the model's sequence maps and unrolled loops are too large to lower at import");
    const bool onnx_domain = n.domain().empty() || n.domain() == "ai.onnx";
    const auto& op = n.op_type();
    if (onnx_domain && is_lowered_sequence_op(op)) return lower_sequence_op(n, user, out);
    if (onnx_domain && op == "Identity" && n.input_size() == 1 && is_sequence_or_none(n.input(0))) {
      bind(n.output(0), resolve(n.input(0)));
      return;
    }
    if (onnx_domain && (op == "If" || op == "Loop") && involves_structured(n))
      return op == "If" ? inline_if(n, user, out) : unroll_loop(n, user, out);
    if (involves_structured(n))
      throw error(error_category::onnx, user + " takes or makes a sequence or an optional", graph_where_,
                  "only the sequence ops, Identity, If with a constant condition and Loop with a constant trip count "
                  "can; the library lowers sequences to tensors at import");
    // A tensor op: its inputs read the tensors the names hold now; its subgraphs' outer reads too.
    ::onnx::NodeProto copy = n;
    for (auto& i : *copy.mutable_input())
      if (!i.empty()) i = tensor_of(i, user);
    auto rename = [&](const std::string& name) {
      const auto v = resolve(name);
      return v.k == value::kind::tensor ? v.tensor : name;
    };
    for (auto& a : *copy.mutable_attribute()) {
      if (a.has_g()) rename_free_uses(*a.mutable_g(), rename);
      for (auto& sub : *a.mutable_graphs()) rename_free_uses(sub, rename);
    }
    if (scopes_.size() > 1 && !copy.name().empty()) copy.set_name(pool_.make(copy.name()));
    for (auto& o : *copy.mutable_output())
      if (!o.empty()) o = output_name(o);
    // Constants and their copies are known, so that a loop body's condition (often an Identity
    // of its input) and positions computed from them stay known.
    if (onnx_domain && op == "Identity" && copy.output_size() == 1)
      if (const auto* v = known(copy.input(0))) ints_[copy.output(0)] = *v;
    if (onnx_domain && op == "Constant" && copy.output_size() == 1)
      for (const auto& a : copy.attribute()) {
        if (a.name() == "value" && a.has_t()) {
          if (auto v = decode_int(a.t())) ints_[copy.output(0)] = std::move(*v);
        } else if (a.name() == "value_int") {
          ints_[copy.output(0)] = {::onnx::TensorProto_DataType_INT64, {}, {a.i()}};
        }
      }
    // So are integer ops of known values (Not of OptionalHasElement, the bounds of a Slice in an
    // unrolled loop body), computed as constant folding would, and written as constants so that
    // shape inference sees them.
    if (onnx_domain && op != "Constant" && op != "Identity" && copy.output_size() == 1 && copy.input_size() > 0 &&
        std::all_of(copy.input().begin(), copy.input().end(), [&](const std::string& i) { return !i.empty() && known(i); }))
      if (auto v = folder::evaluate(copy, types_.back(), ints_); v && v->size() <= max_folded_elements) {
        copy = constant_node(copy.name(), copy.output(0), encode_int(*v));
        ints_[copy.output(0)] = std::move(*v);
      }
    out.push_back(std::move(copy));
  }

  void lower_sequence_op(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto& op = n.op_type();
    auto input = [&](int i) -> std::string { return i < n.input_size() ? n.input(i) : std::string(); };
    const std::string result = n.output_size() > 0 ? n.output(0) : std::string();
    if (result.empty()) return;  // nothing reads it
    if (op == "SequenceEmpty") return bind(result, {value::kind::sequence, {}, {}});
    if (op == "SequenceConstruct") {
      value v{value::kind::sequence, {}, {}};
      for (const auto& i : n.input()) v.elems.push_back(tensor_of(i, user));
      return bind(result, std::move(v));
    }
    if (op == "SequenceInsert") {
      auto elems = sequence_of(input(0), user);
      const auto t = tensor_of(input(1), user);
      const auto size = static_cast<std::int64_t>(elems.size());
      const auto at = input(2).empty() ? size : position(known_scalar(input(2), "the position", user), size, true, user, graph_where_);
      elems.insert(elems.begin() + at, t);
      return bind(result, {value::kind::sequence, {}, std::move(elems)});
    }
    if (op == "SequenceErase") {
      auto elems = sequence_of(input(0), user);
      const auto size = static_cast<std::int64_t>(elems.size());
      if (size == 0)
        throw error(error_category::onnx, user + " erases from an empty sequence", graph_where_, "fix the model");
      const auto at = input(1).empty() ? size - 1 : position(known_scalar(input(1), "the position", user), size, false, user, graph_where_);
      elems.erase(elems.begin() + at);
      return bind(result, {value::kind::sequence, {}, std::move(elems)});
    }
    if (op == "SequenceAt") {
      const auto elems = sequence_of(input(0), user);
      const auto at = position(known_scalar(input(1), "the position", user), static_cast<std::int64_t>(elems.size()), false,
                               user, graph_where_);
      return bind(result, {value::kind::tensor, elems[static_cast<std::size_t>(at)], {}});
    }
    if (op == "SequenceLength") {
      const auto size = static_cast<std::int64_t>(sequence_of(input(0), user).size());
      const auto name = output_name(result);
      out.push_back(constant_node(pool_.make(result + "/constant"), name,
                                  encode_int({::onnx::TensorProto_DataType_INT64, {}, {size}})));
      ints_[name] = {::onnx::TensorProto_DataType_INT64, {}, {size}};
      return;
    }
    if (op == "ConcatFromSequence") return concat_from_sequence(n, user, out);
    if (op == "SplitToSequence") return split_to_sequence(n, user, out);
    if (op == "SequenceMap") return sequence_map(n, user, out);
    if (op == "Optional") {
      if (input(0).empty()) return bind(result, {value::kind::none, {}, {}});
      return bind(result, resolve(input(0)));
    }
    if (op == "OptionalHasElement") {
      const bool has = !input(0).empty() && resolve(input(0)).k != value::kind::none;
      const auto name = output_name(result);
      out.push_back(constant_node(pool_.make(result + "/constant"), name,
                                  encode_int({::onnx::TensorProto_DataType_BOOL, {}, {has ? 1 : 0}})));
      ints_[name] = {::onnx::TensorProto_DataType_BOOL, {}, {has ? 1 : 0}};
      return;
    }
    if (op == "OptionalGetElement") {
      const auto v = resolve(input(0));
      if (v.k == value::kind::none)
        throw error(error_category::onnx, user + " reads an empty optional", graph_where_,
                    "test it with OptionalHasElement first, or give the optional a value");
      return bind(result, v);
    }
    throw error(error_category::internal, "no lowering for " + user, graph_where_, "report this");
  }

  std::vector<std::int64_t> static_dims(const std::string& tensor, const std::string& user) const {
    if (auto d = types_.back().static_shape(tensor)) return *d;
    throw error(error_category::shape, "the shape of '" + tensor + "', read by " + user + ", is not known at import",
                graph_where_, "fix the model's input shapes (import_options::input_shapes, sequence_inputs)");
  }

  void concat_from_sequence(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto elems = sequence_of(n.input(0), user);
    if (elems.empty())
      throw error(error_category::onnx, user + " concatenates an empty sequence", graph_where_,
                  "the result's shape would be unknown; give the sequence at least one element");
    const auto axis = attr_int(n, "axis", 0);
    const bool new_axis = attr_int(n, "new_axis", 0) != 0;
    ::onnx::NodeProto concat;
    concat.set_op_type("Concat");
    concat.set_name(pool_.make(n.name().empty() ? "ConcatFromSequence" : n.name()));
    for (const auto& e : elems) {
      if (!new_axis) {
        concat.add_input(e);
        continue;
      }
      const auto axes = constant({axis}, false, ::onnx::TensorProto_DataType_INT64, e + "/axes", out);
      ::onnx::NodeProto u;
      u.set_op_type("Unsqueeze");
      u.set_name(pool_.make(e + "/unsqueeze"));
      u.add_input(e);
      u.add_input(axes);
      u.add_output(pool_.make(e + "/unsqueezed"));
      concat.add_input(u.output(0));
      out.push_back(std::move(u));
    }
    set_attr(concat, "axis", axis);
    concat.add_output(output_name(n.output(0)));
    out.push_back(std::move(concat));
  }

  void split_to_sequence(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto x = tensor_of(n.input(0), user);
    const auto dims = static_dims(x, user);
    const auto rank = static_cast<std::int64_t>(dims.size());
    auto axis = attr_int(n, "axis", 0);
    if (axis < -rank || axis >= rank)
      throw error(error_category::onnx, "axis " + std::to_string(axis) + " is outside the rank " + std::to_string(rank) + " of '" + x + "' in " + user,
                  graph_where_, "fix the model's axis");
    if (axis < 0) axis += rank;
    const auto length = dims[static_cast<std::size_t>(axis)];
    if (length > max_sequence_elements)
      throw error(error_category::onnx,
                  user + " would make a sequence of " + std::to_string(length) + " elements", graph_where_,
                  "at most " + std::to_string(max_sequence_elements) + " elements are lowered at import; give a split size");
    std::vector<std::int64_t> sizes;
    bool squeeze = false;
    if (n.input_size() < 2 || n.input(1).empty()) {
      sizes.assign(static_cast<std::size_t>(length), 1);
      squeeze = attr_int(n, "keepdims", 1) == 0;
    } else {
      const auto* split = known(tensor_of(n.input(1), user));
      if (!split)
        throw value_dependent_error(n.input(1), {}, error_category::onnx, "the split sizes of " + user + " are computed at run time",
                                    graph_where_, "sequences are lowered to tensors at import, so the split sizes must be constants");
      if (split->dims.empty()) {
        const auto step = split->values.at(0);
        if (step <= 0)
          throw error(error_category::onnx, "the split size " + std::to_string(step) + " of " + user + " is not positive",
                      graph_where_, "fix the model");
        if (length / step + (length % step != 0) > max_sequence_elements)
          throw error(error_category::onnx, user + " would make more than " + std::to_string(max_sequence_elements) + " elements",
                      graph_where_, "give a larger split size");
        for (std::int64_t at = 0; at < length; at += step) sizes.push_back(std::min(step, length - at));
      } else {
        std::int64_t sum = 0;
        for (auto s : split->values) {
          if (s < 0 || __builtin_add_overflow(sum, s, &sum))
            throw error(error_category::onnx, "the split sizes of " + user + " are negative or overflow", graph_where_, "fix the model");
          sizes.push_back(s);
        }
        if (sum != length)
          throw error(error_category::onnx,
                      "the split sizes of " + user + " add up to " + std::to_string(sum) + ", not to the length " +
                          std::to_string(length) + " of axis " + std::to_string(axis),
                      graph_where_, "fix the model's split sizes");
      }
    }
    value v{value::kind::sequence, {}, {}};
    if (!sizes.empty()) {
      ::onnx::NodeProto split;
      split.set_op_type("Split");
      split.set_name(pool_.make(n.name().empty() ? "SplitToSequence" : n.name()));
      split.add_input(x);
      split.add_input(constant(sizes, false, ::onnx::TensorProto_DataType_INT64, x + "/split", out));
      set_attr(split, "axis", axis);
      for (std::size_t i = 0; i < sizes.size(); ++i) split.add_output(pool_.make(n.output(0) + "/" + std::to_string(i)));
      v.elems.assign(split.output().begin(), split.output().end());
      out.push_back(std::move(split));
    }
    if (squeeze) {
      const auto axes = constant({axis}, false, ::onnx::TensorProto_DataType_INT64, x + "/axes", out);
      for (auto& e : v.elems) {
        ::onnx::NodeProto s;
        s.set_op_type("Squeeze");
        s.set_name(pool_.make(e + "/squeeze"));
        s.add_input(e);
        s.add_input(axes);
        e = pool_.make(e + "/squeezed");
        s.add_output(e);
        out.push_back(std::move(s));
      }
    }
    bind(n.output(0), std::move(v));
  }

  /// Lowers a body's nodes with its inputs bound to `args`, in a scope of its own; returns the
  /// values of its outputs.
  std::vector<value> inline_body(const ::onnx::GraphProto& body, const std::vector<value>& args,
                                 std::vector<::onnx::NodeProto>& out) {
    if (static_cast<std::size_t>(body.input_size()) != args.size())
      throw error(error_category::onnx,
                  "the body '" + body.name() + "' has " + std::to_string(body.input_size()) + " inputs for " +
                      std::to_string(args.size()) + " values",
                  graph_where_, "fix the model");
    types_.emplace_back(body, &types_.back());
    scopes_.emplace_back();
    for (int i = 0; i < body.input_size(); ++i) bind(body.input(i).name(), args[static_cast<std::size_t>(i)]);
    for (const auto& t : body.initializer()) {
      auto c = t;
      const auto fresh = pool_.make(t.name());
      c.set_name(fresh);
      if (auto v = decode_int(c)) ints_[fresh] = std::move(*v);
      bind(t.name(), {value::kind::tensor, fresh, {}});
      out.push_back(constant_node(pool_.make(fresh + "/constant"), fresh, std::move(c)));
    }
    for (const auto& n : body.node()) lower(n, out);
    std::vector<value> results;
    for (const auto& o : body.output()) results.push_back(resolve(o.name()));
    scopes_.pop_back();
    types_.pop_back();
    return results;
  }

  void sequence_map(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto* a = find_attr(n, "body");
    if (!a || !a->has_g()) throw error(error_category::onnx, user + " has no body", graph_where_, "fix the model");
    const auto length = sequence_of(n.input(0), user).size();
    std::vector<std::vector<std::string>> results(static_cast<std::size_t>(n.output_size()));
    for (std::size_t i = 0; i < length; ++i) {
      std::vector<value> args;
      for (int j = 0; j < n.input_size(); ++j) {
        const auto v = resolve(n.input(j));
        if (v.k == value::kind::none)
          throw error(error_category::onnx, user + " reads an empty optional", graph_where_, "fix the model");
        if (v.k == value::kind::tensor) {
          args.push_back(v);
          continue;
        }
        if (v.elems.size() != length)
          throw error(error_category::onnx,
                      user + " maps sequences of " + std::to_string(length) + " and " + std::to_string(v.elems.size()) +
                          " elements",
                      graph_where_, "give every sequence input the same length");
        args.push_back({value::kind::tensor, v.elems[i], {}});
      }
      const auto r = inline_body(a->g(), args, out);
      if (r.size() != results.size())
        throw error(error_category::onnx, user + "'s body has " + std::to_string(r.size()) + " outputs for " +
                                              std::to_string(results.size()),
                    graph_where_, "fix the model");
      for (std::size_t k = 0; k < r.size(); ++k) {
        if (r[k].k != value::kind::tensor)
          throw error(error_category::onnx, user + "'s body returns a sequence or an optional", graph_where_,
                      "its outputs must be tensors");
        results[k].push_back(r[k].tensor);
      }
    }
    for (int k = 0; k < n.output_size(); ++k)
      if (!n.output(k).empty()) bind(n.output(k), {value::kind::sequence, {}, results[static_cast<std::size_t>(k)]});
  }

  void bind_outputs(const ::onnx::NodeProto& n, const std::vector<value>& values, std::vector<::onnx::NodeProto>& out) {
    for (int k = 0; k < n.output_size() && static_cast<std::size_t>(k) < values.size(); ++k) {
      const auto& name = n.output(k);
      if (name.empty()) continue;
      const auto& v = values[static_cast<std::size_t>(k)];
      // A tensor result keeps the op's output name, which later nodes and graph outputs read.
      if (v.k == value::kind::tensor && scopes_.size() == 1) out.push_back(identity(v.tensor, name));
      else bind(name, v);
    }
  }

  void inline_if(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto cond = known_scalar(n.input(0), "the condition", user);
    const auto* a = find_attr(n, cond ? "then_branch" : "else_branch");
    if (!a || !a->has_g()) throw error(error_category::onnx, user + " lacks a branch", graph_where_, "fix the model");
    bind_outputs(n, inline_body(a->g(), {}, out), out);
  }

  void unroll_loop(const ::onnx::NodeProto& n, const std::string& user, std::vector<::onnx::NodeProto>& out) {
    const auto* a = find_attr(n, "body");
    if (!a || !a->has_g()) throw error(error_category::onnx, user + " has no body", graph_where_, "fix the model");
    const auto& body = a->g();
    if (n.input_size() < 2 || n.input(0).empty())
      throw error(error_category::onnx, user + " carries a sequence but has no trip count", graph_where_,
                  "sequences are lowered to tensors at import, so such a loop needs a constant trip count");
    const auto trips = known_scalar(n.input(0), "the trip count", user);
    bool cond = n.input(1).empty() || known_scalar(n.input(1), "the condition", user) != 0;
    std::vector<value> carried;
    for (int i = 2; i < n.input_size(); ++i) carried.push_back(resolve(n.input(i)));
    const auto n_scan = static_cast<std::size_t>(std::max(0, body.output_size() - 1 - static_cast<int>(carried.size())));
    std::vector<std::vector<std::string>> scans(n_scan);
    if (trips > max_sequence_elements)
      throw error(error_category::onnx, user + " would be unrolled " + std::to_string(trips) + " times", graph_where_,
                  "loops carrying sequences are unrolled at import; at most " + std::to_string(max_sequence_elements) +
                      " iterations are");
    for (std::int64_t it = 0; it < trips && cond; ++it) {
      std::vector<value> args;
      args.push_back({value::kind::tensor,
                      constant({it}, true, ::onnx::TensorProto_DataType_INT64, n.output_size() ? n.output(0) + "/iteration" : "iteration", out),
                      {}});
      args.push_back({value::kind::tensor, constant({1}, true, ::onnx::TensorProto_DataType_BOOL, "cond", out), {}});
      args.insert(args.end(), carried.begin(), carried.end());
      auto r = inline_body(body, args, out);
      if (r.size() != 1 + carried.size() + n_scan)
        throw error(error_category::onnx, user + "'s body has " + std::to_string(r.size()) + " outputs", graph_where_,
                    "a Loop body returns the condition, the carried values, then the scan outputs");
      const auto* c = r[0].k == value::kind::tensor ? known(r[0].tensor) : nullptr;
      if (!c || c->values.size() != 1)
        throw error(error_category::onnx, user + "'s body computes its condition at run time", graph_where_,
                    "loops carrying sequences are unrolled at import, so their condition must be a constant");
      cond = c->values[0] != 0;
      for (std::size_t k = 0; k < carried.size(); ++k) carried[k] = r[1 + k];
      for (std::size_t k = 0; k < n_scan; ++k) {
        if (r[1 + carried.size() + k].k != value::kind::tensor)
          throw error(error_category::onnx, user + " scans a sequence", graph_where_, "scan outputs must be tensors");
        scans[k].push_back(r[1 + carried.size() + k].tensor);
      }
    }
    std::vector<value> results = carried;
    for (std::size_t k = 0; k < n_scan; ++k) {
      if (scans[k].empty())
        throw error(error_category::onnx, user + " runs no iteration, so its scan output has no known shape", graph_where_,
                    "give the loop at least one iteration");
      const auto axes = constant({0}, false, ::onnx::TensorProto_DataType_INT64, "scan/axes", out);
      ::onnx::NodeProto concat;
      concat.set_op_type("Concat");
      concat.set_name(pool_.make("scan/concat"));
      for (const auto& e : scans[k]) {
        ::onnx::NodeProto u;
        u.set_op_type("Unsqueeze");
        u.set_name(pool_.make(e + "/unsqueeze"));
        u.add_input(e);
        u.add_input(axes);
        u.add_output(pool_.make(e + "/unsqueezed"));
        concat.add_input(u.output(0));
        out.push_back(std::move(u));
      }
      set_attr(concat, "axis", std::int64_t{0});
      const auto stacked = pool_.make("scan");
      concat.add_output(stacked);
      out.push_back(std::move(concat));
      results.push_back({value::kind::tensor, stacked, {}});
    }
    bind_outputs(n, results, out);
  }

  ::onnx::ModelProto& m_;
  name_pool pool_;
  std::string graph_where_;
  std::deque<type_scope> types_;  // the enclosing bodies' types, innermost last (a deque keeps the parents' addresses)
  std::vector<std::unordered_map<std::string, value>> scopes_;
  std::unordered_map<std::string, int_tensor> ints_;
};

}  // namespace detail

/// Lowers a model's sequences and optionals to tensor ops in place (file comment). Run after
/// shape inference, which SplitToSequence's lengths come from.
inline void lower_sequences(::onnx::ModelProto& m) { detail::sequence_lowering(m).run(); }

}  // namespace ipu::onnx
