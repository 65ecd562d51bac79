#pragma once
// The model repository, laid out as Triton's: DIR/<model>/<version>/model.popef, versions numbered,
// plus an optional DIR/<model>/config.json (serve/model_config.hpp). Loading a model serves the
// versions its version policy chooses (default: the highest), each through its own Model Runtime
// model runner (its own simulated device from the device manager) behind its own dynamic batcher.
// A model or version that fails to load (bad file, bad config, no free device) stays in the index,
// unavailable, with the reason; a later load retries.
//
//   ipu::serve::model_repository repo("models", options);
//   repo.load_all();
//   auto m = repo.find("mnist", "");    // the highest version served; shared: an unload waits for it
//   auto out = m->infer(request);
#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
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
#include "ipu/runtime/device_manager.hpp"
#include "ipu/runtime/model_runner.hpp"
#include "ipu/serve/dynamic_batcher.hpp"
#include "ipu/serve/model_config.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

/// What the server says of itself (KServe's server metadata), over HTTP and gRPC alike.
inline constexpr const char* server_name = "ipu";
inline constexpr const char* server_version = "0.1.0";

/// Opened once a served model is destroyed, its runner and so its device released: what an unload
/// waits on. Shared by the model and its waiters, so it outlives whichever of them lets go last.
class release_latch {
 public:
  /// True once released; waits for it until `deadline` (false: not released by then).
  [[nodiscard]] bool wait_until(std::chrono::steady_clock::time_point deadline) const {
    std::unique_lock lock(mutex_);
    return opened_.wait_until(lock, deadline, [&] { return released_; });
  }
  [[nodiscard]] bool released() const {
    std::lock_guard lock(mutex_);
    return released_;
  }
  void release() {
    {
      std::lock_guard lock(mutex_);
      released_ = true;
    }
    opened_.notify_all();  // the releaser still holds the latch: it outlives this call
  }

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable opened_;
  bool released_ = false;
};

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
  /// Released once the model is destroyed, its device with it.
  [[nodiscard]] std::shared_ptr<const release_latch> release_signal() const noexcept { return release_.latch; }
  /// The config's request_timeout_microseconds (0: none).
  [[nodiscard]] std::chrono::microseconds request_timeout() const noexcept { return timeout_; }

  /// Checks a request against the model, runs it (batched with others) and answers it. Throws
  /// request_error (400) for inputs that do not fit the model.
  infer_response infer(const infer_request& r) const {
    const auto where = "model '" + name_ + "'";
    auto [n, spans] = match_inputs(r, inputs_, max_batch_, where);
    std::vector<std::pair<std::size_t, bool>> wanted;  // output index, binary
    for (const auto& o : r.outputs) {  // not a structured binding: Clang 14 cannot capture one in the lambda
      const auto it = std::find_if(outputs_.begin(), outputs_.end(), [&](const auto& m) { return m.name == o.first; });
      if (it == outputs_.end()) throw request_error(400, "'" + o.first + "' is not an output of the model", where, detail::codec::names(outputs_));
      wanted.emplace_back(static_cast<std::size_t>(it - outputs_.begin()), o.second);
    }
    if (r.outputs.empty())
      for (std::size_t k = 0; k < outputs_.size(); ++k) wanted.emplace_back(k, r.binary_outputs);
    // The request's own "timeout" parameter overrides the model's (Triton's rule: 0 is the model's).
    const auto timeout = r.timeout.count() > 0 ? r.timeout : timeout_;
    auto ran = batcher_->infer(std::move(spans), n, timeout);
    if (!ran)
      throw request_error(503, "the request waited " + std::to_string(timeout.count()) + " us in the queue without starting", where,
                          r.timeout.count() > 0 ? "send it again later, or with a longer 'timeout' parameter"
                                                : "send it again later, or raise request_timeout_microseconds in the model's config.json");
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

  // Declared first, so destroyed last: it opens the latch only once the runner, and so its device,
  // is gone (a weak_ptr to the model itself expires before its destructor runs).
  struct release_on_destroy {
    std::shared_ptr<release_latch> latch = std::make_shared<release_latch>();
    release_on_destroy() = default;
    release_on_destroy(const release_on_destroy&) = delete;
    release_on_destroy& operator=(const release_on_destroy&) = delete;
    ~release_on_destroy() { latch->release(); }
  } release_;
  std::string name_;
  std::uint64_t version_;
  mutable runtime::model_runner runner_;  // thread-safe: clients queue requests
  std::uint64_t max_batch_ = 0;
  std::vector<tensor_metadata> inputs_, outputs_;
  std::chrono::microseconds timeout_{0};
  std::unique_ptr<dynamic_batcher> batcher_;  // last: stopped before the runner
};

