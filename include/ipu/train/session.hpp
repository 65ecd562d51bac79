#pragma once
// A training session on the host device: the training step (ipu/train/training_graph.hpp) compiled
// once for the CPU device, run once per weight update with the weights and optimizer state it
// returned the step before.
//
//   ipu::train::training_session s(model, {.output = "fc", .loss = {.kind = loss_kind::mse}});
//   for (...) { auto r = s.run({{"x", x.view()}}, target.view()); use(r.loss); }
//   ipu::graph trained = s.trained_model();  // the model with its trained weights
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/training_graph.hpp"

namespace ipu::train {

/// Rows [first, first + n) of `all` (stacked samples, batch first), wrapping around at the end: the
/// micro-batch a step takes from a data set.
inline host_tensor take_rows(const host_tensor& all, std::int64_t first, std::int64_t n) {
  const auto& s = all.info().shape;
  if (s.rank() == 0 || s[0] < 1 || n < 1 || first < 0)
    throw error(error_category::usage,
                "cannot take " + std::to_string(n) + " rows from row " + std::to_string(first) + " of " + to_string(all.info()),
                "take_rows", "give stacked samples (batch first) and a positive number of rows");
  auto dims = s.dims();
  const auto total = dims[0];
  dims[0] = n;
  host_tensor t(tensor_info{all.info().type, shape(dims)});
  const auto row_bytes = t.bytes().size() / static_cast<std::size_t>(n);
  for (std::int64_t i = 0; i < n; ++i)
    std::memcpy(t.bytes().data() + static_cast<std::size_t>(i) * row_bytes,
                all.bytes().data() + static_cast<std::size_t>((first + i) % total) * row_bytes, row_bytes);
  return t;
}

/// What one step returns.
struct step_result {
  double loss = 0;                   // the loss before the update
  std::vector<host_tensor> outputs;  // the model's outputs, before the update
};

class training_session {
 public:
  explicit training_session(const graph& model, training_options options = {}, cpu::device_options device = {})
      : options_(std::move(options)), model_(model), tg_(make_training_graph(model, options_)),
        device_(tg_.step, device) {
    for (const auto& w : tg_.weights) {
      host_tensor t(w.info);
      const auto bytes = w.initial.bytes();
      if (bytes.size() != t.bytes().size())
        throw error(error_category::graph, "weight '" + w.name + "' holds " + std::to_string(bytes.size()) +
                                               " bytes but " + to_string(w.info) + " needs " +
                                               std::to_string(t.bytes().size()),
                    where());
      if (!bytes.empty()) std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
      weights_.push_back(std::move(t));
    }
    for (const auto& s : tg_.state) state_.emplace_back(s.info);  // zeroed
    for (const auto& b : tg_.buffers) {
      host_tensor t(b.info);
      const auto bytes = b.initial.bytes();
      if (bytes.size() != t.bytes().size())
        throw error(error_category::graph, "buffer '" + b.name + "' holds " + std::to_string(bytes.size()) + " bytes but " +
                                               to_string(b.info) + " needs " + std::to_string(t.bytes().size()),
                    where());
      if (!bytes.empty()) std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
      buffers_.push_back(std::move(t));
    }
    bind_inputs();
  }

  [[nodiscard]] const training_graph& graph_of_step() const noexcept { return tg_; }
  [[nodiscard]] std::uint64_t steps() const noexcept { return steps_; }
  [[nodiscard]] const optimizer& current_optimizer() const noexcept { return options_.opt; }

  /// Changes the optimizer's values for the next steps (PopART's updateOptimizerFromHost). A change
  /// to what shapes the step (the kind, momentum on or off, Nesterov, weight decay on or off) needs
  /// a new session.
  void set_optimizer(const optimizer& o) {
    check(o);
    if (structure_of(o) != tg_.structure)
      throw error(error_category::usage,
                  "the new optimizer (" + std::string(optimizer_name(o)) + ") changes the shape of the compiled step",
                  where(),
                  "keep the kind, and momentum, Nesterov and weight decay on or off as compiled; or build a new "
                  "session");
    options_.opt = o;
  }

  /// One weight update from one batch: the model's inputs by name, and the labels.
  step_result run(const std::vector<std::pair<std::string, const_tensor_view>>& inputs, const_tensor_view labels) {
    std::vector<const_tensor_view> views(bindings_.size());
    std::vector<bool> given(tg_.model_inputs.size(), false);
    for (const auto& [name, view] : inputs) {
      std::size_t i = 0;
      while (i < tg_.model_inputs.size() && tg_.model_inputs[i] != name) ++i;
      if (i == tg_.model_inputs.size())
        throw error(error_category::usage, "the model has no input named '" + name + "'", where(),
                    "its inputs are: " + join(tg_.model_inputs));
      if (given[i]) throw error(error_category::usage, "input '" + name + "' is given twice", where());
      given[i] = true;
      views[model_input_position_[i]] = view;
    }
    for (std::size_t i = 0; i < given.size(); ++i)
      if (!given[i])
        throw error(error_category::usage, "input '" + tg_.model_inputs[i] + "' is not given", where(),
                    "give every model input: " + join(tg_.model_inputs));
    views[labels_position_] = labels;
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (weight_position_[i] != npos) views[weight_position_[i]] = weights_[i].view();
    for (std::size_t i = 0; i < state_.size(); ++i) views[state_position_[i]] = state_[i].view();
    for (std::size_t i = 0; i < buffers_.size(); ++i) views[buffer_position_[i]] = buffers_[i].view();
    std::vector<host_tensor> scalars;
    scalars.reserve(hyper_.size());
    const auto values = hyperparameters(options_.opt, steps_);
    for (const auto& [name, position] : hyper_) {
      const auto& info = device_.model().tensor(device_.model().inputs()[position]).info;
      host_tensor t(info);
      if (name == "optimizer/first_step") {
        t.bytes()[0] = std::byte{steps_ == 0 ? std::uint8_t{1} : std::uint8_t{0}};
      } else {
        const auto found = std::find_if(values.begin(), values.end(), [&](const auto& p) { return p.first == name; });
        if (found == values.end())
          throw error(error_category::internal, "the optimizer gives no value for step input '" + name + "'", where());
        const double v = found->second;
        if (info.type == data_type::F64) t.as<double>()[0] = v;
        else t.as<float>()[0] = static_cast<float>(v);
      }
      scalars.push_back(std::move(t));
      views[position] = scalars.back().view();
    }
    auto out = device_.run(std::span<const const_tensor_view>(views));
    step_result r;
    const auto& loss = out[tg_.model_outputs.size()];
    r.loss = loss.info().type == data_type::F64 ? loss.as<double>()[0] : static_cast<double>(loss.as<float>()[0]);
    std::size_t k = tg_.model_outputs.size() + 1;
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (!tg_.weights[i].updated.empty()) weights_[i] = std::move(out[k++]);
    for (auto& s : state_) s = std::move(out[k++]);
    for (auto& b : buffers_) b = std::move(out[k++]);
    for (std::size_t i = 0; i < tg_.model_outputs.size(); ++i) r.outputs.push_back(std::move(out[i]));
    ++steps_;
    return r;
  }

