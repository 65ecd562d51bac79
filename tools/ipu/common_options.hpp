#pragma once
// What `ipu plan` and `ipu compile` share, so the same flag means the same thing with the same
// default in both: the strategy names, the batches-per-step default, and `--batch`.
#include <CLI/CLI.hpp>
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <span>
#include <string_view>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "import_limits.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/ops/custom_ops.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/poptorch/strategy.hpp"

namespace ipu_cli {

/// --strategy's default, and --batches-per-step's (PopTorch's deviceIterations): enough
/// micro-batches per step to fill a pipeline of up to 16 stages.
inline constexpr const char* default_strategy = "pipelined";
inline constexpr std::int64_t default_batches_per_step = 16;

inline std::string lower_case(std::string s) {
  for (auto& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

/// --strategy, case-insensitive.
inline ipu::execution_mode parse_strategy(const std::string& s) {
  const auto l = lower_case(s);
  if (l == "sharded") return ipu::execution_mode::sharded;
  if (l == "pipelined") return ipu::execution_mode::pipelined;
  if (l == "serial-phased") return ipu::execution_mode::serial_phased;
  if (l == "parallel-phased") return ipu::execution_mode::parallel_phased;
  throw ipu::error(ipu::error_category::usage, "unknown strategy '" + s + "'", "--strategy",
                   "use sharded, pipelined, serial-phased or parallel-phased");
}

/// `--custom-op LIB.so` (repeatable), on every subcommand that imports or runs a model.
inline void add_custom_op_option(CLI::App& cmd, std::vector<std::string>& libraries) {
  cmd.add_option("--custom-op", libraries,
                 "load a custom-op library (a shared library defining ipu_register_custom_ops; repeatable)");
}

/// Registers the custom ops of every --custom-op library, in order; a library given twice, or two
/// defining the same op, is an error naming the op.
inline void load_custom_op_libraries(const std::vector<std::string>& libraries) {
  for (const auto& lib : libraries) {
    try {
      (void)ipu::ops::load_custom_ops(lib);
    } catch (const ipu::error& e) {
      throw ipu::error(e.category(), e.message(), "--custom-op " + lib, e.hint());
    }
  }
}

/// Loads an ONNX model with `shapes` (--input-shape) fixing dynamic dimensions and `batch` (--batch,
/// 0: unchanged) as the leading dimension of every other graph input: a dynamic one is fixed through
/// the importer's input shapes, a fixed one of another size is rewritten in the model (with the
/// recorded intermediate shapes dropped, so inference redoes them; a model whose ops fix the batch
/// fails there). An input with other dynamic dimensions is left for the importer to name.
inline ipu::graph load_model_with_batch(const std::filesystem::path& path, std::int64_t batch,
                                        std::map<std::string, std::vector<std::int64_t>, std::less<>> shapes) {
  if (batch < 0)
    throw ipu::error(ipu::error_category::usage, "--batch " + std::to_string(batch) + " is negative", "--batch",
                     "give the number of samples per micro-batch");
  if (batch == 0) {
    auto io = limited_import_options();
    io.input_shapes = std::move(shapes);
    return ipu::onnx::load_model(path, io);
  }
  auto model = std::make_shared<::onnx::ModelProto>();
  ipu::onnx::read_proto_file(*model, path, "ONNX model");
  auto& g = *model->mutable_graph();
  bool rewritten = false;
  {
    std::map<std::string, bool> initializers;
    for (const auto& t : g.initializer()) initializers[t.name()] = true;
    for (auto& in : *g.mutable_input()) {
      if (initializers.count(in.name()) || shapes.count(in.name())) continue;
      if (!in.type().has_tensor_type() || !in.type().tensor_type().has_shape()) continue;
      auto* shape = in.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape->dim_size() == 0) continue;
      auto* d0 = shape->mutable_dim(0);
      if (d0->has_dim_value()) {
        if (d0->dim_value() == batch) continue;
        d0->set_dim_value(batch);
        rewritten = true;
        continue;
      }
      std::vector<std::int64_t> dims{batch};
      bool dynamic_rest = false;
      for (int i = 1; i < shape->dim_size(); ++i) {
        if (shape->dim(i).has_dim_value()) dims.push_back(shape->dim(i).dim_value());
        else dynamic_rest = true;
      }
      if (!dynamic_rest) shapes.emplace(in.name(), std::move(dims));
    }
  }
  if (rewritten) {
    g.clear_value_info();
    for (auto& out : *g.mutable_output())
      if (out.type().has_tensor_type() && out.type().tensor_type().has_shape() &&
          out.type().tensor_type().shape().dim_size() > 0)
        out.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_param("batch");
  }
  auto io = limited_import_options();
  io.input_shapes = std::move(shapes);
  io.base_dir = path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
  try {
    return ipu::onnx::import_model(std::move(model), io);
  } catch (const ipu::error& e) {
    throw ipu::error(e.category(), e.message(), path.string() + (e.location().empty() ? "" : ": " + e.location()), e.hint());
  }
}

/// --options FILE (PopTorch's options-file syntax) read onto `base` (the command line's values):
/// a setting outside `applied` (prefixes of the lines options::to_config writes) is refused by
/// name, so none is accepted and ignored.
inline ipu::options read_options_file(const std::string& file, ipu::options base, std::span<const std::string_view> applied,
                                      std::string_view command) {
  base.load_from_file(file);
  for (const auto& line : ipu::settings_not_applied(base, applied)) {
    std::string names;
    for (auto p : applied) names += (names.empty() ? "" : ", ") + std::string(p.substr(0, p.size() - 1));
    throw ipu::error(ipu::error_category::usage, "the options file sets " + line + ", which " + std::string(command) +
                                                     " does not apply",
                     "--options '" + file + "'", std::string(command) + " applies " + names + "; use its flags for the rest");
  }
  return base;
}

/// A value both on the command line and in the options file must agree; else the file's applies.
template <class T>
void take_from_file(T& value, T from_file, bool flag_given, const char* flag, const char* setting, const std::string& file) {
  if (from_file == value) return;
  if (flag_given)
    throw ipu::error(ipu::error_category::usage,
                     std::string(flag) + " " + std::to_string(value) + " and the options file's " + setting + "(" +
                         std::to_string(from_file) + ") disagree",
                     "--options '" + file + "'", "set it in one place");
  value = from_file;
}

}  // namespace ipu_cli