/// One version of a model, chosen by its version policy: served, or not and why.
struct version_entry {
  std::uint64_t version = 0;
  std::shared_ptr<const served_model> model;  // null when not served
  std::string reason;                         // why not
};

/// A model of the repository: the versions its policy chose, or why none was chosen.
struct model_entry {
  std::vector<version_entry> versions;  // ascending; empty when the model as a whole is unavailable
  std::string reason;                   // why it is (a bad config, no version on disk, "unloaded"...)

  /// The highest version served (what a request naming no version gets); null when none is.
  [[nodiscard]] std::shared_ptr<const served_model> latest() const {
    for (auto it = versions.rbegin(); it != versions.rend(); ++it)
      if (it->model) return it->model;
    return nullptr;
  }
  [[nodiscard]] bool ready() const { return latest() != nullptr; }
  /// Every version the policy chose is served.
  [[nodiscard]] bool all_ready() const {
    for (const auto& v : versions)
      if (!v.model) return false;
    return !versions.empty();
  }
  /// Why the model, or some of its versions, are not served; empty when all are.
  [[nodiscard]] std::string why() const {
    if (!reason.empty()) return reason;
    std::string s;
    for (const auto& v : versions)
      if (!v.model) s += (s.empty() ? "" : "; ") + ("version " + std::to_string(v.version) + ": " + v.reason);
    return s;
  }
  /// "1, 3": the chosen versions.
  [[nodiscard]] std::string version_list() const {
    std::string s;
    for (const auto& v : versions) s += (s.empty() ? "" : ", ") + std::to_string(v.version);
    return s;
  }
};

/// How long an unload, or a reload short of devices, waits by default for the requests under way on
/// the versions it drops (they hold them, and so their devices, until answered).
inline constexpr std::chrono::seconds release_wait{30};

struct repository_options {
  runtime::model_runner_config runner;
  /// How long an unload, or a reload short of devices, waits for the versions it drops to be
  /// released (serve::release_wait; at most a day is waited); past it, the unload returns with their devices still held.
  std::chrono::milliseconds release_wait = serve::release_wait;
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

  /// (Re)loads the versions of a model its version policy chooses, each on its own runner,
  /// batcher and device; false (the reasons in the index) unless every one loaded. Versions that
  /// loaded are served even when others failed. The versions loaded before are served until the
  /// new ones are in place, unless the system has no spare device for the new ones: then the old
  /// ones are dropped first (requests under way on them finish) and their devices reused.
  /// Throws request_error (404) for a name that is not a model directory.
  bool load(const std::string& name) {
    const auto dir = model_dir(name);
    std::lock_guard loading(load_mutex_);  // one load or unload at a time: each may take devices back
    model_entry fresh;
    model_config config;
    std::vector<std::uint64_t> chosen;
    try {
      config = read_model_config(dir);
      chosen = choose_versions(dir, config.version_policy);
    } catch (const std::exception& e) {
      fresh.reason = e.what();
    }
    bool released = false;
    for (const auto v : chosen) fresh.versions.push_back(load_version(name, dir, v, config, fresh.versions, released));
    const bool ok = fresh.all_ready();
    model_entry old;  // destroyed once the lock is released: its batchers finish the runs under way
    {
      std::lock_guard lock(mutex_);
      old = std::exchange(models_[name], std::move(fresh));
    }
    return ok;
  }

  /// load(), answering a failure with request_error (400) carrying the reason: the repository
  /// extension's load, over HTTP and gRPC.
  void load_or_refuse(const std::string& name) {
    if (load(name)) return;
    throw request_error(400, "failed to load model '" + name + "': " + index().at(name).why(), "model repository",
                        "fix the model's files or config.json, or free a device for it, and load it again");
  }

  /// Stops serving a model; 404 for an unknown one. Returns once the requests under way on it are
  /// answered, so that its devices are free for another model: true then, false when
  /// repository_options::release_wait passed first (some are still under way, holding its devices).
  bool unload(const std::string& name) {
    std::lock_guard loading(load_mutex_);
    std::vector<std::shared_ptr<const release_latch>> gone;
    {
      model_entry old;  // destroyed once the lock is released
      {
        std::lock_guard lock(mutex_);
        auto it = models_.find(name);
        if (it == models_.end()) {
          (void)model_dir(name);  // on disk but never loaded: nothing to do
          return true;
        }
        old = std::exchange(it->second, model_entry{{}, "unloaded"});
      }
      for (const auto& v : old.versions)
        if (v.model) gone.push_back(v.model->release_signal());
    }
    return wait_released(gone);
  }

