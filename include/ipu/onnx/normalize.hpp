#pragma once
// Rewrites a model of any opset from 7 to 17 into one canonical form: opset-17 semantics, so that
// kernels and passes see each op in exactly one shape.
//
// What changed between opsets and how it is rewritten (ai.onnx domain):
//   Clip < 11            min / max attributes        -> inputs 1, 2 (constants of the input's type)
//   Split, Squeeze, Unsqueeze, ReduceSum < 13          axes / split attribute -> input 1
//   Softmax, LogSoftmax, Hardmax < 13                  "coerce to 2-D at axis" semantics -> Flatten,
//                                                      the op on the last axis, Reshape back (a no-op
//                                                      rewrite when axis is already the last one)
//   Pad < 11             pads / value attributes     -> inputs 1, 2
//   Slice < 10           starts / ends / axes        -> inputs 1, 2, 3
//   TopK < 10            k attribute                 -> input 1
//   Dropout < 12         ratio attribute             -> input 1 (a mask output before 10 had the
//                                                      data's type; it is dropped when unused)
//   BatchNormalization < 14  `spatial` (must be 1) dropped; legacy training outputs dropped when unused
//   Upsample 7-9         -> Resize with coordinate_transformation_mode=asymmetric (nearest: floor)
//   Resize 10            -> the opset-11 input layout with the same asymmetric / floor semantics
//   Resize 11-12         an empty `scales` constant next to `sizes` becomes an omitted input
//   Scatter 9-10         -> ScatterElements (same semantics, renamed)
//   RoiAlign < 16        coordinate_transformation_mode=output_half_pixel made explicit
//   Scan 8               refused (its batch-axis semantics were dropped in opset 9)
// Other ops kept their meaning (later opsets only added types or attributes whose defaults match
// the old behaviour). Empty output names before the last used output get fresh names so that every
// op output is a real tensor.
//
// ONNX's own version converter was not used: it copies every initializer through its IR (weights
// can be hundreds of MB), its Resize 10->11 adapter drops the asymmetric coordinate mode, its Clip
// adapter makes FLOAT bounds for any input type, and it has no path for Upsample into opset 17.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_set>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/proto_edit.hpp"

namespace ipu::onnx {

/// The opset the importer normalises ai.onnx ops to.
inline constexpr std::int64_t canonical_opset = 17;
/// The oldest ai.onnx opset the importer accepts.
inline constexpr std::int64_t oldest_opset = 7;

namespace detail {

/// The ai.onnx opset a model imports ("" and "ai.onnx" both name it); 0 when it imports none.
inline std::int64_t onnx_opset(const ::onnx::ModelProto& m) {
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") return o.version();
  return 0;
}

class normalizer {
 public:
  normalizer(::onnx::ModelProto& m, std::int64_t version) : model_(m), names_(m), v_(version) {
    collect_used(m.graph());
    for (const auto& o : m.graph().output()) used_.insert(o.name());
  }

  void run() { graph(*model_.mutable_graph(), nullptr); }

