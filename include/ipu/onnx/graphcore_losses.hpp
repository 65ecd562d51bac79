#pragma once
// PopART's Builder loss ops as a PopART-saved ONNX file holds them: domain ai.graphcore, opset 1,
//   Nll(probs, labels)  reduction, ignoreIndex (optional), inputIsLogProbability (0 / 1)
//   L1(x)               lambda (float), reduction
//   IdentityLoss(x)     reduction
// with reduction PopART's ReductionType: Sum = 0, Mean = 1, NoReduction = 2 (PopART itself writes
// the names "Sum", "Mean", "NoReduction"; both forms are read). The importer writes each node out,
// in place, as the standard ONNX ops that ipu::train::nllloss, l1loss and identityloss build
// (ipu/train/loss.hpp), so shape inference, autodiff, the cost model and the kernels see only
// ordinary ops. It runs on the opset-17 model, after one round of shape inference has typed the
// loss nodes' inputs (the rank decides Nll's Transpose, the element type L1's lambda constant).
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/proto_edit.hpp"
#include "ipu/onnx/types.hpp"

namespace ipu::onnx {

inline constexpr std::string_view graphcore_domain = "ai.graphcore";

/// Whether the importer writes this op out as standard ops (see the file comment).
inline bool is_graphcore_loss(std::string_view domain, std::string_view type) {
  return domain == graphcore_domain && (type == "Nll" || type == "L1" || type == "IdentityLoss");
}

namespace detail {

enum class graphcore_reduction : std::uint8_t { sum, mean, none };

inline graphcore_reduction graphcore_reduction_of(const ::onnx::NodeProto& n, const std::string& where) {
  const auto* a = find_attr(n, "reduction");
  if (!a) return graphcore_reduction::mean;  // PopART's default
  if (a->type() == ::onnx::AttributeProto_AttributeType_INT) {
    switch (a->i()) {
      case 0: return graphcore_reduction::sum;
      case 1: return graphcore_reduction::mean;
      case 2: return graphcore_reduction::none;
      default: break;
    }
    throw error(error_category::onnx, "reduction " + std::to_string(a->i()) + " is not a PopART ReductionType", where,
                "use 0 (Sum), 1 (Mean) or 2 (NoReduction)");
  }
  if (a->type() == ::onnx::AttributeProto_AttributeType_STRING) {
    if (a->s() == "Sum") return graphcore_reduction::sum;
    if (a->s() == "Mean") return graphcore_reduction::mean;
    if (a->s() == "NoReduction") return graphcore_reduction::none;
    throw error(error_category::onnx, "reduction '" + a->s() + "' is not a PopART ReductionType", where,
                "use Sum, Mean or NoReduction (or 0, 1, 2)");
  }
  throw error(error_category::onnx, "the reduction attribute is neither an int nor a string", where,
              "write it as PopART does: Sum, Mean or NoReduction (or 0, 1, 2)");
}

inline bool is_float_elem(std::int32_t t) {
  return t == ::onnx::TensorProto_DataType_FLOAT || t == ::onnx::TensorProto_DataType_DOUBLE ||
         t == ::onnx::TensorProto_DataType_FLOAT16;
}

/// Writes out one graph's loss nodes; refuses them in subgraphs, whose value types this step
/// does not track.
class graphcore_loss_writer {
 public:
  graphcore_loss_writer(::onnx::ModelProto& m, const type_scope& types) : names_(m), types_(types) {}

  void run(::onnx::GraphProto& g) {
    std::vector<::onnx::NodeProto> out;
    out.reserve(static_cast<std::size_t>(g.node_size()));
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      for (const auto& a : n.attribute()) {
        if (a.has_g()) refuse_inside(a.g());
        for (const auto& sub : a.graphs()) refuse_inside(sub);
      }
      if (!is_graphcore_loss(n.domain(), n.op_type())) {
        out.push_back(n);
        continue;
      }
      const std::string where = "node " + node_label(n, i) + " (ai.graphcore)";
      if (n.output_size() != 1 || n.output(0).empty())
        throw error(error_category::onnx, n.op_type() + " has " + std::to_string(n.output_size()) + " outputs", where,
                    "give the loss node exactly one output");
      if (n.op_type() == "Nll") write_nll(n, where, out);
      else if (n.op_type() == "L1") write_l1(n, where, out);
      else write_identity(n, where, out);
    }
    g.clear_node();
    for (auto& n : out) *g.add_node() = std::move(n);
  }

 private:
  void refuse_inside(const ::onnx::GraphProto& g) {
    for (const auto& n : g.node()) {
      if (is_graphcore_loss(n.domain(), n.op_type()))
        throw error(error_category::onnx, "the ai.graphcore loss " + n.op_type() + " is inside subgraph '" + g.name() + "'",
                    "node " + node_label(n), "compute the loss in the main graph, as PopART's Builder does");
      for (const auto& a : n.attribute()) {
        if (a.has_g()) refuse_inside(a.g());
        for (const auto& sub : a.graphs()) refuse_inside(sub);
      }
    }
  }

