#pragma once
// PopART's TrainingSession: a model that computes its own loss (the Builder's nllloss, l1loss or
// identityloss, or any scalar), the loss tensor's name, an optimizer, a data flow, a device and
// options. One run() is `batches per step` weight updates, each from `gradient accumulation`
// micro-batches; the anchors return what the data flow asks for.
//
//   ipu::builder b("mlp");  ... auto probs = b.softmax(logits);
//   auto labels = b.add_input_tensor({ipu::data_type::S32, {4}}, "labels");
//   auto loss = ipu::train::nllloss(b, probs, labels);
//   ipu::runtime::training_session s(std::move(b).build(), ipu::data_flow(10, {{b.name_of(loss),
//                                    ipu::anchor_return_type::all()}}), b.name_of(loss), ipu::train::const_sgd(0.001));
//   s.prepare_device();                        // the training step, planned for the device
//   auto anchors = s.init_anchor_arrays();
//   ipu::step_io io({{"x", x.view()}, {"labels", y.view()}}, anchors);  // 10 batches of 4
//   s.run(io);                                 // 10 weight updates
//   s.weights_to_host(); s.read_weights(arrays); s.model_to_host("trained.onnx");
//
// The step runs on the host's kernels (ipu/train/session.hpp), exactly; prepare_device() also plans
// it for the device, which must hold it (executable() has the plan and its predicted figures).
// Weights move as in PopART: write_weights() sets the host's copy, weights_from_host() sends it to
// the device, weights_to_host() fetches the device's, read_weights() reads the host's copy.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/compile/compile.hpp"
#include "ipu/error.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/log.hpp"
#include "ipu/onnx/export.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/popart/batches_per_step.hpp"
#include "ipu/popart/session_options.hpp"
#include "ipu/popart/signature.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popef/training_state.hpp"
#include "ipu/popef/writer.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/runtime/session.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/optimizer.hpp"
#include "ipu/train/session.hpp"

