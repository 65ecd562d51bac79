// libFuzzer target for the ONNX importer: any bytes must import (parse, check, infer shapes,
// normalise, fold, build the IR) or raise ipu::error — never crash, hang, read out of bounds or
// allocate without limit. A model that imports, is small and has kernels for every op then runs
// once on the CPU device, with inputs filled from the fuzzer's bytes. External data has no base
// directory here, so every external reference is refused without touching the file system.
// fuzz_onnx_import_replay runs the same function over a corpus with any compiler.
//
// In the libFuzzer build (IPU_LIBFUZZER), onnx_mutator.hpp adds a structure-aware mutator: most
// mutations edit the parsed ModelProto (fields, names, op types, dims) rather than its bytes, so
// inputs stay parseable and reach inference and the kernels.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/tensor.hpp"

#ifdef IPU_LIBFUZZER
#include "onnx_mutator.hpp"
#endif

namespace {

// Runs only graphs whose every tensor is small: kernels then finish in milliseconds, and the
// fuzzer spends its time on variety. Control flow is left out because a Loop's trip count comes
// from its inputs (bounded, but by 2^24 trips: too slow for a fuzzer's time limit).
constexpr std::uint64_t max_run_tensor_bytes = 64 << 10;
constexpr std::size_t max_run_tensors = 512;

bool small_enough_to_run(const ipu::graph& g) {
  if (g.tensors().size() > max_run_tensors) return false;
  for (const auto& t : g.tensors())
    if (t.info.num_bytes() > max_run_tensor_bytes) return false;
  for (const auto& op : g.ops())
    for (const auto& a : op.attributes)
      if (a.kind() == ipu::attribute_kind::g || a.kind() == ipu::attribute_kind::graphs) return false;
  return true;
}

void run_once(ipu::graph g, const std::uint8_t* data, std::size_t size) {
  ipu::cpu::check_kernels(g, ipu::default_op_registry());
  std::vector<ipu::host_tensor> inputs;
  for (const auto id : g.inputs()) {
    ipu::host_tensor t(g.tensor(id).info);
    // Fill with the fuzzer's own bytes: NaNs, infinities, huge indices and negative sizes reach
    // the kernels as a stranger's inputs would.
    // (BOOL elements hold 0 or 1, as every reader of inputs makes them.)
    if (t.info().type == ipu::data_type::STRING) {  // strings as a reader makes them: characters, not addresses
      for (std::size_t i = 0; i < static_cast<std::size_t>(t.info().num_elements()) && size > 0; ++i) {
        const std::size_t at = i % size, length = std::min<std::size_t>(data[at] % 12, size - at);
        t.set_string(i, std::string_view(reinterpret_cast<const char*>(data + at), length));
      }
      inputs.push_back(std::move(t));
      continue;
    }
    auto bytes = std::span(reinterpret_cast<std::uint8_t*>(t.data()), t.info().num_bytes());
    const bool truth = t.info().type == ipu::data_type::BOOL;
    for (std::size_t i = 0; i < bytes.size() && size > 0; ++i)
      bytes[i] = truth ? static_cast<std::uint8_t>(data[i % size] & 1) : data[i % size];
    inputs.push_back(std::move(t));
  }
  ipu::cpu::device dev(std::move(g), {.threads = 1});
  (void)dev.run(inputs);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    auto g = ipu::onnx::load_model_from_bytes(std::string_view(reinterpret_cast<const char*>(data), size));
    // Every tensor of the IR must have a size the library can hold: inference bounded it.
    for (const auto& t : g.tensors()) (void)t.info.num_bytes();
    if (small_enough_to_run(g)) run_once(std::move(g), data, size);
  } catch (const ipu::error&) {
    // Refusing bad input with a clear error is the expected outcome.
  }
  return 0;
}
