#pragma once
// Tensor files given for a model's inputs: `.npy` (NumPy) or `.pb` (ONNX TensorProto, as in ONNX's
// test data sets), chosen by extension.
#include <filesystem>

#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/tensor.hpp"
#include "ipu/tensor.hpp"

namespace ipu_cli {

/// Reads a .npy or TensorProto .pb file, chosen by extension.
inline ipu::host_tensor read_input_file(const std::filesystem::path& p) {
  const auto ext = p.extension().string();
  if (ext == ".npy") return ipu::io::read_npy(p);
  if (ext == ".pb") {
    if (!std::filesystem::is_regular_file(p))
      throw ipu::error(ipu::error_category::io, "the file does not exist or is not a regular file", "file '" + p.string() + "'",
                       "check the path");
    return ipu::onnx::load_tensor(p);
  }
  throw ipu::error(ipu::error_category::usage, "unknown input file type '" + ext + "'", "file '" + p.string() + "'",
                   "give a NumPy .npy file or an ONNX TensorProto .pb file");
}

}  // namespace ipu_cli
