#pragma once
// The model repository, laid out as Triton's: DIR/<model>/<version>/model.popef, versions numbered,
// plus an optional DIR/<model>/config.json (serve/model_config.hpp). Loading a model serves its
// highest version through a Model Runtime model runner behind a dynamic batcher; a model that fails
// to load (bad file, bad config, no device) stays in the index, unavailable, with the reason.
//
//   ipu::serve::model_repository repo("models", options);
//   repo.load_all();
//   auto m = repo.find("mnist", "");    // shared: unloading waits for no one
//   auto out = m->infer(request);
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/serve/dynamic_batcher.hpp"
#include "ipu/serve/model_config.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

/// What the server says of itself (KServe's server metadata), over HTTP and gRPC alike.
inline constexpr const char* server_name = "ipu";
inline constexpr const char* server_version = "0.1.0";

/// One loaded model version: its runner, its batcher and what clients see of it.
class served_model {
 public:
  served_model(std::string name, std::uint64_t version, const std::filesystem::path& popef, const model_config& config,
               runtime::model_runner_config runner_config)
      : name_(std::move(name)), version_(version), runner_(popef, std::move(runner_config)) {
    const auto& l = runner_.layout();
    const auto where = "model '" + name_ + "'";
    // The batch dimension: every input and output leads with the same size.
    std::int64_t b = l.inputs.front().info.shape.rank() ? l.inputs.front().info.shape[0] : 0;
    bool batchable = b > 0;
    for (const auto& s : l.inputs) batchable = batchable && s.info.shape.rank() > 0 && s.info.shape[0] == b;
    for (const auto& a : l.anchors) batchable = batchable && a.info.shape.rank() > 0 && a.info.shape[0] == b;
    max_batch_ = config.max_batch_size.value_or(batchable ? static_cast<std::uint64_t>(b) : 0);
    if (max_batch_ > 0 && !batchable)
      throw error(error_category::options,
                  "max_batch_size is " + std::to_string(max_batch_) + " but the model's inputs and outputs do not all lead with one batch dimension",
                  where + " config", "set max_batch_size to 0 (requests give the compiled shapes)");
    if (config.dynamic_batching && max_batch_ == 0)
      throw error(error_category::options, "dynamic_batching needs a batch dimension but max_batch_size is 0", where + " config",
                  "drop dynamic_batching or set max_batch_size");
    batch_layout bl;
    bl.batch = max_batch_ ? static_cast<std::uint64_t>(b) : 1;
    for (const auto& s : l.inputs) {
      inputs_.push_back(metadata(s.name, s.info));
      bl.input_row_bytes.push_back(s.info.num_bytes() / bl.batch);
    }
    for (const auto& a : l.anchors) {
      outputs_.push_back(metadata(a.name, a.info));
      bl.output_row_bytes.push_back(a.info.num_bytes() / bl.batch);
    }
    batcher_config bc;
    bc.instances = config.instance_count;
    if (config.dynamic_batching) {
      bc.dynamic = true;
      bc.max_delay = std::chrono::microseconds(config.dynamic_batching->max_queue_delay_microseconds);
      for (auto p : config.dynamic_batching->preferred_batch_size) {
        if (p > bl.batch)
          throw error(error_category::options,
                      "preferred_batch_size " + std::to_string(p) + " exceeds the compiled batch " + std::to_string(bl.batch),
                      where + " config", "prefer sizes up to the compiled batch");
        bc.dispatch_rows = std::max(bc.dispatch_rows, p);
      }
    }
    batcher_ = std::make_unique<dynamic_batcher>(bl, bc, [this](const auto& in, const auto& out) { run(in, out); });
    timeout_ = std::chrono::microseconds(config.request_timeout_microseconds);
  }

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
  [[nodiscard]] std::uint64_t max_batch_size() const noexcept { return max_batch_; }
  [[nodiscard]] const std::vector<tensor_metadata>& inputs() const noexcept { return inputs_; }
  [[nodiscard]] const std::vector<tensor_metadata>& outputs() const noexcept { return outputs_; }
  [[nodiscard]] const dynamic_batcher& batcher() const noexcept { return *batcher_; }
  [[nodiscard]] const runtime::model_runner& runner() const noexcept { return runner_; }
  /// The config's request_timeout_microseconds (0: none).
  [[nodiscard]] std::chrono::microseconds request_timeout() const noexcept { return timeout_; }

