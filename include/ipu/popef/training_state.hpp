#pragma once
// A training step in a PopEF file, so that training resumes from the file: the step's executable
// (plan and graph) and metadata as for any model; one TensorData per weight, running statistic
// and optimizer state tensor, under the name of the step input that takes it; and the Opaque blob
// "training" (pb::TrainingState): the model computing its loss, the loss's name, the optimizer,
// gradient accumulation and the updates made so far.
//
//   ipu::popef::write_training(w, step, state, tensors);   // tensors: name -> current value
//   auto t = ipu::popef::load_training("step.popef");      // t.step, t.state, t.tensor("fc.weight")
//
// Every value read is checked: the optimizer's kind, attributes and settings (each known, each
// once, each one the optimizer can take), the model (a valid graph whose weights have TensorData),
// the loss (a tensor of the model).
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popef/graph_codec.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/popef/reader.hpp"
#include "ipu/popef/writer.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/optimizer.hpp"

namespace ipu::popef {

/// The Opaque blob of a training step's executable.
inline constexpr std::string_view training_blob_name = "training";

/// What rebuilds a training step around its model and resumes it.
struct training_state {
  graph model;       // computes the loss; the anchors are among its outputs
  std::string loss;  // the scalar tensor of `model` the step descends
  train::optimizer opt = train::sgd{};
  std::uint64_t gradient_accumulation = 1;
  train::accumulation_reduction reduction = train::accumulation_reduction::mean;
  std::uint64_t updates = 0;  // weight updates made before the export
  bool automatic_loss_scaling = false;
  std::uint64_t seed = 0;  // of the step's random ops (training-mode Dropout)
};

/// A training step read from PopEF.
struct training_file {
  compiled_model step;
  training_state state;
  std::map<std::string, byte_buffer, std::less<>> tensors;  // every TensorData of the step, by name

  /// The TensorData blob `name`, or an ipu::error (popef) saying it is missing.
  [[nodiscard]] const byte_buffer& tensor(std::string_view name) const {
    const auto it = tensors.find(name);
    if (it == tensors.end())
      throw error(error_category::popef, "the training step has no TensorData '" + std::string(name) + "'", step.name,
                  "the file is damaged or holds another model's step; export it again");
    return it->second;
  }
};

namespace detail {

inline pb::TrainingState training_state_to_proto(const training_state& s) {
  pb::TrainingState p;
  *p.mutable_model() = popef::graph_to_proto(s.model);
  p.set_loss(s.loss);
  p.set_optimizer(std::string(train::optimizer_name(s.opt)));
  for (const auto& a : train::attributes_of(s.opt)) {
    auto* pa = p.add_attributes();
    pa->set_name(std::string(a.name));
    pa->set_value(a.value.value());
    pa->set_variable(a.value.is_variable());
  }
  for (const auto& x : train::settings_of(s.opt)) {
    auto* px = p.add_settings();
    px->set_name(std::string(x.name));
    px->set_value(x.value);
  }
  p.set_gradient_accumulation(s.gradient_accumulation);
  p.set_reduction_sum(s.reduction == train::accumulation_reduction::sum);
  p.set_updates(s.updates);
  p.set_automatic_loss_scaling(s.automatic_loss_scaling);
  p.set_seed(s.seed);
  return p;
}

/// The optimizer `p` describes. Throws ipu::error (popef) for an unknown kind, an unknown,
/// repeated or missing attribute or setting, and values the optimizer refuses.
inline train::optimizer optimizer_from_proto(const pb::TrainingState& p, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, "the training state's optimizer: " + what, where,
                "the file is damaged or was not written by ipu; export it again");
  };
  auto o = train::optimizer_of_kind(p.optimizer());
  if (!o) fail("unknown kind '" + p.optimizer() + "'");
  const auto names = train::attributes_of(*o);
  std::vector<bool> seen(names.size(), false);
  for (const auto& a : p.attributes()) {
    std::size_t i = 0;
    while (i < names.size() && names[i].name != a.name()) ++i;
    if (i == names.size()) fail("no attribute '" + a.name() + "' in " + p.optimizer());
    if (seen[i]) fail("attribute '" + a.name() + "' is given twice");
    seen[i] = true;
    auto h = train::hyperparameter(a.value());
    if (!a.variable()) h.mark_as_constant();
    (void)train::set_attribute(*o, a.name(), h);
  }
  for (std::size_t i = 0; i < seen.size(); ++i)
    if (!seen[i]) fail("attribute '" + std::string(names[i].name) + "' is missing");
  // Settings are applied by name, then compared whole with what the optimizer now reports: an
  // unknown, repeated, missing or out-of-range setting shows as a difference.
  for (const auto& x : p.settings())
    if (x.name() != "optimizer" && !train::apply_setting(*o, x.name(), x.value()))
      fail("setting '" + x.name() + "' = " + std::to_string(x.value()) + " is not one " + p.optimizer() + " takes");
  const auto want = train::settings_of(*o);
  bool same = want.size() == static_cast<std::size_t>(p.settings_size());
  for (std::size_t i = 0; same && i < want.size(); ++i)
    same = want[i].name == p.settings(static_cast<int>(i)).name() && want[i].value == p.settings(static_cast<int>(i)).value();
  if (!same) fail("its settings are not those of " + p.optimizer() + " (each once, in order)");
  try {
    train::check(*o);
  } catch (const error& e) {
    fail(e.message());
  }
  return *o;
}

}  // namespace detail