  static void expect_inputs(const ::onnx::NodeProto& n, int count, const std::string& where, std::string_view what) {
    bool ok = n.input_size() == count;
    for (int i = 0; ok && i < count; ++i) ok = !n.input(i).empty();
    if (!ok)
      throw error(error_category::onnx, n.op_type() + " has " + std::to_string(n.input_size()) + " inputs; it takes " +
                                            std::to_string(count),
                  where, "give it " + std::string(what));
  }

  [[nodiscard]] std::int64_t known_rank(const std::string& value, const std::string& where) const {
    const auto r = types_.rank(value);
    if (!r)
      throw error(error_category::shape, "the rank of '" + value + "' is unknown after shape inference", where,
                  "fix the model's input shapes with import_options::input_shapes");
    return *r;
  }

  [[nodiscard]] std::int32_t float_input(const std::string& value, const std::string& where, std::string_view role) const {
    const auto t = types_.elem_type(value);
    if (!is_float_elem(t))
      throw error(error_category::onnx,
                  std::string(role) + " '" + value + "' is " + (t == 0 ? std::string("of unknown type") : onnx_type_name(t)) +
                      ", not floating point",
                  where, "give it an F16, F32 or F64 tensor");
    return t;
  }

  /// A node of `type` (ai.onnx) carrying the loss node's annotations (__ipu_number and the like).
  ::onnx::NodeProto op(const ::onnx::NodeProto& from, const std::string& type, std::vector<std::string> inputs,
                       const std::string& output) {
    ::onnx::NodeProto n;
    n.set_op_type(type);
    n.set_name(names_.make((from.name().empty() ? from.output(0) : from.name()) + "/" + type));
    for (auto& i : inputs) n.add_input(std::move(i));
    n.add_output(output);
    for (const auto& a : from.attribute())
      if (a.name().starts_with("__")) *n.add_attribute() = a;
    return n;
  }

  /// `x` reduced over all axes into `output` (an Identity for a scalar or NoReduction).
  void reduce(const ::onnx::NodeProto& from, const std::string& x, std::int64_t rank, graphcore_reduction r,
              std::vector<::onnx::NodeProto>& out) {
    if (r == graphcore_reduction::none || rank == 0) {
      out.push_back(op(from, "Identity", {x}, from.output(0)));
      return;
    }
    // No axes: both reduce every axis at opset 17.
    auto n = op(from, r == graphcore_reduction::mean ? "ReduceMean" : "ReduceSum", {x}, from.output(0));
    set_attr(n, "keepdims", std::int64_t{0});
    out.push_back(std::move(n));
  }

  void write_nll(const ::onnx::NodeProto& n, const std::string& where, std::vector<::onnx::NodeProto>& out) {
    expect_inputs(n, 2, where, "probs [N, ..., C] and labels [N, ...]");
    const auto r = graphcore_reduction_of(n, where);
    (void)float_input(n.input(0), where, "probs");
    const auto rank = known_rank(n.input(0), where);
    if (rank < 2)
      throw error(error_category::onnx, "probs '" + n.input(0) + "' has rank " + std::to_string(rank), where,
                  "give the class probabilities as [N, ..., C], classes on the last axis");
    const auto lt = types_.elem_type(n.input(1));
    if (lt != ::onnx::TensorProto_DataType_INT32 && lt != ::onnx::TensorProto_DataType_INT64)
      throw error(error_category::onnx,
                  "labels '" + n.input(1) + "' are " + (lt == 0 ? std::string("of unknown type") : onnx_type_name(lt)), where,
                  "give INT32 or INT64 class indices");
    if (known_rank(n.input(1), where) != rank - 1)
      throw error(error_category::onnx,
                  "labels '" + n.input(1) + "' have rank " + std::to_string(known_rank(n.input(1), where)) +
                      " for probs of rank " + std::to_string(rank),
                  where, "give labels shaped as probs without its last (class) axis");
    bool log_input = false;
    if (const auto* a = find_attr(n, "inputIsLogProbability")) {
      if (a->type() != ::onnx::AttributeProto_AttributeType_INT || (a->i() != 0 && a->i() != 1))
        throw error(error_category::onnx, "inputIsLogProbability is not 0 or 1", where, "write it as an int, 0 or 1");
      log_input = a->i() == 1;
    }
    std::optional<std::int64_t> ignore;
    if (const auto* a = find_attr(n, "ignoreIndex")) {
      if (a->type() != ::onnx::AttributeProto_AttributeType_INT)
        throw error(error_category::onnx, "ignoreIndex is not an int", where, "write the class index to ignore as an int");
      ignore = a->i();
    }
    for (const auto& a : n.attribute())
      if (!a.name().starts_with("__") && a.name() != "reduction" && a.name() != "ignoreIndex" &&
          a.name() != "inputIsLogProbability")
        throw error(error_category::onnx, "Nll has no attribute '" + a.name() + "'", where,
                    "Nll takes reduction, ignoreIndex and inputIsLogProbability");

    const std::string base = n.name().empty() ? n.output(0) : n.name();
    std::string log_probs = n.input(0);
    if (!log_input) {
      auto name = names_.make(base + "/log_probs");
      out.push_back(op(n, "Log", {log_probs}, name));
      log_probs = std::move(name);
    }
    // NegativeLogLikelihoodLoss wants the classes on axis 1: [N, C, d1, ...].
    if (rank > 2) {
      auto name = names_.make(base + "/classes_on_axis_1");
      auto t = op(n, "Transpose", {log_probs}, name);
      auto* perm = t.add_attribute();
      perm->set_name("perm");
      perm->set_type(::onnx::AttributeProto_AttributeType_INTS);
      perm->add_ints(0);
      perm->add_ints(rank - 1);
      for (std::int64_t i = 1; i < rank - 1; ++i) perm->add_ints(i);
      out.push_back(std::move(t));
      log_probs = std::move(name);
    }
    auto nll = op(n, "NegativeLogLikelihoodLoss", {log_probs, n.input(1)}, n.output(0));
    set_attr(nll, "reduction",
             r == graphcore_reduction::mean ? "mean" : r == graphcore_reduction::sum ? "sum" : "none");
    if (ignore) set_attr(nll, "ignore_index", *ignore);
    out.push_back(std::move(nll));
  }

