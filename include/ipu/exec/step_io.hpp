#pragma once
// PopART's StepIO: the host arrays of one step — an array per graph input holding every
// micro-batch the step consumes, and an array per anchor receiving what the step returns.
//
//   auto layout = ipu::step_layout::of(model, flow, {.batches_per_step = 4, .replicas = 2});
//   ipu::host_tensor x(layout.input_info("x"));            // F32[4,2,...]: batches x replicas
//   auto anchors = layout.make_anchor_arrays();
//   ipu::step_io io;
//   io.set_input("x", x.view());
//   for (auto& [name, array] : anchors) io.set_output(name, array.view());
//   layout.check(io);  // the executor does this too
//
// Like PopART, an array is checked by element count and element type, not by shape: any shape
// with batches x accumulation x replicas x the tensor's elements is accepted.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/tensor.hpp"

namespace ipu {

class step_io {
 public:
  step_io() = default;
  step_io(std::vector<std::pair<std::string, const_tensor_view>> inputs,
          std::vector<std::pair<std::string, tensor_view>> outputs) {
    for (auto& [name, v] : inputs) set_input(name, v);
    for (auto& [name, v] : outputs) set_output(name, v);
  }
  /// Inputs by name, and the anchor arrays (e.g. from step_layout::make_anchor_arrays) as outputs.
  step_io(const std::vector<std::pair<std::string, const_tensor_view>>& inputs, std::map<std::string, host_tensor>& anchors) {
    for (const auto& [name, v] : inputs) set_input(name, v);
    for (auto& [name, t] : anchors) set_output(name, t.view());
  }

  /// Sets (or replaces) the array for input `name`.
  step_io& set_input(std::string_view name, const_tensor_view data) {
    set(inputs_, name, data);
    return *this;
  }
  /// Sets (or replaces) the array anchor `name` is written to.
  step_io& set_output(std::string_view name, tensor_view data) {
    set(outputs_, name, data);
    return *this;
  }

  [[nodiscard]] const const_tensor_view* input(std::string_view name) const noexcept { return find(inputs_, name); }
  [[nodiscard]] const tensor_view* output(std::string_view name) const noexcept { return find(outputs_, name); }
  [[nodiscard]] const std::vector<std::pair<std::string, const_tensor_view>>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] const std::vector<std::pair<std::string, tensor_view>>& outputs() const noexcept { return outputs_; }

 private:
  template <class V>
  static void set(std::vector<std::pair<std::string, V>>& list, std::string_view name, const V& v) {
    for (auto& [n, old] : list)
      if (n == name) {
        old = v;
        return;
      }
    list.emplace_back(std::string(name), v);
  }
  template <class V>
  static const V* find(const std::vector<std::pair<std::string, V>>& list, std::string_view name) noexcept {
    for (const auto& [n, v] : list)
      if (n == name) return &v;
    return nullptr;
  }

  std::vector<std::pair<std::string, const_tensor_view>> inputs_;
  std::vector<std::pair<std::string, tensor_view>> outputs_;
};

/// What the arrays of one step must hold for a model and a data flow.
struct step_layout {
  struct stream {
    std::string name;
    tensor_id tensor = no_tensor;
    tensor_info info;           // one micro-batch's value
    anchor_return_type type{};  // anchors only
    std::uint64_t slices = 1;   // values in the host array
  };

  step_counts counts;
  /// Consecutive replicas in groups of this size read the same input slice (PopTorch's
  /// inputReplicaGrouping): input arrays have replicas / input_group_size replica slices.
  std::uint64_t input_group_size = 1;
  std::vector<stream> inputs;   // in graph input order
  std::vector<stream> anchors;  // in data flow order

  /// Replica slices per micro-batch in an input array.
  [[nodiscard]] std::uint64_t input_replicas() const noexcept { return counts.replicas / input_group_size; }

  /// Throws ipu::error (usage) for an anchor that names no tensor of `g`, that the data flow's
  /// batches per step disagree with `counts`, or a group size not dividing the replicas.
  static step_layout of(const graph& g, const data_flow& flow, step_counts counts, std::uint64_t input_group_size = 1) {
    if (counts.batches_per_step != flow.batches_per_step())
      throw error(error_category::usage,
                  "the data flow runs " + std::to_string(flow.batches_per_step()) + " batches per step but " +
                      std::to_string(counts.batches_per_step) + " were planned",
                  "step layout, graph '" + g.name() + "'", "plan with the data flow's batches per step");
    if (counts.accumulation == 0 || counts.replicas == 0)
      throw error(error_category::usage, "gradient accumulation and replication must be at least 1",
                  "step layout, graph '" + g.name() + "'");
    if (input_group_size == 0 || counts.replicas % input_group_size != 0)
      throw error(error_category::usage,
                  "input replica groups of " + std::to_string(input_group_size) + " do not divide " +
                      std::to_string(counts.replicas) + " replicas",
                  "step layout, graph '" + g.name() + "'", "use a group size dividing the replication factor");
    step_layout l;
    l.counts = counts;
    l.input_group_size = input_group_size;
    for (auto t : g.inputs())
      l.inputs.push_back(stream{g.tensor(t).name, t, g.tensor(t).info, {}, counts.micro_batches() * l.input_replicas()});
    for (const auto& a : flow.anchors()) {
      const auto t = g.find_tensor(a.name);
      if (!t)
        throw error(error_category::usage, "anchor '" + a.name + "' is not a tensor of the model",
                    "data flow, graph '" + g.name() + "'", "anchor one of the model's tensors, e.g. an output");
      l.anchors.push_back(stream{a.name, *t, g.tensor(*t).info, a.type, a.type.fetches(counts) * counts.replicas});
    }
    return l;
  }

