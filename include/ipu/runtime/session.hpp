#pragma once
// Model Runtime's Session: one PopEF model loaded onto one device, its programs run on demand.
//
//   ipu::runtime::session s("model.popef", ipu::device_from_name("mk2", 1));
//   s.set_tensor("bias", my_bias.view());       // overrides the file's TensorData
//   s.run_load_programs();                       // WeightsFromHost
//   ipu::step_io io;                             // one step's arrays (see step_io.hpp)
//   io.set_input("x", x.view());
//   s.run_main_programs(io);                     // outputs not given in io: s.outputs()
//
// - The device is checked against what the model needs (the metadata's IPU count and version, as
//   Model Runtime's DeviceManager requirements say it): a CPU executable needs no IPUs and runs
//   anywhere; an IPU executable needs a device of exactly its IPU count and version.
// - Every input anchor with a TensorData blob in the file is bound to it automatically (weights,
//   and main-program inputs a file carries data for), unless one of the config's exclusion
//   predicates matches it; set_tensor binds any input anchor to the caller's data instead.
// - The load programs upload the bound weights (every weight must be bound); the main programs
//   run one step (batches per step x replicas micro-batches) through ipu::host_engine, feeding
//   each input from the step io or, when absent there, its bound value to every micro-batch (as a
//   stream callback connected to fixed memory does); the save programs read weights back.
// Member functions take turns (one mutex), so a session may be shared by several threads.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/runtime/device_manager.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/runtime/device_wait.hpp"
#include "ipu/error.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/reader.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/engine.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/tensor.hpp"

namespace ipu::runtime {

// --- device requirements ------------------------------------------------------------------------

/// What an executable needs of a device (Model Runtime's DeviceManager requirements).
struct device_requirements {
  std::uint32_t num_ipus = 1;
  std::string ipu_version = "cpu";  // "ipu1", "ipu2", "ipu21"; "cpu": runs on the host

  [[nodiscard]] static device_requirements of(const popef::metadata& m) { return {m.num_ipus, m.ipu_version}; }

  /// False for a CPU executable: it runs on the host, whatever device is given.
  [[nodiscard]] bool needs_ipus() const noexcept { return ipu_version != "cpu"; }

  /// "2 ipu2 IPUs", "no IPUs (a CPU executable)".
  [[nodiscard]] std::string text() const {
    if (!needs_ipus()) return "no IPUs (a CPU executable)";
    return std::to_string(num_ipus) + " " + ipu_version + (num_ipus == 1 ? " IPU" : " IPUs");
  }

  /// Throws ipu::error (device) naming what the executable needs and what `d` has.
  void check(const device_description& d, const std::string& where) const {
    if (!needs_ipus()) return;
    auto fail = [&](const std::string& what, const std::string& hint) {
      throw error(error_category::device, "the executable needs " + text() + " but " + what, where, hint);
    };
    if (d.kind == device_kind::cpu)
      fail("the device is the host CPU, which has no IPUs",
           "pass an IPU device (device_from_name(\"" + ipu_version + "\", " + std::to_string(num_ipus) +
               ") or one acquired with acquire_device), or compile the model for the CPU");
    if (d.arch.ipu_version != ipu_version)
      fail("the device has " + std::string(d.arch.ipu_version) + " IPUs (" + to_string(d) + ")",
           "use a device of IPU version " + ipu_version + ", or compile the model for " +
               std::string(d.arch.ipu_version));
    if (d.num_ipus != num_ipus)
      fail("the device has " + std::to_string(d.num_ipus) + (d.num_ipus == 1 ? " IPU" : " IPUs") + " (" +
               to_string(d) + ")",
           "use a device of exactly " + std::to_string(num_ipus) + " IPUs, or compile the model for " +
               std::to_string(d.num_ipus));
  }
};

/// The device a session runs on: a description (an IPU Model, an offline target, the CPU), or an
/// acquired device whose IPUs stay reserved while the session lives.
class target_device {
 public:
  /// The host CPU.
  target_device() : description_(cpu_device_description()) {}
  target_device(const device_description& d) : description_(d) {}  // NOLINT: implicit on purpose
  /// Takes over an acquired device. Throws ipu::error (device) for an invalid handle.
  target_device(device_handle&& h)  // NOLINT: implicit on purpose
      : description_(h.description()) {
    if (!h.valid())
      throw error(error_category::device, "the device handle holds no device (released or moved from)",
                  "target device", "acquire a device from the device manager");
    handle_ = std::make_shared<device_handle>(std::move(h));
  }
  /// A compile-time device model, e.g. target_device::of<ipu_model<mk2, 2>>().
  template <device_model D>
  static target_device of() {
    return target_device(D::description());
  }

