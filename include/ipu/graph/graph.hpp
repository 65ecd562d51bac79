#pragma once
// The graph IR: plain data with indices instead of pointers, usable in constant expressions.
//
// Tensors and ops live in two vectors; an op refers to its tensors by index and a tensor to its
// producer and consumers by index. `add_op` keeps producer/consumer links in step with op inputs
// and outputs so queries never search; `validate` (validate.hpp) checks everything else.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/attribute.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

using tensor_id = std::uint32_t;
using op_id = std::uint32_t;
/// Marks an omitted optional input (ONNX's empty name) or a tensor with no producer.
inline constexpr tensor_id no_tensor = static_cast<tensor_id>(-1);
inline constexpr op_id no_op = static_cast<op_id>(-1);

enum class tensor_kind : std::uint8_t {
  input,         // fed by the host each iteration
  variable,      // a weight: initialised from host data, may be updated by training
  constant,      // fixed data folded into the executable
  intermediate,  // produced by an op
};

constexpr std::string_view to_string(tensor_kind k) noexcept {
  switch (k) {
    case tensor_kind::input: return "input";
    case tensor_kind::variable: return "variable";
    case tensor_kind::constant: return "constant";
    case tensor_kind::intermediate: return "intermediate";
  }
  return "?";
}

struct tensor_node {
  std::string name;
  tensor_info info;
  tensor_kind kind = tensor_kind::intermediate;
  op_id producer = no_op;
  std::vector<op_id> consumers;
  byte_buffer data;  // contents of a variable or constant; empty otherwise

  [[nodiscard]] constexpr bool has_data() const noexcept {
    return kind == tensor_kind::variable || kind == tensor_kind::constant;
  }
  friend constexpr bool operator==(const tensor_node&, const tensor_node&) = default;
};

/// Where an op runs: PopART's virtual graph (IPU), pipeline stage and execution phase, and the
/// PopTorch block it was built in. Unset fields are left to the execution strategy.
struct annotation {
  std::optional<std::int64_t> ipu;
  std::optional<std::int64_t> stage;
  std::optional<std::int64_t> phase;
  std::string block;
  /// A recomputation checkpoint (PopART's RecomputeType::Checkpoint, Builder::checkpointOutput;
  /// PopTorch's recomputationCheckpoint): the op's outputs are stashed for the backward pass, never
  /// recomputed, so recomputation reruns only the ops after the last checkpoint.
  bool checkpoint = false;
  /// PopART's RecomputeType::Recompute (Builder::recomputeOutputInBackwardPass): in a pipelined
  /// training step the op's outputs are not stashed but recomputed by the backward stages that read
  /// them, whatever the automatic recomputation says. Exclusive with checkpoint.
  bool recompute = false;
  friend constexpr bool operator==(const annotation&, const annotation&) = default;
};

inline constexpr std::string_view onnx_domain = "";  // "ai.onnx" is spelled as the empty domain

struct op_node {
  std::string type;    // "Conv", "MatMul", ...
  std::string domain;  // "" for ai.onnx
  std::int64_t opset = 0;
  std::string name;
  std::vector<tensor_id> inputs;  // no_tensor for an omitted optional input
  std::vector<tensor_id> outputs;
  std::vector<attribute> attributes;
  annotation where;

  [[nodiscard]] constexpr const attribute* find_attribute(std::string_view n) const noexcept {
    for (const auto& a : attributes)
      if (a.name == n) return &a;
    return nullptr;
  }
  friend constexpr bool operator==(const op_node&, const op_node&) = default;
};

struct opset_import {
  std::string domain;
  std::int64_t version = 0;
  friend constexpr bool operator==(const opset_import&, const opset_import&) = default;
};

class graph {
 public:
  constexpr graph() = default;
  // Names are taken as string_view: GCC 12 cannot move a by-value std::string parameter in a
  // constant expression.
  constexpr explicit graph(std::string_view name) : name_(name) {}

  // --- construction -----------------------------------------------------------------------
  /// Adds a tensor and returns its id. Names are not checked here (see validate()).
  constexpr tensor_id add_tensor(std::string_view name, tensor_info info, tensor_kind kind = tensor_kind::intermediate,
                                 byte_buffer data = {}) {
    if (kind != tensor_kind::variable && kind != tensor_kind::constant && !data.empty())
      throw error(error_category::graph, "tensor '" + std::string(name) + "' of kind " + std::string(to_string(kind)) +
                                             " cannot hold data",
                  "graph '" + name_ + "'", "only variables and constants carry data");
    tensors_.push_back(tensor_node{std::string(name), std::move(info), kind, no_op, {}, std::move(data)});
    const auto id = static_cast<tensor_id>(tensors_.size() - 1);
    if (kind == tensor_kind::input) inputs_.push_back(id);
    return id;
  }