  /// The served version for a request: `version` empty, the highest served. request_error 404 for
  /// an unknown model or a version the policy did not choose, 503 for one not served (the reason).
  [[nodiscard]] std::shared_ptr<const served_model> find(const std::string& name, const std::string& version) const {
    std::lock_guard lock(mutex_);
    auto it = models_.find(name);
    if (it == models_.end())
      throw request_error(404, "unknown model '" + name.substr(0, 200) + "'", "model repository", "GET /v2/repository/index lists them");
    const auto& e = it->second;
    const auto load_hint = "load it with POST /v2/repository/models/" + name + "/load";
    if (e.versions.empty()) throw request_error(503, "model '" + name + "' is not ready: " + e.reason, "model repository", load_hint);
    if (version.empty()) {
      if (auto m = e.latest()) return m;
      throw request_error(503, "model '" + name + "' is not ready: " + e.why(), "model repository", load_hint);
    }
    for (const auto& v : e.versions)
      if (std::to_string(v.version) == version) {
        if (v.model) return v.model;
        throw request_error(503, "model '" + name + "' version " + version + " is not ready: " + v.reason, "model repository", load_hint);
      }
    throw request_error(404, "model '" + name + "' has no version '" + version.substr(0, 40) + "' served (versions served: " + e.version_list() + ")",
                        "model repository", "ask for one of those, or for none (the highest ready); config.json's version_policy chooses them");
  }

  /// The versions of a model being served, ascending (KServe's model metadata "versions").
  [[nodiscard]] std::vector<std::uint64_t> served_versions(const std::string& name) const {
    std::vector<std::uint64_t> out;
    std::lock_guard lock(mutex_);
    if (const auto it = models_.find(name); it != models_.end())
      for (const auto& v : it->second.versions)
        if (v.model) out.push_back(v.version);
    return out;
  }