  /// Checks a request against the model, runs it (batched with others) and answers it. Throws
  /// request_error (400) for inputs that do not fit the model.
  infer_response infer(const infer_request& r) const {
    const auto where = "model '" + name_ + "'";
    auto [n, spans] = match_inputs(r, inputs_, max_batch_, where);
    std::vector<std::pair<std::size_t, bool>> wanted;  // output index, binary
    for (const auto& [name, binary] : r.outputs) {
      const auto it = std::find_if(outputs_.begin(), outputs_.end(), [&](const auto& m) { return m.name == name; });
      if (it == outputs_.end()) throw request_error(400, "'" + name + "' is not an output of the model", where, detail::codec::names(outputs_));
      wanted.emplace_back(static_cast<std::size_t>(it - outputs_.begin()), binary);
    }
    if (r.outputs.empty())
      for (std::size_t k = 0; k < outputs_.size(); ++k) wanted.emplace_back(k, r.binary_outputs);
    auto ran = batcher_->infer(std::move(spans), n, timeout_);
    if (!ran)
      throw request_error(503, "the request waited " + std::to_string(timeout_.count()) + " us in the queue without starting",
                          where, "send it again later, or raise request_timeout_microseconds in the model's config.json");
    auto& out = *ran;
    infer_response resp;
    resp.model_name = name_;
    resp.model_version = std::to_string(version_);
    resp.id = r.id;
    for (const auto& [k, binary] : wanted) {
      wire_tensor t;
      t.name = outputs_[k].name;
      t.type = outputs_[k].type;
      t.shape = outputs_[k].shape;
      if (max_batch_) t.shape[0] = static_cast<std::int64_t>(n);
      t.data = out[k];
      t.binary = binary;
      resp.outputs.push_back(std::move(t));
    }
    return resp;
  }

 private:
  tensor_metadata metadata(const std::string& n, const tensor_info& info) const {
    tensor_metadata m{n, info.type, info.shape.dims()};
    (void)kserve_name(info.type);  // refuses types the protocol cannot carry
    if (max_batch_) m.shape[0] = -1;
    return m;
  }

  void run(const std::vector<std::span<const std::byte>>& in, const std::vector<std::span<std::byte>>& out) const {
    const auto& l = runner_.layout();
    runtime::input_map inputs;
    for (std::size_t i = 0; i < in.size(); ++i) inputs.emplace(l.inputs[i].name, const_tensor_view(l.inputs[i].info, in[i].data()));
    auto result = runner_.execute(inputs);
    for (std::size_t k = 0; k < out.size(); ++k) {
      const auto& t = result.at(l.anchors[k].name);
      std::memcpy(out[k].data(), t.bytes().data(), out[k].size());
    }
  }

  std::string name_;
  std::uint64_t version_;
  mutable runtime::model_runner runner_;  // thread-safe: clients queue requests
  std::uint64_t max_batch_ = 0;
  std::vector<tensor_metadata> inputs_, outputs_;
  std::chrono::microseconds timeout_{0};
  std::unique_ptr<dynamic_batcher> batcher_;  // last: stopped before the runner
};

/// A model of the repository: loaded (a version served) or not, and why.
struct model_entry {
  std::shared_ptr<const served_model> model;  // null when not loaded
  std::string reason;                         // why not, after a failed load or an unload
};

struct repository_options {
  runtime::model_runner_config runner;
};

