#pragma once
// `--max-model-bytes N` and `--max-tensor-bytes N` on every subcommand that imports an ONNX model
// (info, run, plan, compile, train): the importer's resource caps (ipu::onnx::import_options).
#include <CLI/CLI.hpp>

#include <cstdint>

#include "ipu/onnx/import.hpp"

namespace ipu_cli {

/// The caps given on the command line (the library's defaults otherwise).
inline ipu::onnx::import_options& import_limits() {
  static ipu::onnx::import_options limits;
  return limits;
}

/// Import options carrying the command line's caps; every subcommand starts from these.
inline ipu::onnx::import_options limited_import_options() {
  ipu::onnx::import_options o;
  o.max_model_bytes = import_limits().max_model_bytes;
  o.max_tensor_bytes = import_limits().max_tensor_bytes;
  return o;
}

inline void add_import_limit_options(CLI::App& app) {
  auto& l = import_limits();
  // Sizes in bytes, or with a unit: 512M, 16GiB (k = 1024).
  app.add_option("--max-model-bytes", l.max_model_bytes,
                 "refuse ONNX models (file plus external data) larger than this (default 8G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, UINT64_MAX));
  app.add_option("--max-tensor-bytes", l.max_tensor_bytes,
                 "refuse ONNX models with any tensor larger than this, before allocating it (default 4G)")
      ->transform(CLI::AsSizeValue(false))
      ->check(CLI::Range(std::uint64_t{1}, UINT64_MAX));
}

}  // namespace ipu_cli