namespace ipu::runtime {

class training_session {
 public:
  /// A model built in this process; `loss` names the scalar tensor it computes as its loss. The
  /// options may set device iterations (equal to the data flow's batches per step), gradient
  /// accumulation, the replication factor (R replicas, train::replication: an update takes
  /// accumulation x R micro-batches, input arrays are [batches, accumulation, R, *tensor]; see
  /// session_options.hpp for PopART's names), inputReplicaGrouping (input arrays hold one slice per
  /// input group instead of per replica), their reduction type, the random seed (the masks of training-mode Dropout) and the
  /// log level; any other option is an ipu::error
  /// (usage) naming it, as are a loss that is not a scalar tensor of the model, an anchor naming
  /// no tensor, and an op on a weight's path to the loss without a gradient rule.
  training_session(graph model, data_flow flow, std::string loss, train::optimizer opt, target_device device = {},
                   ipu::options options = {})
      : model_(std::move(model)), flow_(std::move(flow)), loss_(std::move(loss)), opt_(std::move(opt)), device_(std::move(device)),
        options_(std::move(options)) {
    if (options_.log_level()) log::set_level(*options_.log_level());
    check_options();
    train::check(opt_);
    mark_anchors_as_outputs();
    counts_ = {flow_.batches_per_step(), static_cast<std::uint64_t>(options_.gradient_accumulation()),
               static_cast<std::uint64_t>(options_.replication_factor())};
    // PopTorch's inputReplicaGrouping, as its training wrapper applies it: the replicas of one input
    // group take the same data, so an input array holds one slice per group, not per replica.
    train::replication_options replication{.replicas = options_.replication_factor()};
    if (options_.input_group_size() != 1 || options_.input_group_type() != comm_group_type::ungrouped) {
      const auto type = options_.input_group_type();
      replication.inputs = train::replica_grouping{
          type == comm_group_type::all           ? train::comm_group_type::all
          : type == comm_group_type::consecutive ? train::comm_group_type::consecutive
          : type == comm_group_type::orthogonal  ? train::comm_group_type::orthogonal
                                                 : train::comm_group_type::none,
          options_.input_group_size()};
      input_groups_ = static_cast<std::uint64_t>(
          train::groups_of(*replication.inputs, options_.replication_factor(), "inputReplicaGrouping").count);
    } else {
      input_groups_ = counts_.replicas;
    }
    layout_ = step_layout::of(model_, flow_, counts_, counts_.replicas / input_groups_);
    for (const auto& a : flow_.anchors())
      if (a.type.id() == anchor_return_type_id::sum) {
        const auto type = model_.tensor(*model_.find_tensor(a.name)).info.type;
        if (type != data_type::F32 && type != data_type::F64 && type != data_type::S32 && type != data_type::S64)
          throw error(error_category::usage, "anchor '" + a.name + "' is " + std::string(to_string(type)) +
                                                 " and returns Sum: only F32, F64, S32 and S64 values are added",
                      where(), "return it with All, EveryN or Final");
      }
    for (tensor_id t = 0; t < model_.num_tensors(); ++t)
      if (const auto& n = model_.tensor(t); n.kind == tensor_kind::variable && is_floating_point(n.info.type))
        host_weights_.emplace(n.name, copy_of(n.name, n.info, n.data.bytes()));
    // The step is built now, so that a loss or op it cannot train through is refused before any work.
    train::training_options o;
    o.output = loss_;
    o.loss.kind = train::loss_kind::output;
    o.opt = opt_;
    o.gradient_accumulation = options_.gradient_accumulation();
    o.auto_loss_scaling.enabled = options_.automatic_loss_scaling();
    o.seed = options_.random_seed().value_or(0);  // PopTorch's randomSeed; unset, the training step's default
    o.reduction = options_.accumulation_and_replication_reduction_type() == reduction_type::sum
                      ? train::accumulation_reduction::sum
                      : train::accumulation_reduction::mean;
    // Replicas run through train::replication: each accumulation index's R micro-batches at once,
    // their gradients reduced in the order of [accumulation][replica], PopART's layout of the data.
    session_ = std::make_unique<train::training_session>(model_, o, cpu::device_options{}, train::output_mode::all,
                                                         std::move(replication));
    if (counts_.accumulation * counts_.replicas > 1)
      for (auto t : model_.inputs())
        if (model_.tensor(t).info.shape.rank() == 0)
          throw error(error_category::usage,
                      "input '" + model_.tensor(t).name + "' is a scalar; gradient accumulation and replication stack "
                                                          "micro-batches along an input's first axis",
                      where(), "give the input a batch axis");
  }
  /// An ONNX file (PopART's TrainingSession::createFromOnnxModel).
  training_session(const std::filesystem::path& onnx_model, data_flow flow, std::string loss, train::optimizer opt,
                   target_device device = {}, ipu::options options = {}, const onnx::import_options& import = {})
      : training_session(onnx::load_model(onnx_model, import), std::move(flow), std::move(loss), std::move(opt),
                         std::move(device), std::move(options)) {}

  training_session(training_session&&) noexcept = default;
  training_session& operator=(training_session&&) noexcept = default;

  /// Plans the training step for the device (an ipu::error when it does not fit) and loads the
  /// host's weights onto the device (PopART's prepareDevice + weightsFromHost).
  void prepare_device() {
    if (!compiled_) compiled_ = popef::compile(session_->graph_of_step().step, ipu::options{}, device_.description());
    prepared_ = true;
    weights_from_host();
  }