  void write_l1(const ::onnx::NodeProto& n, const std::string& where, std::vector<::onnx::NodeProto>& out) {
    expect_inputs(n, 1, where, "one input, the tensor to take the L1 norm of");
    const auto r = graphcore_reduction_of(n, where);
    const auto type = float_input(n.input(0), where, "the input");
    const auto rank = known_rank(n.input(0), where);
    const auto* lambda = find_attr(n, "lambda");
    if (!lambda || lambda->type() != ::onnx::AttributeProto_AttributeType_FLOAT)
      throw error(error_category::onnx, "L1 has no float attribute lambda", where, "give the scale as a float lambda");
    for (const auto& a : n.attribute())
      if (!a.name().starts_with("__") && a.name() != "reduction" && a.name() != "lambda")
        throw error(error_category::onnx, "L1 has no attribute '" + a.name() + "'", where, "L1 takes lambda and reduction");
    const std::string base = n.name().empty() ? n.output(0) : n.name();
    const auto abs = names_.make(base + "/abs"), scale = names_.make(base + "/lambda");
    out.push_back(op(n, "Abs", {n.input(0)}, abs));
    out.push_back(constant_node(names_.make(base + "/lambda_value"), scale, scalar_tensor(type, lambda->f(), "L1's lambda")));
    if (r == graphcore_reduction::none) {
      out.push_back(op(n, "Mul", {abs, scale}, n.output(0)));
      return;
    }
    const auto scaled = names_.make(base + "/scaled");
    out.push_back(op(n, "Mul", {abs, scale}, scaled));
    reduce(n, scaled, rank, r, out);
  }

  void write_identity(const ::onnx::NodeProto& n, const std::string& where, std::vector<::onnx::NodeProto>& out) {
    expect_inputs(n, 1, where, "one input, the loss the model computed");
    const auto r = graphcore_reduction_of(n, where);
    (void)float_input(n.input(0), where, "the input");
    for (const auto& a : n.attribute())
      if (!a.name().starts_with("__") && a.name() != "reduction")
        throw error(error_category::onnx, "IdentityLoss has no attribute '" + a.name() + "'", where,
                    "IdentityLoss takes reduction");
    reduce(n, n.input(0), known_rank(n.input(0), where), r, out);
  }

  name_pool names_;
  const type_scope& types_;
};

/// Whether the main graph or a subgraph holds an ai.graphcore loss node.
inline bool has_graphcore_losses(const ::onnx::GraphProto& g) {
  for (const auto& n : g.node()) {
    if (is_graphcore_loss(n.domain(), n.op_type())) return true;
    for (const auto& a : n.attribute()) {
      if (a.has_g() && has_graphcore_losses(a.g())) return true;
      for (const auto& sub : a.graphs())
        if (has_graphcore_losses(sub)) return true;
    }
  }
  return false;
}

}  // namespace detail

/// Writes out every ai.graphcore loss node of a shape-inferred opset-17 model as standard ops (see
/// the file comment); returns how many there were.
inline std::size_t write_out_graphcore_losses(::onnx::ModelProto& m) {
  if (!detail::has_graphcore_losses(m.graph())) return 0;
  for (const auto& o : m.opset_import())
    if (o.domain() == graphcore_domain && o.version() != 1)
      throw error(error_category::onnx, "the model imports ai.graphcore opset " + std::to_string(o.version()), "model",
                  "PopART writes its loss ops at ai.graphcore opset 1");
  std::size_t count = 0;
  for (const auto& n : m.graph().node()) count += is_graphcore_loss(n.domain(), n.op_type()) ? 1 : 0;
  const detail::type_scope types(m.graph(), nullptr);
  detail::graphcore_loss_writer(m, types).run(*m.mutable_graph());
  return count;
}

}  // namespace ipu::onnx