  [[nodiscard]] const device_description& description() const noexcept { return description_; }
  /// The reserved device, or nullptr for a description.
  [[nodiscard]] const device_handle* handle() const noexcept { return handle_.get(); }

 private:
  device_description description_;
  std::shared_ptr<device_handle> handle_;  // shared: copies of a target keep the same reservation
};

/// Reserves a device of the system meeting `r` (Model Runtime's DeviceManager::getDevice with the
/// model's requirements). A CPU executable gets the host, reserving nothing. Throws ipu::error
/// (device) when the system's IPUs are of another version, device_busy_error when none is free
/// within `wait`.
inline target_device acquire_device(const device_requirements& r, const device_manager& manager,
                                    const device_wait_config& wait = {}) {
  if (!r.needs_ipus()) return target_device(cpu_device_description());
  const auto& arch = manager.system().arch;
  if (arch.ipu_version != r.ipu_version)
    throw error(error_category::device,
                "the executable needs " + r.text() + " but the system's IPUs are " + std::string(arch.ipu_version) + " (" +
                    std::string(arch.name) + ")",
                "device manager", "run it on a system of that IPU version (IPU_SYSTEM) or compile it for this one");
  acquire_options o;
  o.wait = wait;
  return target_device(manager.acquire(r.num_ipus, o));
}

inline target_device acquire_device(const popef::metadata& m, const device_manager& manager,
                                    const device_wait_config& wait = {}) {
  return acquire_device(device_requirements::of(m), manager, wait);
}

/// The device PopTorch's options ask for: device `use_ipu_id` when set (it must have the IPUs the
/// executable needs), otherwise any free IPUs the executable needs; waiting for one forever when
/// `wait_for_device` is on (IPU_WAIT_FOR_DEVICE / POPTORCH_WAIT_FOR_IPU), not at all otherwise.
inline target_device acquire_device(const device_requirements& r, const device_manager& manager,
                                    const ipu::options& opts) {
  const auto wait = opts.wait_for_device() ? device_wait_config::forever() : device_wait_config::no_wait();
  const auto id = opts.ipu_id();
  if (!id || !r.needs_ipus()) return acquire_device(r, manager, wait);
  if (*id < 0 || *id > static_cast<std::int64_t>(std::numeric_limits<std::uint32_t>::max()))
    throw error(error_category::options, "use_ipu_id(" + std::to_string(*id) + ") is not a device id", "device manager",
                "give an id that `ipu info --devices` lists");
  auto h = manager.acquire_by_id(static_cast<std::uint32_t>(*id), wait);
  target_device t(std::move(h));
  r.check(t.description(), "device " + std::to_string(*id) + " (use_ipu_id)");  // it may have other IPUs
  return t;
}

// --- binding predicates ---------------------------------------------------------------------------

/// Chooses anchors, e.g. those a session must not bind to their TensorData.
using anchor_predicate = std::function<bool(const popef::anchor&, const popef::metadata&)>;

/// Model Runtime's predicate factory: the usual ways to pick anchors, and their combinations.
struct predicate_factory {
  /// Anchors with one of these names.
  static anchor_predicate names(std::vector<std::string> list) {
    return [list = std::move(list)](const popef::anchor& a, const popef::metadata&) {
      return std::find(list.begin(), list.end(), a.name) != list.end();
    };
  }
  /// Anchors of one kind (input, output).
  static anchor_predicate of_type(popef::anchor_type t) {
    return [t](const popef::anchor& a, const popef::metadata&) { return a.type == t; };
  }
  /// Anchors used by program `index` (PopART numbering, e.g. 0 = WeightsFromHost).
  static anchor_predicate in_program(std::uint32_t index) {
    return [index](const popef::anchor& a, const popef::metadata&) {
      return std::find(a.programs.begin(), a.programs.end(), index) != a.programs.end();
    };
  }
  /// Anchors used by a program of the load flow (weights), the main flow or the save flow.
  static anchor_predicate in_load_flow() { return in_flow(&program_flow::load); }
  static anchor_predicate in_main_flow() { return in_flow(&program_flow::main); }
  static anchor_predicate in_save_flow() { return in_flow(&program_flow::save); }
  /// Anchors no program uses.
  static anchor_predicate no_program() {
    return [](const popef::anchor& a, const popef::metadata&) { return a.programs.empty(); };
  }
  static anchor_predicate any_of(std::vector<anchor_predicate> ps) {
    return [ps = std::move(ps)](const popef::anchor& a, const popef::metadata& m) {
      return std::any_of(ps.begin(), ps.end(), [&](const anchor_predicate& p) { return p(a, m); });
    };
  }
  static anchor_predicate all_of(std::vector<anchor_predicate> ps) {
    return [ps = std::move(ps)](const popef::anchor& a, const popef::metadata& m) {
      return std::all_of(ps.begin(), ps.end(), [&](const anchor_predicate& p) { return p(a, m); });
    };
  }
  static anchor_predicate negate(anchor_predicate p) {
    return [p = std::move(p)](const popef::anchor& a, const popef::metadata& m) { return !p(a, m); };
  }

