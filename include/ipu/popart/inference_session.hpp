#pragma once
// PopART's InferenceSession: a model, a data flow, a device and options; compiled when the device
// is prepared, or loaded from a PopEF file without compiling.
//
//   ipu::data_flow flow(4, {{"probs", ipu::anchor_return_type::all()}});
//   ipu::runtime::inference_session s("model.onnx", flow, ipu::device_from_name("mk2", 1),
//                                     ipu::options().execution_strategy(ipu::strategy_settings::sharded()));
//   s.prepare_device();                          // compile (or use load_executable's), load weights
//   auto anchors = s.init_anchor_arrays();
//   ipu::step_io io({{"x", x.view()}}, anchors); // x: 4 micro-batches
//   s.run(io);
//   s.compile_and_export("model.popef");         // later: s2.load_executable("model.popef")
//
// Compiling goes through popef::compile_cached (the same plan a PopEF export holds; options that
// enable executable caching, or IPU_CACHE_DIR / POPTORCH_CACHE_DIR, make a second session on the
// same model load it from the cache); running goes through runtime::session (device checks,
// weights upload, the executor engine).
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/log.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/popart/batches_per_step.hpp"
#include "ipu/popart/signature.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/cache.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/runtime/session.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/tensor.hpp"

namespace ipu::runtime {

class inference_session {
 public:
  /// A model built in this process. The data flow sets the batches per step; options giving
  /// other device iterations are an ipu::error (usage).
  inference_session(graph model, data_flow flow, target_device device = {}, ipu::options options = {},
                    popef::compile_options compile = {})
      : model_(std::move(model)),
        flow_(std::move(flow)),
        device_(std::move(device)),
        options_(std::move(options)),
        compile_(std::move(compile)) {
    // The options' log level (set in code, or IPU_LOG_LEVEL through apply_environment) is the
    // process's, as PopART's logging is.
    if (options_.log_level()) log::set_level(*options_.log_level());
    take_batches_per_step(options_, flow_, where());
  }
  /// An ONNX file (PopART's InferenceSession::createFromOnnxModel).
  inference_session(const std::filesystem::path& onnx_model, data_flow flow, target_device device = {},
                    ipu::options options = {}, const onnx::import_options& import = {},
                    popef::compile_options compile = {})
      : inference_session(onnx::load_model(onnx_model, import), std::move(flow), std::move(device), std::move(options),
                          std::move(compile)) {}

  /// A session on a PopEF file alone: no model to compile, prepare_device() loads the file.
  static inference_session from_executable(const std::filesystem::path& popef_file, data_flow flow,
                                           target_device device = {}) {
    auto m = popef::load(popef_file);
    inference_session s(m.model(), std::move(flow), std::move(device));
    s.adopt(std::move(m), popef_file);
    return s;
  }

  inference_session(inference_session&&) noexcept = default;
  inference_session& operator=(inference_session&&) noexcept = default;

  /// PopART's loadExecutableFromFile: prepare_device() will use this PopEF file's executable
  /// instead of compiling. Throws ipu::error when the session is prepared already, or the file was
  /// compiled from another model (other inputs or outputs) or for other batches per step.
  void load_executable(const std::filesystem::path& popef_file) {
    if (session_)
      throw error(error_category::usage, "load_executable after prepare_device", where(),
                  "load the executable before preparing the device");
    auto m = popef::load(popef_file);
    const auto& g = m.model();
    for (bool inputs : {true, false})
      if (describe_signature(g, inputs) != describe_signature(model_, inputs))
        throw error(error_category::usage,
                    "the executable in " + popef_file.string() + " was compiled from another model: its " +
                        (inputs ? "inputs are " : "outputs are ") + describe_signature(g, inputs) + ", this model's " +
                        describe_signature(model_, inputs),
                    where(), "load an executable exported from this model, or compile it with prepare_device()");
    adopt(std::move(m), popef_file);
  }

  /// Compiles the model unless an executable was loaded, checks it against the device and uploads
  /// the weights (PopART's prepareDevice + weightsFromHost). Throws what compiling throws
  /// (options, schedule, memory errors) and ipu::error (device) for a device the executable does
  /// not fit.
  void prepare_device() {
    if (!compiled_) compile_model();
    session_config c;
    c.flow = flow_;
    auto s = std::make_unique<session>(*compiled_, device_, std::move(c));
    s->run_load_programs();
    session_ = std::move(s);
  }