  /// Plans the training step (unless planned or loaded already) and writes it as a PopEF file
  /// that training resumes from (PopART's compileAndExport; no device needed): the executable, and
  /// as TensorData the weights and running statistics (the device's once prepared, else the
  /// host's copy) and the optimizer's state, with the model, the loss, the optimizer and the
  /// updates made (popef/training_state.hpp).
  void compile_and_export(const std::filesystem::path& popef_file, bool compress = true) {
    refuse_replicated_popef("compile_and_export");
    if (!compiled_) compiled_ = popef::compile(session_->graph_of_step().step, ipu::options{}, device_.description());
    popef::training_state st;
    st.model = model_;
    st.loss = loss_;
    st.opt = session_->current_optimizer();  // with automatic loss scaling, the scale reached
    st.gradient_accumulation = counts_.accumulation;
    st.reduction = reduction();
    st.updates = session_->steps();
    st.automatic_loss_scaling = options_.automatic_loss_scaling();
    st.seed = options_.random_seed().value_or(0);
    std::vector<std::pair<std::string, host_tensor>> values;
    for (const auto& n : session_->weight_names()) values.emplace_back(n, prepared_ ? session_->weight(n) : host_weights_.at(n));
    for (const auto& n : session_->buffer_names()) values.emplace_back(n, prepared_ ? session_->buffer(n) : host_weights_.at(n));
    for (auto& [name, t] : session_->optimizer_state())
      if (name != "step") values.emplace_back(name, std::move(t));
    popef::writer w(popef_file);
    popef::write_training(w, *compiled_, st, values, compress);
    w.close();
  }

  /// A session on a training step exported by compile_and_export: the model, loss and optimizer
  /// come from the file, and training resumes where it stopped (weights, running statistics,
  /// optimizer state, update count). The options may set what a session's options may; gradient
  /// accumulation and its reduction are the file's (options that set others are refused). The data
  /// flow's anchors must be those the step was exported with. The random seed and automatic loss
  /// scaling are the file's too.
  static training_session from_executable(const std::filesystem::path& popef_file, data_flow flow, target_device device = {},
                                          ipu::options options = {}) {
    auto f = popef::load_training(popef_file);
    const auto file_reduction = f.state.reduction == train::accumulation_reduction::sum ? reduction_type::sum : reduction_type::mean;
    const auto accumulation = static_cast<std::int64_t>(f.state.gradient_accumulation);
    if ((options.gradient_accumulation() != 1 && options.gradient_accumulation() != accumulation) ||
        (options.accumulation_and_replication_reduction_type() != reduction_type::mean &&
         options.accumulation_and_replication_reduction_type() != file_reduction))
      throw error(error_category::usage,
                  "the options ask for another gradient accumulation or reduction than the step in " + popef_file.string() +
                      " was compiled with (" + std::to_string(accumulation) + ", " +
                      (file_reduction == reduction_type::sum ? "sum" : "mean") + ")",
                  "training session from " + popef_file.string(), "leave them unset: the file's are used");
    if (options.automatic_loss_scaling() && !f.state.automatic_loss_scaling)
      throw error(error_category::usage,
                  "the options turn automatic loss scaling on, but the step in " + popef_file.string() + " trained without it",
                  "training session from " + popef_file.string(), "leave it unset: the file's setting is used");
    options.gradient_accumulation(accumulation);
    options.accumulation_and_replication_reduction_type(file_reduction);
    options.automatic_loss_scaling(f.state.automatic_loss_scaling);
    if (options.random_seed() && *options.random_seed() != f.state.seed)
      throw error(error_category::usage,
                  "the options ask for random seed " + std::to_string(*options.random_seed()) + ", the step in " +
                      popef_file.string() + " was trained with " + std::to_string(f.state.seed),
                  "training session from " + popef_file.string(), "leave it unset: the file's seed is used");
    options.random_seed(f.state.seed);
    auto model = f.state.model;
    auto loss = f.state.loss;
    auto opt = f.state.opt;
    training_session s(std::move(model), std::move(flow), std::move(loss), std::move(opt), std::move(device), std::move(options));
    s.refuse_replicated_popef("from_executable");
    s.adopt(std::move(f), popef_file);
    return s;
  }

