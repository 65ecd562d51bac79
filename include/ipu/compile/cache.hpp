#pragma once
// The executable cache: compiled models kept as `<dir>/<key>.popef`, the key a 128-bit XXH3 hash
// of the model (its weightless graph and every weight byte), the options, the device, the compile
// options, the library version and the format version.
//
//   auto opts = ipu::options().enable_executable_caching("cache");
//   auto m = ipu::popef::compile(graph, opts, device);         // compile.hpp: through the cache
//   auto r = ipu::popef::compile_cached(graph, opts, device);  // the same, r.hit: served from it
//
// The directory is the options' executable cache path (PopTorch's enableExecutableCaching), else
// the environment's IPU_CACHE_DIR or POPTORCH_CACHE_DIR; with none, compiles are not cached. The
// cache directory itself is no part of the key or of the executable: moving the cache, or compiling
// without it, gives the same file. Entries are written to a temporary file in the directory
// (unique per process and thread) and renamed into place (writer.hpp), so a reader never sees half
// a file and concurrent writers of one key leave one whole entry. An entry that fails to load
// (damaged, truncated) or records another key or library version is logged and replaced by a
// rebuilt one — never an error. Failing to write an entry (read-only directory, full disk) is
// logged and otherwise ignored. A cache path that is empty or names something other than a
// directory is an ipu::error: that is a mistake, not a passing condition.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <system_error>

#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/log.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/compile/compile_options.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/popef/format.hpp"
#include "ipu/popef/graph_codec.hpp"
#include "ipu/popef/plan_codec.hpp"
#include "ipu/popef/writer.hpp"

namespace ipu::popef {

struct cache_result {
  compiled_model model;
  bool hit = false;            // loaded from the cache
  bool stored = false;         // a miss whose entry was written
  std::filesystem::path file;  // the entry; empty when caching is off
};

class executable_cache {
 public:
  /// Throws ipu::error (usage) when `dir` is empty or names something other than a directory,
  /// naming `where` the path came from. A directory that does not exist yet is made by the first
  /// store().
  explicit executable_cache(std::filesystem::path dir, const std::string& where = "executable cache")
      : dir_(std::move(dir)) {
    if (dir_.empty())
      throw error(error_category::usage, "the executable cache directory is empty", where,
                  "name a directory (it is made when missing), or turn caching off");
    std::error_code ec;
    const auto st = std::filesystem::status(dir_, ec);
    if (std::filesystem::exists(st) && !std::filesystem::is_directory(st))
      throw error(error_category::usage,
                  "the executable cache directory '" + dir_.string() + "' is " +
                      (std::filesystem::is_regular_file(st) ? "a regular file" : "not a directory"),
                  where, "name a directory (it is made when missing), not a file");
  }

  /// Where directory_for() found the directory, for errors: the options or the environment.
  static std::string source_of(const ipu::options& o) {
    return o.executable_cache_dir() ? "enable_executable_caching" : "IPU_CACHE_DIR / POPTORCH_CACHE_DIR";
  }

  /// The options' cache directory, else IPU_CACHE_DIR or POPTORCH_CACHE_DIR (as
  /// options::apply_environment reads them); nullopt when none is set.
  static std::optional<std::filesystem::path> directory_for(const ipu::options& o) {
    if (o.executable_cache_dir()) return std::filesystem::path(*o.executable_cache_dir());
    if (const auto env = ipu::options::cache_dir_from_environment()) return std::filesystem::path(*env);
    return std::nullopt;
  }

  /// The options without the cache directory: where executables are cached changes neither the
  /// key nor the executable.
  [[nodiscard]] static ipu::options without_cache(ipu::options o) {
    o.disable_executable_caching();
    return o;
  }

  /// The key of compiling `g` with these settings: 32 hex digits.
  [[nodiscard]] static std::string key(const graph& g, const ipu::options& o, const device_description& d,
                                       const compile_options& co) {
    XXH3_state_t* state = XXH3_createState();
    if (!state) throw error(error_category::internal, "cannot allocate an XXH3 state");
    XXH3_128bits_reset(state);
    auto add = [&](std::string_view s) {
      const std::uint64_t n = s.size();  // length-prefixed so fields cannot run into each other
      XXH3_128bits_update(state, &n, sizeof(n));
      XXH3_128bits_update(state, s.data(), s.size());
    };
    add("ipu " + std::string(library_version) + " popef " + std::to_string(format_version));
    add(detail::serialize_message(graph_to_proto(g), "the graph '" + g.name() + "'"));
    for (const auto& t : g.tensors())
      if (t.kind == tensor_kind::variable) {
        add(t.name);
        add(std::string_view(reinterpret_cast<const char*>(t.data.data()), t.data.size()));
      }
    auto settings = without_cache(o);
    settings.show_compilation_progress_bar(true);  // how compiling looks, not what it makes
    add(settings.to_config());
    pb::Device dev;
    detail::to_proto(d, dev);
    add(detail::serialize_message(dev, "the device"));
    add(co.name);
    add(std::to_string(co.auto_plan) + "," + std::to_string(co.compress) + "," +
        (co.from_annotations ? std::string(to_string(*co.from_annotations)) : std::string("-")) + "," +
        std::string(to_string(co.float8)));
    const auto h = XXH3_128bits_digest(state);
    XXH3_freeState(state);
    auto hex16 = [](std::uint64_t v) {
      static constexpr char digits[] = "0123456789abcdef";
      std::string s(16, '0');
      for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xf];
      return s;
    };
    return hex16(h.high64) + hex16(h.low64);
  }

  [[nodiscard]] std::filesystem::path entry(const std::string& key) const { return dir_ / (key + ".popef"); }
  [[nodiscard]] const std::filesystem::path& directory() const noexcept { return dir_; }

  /// The cached model for `key`, or nullopt when there is no usable entry. A damaged or stale
  /// entry is logged and left for store() to replace (atomically: removing it here could remove a
  /// good entry another process has just renamed into place).
  [[nodiscard]] std::optional<compiled_model> find(const std::string& key) const {
    const auto file = entry(key);
    std::error_code ec;
    if (!std::filesystem::exists(file, ec)) return std::nullopt;
    try {
      auto m = load(file);
      const auto& eo = m.metadata.engine_options;
      const auto k = eo.find("ipu.cache_key");
      const auto v = eo.find("ipu.version");
      if (k != eo.end() && k->second == key && v != eo.end() && v->second == library_version) return m;
      log::warn("popef: executable cache entry ", file.string(),
                " was made by another version or for another model; rebuilding it");
    } catch (const std::exception& e) {
      log::warn("popef: executable cache entry ", file.string(), " is unusable and will be rebuilt: ", e.what());
    }
    return std::nullopt;
  }

  /// Writes `m` as the entry for `key` (the writer writes a temporary file and renames it into
  /// place, replacing any entry there). `m` records the key (engine option `ipu.cache_key`), or
  /// find() will not accept the entry. Returns false, having logged why, when it cannot.
  bool store(const std::string& key, const compiled_model& m, bool compress = true) const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    try {
      writer w(entry(key));
      write_model(w, m, compress);
      w.close();
      return true;
    } catch (const std::exception& e) {
      log::warn("popef: cannot write cache entry in ", dir_.string(), ": ", e.what());
      return false;
    }
  }

 private:
  std::filesystem::path dir_;
};

}  // namespace ipu::popef
