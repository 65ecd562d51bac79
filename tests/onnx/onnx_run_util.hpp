#pragma once
// Importing a test model and running it on the CPU device, or reading why the import refused it:
// for the test files that check what an import writes out (not included by the others, which need
// no device).
#include <string>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_onnx {

/// The outputs of model `m` on `inputs`, imported and run on one thread.
inline std::vector<ipu::host_tensor> run(const model& m, const std::vector<ipu::host_tensor>& inputs) {
  ipu::cpu::device dev(ipu::onnx::load_model_from_bytes(m.bytes()), {.threads = 1});
  return dev.run(inputs);
}

/// What importing `m` throws, or "no error".
inline std::string import_error(const model& m) {
  try {
    (void)ipu::onnx::load_model_from_bytes(m.bytes());
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace test_onnx