  /// PopART's loadExecutableFromFile: prepare_device() uses the training step in `popef_file`
  /// instead of planning one, and training resumes from its weights, running statistics,
  /// optimizer state and update count. The session's optimizer stays (its variable attributes may
  /// differ from the file's; what is compiled into the step may not). Throws ipu::error when the
  /// session is prepared already, or the file holds the step of another model, loss, optimizer,
  /// gradient accumulation or set of anchors.
  void load_executable(const std::filesystem::path& popef_file) {
    if (prepared_)
      throw error(error_category::usage, "load_executable after prepare_device", where(),
                  "load the executable before preparing the device");
    refuse_replicated_popef("load_executable");
    auto f = popef::load_training(popef_file);
    const std::string fix = "load a step exported from this model with this loss, optimizer and options";
    if (f.state.loss != loss_)
      throw error(error_category::usage,
                  "the step in " + popef_file.string() + " descends loss '" + f.state.loss + "', this session '" + loss_ + "'",
                  where(), fix);
    if (f.state.gradient_accumulation != counts_.accumulation ||
        f.state.reduction != reduction())
      throw error(error_category::usage,
                  "the step in " + popef_file.string() + " was compiled for gradient accumulation " +
                      std::to_string(f.state.gradient_accumulation) + " (" +
                      (f.state.reduction == train::accumulation_reduction::sum ? "sum" : "mean") + "), this session's is " +
                      std::to_string(counts_.accumulation),
                  where(), fix);
    if (f.state.automatic_loss_scaling != options_.automatic_loss_scaling())
      throw error(error_category::usage,
                  "the step in " + popef_file.string() + " trained " +
                      (f.state.automatic_loss_scaling ? "with" : "without") + " automatic loss scaling, this session " +
                      (options_.automatic_loss_scaling() ? "with" : "without") + " it",
                  where(), fix);
    if (f.state.seed != options_.random_seed().value_or(0))
      throw error(error_category::usage,
                  "the step in " + popef_file.string() + " was trained with random seed " + std::to_string(f.state.seed) +
                      ", this session's is " + std::to_string(options_.random_seed().value_or(0)),
                  where(), "set the session's randomSeed to the file's");
    train::check_same_step(f.state.opt, opt_, where() + ", loading " + popef_file.string());
    adopt(std::move(f), popef_file);
  }

  /// True when the training step came from a PopEF file (load_executable, from_executable).
  [[nodiscard]] bool is_loaded_from_file() const noexcept { return !loaded_from_.empty(); }
  [[nodiscard]] const std::filesystem::path& loaded_from() const noexcept { return loaded_from_; }

  /// Sends the host's copy of the weights to the device (after write_weights()).
  void weights_from_host() {
    auto& s = prepared("weights_from_host()");
    for (const auto& [name, value] : host_weights_)
      if (contains(s.weight_names(), name)) s.set_weight(name, value.view());
      else if (contains(s.buffer_names(), name)) s.set_buffer(name, value.view());
  }
  /// Fetches the device's weights into the host's copy (before read_weights() or model_to_host()).
  void weights_to_host() {
    const auto& s = prepared("weights_to_host()");
    for (const auto& name : s.weight_names()) host_weights_.at(name) = s.weight(name);
    for (const auto& name : s.buffer_names()) host_weights_.at(name) = s.buffer(name);
  }
  /// Copies the host's copy of each named weight into its array (PopART's readWeights). Throws
  /// ipu::error (usage) for a name that is no weight and an array of another type or shape.
  void read_weights(const std::map<std::string, tensor_view>& arrays) const {
    for (const auto& [name, out] : arrays) {
      const auto& w = host_weight(name);
      check_array(name, out.info(), w.info());
      std::memcpy(out.data(), w.bytes().data(), w.bytes().size());
    }
  }
  /// Sets the host's copy of each named weight (PopART's writeWeights); weights_from_host() sends
  /// them. Nothing changes unless every array is right.
  void write_weights(const std::map<std::string, const_tensor_view>& arrays) {
    for (const auto& [name, in] : arrays) check_array(name, in.info(), host_weight(name).info());
    for (const auto& [name, in] : arrays) host_weights_.at(name) = copy_of(name, in.info(), in.bytes());
  }

