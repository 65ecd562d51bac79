#pragma once
// Custom ops: ops a user adds at run time (PopART's custom ops, PopTorch's ipu.custom_op), each
// with the same knowledge a row of the built-in op table has (ops/op_table.hpp): a shape rule, a
// host kernel, an optional cost rule and an optional gradient rule. The built-in table stays a
// constant expression; the lookups that serve run time (op_def_index, op_row_at, op_registry::find)
// fall back to the ops registered here, so a custom op imports, infers, costs, trains and runs
// like any other. Registration is process-wide and permanent (kernels may live in a loaded shared
// library, which therefore stays loaded): a second op of the same domain and type is refused.
//
// From C++:   ipu::ops::register_custom_op({.domain = "custom.ops", .type = "LeakyRelu6", ...});
// From a shared library (ipu::ops::load_custom_ops, `ipu run --custom-op LIB.so`): the library
// defines, with C linkage,
//     extern "C" void ipu_register_custom_ops(ipu::ops::custom_op_registrar& r) { r.add({...}); }
// and must be built with the same compiler and ipu headers as the program loading it.
#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/ops/custom_store.hpp"
#include "ipu/ops/kernel.hpp"
#include "ipu/ops/op_def.hpp"
#include "ipu/ops/op_table.hpp"

namespace ipu::ops {

/// What a user gives for one custom op.
struct custom_op {
  std::string domain;        // PopART's OperatorIdentifier domain, e.g. "custom.ops" (not ai.onnx)
  std::string type;          // e.g. "LeakyRelu6"
  std::int64_t version = 1;  // the domain's opset version a model must import
  infer_fn shape = nullptr;  // required: the outputs' infos from the inputs' and the attributes
  kernel_fn kernel = nullptr;           // required: the host kernel
  op_cost_fn cost = nullptr;            // optional: nullptr costs it with the generic rule
  gradient_fn gradient = nullptr;       // optional: nullptr means it cannot be trained through
};

/// The name used in messages: domain::type (version N).
inline std::string custom_op_label(std::string_view domain, std::string_view type, std::int64_t version) {
  return std::string(domain) + "::" + std::string(type) + " (version " + std::to_string(version) + ")";
}

namespace detail::custom {

inline void check(const custom_op& op, const std::string& where) {
  const auto label = custom_op_label(op.domain, op.type, op.version);
  if (op.domain.empty() || op.domain == "ai.onnx")
    throw error(error_category::usage, "custom op " + op.type + " has the ai.onnx domain", where,
                "give it a domain of its own, e.g. \"custom.ops\"");
  if (op.type.empty()) throw error(error_category::usage, "a custom op of domain " + op.domain + " has no type", where);
  if (op.version < 1)
    throw error(error_category::usage, "custom op " + label + " needs a version >= 1", where);
  if (!op.shape)
    throw error(error_category::usage, "custom op " + label + " has no shape rule", where,
                "give custom_op::shape, computing the outputs' infos from the inputs'");
  if (!op.kernel)
    throw error(error_category::usage, "custom op " + label + " has no kernel", where, "give custom_op::kernel");
}

}  // namespace detail::custom

/// Registers `ops` all or none: each is checked, and refused if its domain and type are already
/// taken (by the op table, an earlier registration, or another of `ops`). `where` names the source
/// in errors.
inline void register_custom_ops(const std::vector<custom_op>& ops, const std::string& where = "register_custom_op") {
  for (const auto& op : ops) detail::custom::check(op, where);
  auto& s = detail::custom::the_store();
  const std::unique_lock lock(s.mutex);
  auto taken = [&](const std::string& domain, const std::string& type) {
    for (const auto& r : s.rows)
      if (r.domain == domain && r.type == type) return true;
    for (const auto& def : op_table())  // the built-in rows (op_def_index would take the lock again)
      if (def.domain == domain && def.type == type) return true;
    return false;
  };
  for (std::size_t i = 0; i < ops.size(); ++i) {
    bool twice = taken(ops[i].domain, ops[i].type);
    for (std::size_t j = 0; j < i && !twice; ++j) twice = ops[j].domain == ops[i].domain && ops[j].type == ops[i].type;
    if (twice)
      throw error(error_category::usage,
                  "custom op " + custom_op_label(ops[i].domain, ops[i].type, ops[i].version) + " is already registered",
                  where, "register each op once (load each custom-op library once); give a new op a type or domain of its own");
  }
  for (const auto& op : ops) {
    auto& r = s.rows.emplace_back();
    r.domain = op.domain;
    r.type = op.type;
    r.version = op.version;
    r.def.domain = r.domain;
    r.def.type = r.type;
    r.def.shape = op.shape;
    if (op.cost) r.def.cost = op.cost;
    if (op.gradient) r.def.gradient = op.gradient;
    r.entry.domain = r.domain;
    r.entry.type = r.type;
    r.entry.kernel = op.kernel;
  }
}

/// Registers one custom op (see register_custom_ops).
inline void register_custom_op(const custom_op& op) { register_custom_ops({op}); }

/// Whether (domain, type) is a registered custom op, and its version if so (0 if not).
inline std::int64_t custom_op_version(std::string_view domain, std::string_view type) {
  const auto i = detail::custom::index_of(domain, type);
  return i == detail::custom::none ? 0 : detail::custom::at(i).version;
}

/// Every registered custom op as domain::type (version N), in registration order.
inline std::vector<std::string> custom_op_names() {
  auto& s = detail::custom::the_store();
  const std::shared_lock lock(s.mutex);
  std::vector<std::string> out;
  for (const auto& r : s.rows) out.push_back(custom_op_label(r.domain, r.type, r.version));
  return out;
}

/// Given to a shared library's ipu_register_custom_ops; collects what it adds.
class custom_op_registrar {
 public:
  virtual ~custom_op_registrar() = default;
  virtual void add(const custom_op& op) = 0;
};

/// The C-linkage entry point a custom-op library defines.
using register_custom_ops_fn = void (*)(custom_op_registrar&);
inline constexpr const char* custom_ops_entry_point = "ipu_register_custom_ops";

/// Loads the shared library at `path` and registers the custom ops its ipu_register_custom_ops adds
/// (all or none; see register_custom_ops). The library stays loaded: the ops' code lives in it.
/// Returns the ops' labels. Errors name the file: missing or not loadable, no entry point, an op
/// refused, or the entry point throwing.
inline std::vector<std::string> load_custom_ops(const std::filesystem::path& path) {
  const std::string where = "custom-op library " + path.string();
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw error(error_category::usage, "the custom-op library does not exist (or is not a file)", where,
                "give the path of a shared library defining " + std::string(custom_ops_entry_point));
  // A bare name would make dlopen search the library path: a path names this file only.
  const auto file = path.has_parent_path() ? path : std::filesystem::path(".") / path;
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw error(error_category::usage, std::string("the custom-op library cannot be loaded: ") + (why ? why : "unknown reason"),
                where, "build it as a shared library (add_library(... MODULE ...)) for this machine");
  }
  struct closer {  // closes the library unless its ops were registered
    void* h;
    ~closer() {
      if (h) ::dlclose(h);
    }
  } guard{handle};
  (void)::dlerror();
  void* sym = ::dlsym(handle, custom_ops_entry_point);
  if (!sym)
    throw error(error_category::usage, std::string("the library defines no ") + custom_ops_entry_point, where,
                "define extern \"C\" void " + std::string(custom_ops_entry_point) +
                    "(ipu::ops::custom_op_registrar&) in it (see ipu/ops/custom_ops.hpp)");
  struct collect final : custom_op_registrar {
    std::vector<custom_op> ops;
    void add(const custom_op& op) override { ops.push_back(op); }
  } registrar;
  register_custom_ops_fn entry = nullptr;
  static_assert(sizeof(entry) == sizeof(sym), "ipu: dlsym's pointer must convert to a function pointer");
  std::memcpy(&entry, &sym, sizeof(entry));  // POSIX's object-to-function pointer conversion
  try {
    entry(registrar);
  } catch (const error& e) {
    throw error(e.category(), e.message(), where + (e.location().empty() ? "" : ": " + e.location()), e.hint());
  } catch (const std::exception& e) {
    throw error(error_category::usage, std::string(custom_ops_entry_point) + " threw: " + e.what(), where);
  }
  if (registrar.ops.empty())
    throw error(error_category::usage, std::string(custom_ops_entry_point) + " registered no op", where,
                "call add() on the registrar once per op");
  register_custom_ops(registrar.ops, where);
  guard.h = nullptr;
  std::vector<std::string> labels;
  for (const auto& op : registrar.ops) labels.push_back(custom_op_label(op.domain, op.type, op.version));
  return labels;
}

}  // namespace ipu::ops