 private:
  void collect_used(const ::onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      for (const auto& i : n.input()) used_.insert(i);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) {
          collect_used(a.g());
          for (const auto& o : a.g().output()) used_.insert(o.name());
        }
        for (const auto& sub : a.graphs()) {
          collect_used(sub);
          for (const auto& o : sub.output()) used_.insert(o.name());
        }
      }
    }
  }

  void graph(::onnx::GraphProto& g, const type_scope* parent) {
    const type_scope scope(g, parent);
    // Constant tensors visible here, for rules that look at values (Resize's empty scales).
    std::unordered_map<std::string, const ::onnx::TensorProto*> consts;
    for (const auto& t : g.initializer()) consts[t.name()] = &t;
    for (const auto& n : g.node())
      if (n.op_type() == "Constant" && (n.domain().empty() || n.domain() == "ai.onnx") && n.output_size() == 1)
        if (auto* a = find_attr(n, "value"); a && a->has_t()) consts[n.output(0)] = &a->t();

    std::vector<::onnx::NodeProto> out;
    out.reserve(static_cast<std::size_t>(g.node_size()));
    std::unordered_set<std::string> rewritten;  // outputs whose recorded types may be stale
    for (int i = 0; i < g.node_size(); ++i) {
      ::onnx::NodeProto n = g.node(i);
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) graph(*a.mutable_g(), &scope);
        for (auto& sub : *a.mutable_graphs()) graph(sub, &scope);
      }
      name_omitted_outputs(n);
      if (n.domain() == "ai.onnx") n.set_domain("");
      if (n.domain().empty() && v_ < canonical_opset) {
        if (rewrite(n, i, scope, consts, out))
          for (const auto& o : n.output()) rewritten.insert(o);
      }
      out.push_back(std::move(n));
      for (auto& p : pending_) out.push_back(std::move(p));
      pending_.clear();
    }
    g.clear_node();
    for (auto& n : out) *g.add_node() = std::move(n);
    if (!rewritten.empty()) {
      auto* vi = g.mutable_value_info();
      for (int i = vi->size(); i-- > 0;)
        if (rewritten.count(vi->Get(i).name())) vi->erase(vi->begin() + i);
    }
  }

  /// Gives a name to every omitted output before the last named one.
  void name_omitted_outputs(::onnx::NodeProto& n) {
    int last = n.output_size() - 1;
    while (last >= 0 && n.output(last).empty()) --last;
    for (int i = n.output_size() - 1; i > last; --i) n.mutable_output()->RemoveLast();
    for (int i = 0; i < last; ++i)
      if (n.output(i).empty())
        n.set_output(i, names_.make((n.name().empty() ? n.op_type() : n.name()) + "_unused_output_" + std::to_string(i)));
  }

  std::string add_constant(const ::onnx::NodeProto& n, const std::string& what, ::onnx::TensorProto value,
                           std::vector<::onnx::NodeProto>& out) {
    const auto name = names_.make((n.name().empty() ? n.op_type() : n.name()) + "_" + what);
    out.push_back(constant_node(name, name, std::move(value)));
    return name;
  }

  /// Moves an INTS attribute to input `index` when present.
  void ints_to_input(::onnx::NodeProto& n, const char* attr, int index, std::vector<::onnx::NodeProto>& out) {
    if (!find_attr(n, attr)) return;
    auto values = attr_ints(n, attr);
    remove_attr(n, attr);
    set_input(n, index, add_constant(n, attr, int64_tensor(values), out));
  }

  [[nodiscard]] bool is_used(const std::string& name) const { return !name.empty() && used_.count(name) != 0; }

  error fail(const ::onnx::NodeProto& n, int index, const std::string& message, const std::string& hint) const {
    return error(error_category::onnx, message, "node " + node_label(n, index) + " (opset " + std::to_string(v_) + ")",
                 hint);
  }

  std::int32_t input_type(const ::onnx::NodeProto& n, int index, const type_scope& scope) const {
    const auto t = n.input_size() ? scope.elem_type(n.input(0)) : 0;
    if (!t)
      throw fail(n, index, "the element type of input '" + (n.input_size() ? n.input(0) : std::string()) + "' is unknown",
                 "give the model's inputs types and shapes");
    return t;
  }

  /// Rewrites `n` in place (and may emit nodes before it into `out`); true if anything changed.
  bool rewrite(::onnx::NodeProto& n, int index, const type_scope& scope,
               const std::unordered_map<std::string, const ::onnx::TensorProto*>& consts,
               std::vector<::onnx::NodeProto>& out) {
    const auto& op = n.op_type();
    if (op == "Clip" && v_ < 11) {
      const auto* lo = find_attr(n, "min");
      const auto* hi = find_attr(n, "max");
      if (!lo && !hi) return false;
      const auto type = input_type(n, index, scope);
      if (lo) set_input(n, 1, add_constant(n, "min", scalar_tensor(type, lo->f(), "Clip"), out));
      if (hi) set_input(n, 2, add_constant(n, "max", scalar_tensor(type, hi->f(), "Clip"), out));
      remove_attr(n, "min");
      remove_attr(n, "max");
      return true;
    }
    if ((op == "Squeeze" || op == "Unsqueeze" || op == "ReduceSum") && v_ < 13) {
      ints_to_input(n, "axes", 1, out);
      return true;
    }
    if (op == "Split" && v_ < 13) {
      ints_to_input(n, "split", 1, out);
      return true;
    }
    if ((op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") && v_ < 13) return softmax(n, scope, out);
    if (op == "Pad" && v_ < 11) {
      const auto mode = attr_string(n, "mode", "constant");
      ints_to_input(n, "pads", 1, out);
      if (const auto* value = find_attr(n, "value")) {
        if (mode == "constant")
          set_input(n, 2, add_constant(n, "value", scalar_tensor(input_type(n, index, scope), value->f(), "Pad"), out));
        remove_attr(n, "value");
      }
      return true;
    }
    if (op == "Slice" && v_ < 10) {
      ints_to_input(n, "starts", 1, out);
      ints_to_input(n, "ends", 2, out);
      ints_to_input(n, "axes", 3, out);
      return true;
    }
    if (op == "TopK" && v_ < 10) {
      const std::int64_t k = attr_int(n, "k", -1);
      remove_attr(n, "k");
      set_input(n, 1, add_constant(n, "k", int64_tensor(std::span(&k, 1)), out));
      return true;
    }
    if (op == "Dropout" && v_ < 12) {
      if (const auto* ratio = find_attr(n, "ratio")) {
        set_input(n, 1, add_constant(n, "ratio", scalar_tensor(::onnx::TensorProto_DataType_FLOAT, ratio->f(), "Dropout"),
                                     out));
        remove_attr(n, "ratio");
      }
      if (v_ < 10 && n.output_size() > 1) {
        if (is_used(n.output(1)))
          throw fail(n, index, "the mask output of an opset < 10 Dropout is used; its type changed in opset 10",
                     "export the model at opset 12 or later");
        n.mutable_output()->RemoveLast();
      }
      return true;
    }
    if (op == "BatchNormalization" && v_ < 14) {
      if (attr_int(n, "spatial", 1) != 1)
        throw fail(n, index, "BatchNormalization with spatial=0 (per-activation statistics) is not supported",
                   "export the model at opset 9 or later, where statistics are per channel");
      remove_attr(n, "spatial");
      for (int i = 1; i < n.output_size(); ++i)
        if (is_used(n.output(i)))
          throw fail(n, index, "the training-mode output '" + n.output(i) + "' of a legacy BatchNormalization is used",
                     "export the model for inference, or at opset 14 or later with training_mode");
      while (n.output_size() > 1) n.mutable_output()->RemoveLast();
      return true;
    }
    if (op == "Upsample" && v_ < 10) {
      const auto mode = attr_string(n, "mode", "nearest");
      std::string scales = n.input_size() > 1 ? n.input(1) : std::string();
      if (const auto* a = find_attr(n, "scales")) {
        ::onnx::TensorProto t;
        t.set_data_type(::onnx::TensorProto_DataType_FLOAT);
        t.add_dims(a->floats_size());
        for (auto f : a->floats()) t.add_float_data(f);
        scales = add_constant(n, "scales", std::move(t), out);
        remove_attr(n, "scales");
      }
      n.set_op_type("Resize");
      while (n.input_size() > 1) n.mutable_input()->RemoveLast();
      set_input(n, 2, scales);
      resize_asymmetric(n, mode, index);
      return true;
    }
    if (op == "Resize" && v_ == 10) {
      const auto scales = n.input_size() > 1 ? n.input(1) : std::string();
      while (n.input_size() > 1) n.mutable_input()->RemoveLast();
      set_input(n, 2, scales);
      resize_asymmetric(n, attr_string(n, "mode", "nearest"), index);
      return true;
    }
    if (op == "Resize" && v_ < 13 && n.input_size() > 3 && !n.input(3).empty()) {
      auto it = consts.find(n.input(2));
      if (it != consts.end() && it->second->dims_size() == 1 && it->second->dims(0) == 0) {
        n.set_input(2, "");
        return true;
      }
      return false;
    }
    if (op == "Scatter" && v_ < 11) {
      n.set_op_type("ScatterElements");
      return true;
    }
    if (op == "RoiAlign" && v_ < 16) {
      if (!find_attr(n, "coordinate_transformation_mode")) set_attr(n, "coordinate_transformation_mode", "output_half_pixel");
      return true;
    }
    if (op == "Scan" && v_ == 8)
      throw fail(n, index, "Scan from opset 8 has a batch axis that opset 9 removed; it is not supported",
                 "export the model at opset 9 or later");
    return false;
  }

  void resize_asymmetric(::onnx::NodeProto& n, const std::string& mode, int index) {
    if (mode != "nearest" && mode != "linear")
      throw fail(n, index, "interpolation mode '" + mode + "' is not one of nearest, linear", "fix the model");
    set_attr(n, "mode", mode);
    set_attr(n, "coordinate_transformation_mode", "asymmetric");
    if (mode == "nearest") set_attr(n, "nearest_mode", "floor");
  }

  /// Pre-13 Softmax flattens the input to 2-D at `axis` and normalises each row; from 13 it works
  /// on one axis. Equivalent form: Flatten(axis) -> op(axis=-1) -> Reshape(original shape).
  bool softmax(::onnx::NodeProto& n, const type_scope& scope, std::vector<::onnx::NodeProto>& out) {
    const auto axis = attr_int(n, "axis", 1);
    const auto& x = n.input(0);
    const auto rank = scope.rank(x);
    remove_attr(n, "axis");
    set_attr(n, "axis", std::int64_t{-1});
    if (axis == -1 || (rank && (axis < 0 ? axis + *rank : axis) == *rank - 1)) return true;  // already the last axis

    const auto base = n.name().empty() ? n.op_type() : n.name();
    ::onnx::NodeProto flatten;
    flatten.set_op_type("Flatten");
    flatten.set_name(names_.make(base + "_flatten"));
    flatten.add_input(x);
    flatten.add_output(names_.make(base + "_flat"));
    set_attr(flatten, "axis", axis);
    // Shape back: a constant when known now, else a Shape op that constant folding resolves later.
    std::string target;
    if (auto dims = scope.static_shape(x)) {
      target = add_constant(n, "shape", int64_tensor(*dims), out);
    } else {
      ::onnx::NodeProto shape;
      shape.set_op_type("Shape");
      shape.set_name(names_.make(base + "_shape"));
      shape.add_input(x);
      target = names_.make(base + "_shape");
      shape.add_output(target);
      out.push_back(std::move(shape));
    }
    const std::string y = n.output(0);
    n.set_input(0, flatten.output(0));
    n.set_output(0, names_.make(base + "_2d"));
    out.push_back(std::move(flatten));
    ::onnx::NodeProto reshape;
    reshape.set_op_type("Reshape");
    reshape.set_name(names_.make(base + "_reshape"));
    reshape.add_input(n.output(0));
    reshape.add_input(target);
    reshape.add_output(y);
    pending_.push_back(std::move(reshape));  // goes after the op itself
    return true;
  }

  ::onnx::ModelProto& model_;
  name_pool names_;
  std::int64_t v_;
  std::unordered_set<std::string> used_;
  std::vector<::onnx::NodeProto> pending_;  // nodes to place after the node just rewritten
};

}  // namespace detail

/// Normalises a checked model to canonical form in place (see the table above) and sets its
/// ai.onnx opset import to 17. Throws for opsets outside 7-17 and for the few legacy forms that
/// have no opset-17 equivalent.
inline void normalize_model(::onnx::ModelProto& model) {
  const auto v = detail::onnx_opset(model);
  if (v == 0)
    throw error(error_category::onnx, "the model does not import the ai.onnx opset", "model",
                "add an opset_import entry for the default domain");
  if (v < oldest_opset || v > canonical_opset)
    throw error(error_category::onnx,
                "the model uses ai.onnx opset " + std::to_string(v) + "; opsets " + std::to_string(oldest_opset) +
                    " to " + std::to_string(canonical_opset) + " are supported",
                "model", v < oldest_opset ? "re-export the model at opset 7 or later" : "re-export the model at opset 17 or earlier");
  detail::normalizer(model, v).run();
  for (auto& o : *model.mutable_opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") {
      o.set_domain("");
      o.set_version(canonical_opset);
    }
}

}  // namespace ipu::onnx