  /// Runs `batches per step` weight updates (PopART's run(stepio)): every input array holds
  /// [batches, accumulation, replicas, *tensor] (dimensions of 1 left out; with inputReplicaGrouping,
  /// one slice per input group in place of the replicas: replica r reads its group's slice), every anchor array is filled as
  /// its return type says. Throws ipu::error (usage) before prepare_device() and for missing or
  /// mis-sized arrays; a failed update leaves the weights of the updates before it.
  void run(step_io& io) {
    auto& s = prepared("run()");
    layout_.check(io);
    // One update takes G x R micro-batches, [accumulation][replica] as the arrays hold them.
    const auto replicas = counts_.replicas, micro = counts_.accumulation * replicas;
    const auto given = counts_.accumulation * input_groups_;  // the input arrays' micro-batches per update
    const auto& tg = s.graph_of_step();
    for (std::uint64_t b = 0; b < counts_.batches_per_step; ++b) {
      std::vector<std::pair<std::string, const_tensor_view>> inputs;
      for (const auto& name : tg.model_inputs) {
        const auto& info = model_.tensor(*model_.find_tensor(name)).info;
        auto dims = info.shape.dims();
        if (given > 1) dims[0] *= static_cast<std::int64_t>(given);
        const tensor_info batch{info.type, shape(dims)};
        inputs.emplace_back(name, const_tensor_view(batch, io.input(name)->data() + b * batch.num_bytes()));
      }
      const auto r = s.run(inputs);
      for (const auto& a : flow_.anchors()) {
        const auto i = index_of(tg.model_outputs, a.name);
        const auto& all = r.outputs[i];  // micro-batch j's value at j * n
        const auto n = all.bytes().size() / micro;
        auto* out = io.output(a.name);
        for (std::uint64_t j = 0; j < micro; ++j) {
          const auto m = b * counts_.accumulation + j / replicas, replica = j % replicas;  // this replica's micro-batch m
          const auto f = a.type.fetch_of(m, counts_);
          if (!f) continue;
          auto* dst = out->data() + (*f * replicas + replica) * n;
          const auto* src = all.bytes().data() + j * n;
          if (a.type.id() == anchor_return_type_id::sum && m > 0) add_into(dst, src, all.info().type, n);
          else std::memcpy(dst, src, n);
        }
      }
      ++updates_;
    }
  }

  /// Changes the optimizer's variable attributes for the next updates (PopART's
  /// updateOptimizerFromHost); a constant attribute, the kind or a flag cannot change.
  void update_optimizer_from_host(const train::optimizer& o) {
    prepared("update_optimizer_from_host()").set_optimizer(o);
    opt_ = o;
  }

  /// Writes the model with the device's weights as an ONNX file (PopART's modelToHost), and
  /// fetches them into the host's copy as weights_to_host() does.
  void model_to_host(const std::filesystem::path& onnx_file) {
    weights_to_host();
    onnx::save_model(prepared("model_to_host()").trained_model(), onnx_file);
  }

  /// One zeroed array per anchor, shaped by its return type (PopART's initAnchorArrays).
  [[nodiscard]] std::map<std::string, host_tensor> init_anchor_arrays() const { return layout_.make_anchor_arrays(); }
  /// The array input `name` takes in a run, e.g. F32[batches, accumulation, ...].
  [[nodiscard]] tensor_info input_array_info(std::string_view name) const { return layout_.input_info(name); }

  [[nodiscard]] bool is_prepared() const noexcept { return prepared_; }
  /// Weight updates run so far.
  [[nodiscard]] std::uint64_t updates() const noexcept { return updates_; }
  [[nodiscard]] const graph& model() const noexcept { return model_; }
  [[nodiscard]] const data_flow& flow() const noexcept { return flow_; }
  [[nodiscard]] const ipu::options& options() const noexcept { return options_; }
  /// The training step planned for the device. Throws ipu::error (usage) before prepare_device().
  [[nodiscard]] const popef::compiled_model& executable() const {
    (void)prepared("executable()");
    return *compiled_;
  }
  /// The host training session running the step. Throws ipu::error (usage) before prepare_device().
  [[nodiscard]] const train::training_session& host_session() const { return prepared("host_session()"); }