  /// Runs one step (PopART's run(stepio)): every input array, anchor arrays as the data flow says
  /// (init_anchor_arrays). Throws ipu::error (usage) before prepare_device(), and for missing or
  /// mis-sized arrays (naming the tensor and both element counts).
  void run(step_io& io) {
    if (!session_)
      throw error(error_category::usage, "run() before prepare_device()", where(),
                  "call prepare_device() first: it compiles the model (or uses the loaded executable) and "
                  "loads it onto the device");
    session_->run_main_programs(io);
  }

  /// Compiles the model (unless compiled or loaded already) and writes it as a PopEF file; needs
  /// no device attached (PopART's compileAndExport).
  void compile_and_export(const std::filesystem::path& popef_file) {
    if (!compiled_) compile_model();
    popef::export_model(*compiled_, popef_file, compile_.compress);
  }

  /// One zeroed array per anchor, shaped by its return type (PopART's initAnchorArrays).
  [[nodiscard]] std::map<std::string, host_tensor> init_anchor_arrays() const { return layout().make_anchor_arrays(); }
  /// The array input `name` takes in a step, e.g. F32[batches, ...].
  [[nodiscard]] tensor_info input_array_info(std::string_view name) const { return layout().input_info(name); }

  [[nodiscard]] bool is_prepared() const noexcept { return session_ != nullptr; }
  /// True when the executable came from a PopEF file (load_executable, from_executable).
  [[nodiscard]] bool is_loaded_from_file() const noexcept { return !loaded_from_.empty(); }
  [[nodiscard]] const std::filesystem::path& loaded_from() const noexcept { return loaded_from_; }
  /// True when compiling was served from the executable cache (popef/cache.hpp).
  [[nodiscard]] bool is_from_cache() const noexcept { return from_cache_; }
  [[nodiscard]] const graph& model() const noexcept { return model_; }
  [[nodiscard]] const data_flow& flow() const noexcept { return flow_; }
  [[nodiscard]] const ipu::options& options() const noexcept { return options_; }
  [[nodiscard]] const device_description& device() const noexcept { return device_.description(); }
  /// The compiled or loaded executable. Throws ipu::error (usage) before there is one.
  [[nodiscard]] const popef::compiled_model& executable() const {
    if (!compiled_)
      throw error(error_category::usage, "the model is not compiled yet", where(),
                  "call prepare_device(), compile_and_export() or load_executable() first");
    return *compiled_;
  }
  /// The runtime session running it. Throws ipu::error (usage) before prepare_device().
  [[nodiscard]] session& runtime_session() {
    if (!session_)
      throw error(error_category::usage, "no runtime session before prepare_device()", where(),
                  "call prepare_device() first");
    return *session_;
  }

 private:
  [[nodiscard]] std::string where() const { return "inference session for '" + model_.name() + "'"; }

  void compile_model() {
    auto r = popef::compile_cached(model_, options_, device_.description(), compile_);
    compiled_ = std::move(r.model);
    from_cache_ = r.hit;
  }

  void adopt(popef::compiled_model&& m, const std::filesystem::path& file) {
    if (m.plan.batches_per_step != flow_.batches_per_step())
      throw error(error_category::usage,
                  "the executable in " + file.string() + " runs " + std::to_string(m.plan.batches_per_step) +
                      " batches per step but the data flow " + std::to_string(flow_.batches_per_step()),
                  where(), "use the batches per step it was compiled with, or compile again");
    device_requirements::of(m.metadata).check(device_.description(), where());
    compiled_ = std::move(m);
    loaded_from_ = file;
  }

  /// The step layout: the compiled executable's, else the model's under the options.
  [[nodiscard]] step_layout layout() const {
    if (session_) return session_->layout();
    if (compiled_) {
      const auto& p = compiled_->plan;
      return step_layout::of(p.model, flow_, {p.batches_per_step, p.gradient_accumulation, p.replication_factor},
                             p.input_group_size);
    }
    return step_layout::of(model_, flow_,
                           {flow_.batches_per_step(), static_cast<std::uint64_t>(options_.gradient_accumulation()),
                            static_cast<std::uint64_t>(options_.replication_factor())},
                           static_cast<std::uint64_t>(options_.input_group_size()));
  }

  graph model_;
  data_flow flow_;
  target_device device_;
  ipu::options options_;
  popef::compile_options compile_;
  std::optional<popef::compiled_model> compiled_;
  std::filesystem::path loaded_from_;
  bool from_cache_ = false;
  std::unique_ptr<session> session_;
};

}  // namespace ipu::runtime
