// libFuzzer target for what `ipu run` / `ipu compile` / `ipu info` read from the command line and
// from input files besides .npy (fuzz_npy): the first byte picks
//  - even: `--input-shape` values, one per line (tools/ipu/input_shapes.hpp);
//  - odd:  an `--input NAME=FILE.pb` tensor, a serialized ONNX TensorProto (external data refused).
// Any bytes must parse or raise ipu::error — never crash, overflow or allocate without limit.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/onnx/tensor.hpp"
#include "../../tools/ipu/input_shapes.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    if (data[0] % 2 == 0) {
      std::vector<std::string> texts;
      std::size_t pos = 0;
      while (pos <= rest.size()) {
        auto nl = rest.find('\n', pos);
        if (nl == std::string_view::npos) nl = rest.size();
        texts.emplace_back(rest.substr(pos, nl - pos));
        pos = nl + 1;
      }
      (void)ipu_cli::parse_input_shapes(texts);
    } else {
      ::onnx::TensorProto t;
      ipu::onnx::parse_proto(t, rest, "ONNX tensor", "fuzz");
      (void)ipu::onnx::to_host_tensor(t);
    }
  } catch (const ipu::error&) {
    // Refusing bad input with a clear error is the expected outcome.
  }
  return 0;
}
