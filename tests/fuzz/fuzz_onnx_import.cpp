// libFuzzer target for the ONNX importer: any bytes must import (parse, check, infer shapes,
// normalise, fold, build the IR) or raise ipu::error — never crash, hang, read out of bounds or
// allocate without limit. External data has no base directory here, so every external reference
// is refused without touching the file system. fuzz_onnx_import_replay runs the same function over
// a corpus with any compiler.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ipu/error.hpp"
#include "ipu/onnx/import.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const auto g = ipu::onnx::load_model_from_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
    // Every tensor of the IR must have a size the library can hold: inference bounded it.
    for (const auto& t : g.tensors()) (void)t.info.num_bytes();
  } catch (const ipu::error&) {
    // Refusing bad input with a clear error is the expected outcome.
  }
  return 0;
}