  /// The current value of trained weight `name`.
  [[nodiscard]] const host_tensor& weight(std::string_view name) const {
    for (std::size_t i = 0; i < weights_.size(); ++i)
      if (tg_.weights[i].name == name) return weights_[i];
    throw error(error_category::usage, "no trained weight named '" + std::string(name) + "'", where());
  }
  [[nodiscard]] std::vector<std::string> weight_names() const {
    std::vector<std::string> n;
    for (const auto& w : tg_.weights) n.push_back(w.name);
    return n;
  }
  /// The current value of buffer `name` (a BatchNormalization running statistic).
  [[nodiscard]] const host_tensor& buffer(std::string_view name) const {
    for (std::size_t i = 0; i < buffers_.size(); ++i)
      if (tg_.buffers[i].name == name) return buffers_[i];
    throw error(error_category::usage, "no buffer named '" + std::string(name) + "'", where());
  }
  [[nodiscard]] std::vector<std::string> buffer_names() const {
    std::vector<std::string> n;
    for (const auto& b : tg_.buffers) n.push_back(b.name);
    return n;
  }

  /// The model with its weights as trained so far (PopART's modelToHost).
  [[nodiscard]] graph trained_model() const {
    graph g(model_.name());
    std::vector<bool> now_data(model_.num_tensors(), false);  // buffers the model computed by an Identity
    for (tensor_id t = 0; t < model_.num_tensors(); ++t) {
      const auto& n = model_.tensor(t);
      byte_buffer data = n.data;
      auto kind = n.kind;
      for (std::size_t i = 0; i < weights_.size(); ++i)
        if (tg_.weights[i].name == n.name) data = byte_buffer::copy(weights_[i].bytes());
      for (std::size_t i = 0; i < buffers_.size(); ++i)
        if (tg_.buffers[i].name == n.name) {
          data = byte_buffer::copy(buffers_[i].bytes());
          if (kind == tensor_kind::intermediate) {
            kind = tensor_kind::variable;
            now_data[t] = true;
          }
        }
      g.add_tensor(n.name, n.info, kind, std::move(data));
    }
    for (const auto& op : model_.ops())
      if (op.outputs.size() != 1 || !now_data[op.outputs[0]]) g.add_op(op);
    for (auto t : model_.outputs()) g.mark_output(t);
    g.set_opset_imports(model_.opset_imports());
    return g;
  }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  std::string where() const { return "training session of '" + model_.name() + "'"; }
  static std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
  }

  /// Where each kind of input sits among the step graph's inputs.
  void bind_inputs() {
    const auto& g = device_.model();
    const auto& ids = g.inputs();
    auto position = [&](std::string_view name) {
      for (std::size_t i = 0; i < ids.size(); ++i)
        if (g.tensor(ids[i]).name == name) return i;
      return npos;
    };
    for (const auto& n : tg_.model_inputs) model_input_position_.push_back(position(n));
    labels_position_ = position(tg_.labels);
    for (const auto& w : tg_.weights) weight_position_.push_back(position(w.name));
    for (const auto& s : tg_.state) state_position_.push_back(position(s.input));
    for (const auto& b : tg_.buffers) buffer_position_.push_back(position(b.name));
    bindings_.assign(ids.size(), false);
    auto bind = [&](std::size_t p) {
      if (p != npos) bindings_[p] = true;
    };
    for (auto p : model_input_position_) bind(p);
    bind(labels_position_);
    for (auto p : weight_position_) bind(p);
    for (auto p : state_position_) bind(p);
    for (auto p : buffer_position_) bind(p);
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (!bindings_[i]) {
        const auto& name = g.tensor(ids[i]).name;
        if (name.rfind("optimizer/", 0) != 0)
          throw error(error_category::internal, "step input '" + name + "' has no source", where());
        hyper_.push_back({name, i});
        bindings_[i] = true;
      }
  }

  training_options options_;
  graph model_;
  training_graph tg_;
  cpu::device device_;
  std::vector<host_tensor> weights_, state_, buffers_;
  std::vector<std::size_t> model_input_position_, weight_position_, state_position_, buffer_position_;
  std::size_t labels_position_ = npos;
  std::vector<std::pair<std::string, std::size_t>> hyper_;
  std::vector<bool> bindings_;
  std::uint64_t steps_ = 0;
};

}  // namespace ipu::train