/// The training state `p` describes, the model's weights bound by `weights`. Throws ipu::error
/// (popef) for anything damaged: no model or an invalid one, a loss that is no scalar tensor of it,
/// an optimizer optimizer_from_proto refuses, a gradient accumulation of 0 or over 2^31.
inline training_state training_state_from_proto(const pb::TrainingState& p, const weight_source& weights,
                                                const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, "the training state: " + what, where, "the file is damaged; export it again");
  };
  if (!p.has_model()) fail("it holds no model");
  training_state out;
  out.model = graph_from_proto(p.model(), weights, where);
  out.loss = p.loss();
  if (const auto t = out.model.find_tensor(out.loss); !t || out.model.tensor(*t).info.shape.rank() != 0)
    fail("the loss '" + p.loss() + "' is no scalar tensor of its model");
  out.opt = detail::optimizer_from_proto(p, where);
  if (p.gradient_accumulation() < 1 || p.gradient_accumulation() > (std::uint64_t{1} << 31))
    fail("its gradient accumulation is " + std::to_string(p.gradient_accumulation()));
  out.gradient_accumulation = p.gradient_accumulation();
  out.reduction = p.reduction_sum() ? train::accumulation_reduction::sum : train::accumulation_reduction::mean;
  if (p.updates() > (std::uint64_t{1} << 62)) fail("it counts " + std::to_string(p.updates()) + " updates");
  out.updates = p.updates();
  out.automatic_loss_scaling = p.automatic_loss_scaling();
  out.seed = p.seed();
  return out;
}

/// The message of `s` (its model's top-level weights left out, as in an Executable).
inline pb::TrainingState training_state_to_proto(const training_state& s) { return detail::training_state_to_proto(s); }

/// Writes the training step `step` (compiled from the step graph) with `state` and the current
/// value of every step input that resumes training (weights, running statistics, optimizer state),
/// by name. A value that is no anchor of the step (the optimizer state when gradient accumulation
/// splits the update into its own graph, a weight the step does not read) becomes an input anchor
/// of no program.
inline void write_training(writer& w, compiled_model step, const training_state& state,
                           const std::vector<std::pair<std::string, host_tensor>>& values, bool compress = true) {
  std::map<std::string, const host_tensor*, std::less<>> by_name;
  for (const auto& [name, t] : values)
    if (!by_name.emplace(name, &t).second)
      throw error(error_category::usage, "value '" + name + "' is given twice", "write_training", "give each value once");
  // The step's own weights (frozen or integer initializers) are written by write_model.
  for (const auto& t : step.model().tensors())
    if (t.kind == tensor_kind::variable && by_name.count(t.name))
      throw error(error_category::usage, "'" + t.name + "' is a constant weight of the step, not a value it trains",
                  "write_training", "give only the step's trained inputs");
  // The model's weights that the step neither reads nor trains still rebuild the model.
  std::vector<std::pair<std::string, host_tensor>> extra;
  for (const auto& t : state.model.tensors())
    if (t.kind == tensor_kind::variable && !by_name.count(t.name) && !step.model().find_tensor(t.name)) {
      host_tensor v(t.info);
      if (v.bytes().size() != t.data.bytes().size())
        throw error(error_category::graph, "weight '" + t.name + "' holds the wrong number of bytes", "write_training");
      if (!v.bytes().empty()) std::memcpy(v.bytes().data(), t.data.bytes().data(), v.bytes().size());
      extra.emplace_back(t.name, std::move(v));
    }
  for (const auto& [name, t] : extra) by_name.emplace(name, &t);
  for (const auto& [name, t] : by_name)
    if (const auto* a = step.metadata.find_anchor(name)) {
      if (a->info != t->info())
        throw error(error_category::usage,
                    "value '" + name + "' is " + to_string(t->info()) + " but the step's input is " + to_string(a->info),
                    "write_training", "give the value the step takes");
    } else {
      step.metadata.anchors.push_back({name, {}, t->info(), false, anchor_type::input, {}});
    }
  write_model(w, step, compress);
  for (const auto& [name, t] : by_name) w.write_tensor_data(name, t->info(), t->bytes());
  const auto bytes = detail::serialize_message(detail::training_state_to_proto(state), "the training state");
  w.write_opaque(training_blob_name, step.name, std::as_bytes(std::span(bytes.data(), bytes.size())), compress);
}

/// Reads the training step of `file` (its only executable, or `executable`). Throws ipu::error
/// (popef) for a file that is not a training step or whose state is damaged.
inline training_file load_training(const std::filesystem::path& file, std::string_view executable = {}) {
  reader r(std::span<const std::filesystem::path>(&file, 1));
  const popef::model m = model_builder(r).create_model(executable);
  const auto& where = m.executable.blob.location;
  const auto* blob = m.find_opaque(training_blob_name);
  if (!blob)
    throw error(error_category::popef,
                "executable '" + m.executable.name + "' has no Opaque blob '" + std::string(training_blob_name) +
                    "': it is not a training step",
                where, "export it from a training session (compile_and_export), or load it in an inference session");
  training_file out;
  for (const auto& t : m.tensors) out.tensors.emplace(t.name, t.data);
  out.step = load(m);
  pb::TrainingState p;
  const auto bytes = blob->decompressed();
  detail::parse_message(p, std::as_bytes(std::span(bytes.data(), bytes.size())), "the training state", blob->blob.location);
  auto weights = [&](const std::string& name, const tensor_info& info) -> byte_buffer {
    const auto it = out.tensors.find(name);
    if (it == out.tensors.end())
      throw error(error_category::popef, "the model's weight '" + name + "' has no TensorData", blob->blob.location,
                  "the file is damaged; export it again");
    if (it->second.bytes().size() != info.num_bytes())
      throw error(error_category::popef, "TensorData '" + name + "' does not hold " + to_string(info), blob->blob.location,
                  "the file is damaged; export it again");
    return it->second;
  };
  out.state = training_state_from_proto(p, weights, blob->blob.location);
  return out;
}

}  // namespace ipu::popef