  [[nodiscard]] const stream* find_input(std::string_view name) const noexcept { return find(inputs, name); }
  [[nodiscard]] const stream* find_anchor(std::string_view name) const noexcept { return find(anchors, name); }

  /// The array shape input `name` takes, e.g. F32[bps, replicas, 3, 224, 224].
  [[nodiscard]] tensor_info input_info(std::string_view name) const {
    const auto* s = find_input(name);
    if (!s) throw error(error_category::usage, "no graph input named '" + std::string(name) + "'", "step layout", hint_inputs());
    step_counts c = counts;
    c.replicas = input_replicas();
    return {s->info.type, input_array_shape(s->info.shape, c)};
  }
  /// The array shape anchor `name` fills.
  [[nodiscard]] tensor_info anchor_info(std::string_view name) const {
    const auto* s = find_anchor(name);
    if (!s) throw error(error_category::usage, "'" + std::string(name) + "' is not an anchor", "step layout", hint_anchors());
    return {s->info.type, anchor_array_shape(s->info.shape, s->type, counts)};
  }
  /// One zeroed array per anchor (PopART's initAnchorArrays).
  [[nodiscard]] std::map<std::string, host_tensor> make_anchor_arrays() const {
    std::map<std::string, host_tensor> out;
    for (const auto& a : anchors) out.emplace(a.name, host_tensor(anchor_info(a.name)));
    return out;
  }

  /// Throws ipu::error naming the tensor when an array is missing, unknown, of another element
  /// type, or holds another number of elements than expected (saying both counts).
  void check(const step_io& io) const {
    for (const auto& s : inputs) {
      const auto* v = io.input(s.name);
      if (!v)
        throw error(error_category::usage, "no array for input '" + s.name + "'", "step io", hint_inputs());
      check_array(s, v->info(), v->data() != nullptr, "input");
    }
    for (const auto& [name, v] : io.inputs())
      if (!find_input(name))
        throw error(error_category::usage, "an array is given for '" + name + "', which is not a graph input", "step io",
                    hint_inputs());
    for (const auto& s : anchors) {
      const auto* v = io.output(s.name);
      if (!v)
        throw error(error_category::usage, "no array for anchor '" + s.name + "'", "step io", hint_anchors());
      check_array(s, v->info(), v->data() != nullptr, "anchor");
    }
    for (const auto& [name, v] : io.outputs())
      if (!find_anchor(name))
        throw error(error_category::usage, "an output array is given for '" + name + "', which is not an anchor",
                    "step io", hint_anchors());
  }

 private:
  static const stream* find(const std::vector<stream>& list, std::string_view name) noexcept {
    for (const auto& s : list)
      if (s.name == name) return &s;
    return nullptr;
  }
  [[nodiscard]] std::string hint_inputs() const {
    std::string s;
    for (const auto& i : inputs) s += (s.empty() ? "" : ", ") + i.name;
    return "the graph inputs are: " + (s.empty() ? std::string("none") : s);
  }
  [[nodiscard]] std::string hint_anchors() const {
    std::string s;
    for (const auto& a : anchors) s += (s.empty() ? "" : ", ") + a.name;
    return "the anchors are: " + (s.empty() ? std::string("none") : s);
  }
  [[nodiscard]] std::string composition(const stream& s, bool is_input) const {
    const auto per = std::to_string(s.info.num_elements());
    if (is_input)
      return std::to_string(counts.batches_per_step) + " batches x " + std::to_string(counts.accumulation) +
             " accumulation x " + std::to_string(input_replicas()) +
             (input_group_size == 1 ? " replicas" : " replica groups") + " x " + per + " elements of " +
             to_string(s.info);
    return std::to_string(s.type.fetches(counts)) + " values per replica (" + to_string(s.type) + ") x " +
           std::to_string(counts.replicas) + " replicas x " + per + " elements of " + to_string(s.info);
  }
  void check_array(const stream& s, const tensor_info& got, bool has_data, const char* what) const {
    const bool is_input = what[0] == 'i';
    if (got.type != s.info.type)
      throw error(error_category::shape,
                  std::string(what) + " '" + s.name + "' is given " + std::string(to_string(got.type)) +
                      " elements but the tensor holds " + std::string(to_string(s.info.type)),
                  "step io", "pass an array of " + std::string(to_string(s.info.type)));
    const auto expected = s.slices * static_cast<std::uint64_t>(s.info.num_elements());
    const auto received = static_cast<std::uint64_t>(got.num_elements());
    if (received != expected)
      throw error(error_category::shape,
                  "unexpected number of " + std::string(what) + " elements for tensor '" + s.name + "': expected " +
                      std::to_string(expected) + " but received " + std::to_string(received),
                  "step io", "the array holds " + composition(s, is_input));
    if (!has_data && expected != 0)
      throw error(error_category::usage, std::string(what) + " '" + s.name + "' is an empty view", "step io",
                  "pass an array with data");
  }
};

}  // namespace ipu