 private:
  [[nodiscard]] std::string where() const { return "training session for '" + model_.name() + "'"; }

  [[nodiscard]] train::accumulation_reduction reduction() const {
    return options_.accumulation_and_replication_reduction_type() == reduction_type::sum ? train::accumulation_reduction::sum
                                                                                          : train::accumulation_reduction::mean;
  }

  /// Takes the training step of `f` in place of planning one, and resumes from its values. The
  /// step must be the one this session builds (the same inputs and outputs: the same model, loss,
  /// optimizer and anchors). Nothing changes unless all of it is right.
  void adopt(popef::training_file&& f, const std::filesystem::path& file) {
    const auto& mine = session_->graph_of_step().step;
    const auto& theirs = f.step.model();
    for (bool inputs : {true, false})
      if (describe_signature(theirs, inputs) != describe_signature(mine, inputs))
        throw error(error_category::usage,
                    "the training step in " + file.string() + " is not this session's: its " +
                        (inputs ? "inputs are " : "outputs are ") + describe_signature(theirs, inputs) + "; this session's " +
                        describe_signature(mine, inputs),
                    where(),
                    inputs ? "load a step exported from this model, loss and optimizer"
                           : "ask the data flow for the anchors the step was exported with");
    auto value = [&](const std::string& name, const tensor_info& info) {
      const auto& b = f.tensor(name);
      if (b.bytes().size() != info.num_bytes())
        throw error(error_category::popef, "TensorData '" + name + "' does not hold " + to_string(info), file.string(),
                    "the file is damaged; export it again");
      host_tensor t(info);
      if (!b.bytes().empty()) std::memcpy(t.bytes().data(), b.bytes().data(), b.bytes().size());
      return t;
    };
    std::vector<std::pair<std::string, host_tensor>> state;
    for (const auto& [name, t] : session_->optimizer_state())
      state.emplace_back(name, name == "step" ? host_tensor::from<std::int64_t>({}, {static_cast<std::int64_t>(f.state.updates)})
                                              : value(name, t.info()));
    std::map<std::string, host_tensor> weights;
    for (const auto& names : {session_->weight_names(), session_->buffer_names()})
      for (const auto& n : names) weights.emplace(n, value(n, host_weights_.at(n).info()));
    session_->load_optimizer_state(state);
    if (options_.automatic_loss_scaling()) {  // the scale reached is state too
      auto o = session_->current_optimizer();
      const double scale = std::visit([](const auto& x) { return x.loss_scaling.value(); }, f.state.opt);
      std::visit([&](auto& x) { x.loss_scaling = scale; }, o);
      session_->set_optimizer(o);
    }
    for (auto& [n, t] : weights) host_weights_.at(n) = std::move(t);
    updates_ = f.state.updates;
    compiled_ = std::move(f.step);
    loaded_from_ = file;
  }

  train::training_session& prepared(std::string_view call) const {
    if (!prepared_)
      throw error(error_category::usage, std::string(call) + " before prepare_device()", where(),
                  "call prepare_device() first: it plans the training step and loads the weights");
    return *session_;
  }

  /// What the options may set; anything else is refused by name (nothing is accepted and ignored).
  void check_options() {
    take_batches_per_step(options_, flow_, where());
    static constexpr std::string_view applied[] = {"deviceIterations(", "Training.gradientAccumulation(", "replicationFactor(",
                                                   "inputReplicaGrouping(",
                                                   "Training.accumulationAndReplicationReductionType(",
                                                   "Training.setAutomaticLossScaling(", "randomSeed("};
    std::string refused;
    for (const auto& line : settings_not_applied(options_, applied)) refused += (refused.empty() ? "" : ", ") + line;
    if (!refused.empty())
      throw error(error_category::usage, "a training session does not apply these options yet: " + refused, where(),
                  "leave them at their defaults (pipelined and phased training is a later step)");
  }

