// libFuzzer target for the KServe v2 request readers (serve/tensor_codec.hpp, serve/grpc_codec.hpp):
// the first byte picks
//  - bit 0 clear: an HTTP body, decoded by decode_infer_request(body, header_length); with bit 1 set
//    the next 4 bytes (little-endian) are the Inference-Header-Content-Length, else it is absent;
//  - bit 0 set:   a serialized inference.ModelInferRequest, parsed by protobuf then decoded.
// Bit 2 picks the signature a decoded request is then matched against (match_inputs, as the model
// repository does before running): with a batch dimension (max_batch_size 4) or without.
// Any bytes must decode or raise request_error / ipu::error — never crash, overflow or allocate
// without limit. A decoded request must be self-consistent (each tensor's bytes are its shape's
// elements times its datatype's size), and one matched must hand the batcher `rows` rows of each
// input; a violation aborts. Light on purpose: no model, runtime or kernels in this TU.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/serve/grpc_codec.hpp"
#include "ipu/serve/tensor_codec.hpp"

namespace {

using ipu::serve::tensor_metadata;

// The signature of tests/serve's model: x F32 rows of 3, and a second input to exercise matching.
const std::vector<tensor_metadata> batched{{"x", ipu::data_type::F32, {-1, 3}}, {"mask", ipu::data_type::BOOL, {-1}}};
const std::vector<tensor_metadata> fixed{{"x", ipu::data_type::F32, {4, 3}}, {"ids", ipu::data_type::S64, {2}}};

void check(bool ok) {
  if (!ok) std::abort();
}

void check_decoded(const ipu::serve::infer_request& r, bool batch) {
  for (const auto& t : r.inputs) {
    std::uint64_t n = 1;
    for (auto d : t.shape) {
      check(d >= 0);
      n *= static_cast<std::uint64_t>(d);  // bounded: decoding refused more than 2^40 elements
    }
    check(t.data.size() == n * ipu::size_of(t.type));
    if (t.type == ipu::data_type::BOOL)
      for (auto b : t.data) check(b == std::byte{0} || b == std::byte{1});
  }
  const auto& sig = batch ? batched : fixed;
  const auto m = ipu::serve::match_inputs(r, sig, batch ? 4 : 0, "model 'fuzz'");
  check(m.data.size() == sig.size());
  check(batch ? m.rows <= 4 : m.rows == 1);
  for (std::size_t k = 0; k < sig.size(); ++k) {
    std::uint64_t row = ipu::size_of(sig[k].type);
    for (std::size_t d = batch ? 1 : 0; d < sig[k].shape.size(); ++d) row *= static_cast<std::uint64_t>(sig[k].shape[d]);
    check(m.data[k].size() == (batch ? m.rows : 1) * row);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    ipu::serve::infer_request r;
    if ((mode & 1) == 0) {
      std::optional<std::size_t> header;
      if (mode & 2) {
        if (rest.size() < 4) return 0;
        std::uint32_t n = 0;
        for (int i = 3; i >= 0; --i) n = n << 8 | static_cast<std::uint8_t>(rest[static_cast<std::size_t>(i)]);
        header = n;
        rest.remove_prefix(4);
      }
      r = ipu::serve::decode_infer_request(rest, header);
    } else {
      inference::ModelInferRequest m;
      if (!m.ParseFromArray(rest.data(), static_cast<int>(rest.size()))) return 0;
      r = ipu::serve::decode_infer_request(m);
    }
    check_decoded(r, (mode & 4) != 0);
  } catch (const ipu::error&) {
    // request_error (an ipu::error) refusing bad input is the expected outcome.
  }
  return 0;
}
