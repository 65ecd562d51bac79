// libFuzzer target for the PopTorch options-file parser: any text must load or raise ipu::error —
// never crash (deep nesting is bounded), hang or read out of bounds. What loads must round-trip:
// to_config() reads back to the same configuration.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ipu/error.hpp"
#include "ipu/poptorch/options.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string config;
  try {
    ipu::options o;
    o.load_from_string(text, "fuzz");
    config = o.to_config();
  } catch (const ipu::error&) {
    return 0;  // refusing bad input with a clear error is the expected outcome
  }
  // What to_config writes must load, and give the same text again.
  ipu::options again;
  again.load_from_string(config, "to_config");
  if (again.to_config() != config) std::abort();
  return 0;
}