 private:
  static anchor_predicate in_flow(std::vector<std::uint32_t> program_flow::*which) {
    return [which](const popef::anchor& a, const popef::metadata& m) {
      const auto& ids = m.flow.*which;
      return std::any_of(a.programs.begin(), a.programs.end(),
                         [&](std::uint32_t p) { return std::find(ids.begin(), ids.end(), p) != ids.end(); });
    };
  }
};

// --- the session ----------------------------------------------------------------------------------

struct session_config {
  /// Input anchors matching any of these are not bound to their TensorData blob: give them with
  /// set_tensor (weights before run_load_programs) or in the step io (main inputs).
  std::vector<anchor_predicate> exclude_from_binding;
  /// The anchors the main programs return and how (PopART's DataFlow); unset: every output anchor
  /// of the metadata, All. Its batches per step must be the executable's.
  std::optional<data_flow> flow;
  /// Kernel threads of each engine worker.
  std::size_t threads_per_worker = 1;
};

/// Where an anchor's data comes from.
enum class binding_source : std::uint8_t {
  none,         // unbound: the caller must give it
  tensor_data,  // the model's TensorData blob (or the compiled model's own weight)
  user,         // set_tensor
};

constexpr std::string_view to_string(binding_source s) noexcept {
  switch (s) {
    case binding_source::none: return "none";
    case binding_source::tensor_data: return "tensor_data";
    case binding_source::user: return "user";
  }
  return "?";
}

class session {
 public:
  /// A compiled model (loaded from PopEF or compiled in this process): its weights are the bound
  /// TensorData.
  explicit session(const popef::compiled_model& m, target_device device = {}, session_config config = {})
      : session(popef::compiled_model(m), std::move(device), std::move(config)) {}
  explicit session(popef::compiled_model&& m, target_device device = {}, session_config config = {})
      : device_(std::move(device)), config_(std::move(config)), name_(m.name), metadata_(std::move(m.metadata)) {
    plan_ = std::move(m.plan);
    init([&](const popef::anchor&) -> std::optional<byte_buffer> { return std::nullopt; });
  }
  /// A PopEF model: the executable is decoded and each anchor with a TensorData blob bound to it
  /// (a view of the file, not a copy). Weights may have no blob: they are unbound.
  explicit session(const popef::model& m, target_device device = {}, session_config config = {})
      : device_(std::move(device)), config_(std::move(config)), name_(m.executable.name), metadata_(m.metadata.value) {
    from_file_ = true;
    load_model(m);
    init([&](const popef::anchor& a) -> std::optional<byte_buffer> {
      if (const auto* t = m.find_tensor(a.name)) return t->data;
      return std::nullopt;
    });
  }
  /// The model of `executable` (empty: the only one) in one or several PopEF files.
  explicit session(std::span<const std::filesystem::path> files, target_device device = {}, session_config config = {},
                   std::string_view executable = {})
      : session(read_model(files, executable), std::move(device), std::move(config)) {}
  explicit session(const std::filesystem::path& file, target_device device = {}, session_config config = {},
                   std::string_view executable = {})
      : session(std::span<const std::filesystem::path>(&file, 1), std::move(device), std::move(config), executable) {}