  /// KServe's model readiness: false for a model or version known but not served; request_error
  /// 404 for an unknown model or version.
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
    for (const auto& n : scan()) out[n] = {{}, "not loaded"};
    std::lock_guard lock(mutex_);
    for (const auto& kv : models_) out[kv.first] = kv.second;
    return out;
  }

  /// True when every version of every model loaded (unloaded models aside).
  [[nodiscard]] bool all_ready() const {
    std::lock_guard lock(mutex_);
    for (const auto& kv : models_)
      if (!kv.second.all_ready() && kv.second.reason != "unloaded") return false;
    return true;
  }

  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }

  /// The versions under a model directory, ascending: directories named by a number (not starting
  /// with 0, as Triton's) holding a model.popef.
  [[nodiscard]] static std::vector<std::uint64_t> versions_on_disk(const std::filesystem::path& dir) {
    std::vector<std::uint64_t> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
      const auto s = e.path().filename().string();
      std::uint64_t v = 0;
      const auto [p, err] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (err != std::errc() || p != s.data() + s.size() || s.front() == '0' || !e.is_directory(ec)) continue;
      if (!std::filesystem::is_regular_file(e.path() / "model.popef", ec)) continue;
      out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  /// The versions a policy chooses among those on disk; throws ipu::error when it chooses none, or
  /// names one that is not there.
  [[nodiscard]] static std::vector<std::uint64_t> choose_versions(const std::filesystem::path& dir, const version_policy& policy) {
    const auto on_disk = versions_on_disk(dir);
    auto list = [](const std::vector<std::uint64_t>& v) {
      std::string s;
      for (auto n : v) s += (s.empty() ? "" : ", ") + std::to_string(n);
      return s.empty() ? std::string("none") : s;
    };
    if (policy.policy == version_policy::kind::specific) {
      for (auto v : policy.versions)
        if (!std::binary_search(on_disk.begin(), on_disk.end(), v))
          throw error(error_category::io,
                      "version_policy names version " + std::to_string(v) + ", which has no model.popef (versions on disk: " + list(on_disk) + ")",
                      dir.string(), "put it at " + (dir / std::to_string(v) / "model.popef").string() + " or drop it from the policy");
      return policy.versions;
    }
    if (on_disk.empty())
      throw error(error_category::io, "no version holds a model.popef", dir.string(), "put the model at " + (dir / "1" / "model.popef").string());
    if (policy.policy == version_policy::kind::all) {
      if (on_disk.size() > max_served_versions)
        throw error(error_category::options,
                    std::to_string(on_disk.size()) + " versions on disk; at most " + std::to_string(max_served_versions) + " are served at once",
                    dir.string(), "serve fewer with version_policy latest or specific");
      return on_disk;
    }
    const auto n = std::min<std::size_t>(on_disk.size(), policy.num_versions);
    return {on_disk.end() - static_cast<std::ptrdiff_t>(n), on_disk.end()};
  }

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

  /// One version on its own runner, batcher and device; on failure, the entry says why.
  version_entry load_version(const std::string& name, const std::filesystem::path& dir, std::uint64_t v, const model_config& config,
                             const std::vector<version_entry>& built, bool& released) {
    version_entry out{v, nullptr, {}};
    for (;;) {
      try {
        out.model = std::make_shared<const served_model>(name, v, dir / std::to_string(v) / "model.popef", config, options_.runner);
      } catch (const device_busy_error& e) {
        // A reload with no spare device: the versions it replaces give theirs up first (once).
        if (!released) {
          released = true;
          if (release_loaded(name)) continue;
        }
        out.reason = busy_reason(e, name, built);
      } catch (const std::exception& e) {
        out.reason = e.what();
      }
      return out;
    }
  }

  /// Drops the model's loaded versions and waits for their requests under way; false when none was loaded.
  bool release_loaded(const std::string& name) {
    std::vector<std::shared_ptr<const release_latch>> gone;
    {
      model_entry old;  // destroyed once the lock is released
      {
        std::lock_guard lock(mutex_);
        const auto it = models_.find(name);
        if (it == models_.end() || !it->second.ready()) return false;
        old = std::exchange(it->second, model_entry{{}, "reloading (its devices were released for the new load)"});
      }
      for (const auto& v : old.versions)
        if (v.model) gone.push_back(v.model->release_signal());
    }
    (void)wait_released(gone);  // if some are still held past it, the retried load says who holds the devices
    return true;
  }

  /// Waits until the versions are destroyed (their last request answered), at most
  /// options_.release_wait in all; false when some are not by then.
  [[nodiscard]] bool wait_released(const std::vector<std::shared_ptr<const release_latch>>& gone) const {
    // At most a day: a larger release_wait would overflow the clock's arithmetic, and no unload
    // should wait longer than that for a request to end.
    const auto deadline =
        std::chrono::steady_clock::now() + std::clamp(options_.release_wait, std::chrono::milliseconds{0},
                                                      std::chrono::milliseconds{std::chrono::hours{24}});
    bool all = true;
    for (const auto& l : gone) all = l->wait_until(deadline) && all;
    return all;
  }

  /// Why a version got no device: what it asked for, who holds the IPUs (the device manager knows
  /// the processes; which of this server's versions hold them is known here), and what to do.
  std::string busy_reason(const device_busy_error& e, const std::string& name, const std::vector<version_entry>& built) const {
    std::string ours;
    auto note = [&](const std::string& model, const version_entry& v) {
      if (!v.model || !v.model->runner().device().valid()) return;
      const auto ipus = v.model->runner().device().ipus();
      bool holds = false;
      for (const auto& h : e.holders()) holds = holds || std::find(ipus.begin(), ipus.end(), h.ipu) != ipus.end();
      if (!holds) return;
      // A device's IPUs are consecutive: "IPU 3", "IPUs 4-7".
      const auto held = ipus.size() == 1 ? "IPU " + std::to_string(ipus.front())
                                         : "IPUs " + std::to_string(ipus.front()) + "-" + std::to_string(ipus.back());
      ours += (ours.empty() ? "" : ", ") + ("model '" + model + "' version " + std::to_string(v.version) + " holds " + held);
    };
    {
      std::lock_guard lock(mutex_);
      for (const auto& kv : models_)
        for (const auto& v : kv.second.versions) note(kv.first, v);
    }
    for (const auto& v : built) note(name, v);
    return "no free device: " + e.message() + (ours.empty() ? std::string() : " (in this server: " + ours + ")") + "; " + e.location() +
           " (unload a model holding them and load this one again, or serve on a system with more IPUs: IPU_SYSTEM)";
  }

  std::filesystem::path dir_;
  repository_options options_;
  std::mutex load_mutex_;  // held by load and unload, never under mutex_
  mutable std::mutex mutex_;
  std::map<std::string, model_entry> models_;
};

}  // namespace ipu::serve