class model_repository {
 public:
  explicit model_repository(std::filesystem::path dir, repository_options options = {})
      : dir_(std::move(dir)), options_(std::move(options)) {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir_, ec))
      throw error(error_category::io, "the model repository is not a directory", dir_.string(),
                  "give a directory holding <model>/<version>/model.popef");
  }

  /// The models on disk (directory names), sorted.
  [[nodiscard]] std::vector<std::string> scan() const {
    std::vector<std::string> names;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir_, ec))
      if (e.is_directory(ec)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Loads every model on disk; true when all loaded.
  bool load_all() {
    bool ok = true;
    for (const auto& n : scan()) ok = load(n) && ok;
    return ok;
  }

  /// (Re)loads a model's highest version; false (the reason in the index) when it fails.
  /// Throws request_error (404) for a name that is not a model directory.
  bool load(const std::string& name) {
    const auto dir = model_dir(name);
    std::shared_ptr<const served_model> m;
    std::string reason;
    try {
      const auto config = read_model_config(dir);
      const auto version = latest_version(dir);
      auto rc = options_.runner;
      m = std::make_shared<const served_model>(name, version, dir / std::to_string(version) / "model.popef", config, rc);
    } catch (const std::exception& e) {
      reason = e.what();
    }
    std::lock_guard lock(mutex_);
    models_[name] = {m, reason};
    return m != nullptr;
  }

  /// load(), answering a failure with request_error (400) carrying the reason: the repository
  /// extension's load, over HTTP and gRPC.
  void load_or_refuse(const std::string& name) {
    if (load(name)) return;
    throw request_error(400, "failed to load model '" + name + "': " + index().at(name).reason, "model repository",
                        "fix the model's files or config.json and load it again");
  }

  /// Stops serving a model (requests already running finish); 404 for an unknown one.
  void unload(const std::string& name) {
    std::shared_ptr<const served_model> old;  // destroyed outside the lock
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end()) {
      (void)model_dir(name);  // on disk but never loaded: nothing to do
      return;
    }
    old = std::move(it->second.model);
    it->second = {nullptr, "unloaded"};
  }

  /// The loaded model for a request; request_error 404 (unknown model or version) or 503 (not
  /// loaded). `version` empty: the loaded one.
  [[nodiscard]] std::shared_ptr<const served_model> find(const std::string& name, const std::string& version) const {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end())
      throw request_error(404, "unknown model '" + name.substr(0, 200) + "'", "model repository", "GET /v2/repository/index lists them");
    if (!it->second.model)
      throw request_error(503, "model '" + name + "' is not ready: " + it->second.reason, "model repository",
                          "load it with POST /v2/repository/models/" + name + "/load");
    if (!version.empty() && version != std::to_string(it->second.model->version()))
      throw request_error(404, "model '" + name + "' has no version '" + version.substr(0, 40) + "' loaded (serving version " +
                                   std::to_string(it->second.model->version()) + ")",
                          "model repository", "ask for the served version or none");
    return it->second.model;
  }

  /// KServe's model readiness: false for a model known but not loaded; request_error 404 for an
  /// unknown model or version.
  [[nodiscard]] bool ready(const std::string& name, const std::string& version) const {
    try {
      (void)find(name, version);
    } catch (const request_error& e) {
      if (e.status() == 503) return false;
      throw;
    }
    return true;
  }

  /// Every model on disk or loaded, with its state.
  [[nodiscard]] std::map<std::string, model_entry> index() const {
    std::map<std::string, model_entry> out;
    for (const auto& n : scan()) out[n] = {nullptr, "not loaded"};
    std::lock_guard lock(mutex_);
    for (const auto& [n, e] : models_) out[n] = e;
    return out;
  }

  /// True when no model failed to load.
  [[nodiscard]] bool all_ready() const {
    std::lock_guard lock(mutex_);
    for (const auto& [n, e] : models_)
      if (!e.model && e.reason != "unloaded") return false;
    return true;
  }

  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }

 private:
  [[nodiscard]] std::filesystem::path model_dir(const std::string& name) const {
    // A name is one directory entry: no separators, no "." or "..", nothing outside the repository.
    const bool plain = !name.empty() && name != "." && name != ".." && name.find_first_of("/\\") == std::string::npos &&
                       name.find('\0') == std::string::npos && name.size() <= 255;
    std::error_code ec;
    if (!plain || !std::filesystem::is_directory(dir_ / name, ec))
      throw request_error(404, "unknown model '" + name.substr(0, 200) + "'", "model repository " + dir_.string(),
                          "a model is a directory <model>/<version>/model.popef of the repository");
    return dir_ / name;
  }

  static std::uint64_t latest_version(const std::filesystem::path& dir) {
    std::optional<std::uint64_t> best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const auto s = e.path().filename().string();
      std::uint64_t v = 0;
      const auto [p, err] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (err != std::errc() || p != s.data() + s.size() || !e.is_directory(ec)) continue;
      if (!std::filesystem::exists(e.path() / "model.popef", ec)) continue;
      if (!best || v > *best) best = v;
    }
    if (!best)
      throw error(error_category::io, "no version holds a model.popef", dir.string(), "put the model at " + (dir / "1" / "model.popef").string());
    return *best;
  }

  std::filesystem::path dir_;
  repository_options options_;
  mutable std::mutex mutex_;
  std::map<std::string, model_entry> models_;
};

}  // namespace ipu::serve