  session(const session&) = delete;
  session& operator=(const session&) = delete;

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] const popef::metadata& metadata() const noexcept { return metadata_; }
  [[nodiscard]] const executable& plan() const noexcept { return plan_; }
  [[nodiscard]] const device_description& device() const noexcept { return device_.description(); }
  [[nodiscard]] const target_device& target() const noexcept { return device_; }
  /// The arrays of one step (input arrays: batches x replicas micro-batches; anchor arrays).
  [[nodiscard]] const step_layout& layout() const noexcept { return layout_; }

  /// Where input anchor `name` gets its data. Throws ipu::error (usage) for an unknown name.
  [[nodiscard]] binding_source binding(std::string_view name) const {
    std::lock_guard lock(mutex_);
    return find_slot(name).source;
  }
  /// Weights and main inputs with no data yet, in metadata order.
  [[nodiscard]] std::vector<std::string> unbound_tensors() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& s : slots_)
      if (s.use != role::output && s.source == binding_source::none) out.push_back(s.name);
    return out;
  }

  /// Binds input anchor `name` (a weight or a main-program input) to a copy of `data`, which must
  /// have the anchor's type and shape (one micro-batch for main inputs). A weight set after the
  /// load programs ran is uploaded by the next run_load_programs.
  void set_tensor(std::string_view name, const_tensor_view data) {
    auto owned = std::make_shared<const host_tensor>(host_tensor::copy_of(data));
    set_tensor(name, std::move(owned));
  }
  /// As above, sharing `data` instead of copying it.
  void set_tensor(std::string_view name, std::shared_ptr<const host_tensor> data) {
    if (!data) throw error(error_category::usage, "no tensor given for '" + std::string(name) + "'", where());
    std::lock_guard lock(mutex_);
    auto& s = find_slot(name);
    if (s.use == role::output)
      throw error(error_category::usage, "'" + s.name + "' is an output anchor: the main programs write it", where(),
                  "set input anchors only; pass an array for an output in the step io to receive it there");
    if (data->info() != s.info)
      throw error(error_category::shape,
                  "tensor '" + s.name + "' is given as " + to_string(data->info()) + " but the anchor is " +
                      to_string(s.info),
                  where(),
                  s.use == role::weight ? "give the weight's type and shape"
                                         : "give one micro-batch of the input, of the anchor's type and shape");
    if (!data->data() && s.info.num_bytes() != 0)
      throw error(error_category::usage, "tensor '" + s.name + "' has no data", where());
    const auto* p = data->data();
    const auto size = data->info().num_bytes();
    s.data = byte_buffer::share(std::move(data), p, size);
    s.source = binding_source::user;
    if (s.use == role::weight && engine_) stale_weights_.push_back(s.name);
    if (s.use == role::input) staged_.erase(s.name);
  }

  /// Runs the load programs: uploads every weight's bound data (a fresh upload each call).
  /// Throws ipu::error (usage) naming every unbound weight.
  void run_load_programs() {
    std::lock_guard lock(mutex_);
    std::string missing;
    for (const auto& s : slots_)
      if (s.use == role::weight && s.source == binding_source::none) missing += (missing.empty() ? "'" : ", '") + s.name + "'";
    if (!missing.empty())
      throw error(error_category::usage, "the load programs need weights that have no data: " + missing, where(),
                  "bind them with set_tensor, or do not exclude their TensorData from binding");
    for (auto id : plan_.flow.load)
      if (id >= plan_.programs.size())
        throw error(error_category::popef,
                    "the program flow loads with program " + std::to_string(id) + " but the executable has " +
                        std::to_string(plan_.programs.size()) + " programs",
                    where(), "the file is damaged; export it again");
    auto exe = std::make_shared<executable>(plan_);  // weights are shared views: no bytes copied
    for (const auto& s : slots_)
      if (s.use == role::weight) exe->model.tensor(s.tensor).data = s.data;
    executor_options o;
    o.threads_per_worker = config_.threads_per_worker;
    o.random_seed = popef::random_seed(metadata_, where()).value_or(random_source::default_seed);
    engine_.reset();
    loaded_ = exe;
    engine_ = std::make_unique<host_engine>(std::move(exe), flow_, o);
    stale_weights_.clear();
  }

  [[nodiscard]] bool loaded() const {
    std::lock_guard lock(mutex_);
    return engine_ != nullptr;
  }

  /// Runs the main programs for one step. Inputs come from `io`, or else from their binding;
  /// anchors go to `io`'s arrays, or else to outputs(). Throws ipu::error (runtime) before the
  /// load programs ran or when a weight changed since, (usage) for an input with neither an array
  /// nor a binding, (shape) for arrays of the wrong type or size.
  void run_main_programs(const step_io& io) {
    std::lock_guard lock(mutex_);
    if (!engine_)
      throw error(error_category::runtime, "the main programs ran before the load programs", where(),
                  "call run_load_programs() first: it uploads the weights");
    if (!stale_weights_.empty())
      throw error(error_category::runtime,
                  "weight '" + stale_weights_.front() + "' was set after the load programs ran", where(),
                  "call run_load_programs() again to upload it");
    step_io full;
    for (const auto& [name, v] : io.inputs()) full.set_input(name, v);
    for (const auto& in : layout_.inputs) {
      if (io.input(in.name)) continue;
      const auto& s = find_slot(in.name);
      if (s.source == binding_source::none)
        throw error(error_category::usage,
                    "input '" + in.name + "' is unbound: the step io has no array for it and it has no TensorData or "
                    "value set",
                    where(),
                    "pass an array for it in the step io (" + to_string(layout_.input_info(in.name)) +
                        ") or set one micro-batch with set_tensor(\"" + in.name + "\", ...)");
      full.set_input(in.name, staged(s).view());
    }
    for (const auto& [name, v] : io.outputs()) full.set_output(name, v);
    for (auto& [name, array] : outputs_)
      if (!io.output(name)) full.set_output(name, array.view());
    engine_->run(full);
  }

  /// Runs one step on bound inputs only; the anchors' arrays (valid until the next step).
  const std::map<std::string, host_tensor>& run_main_programs() {
    run_main_programs(step_io{});
    return outputs_;
  }

  /// The anchor arrays of the last step, for anchors the step io gave no array for.
  [[nodiscard]] const std::map<std::string, host_tensor>& outputs() const noexcept { return outputs_; }

  /// Runs the save programs: the device's value of every tensor they stream to the host (weights,
  /// WeightsToHost). An inference executable never writes its weights, so these are the values the
  /// load programs uploaded. Empty when the flow has no save program (inference exports).
  [[nodiscard]] std::map<std::string, host_tensor> run_save_programs() {
    std::lock_guard lock(mutex_);
    if (!engine_)
      throw error(error_category::runtime, "the save programs ran before the load programs", where(),
                  "call run_load_programs() first");
    std::map<std::string, host_tensor> out;
    const auto& g = loaded_->model;
    for (auto id : plan_.flow.save) {
      if (id >= plan_.programs.size())
        throw error(error_category::popef,
                    "the program flow saves with program " + std::to_string(id) + " but the executable has " +
                        std::to_string(plan_.programs.size()) + " programs",
                    where(), "the file is damaged; export it again");
      for (const auto& st : plan_.programs[id].steps) {
        if (st.kind != step_kind::device_to_host || st.tensor >= g.num_tensors()) continue;
        const auto& t = g.tensor(st.tensor);
        if (t.kind != tensor_kind::variable || out.count(t.name)) continue;
        host_tensor v(t.info);
        if (t.info.num_bytes()) std::memcpy(v.data(), t.data.data(), t.info.num_bytes());
        out.emplace(t.name, std::move(v));
      }
    }
    return out;
  }

  /// Unloads the executable (drops the engine); run_load_programs loads it again.
  void stop() {
    std::lock_guard lock(mutex_);
    engine_.reset();
    loaded_.reset();
    stale_weights_.clear();
  }

 private:
  enum class role : std::uint8_t { weight, input, output };
  struct slot {
    std::string name;
    tensor_id tensor = no_tensor;
    tensor_info info;
    session::role use = role::input;
    binding_source source = binding_source::none;
    byte_buffer data;  // weights: the value; inputs: one micro-batch
  };

  static popef::model read_model(std::span<const std::filesystem::path> files, std::string_view executable) {
    popef::reader r(files);
    return popef::model_builder(r).create_model(executable);  // blobs keep the mapping alive
  }

  [[nodiscard]] std::string where() const { return "session for '" + name_ + "'"; }

  [[nodiscard]] bool excluded(const popef::anchor& a) const {
    return std::any_of(config_.exclude_from_binding.begin(), config_.exclude_from_binding.end(),
                       [&](const anchor_predicate& p) { return p && p(a, metadata_); });
  }

  /// Decodes the executable of `m` (as popef::load does), leaving weights without a TensorData
  /// blob, or excluded from binding, as zeros that run_load_programs refuses to upload.
  void load_model(const popef::model& m) {
    const auto& at = m.executable.blob.location;
    const popef::pb::Executable e = popef::decode_executable(m);
    std::shared_ptr<std::vector<std::byte>> zeros;
    auto weights = [&](const std::string& name, const tensor_info& info) -> byte_buffer {
      const auto* a = m.metadata.value.find_anchor(name);
      const auto* t = m.find_tensor(name);
      if (t && t->info != info)
        throw error(error_category::popef,
                    "TensorData '" + name + "' is " + to_string(t->info) + " but the graph's weight is " + to_string(info),
                    t->blob.location, "the tensor data belongs to another model");
      if (t && a && !excluded(*a)) return t->data;
      const auto n = static_cast<std::size_t>(info.num_bytes());
      if (!zeros || zeros->size() < n) zeros = std::make_shared<std::vector<std::byte>>(n);
      return byte_buffer::share(zeros, zeros->data(), n);
    };
    popef::plan_from_proto(e.plan(), plan_, at);
    plan_.model = popef::graph_from_executable(e, weights, at);
    popef::check_plan(plan_, at);
  }

  /// Builds the slots from the metadata and binds them: `file_data` gives an anchor's TensorData
  /// (nullopt: none, or the compiled model's own weight).
  template <class FileData>
  void init(FileData&& file_data) {
    device_requirements::of(metadata_).check(device_.description(), where());
    const auto& g = plan_.model;
    for (const auto& a : metadata_.anchors) {
      slot s;
      s.name = a.name;
      s.info = a.info;
      const auto t = g.find_tensor(a.name);
      if (!t)
        throw error(error_category::popef, "anchor '" + a.name + "' names no tensor of the executable", where(),
                    "the metadata belongs to another executable; export the model again");
      s.tensor = *t;
      const auto& node = g.tensor(*t);
      if (node.info != a.info)
        throw error(error_category::popef,
                    "anchor '" + a.name + "' is " + to_string(a.info) + " but the executable's tensor is " +
                        to_string(node.info),
                    where(), "the metadata belongs to another executable; export the model again");
      if (a.type == popef::anchor_type::output) s.use = role::output;
      else if (node.kind == tensor_kind::variable) s.use = role::weight;
      else if (node.kind == tensor_kind::input) s.use = role::input;
      else s.use = role::output;  // an anchor on a computed tensor: returned, never fed
      if (s.use != role::output && !excluded(a)) {
        if (auto d = file_data(a)) {
          s.data = std::move(*d);
          s.source = binding_source::tensor_data;
        } else if (s.use == role::weight && !from_file_) {
          s.data = shared(plan_.model.tensor(*t).data);
          s.source = binding_source::tensor_data;
        }
      }
      slots_.push_back(std::move(s));
    }
    for (tensor_id t = 0; t < g.num_tensors(); ++t)
      if (g.tensor(t).kind == tensor_kind::variable && !metadata_.find_anchor(g.tensor(t).name))
        throw error(error_category::popef, "weight '" + g.tensor(t).name + "' has no anchor in the metadata", where(),
                    "the metadata belongs to another executable; export the model again");
    if (config_.threads_per_worker == 0)
      throw error(error_category::usage, "threads_per_worker is 0", "session config", "use at least 1");
    if (config_.flow) {
      flow_ = *config_.flow;
    } else {
      std::vector<std::string> names;
      for (const auto& s : slots_)
        if (s.use == role::output) names.push_back(s.name);
      flow_ = data_flow(plan_.batches_per_step, names, anchor_return_type::all());
    }
    layout_ = step_layout::of(g, flow_,
                              step_counts{plan_.batches_per_step, plan_.gradient_accumulation, plan_.replication_factor},
                              plan_.input_group_size);
    outputs_ = layout_.make_anchor_arrays();
  }

  /// The compiled model's own weight as a shared view, so copies of the plan share its bytes.
  static byte_buffer shared(byte_buffer& b) {
    if (b.is_shared()) return b;
    auto owner = std::make_shared<const byte_buffer>(std::move(b));
    b = byte_buffer::share(owner, owner->data(), owner->size());
    return b;
  }

  slot& find_slot(std::string_view name) {
    for (auto& s : slots_)
      if (s.name == name) return s;
    throw error(error_category::usage, "no anchor named '" + std::string(name) + "'", where(), anchor_names());
  }
  [[nodiscard]] const slot& find_slot(std::string_view name) const { return const_cast<session*>(this)->find_slot(name); }
  [[nodiscard]] std::string anchor_names() const {
    std::string s;
    for (const auto& a : slots_) s += (s.empty() ? "" : ", ") + a.name;
    return "the anchors are: " + (s.empty() ? std::string("none") : s);
  }

  /// The step array of a bound input: its value repeated for every micro-batch and replica slice.
  const host_tensor& staged(const slot& s) {
    auto it = staged_.find(s.name);
    if (it != staged_.end()) return it->second;
    host_tensor array(layout_.input_info(s.name));
    const auto n = s.info.num_bytes();
    if (n)
      for (std::size_t off = 0; off + n <= array.info().num_bytes(); off += n) std::memcpy(array.data() + off, s.data.data(), n);
    return staged_.emplace(s.name, std::move(array)).first->second;
  }

  target_device device_;
  session_config config_;
  std::string name_;
  popef::metadata metadata_;
  executable plan_;
  bool from_file_ = false;
  data_flow flow_;
  step_layout layout_;
  std::vector<slot> slots_;
  std::map<std::string, host_tensor> outputs_;
  std::map<std::string, host_tensor, std::less<>> staged_;
  std::vector<std::string> stale_weights_;
  std::shared_ptr<const executable> loaded_;  // what the load programs uploaded
  std::unique_ptr<host_engine> engine_;
  mutable std::mutex mutex_;
};

}  // namespace ipu::runtime
