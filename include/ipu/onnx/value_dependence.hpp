#pragma once
// Structure that depends on the values of a model's inputs.
//
// The library plans static graphs (as Poplar compiles them): every shape, If branch, unrolled
// Loop and sequence position is settled at import. When one of them is computed from the value of
// an input - a Loop's trip count, an If's condition, a SequenceInsert's position, the size given
// to a window function - the importer throws a value_dependent_error naming the tensor it could
// not settle and the model inputs it is computed from. Giving those inputs' values at import
// (import_options::input_values) makes them constants, so the model is imported for those values,
// as PopART re-prepares a session for new input shapes. import_model_given_inputs (import.hpp)
// does this for a run whose inputs are at hand, binding only the inputs the importer asks for.
#include <onnx/onnx_pb.h>

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::onnx {

/// The importer cannot settle a shape or a sequence's structure because it is computed at run time.
class value_dependent_error : public error {
 public:
  /// `tensor`: the value that must be known at import; `inputs`: the model inputs it is computed
  /// from whose values would settle it (filled in by import_model, empty where none would).
  value_dependent_error(std::string tensor, std::vector<std::string> inputs, error_category category,
                        std::string message, std::string location = {}, std::string hint = {})
      : error(category, std::move(message), std::move(location), std::move(hint)),
        tensor_(std::move(tensor)),
        inputs_(std::move(inputs)) {}

  [[nodiscard]] const std::string& tensor() const noexcept { return tensor_; }
  [[nodiscard]] const std::vector<std::string>& inputs() const noexcept { return inputs_; }

 private:
  std::string tensor_;
  std::vector<std::string> inputs_;
};

namespace detail {

/// Every name a node reads: its inputs and, through its subgraphs, the outer values they use
/// (names a subgraph defines itself are included too; they match no graph input of the caller
/// unless they shadow one, which only widens the answer).
inline void names_read(const ::onnx::NodeProto& n, std::vector<std::string>& out) {
  for (const auto& i : n.input())
    if (!i.empty()) out.push_back(i);
  for (const auto& a : n.attribute()) {
    auto from = [&](const ::onnx::GraphProto& g) {
      for (const auto& sub : g.node()) names_read(sub, out);
      for (const auto& o : g.output()) out.push_back(o.name());
    };
    if (a.has_g()) from(a.g());
    for (const auto& g : a.graphs()) from(g);
  }
}

/// Whether `name` is defined inside one of `n`'s subgraphs (as a formal input or a node output).
inline bool defined_inside(const ::onnx::NodeProto& n, std::string_view name) {
  auto in = [&](const auto& self, const ::onnx::GraphProto& g) -> bool {
    for (const auto& v : g.input())
      if (v.name() == name) return true;
    for (const auto& sub : g.node()) {
      for (const auto& o : sub.output())
        if (o == name) return true;
      for (const auto& a : sub.attribute()) {
        if (a.has_g() && self(self, a.g())) return true;
        for (const auto& h : a.graphs())
          if (self(self, h)) return true;
      }
    }
    return false;
  };
  for (const auto& a : n.attribute()) {
    if (a.has_g() && in(in, a.g())) return true;
    for (const auto& g : a.graphs())
      if (in(in, g)) return true;
  }
  return false;
}

}  // namespace detail

/// The inputs of graph `g` (those without an initializer) from which `name` is computed, in the
/// graph's input order. A name defined inside a subgraph counts as computed from everything the
/// node owning that subgraph reads. Empty when `name` is not found.
inline std::vector<std::string> inputs_computing(const ::onnx::GraphProto& g, std::string_view name) {
  std::unordered_map<std::string, const ::onnx::NodeProto*> producer;
  for (const auto& n : g.node())
    for (const auto& o : n.output()) producer.emplace(o, &n);
  std::set<std::string, std::less<>> seen;
  std::vector<std::string> todo;
  if (producer.count(std::string(name)) || [&] {
        for (const auto& v : g.input())
          if (v.name() == name) return true;
        return false;
      }()) {
    todo.emplace_back(name);
  } else {
    for (const auto& n : g.node())
      if (detail::defined_inside(n, name)) detail::names_read(n, todo);
  }
  while (!todo.empty()) {
    auto v = std::move(todo.back());
    todo.pop_back();
    if (!seen.insert(v).second) continue;
    if (auto it = producer.find(v); it != producer.end()) detail::names_read(*it->second, todo);
  }
  std::set<std::string, std::less<>> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::string> inputs;
  for (const auto& v : g.input())
    if (seen.count(v.name()) && !initializers.count(v.name())) inputs.push_back(v.name());
  return inputs;
}

}  // namespace ipu::onnx