  /// The PopEF training state records gradient accumulation, not replicas: a replicated step
  /// would resume as another step.
  void refuse_replicated_popef(const char* call) const {
    if (counts_.replicas > 1)
      throw error(error_category::usage,
                  std::string(call) + " with a replication factor of " + std::to_string(counts_.replicas) +
                      ": a PopEF training step holds no replicas yet",
                  where(), "export or load without replicatedGraphCount");
  }

  /// The loss and every anchor become outputs of the model (a PopART anchor can be any tensor).
  void mark_anchors_as_outputs() {
    auto& g = model_;
    auto mark = [&](const std::string& name, const char* what) {
      const auto t = g.find_tensor(name);
      if (!t)
        throw error(error_category::usage, std::string(what) + " '" + name + "' is no tensor of the model", where(),
                    "name a tensor the model computes");
      for (auto o : g.outputs())
        if (o == *t) return;
      g.mark_output(*t);
    };
    mark(loss_, "the loss");
    for (const auto& a : flow_.anchors()) mark(a.name, "anchor");
  }

  [[nodiscard]] const host_tensor& host_weight(const std::string& name) const {
    const auto it = host_weights_.find(name);
    if (it == host_weights_.end())
      throw error(error_category::usage, "'" + name + "' is not a weight of the model", where(),
                  "name a floating-point initializer of the model");
    return it->second;
  }
  void check_array(const std::string& name, const tensor_info& got, const tensor_info& want) const {
    if (got != want)
      throw error(error_category::usage,
                  "the array for weight '" + name + "' is " + to_string(got) + ", the weight " + to_string(want), where(),
                  "give an array of the weight's type and shape");
  }
  static bool contains(const std::vector<std::string>& names, const std::string& name) {
    for (const auto& n : names)
      if (n == name) return true;
    return false;
  }
  [[nodiscard]] host_tensor copy_of(const std::string& name, const tensor_info& info, std::span<const std::byte> bytes) const {
    host_tensor t(info);
    if (bytes.size() != t.bytes().size())
      throw error(error_category::graph,
                  "weight '" + name + "' holds " + std::to_string(bytes.size()) + " bytes but " + to_string(info) +
                      " needs " + std::to_string(t.bytes().size()),
                  where());
    if (!bytes.empty()) std::memcpy(t.bytes().data(), bytes.data(), bytes.size());
    return t;
  }
  static std::size_t index_of(const std::vector<std::string>& v, const std::string& name) {
    std::size_t i = 0;
    while (i < v.size() && v[i] != name) ++i;
    return i;
  }
  static void add_into(std::byte* dst, const std::byte* src, data_type type, std::size_t n) {
    auto add = [&](auto tag) {
      using T = decltype(tag);
      for (std::size_t k = 0; k < n / sizeof(T); ++k) {
        T a, b;
        std::memcpy(&a, dst + k * sizeof(T), sizeof(T));
        std::memcpy(&b, src + k * sizeof(T), sizeof(T));
        a = static_cast<T>(a + b);
        std::memcpy(dst + k * sizeof(T), &a, sizeof(T));
      }
    };
    switch (type) {
      case data_type::F32: add(float{}); break;
      case data_type::F64: add(double{}); break;
      case data_type::S32: add(std::int32_t{}); break;
      default: add(std::int64_t{}); break;  // S64: the constructor admits no other type
    }
  }

  graph model_;
  data_flow flow_;
  std::string loss_;
  train::optimizer opt_;
  target_device device_;
  ipu::options options_;
  step_counts counts_{};
  std::uint64_t input_groups_ = 1;  // input slices per micro-batch: the replicas, or their input groups
  step_layout layout_;
  std::map<std::string, host_tensor> host_weights_;
  std::unique_ptr<train::training_session> session_;
  std::optional<popef::compiled_model> compiled_;
  bool prepared_ = false;
  std::uint64_t updates_ = 0;
  std::filesystem::path loaded_from_;
};

}  // namespace ipu::runtime