  /// Adds an op, links its tensors and returns its id.
  constexpr op_id add_op(const op_node& op) { return add_op(op_node(op)); }
  constexpr op_id add_op(op_node&& op) {
    const auto id = static_cast<op_id>(ops_.size());
    for (auto t : op.inputs) {
      if (t == no_tensor) continue;
      check_tensor_id(t, op);
      auto& c = tensors_[t].consumers;
      if (c.empty() || c.back() != id) c.push_back(id);
    }
    for (auto t : op.outputs) {
      check_tensor_id(t, op);
      auto& out = tensors_[t];
      if (out.producer != no_op)
        throw error(error_category::graph,
                    "tensor '" + out.name + "' is already produced by op " + describe(ops_[out.producer]),
                    "op " + describe(op), "give every op output a unique tensor");
      if (out.kind != tensor_kind::intermediate)
        throw error(error_category::graph,
                    "op output '" + out.name + "' is a graph " + std::string(to_string(out.kind)),
                    "op " + describe(op), "ops may only write intermediate tensors");
      out.producer = id;
    }
    ops_.push_back(std::move(op));
    return id;
  }

  /// Declares `t` a graph output (order is kept).
  constexpr void mark_output(tensor_id t) {
    if (t >= tensors_.size())
      throw error(error_category::graph, "output tensor id " + std::to_string(t) + " does not exist",
                  "graph '" + name_ + "'");
    outputs_.push_back(t);
  }

  constexpr void set_opset_imports(std::vector<opset_import> v) { opsets_ = std::move(v); }
  constexpr void set_name(std::string_view n) { name_ = n; }
  /// Mutable access for passes that rewrite ops in place (attributes, annotations).
  constexpr op_node& op(op_id i) { return ops_.at(i); }
  constexpr tensor_node& tensor(tensor_id i) { return tensors_.at(i); }

  // --- queries ---------------------------------------------------------------------------
  [[nodiscard]] constexpr const std::string& name() const noexcept { return name_; }
  [[nodiscard]] constexpr std::size_t num_tensors() const noexcept { return tensors_.size(); }
  [[nodiscard]] constexpr std::size_t num_ops() const noexcept { return ops_.size(); }
  [[nodiscard]] constexpr const tensor_node& tensor(tensor_id i) const { return tensors_.at(i); }
  [[nodiscard]] constexpr const op_node& op(op_id i) const { return ops_.at(i); }
  [[nodiscard]] constexpr const std::vector<tensor_node>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] constexpr const std::vector<op_node>& ops() const noexcept { return ops_; }
  [[nodiscard]] constexpr const std::vector<tensor_id>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] constexpr const std::vector<tensor_id>& outputs() const noexcept { return outputs_; }
  [[nodiscard]] constexpr const std::vector<opset_import>& opset_imports() const noexcept { return opsets_; }

  /// The opset version imported for `domain` (0 if none).
  [[nodiscard]] constexpr std::int64_t opset_version(std::string_view domain = onnx_domain) const noexcept {
    for (const auto& o : opsets_)
      if (o.domain == domain || (domain.empty() && o.domain == "ai.onnx")) return o.version;
    return 0;
  }

  /// Finds a tensor by name (linear: for tools and tests; importers keep their own index).
  [[nodiscard]] constexpr std::optional<tensor_id> find_tensor(std::string_view n) const noexcept {
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      if (tensors_[i].name == n) return static_cast<tensor_id>(i);
    return std::nullopt;
  }

  /// Like find_tensor, but throws an error naming the tensor when it is absent.
  [[nodiscard]] constexpr tensor_id tensor_id_of(std::string_view n) const {
    if (auto t = find_tensor(n)) return *t;
    throw error(error_category::graph, "no tensor named '" + std::string(n) + "'", "graph '" + name_ + "'",
                "check the spelling against the model's tensor names");
  }

  /// "Conv 'conv1'", or "Conv" when unnamed: how errors refer to an op.
  [[nodiscard]] static constexpr std::string describe(const op_node& op) {
    return op.type + (op.name.empty() ? std::string() : " '" + op.name + "'");
  }

  friend constexpr bool operator==(const graph&, const graph&) = default;

 private:
  constexpr void check_tensor_id(tensor_id t, const op_node& op) const {
    if (t >= tensors_.size())
      throw error(error_category::graph, "tensor id " + std::to_string(t) + " does not exist",
                  "op " + describe(op), "add the tensor to the graph before the op that uses it");
  }

  std::string name_;
  std::vector<tensor_node> tensors_;
  std::vector<op_node> ops_;
  std::vector<tensor_id> inputs_;
  std::vector<tensor_id> outputs_;
  std::vector<opset_import> opsets_;
};

}  // namespace ipu
