// libFuzzer target for the .npy reader: any bytes must parse or raise ipu::error — never crash,
// read out of bounds or allocate more than the file holds. What parses must round-trip: writing
// the tensor and reading it back gives the same type, shape and bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "ipu/error.hpp"
#include "ipu/io/npy.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ipu::host_tensor t;
  try {
    t = ipu::io::parse_npy(std::as_bytes(std::span(data, size)), "fuzz");
  } catch (const ipu::error&) {
    return 0;  // refusing bad input with a clear error is the expected outcome
  }
  const auto bytes = ipu::io::to_npy(t);
  const auto back = ipu::io::parse_npy(bytes, "to_npy");
  if (back.info() != t.info() || back.bytes().size() != t.bytes().size() ||
      (!t.bytes().empty() && std::memcmp(back.bytes().data(), t.bytes().data(), t.bytes().size()) != 0))
    std::abort();
  return 0;
}
