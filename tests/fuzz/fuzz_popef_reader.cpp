// libFuzzer target for the PopEF reader: any bytes must parse or raise ipu::error — never crash,
// read out of bounds or allocate without limit. Each input is read twice: with checksums (what
// users run) and without (so mutations reach the info messages, the metadata, zlib streams and the
// plan, graph and training-state decoders instead of stopping at the checksum). Built with clang++ -fsanitize=fuzzer,address
// when clang is available; fuzz_popef_reader_replay runs the same function over a corpus with any
// compiler.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/popef/graph_codec.hpp"
#include "ipu/popef/model.hpp"
#include "ipu/popef/plan_codec.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/popef/reader.hpp"
#include "ipu/popef/training_state.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  for (const bool verify : {true, false}) {
    try {
      ipu::popef::reader_options options;
      options.verify_checksums = verify;
      ipu::popef::reader r(options);
      r.parse_bytes(nullptr, bytes, "fuzz");
      // Weights bound to zeros (small ones only: the fuzzer's memory is not the point).
      auto zeros = [](const std::string& name, const ipu::tensor_info& info) {
        if (info.num_bytes() > (1u << 20))
          throw ipu::error(ipu::error_category::popef, "weight '" + name + "' is over the fuzzer's 1 MB", "fuzz");
        return ipu::byte_buffer(std::vector<std::byte>(static_cast<std::size_t>(info.num_bytes())));
      };
      for (const auto& o : r.opaque_blobs()) {
        const auto payload = o.decompressed();
        if (o.name != ipu::popef::training_blob_name) continue;
        ipu::popef::pb::TrainingState state;
        if (!state.ParseFromString(payload)) continue;
        try {
          (void)ipu::popef::training_state_from_proto(state, zeros, o.blob.location);
        } catch (const ipu::error&) {
        }
      }
      for (const auto& e : r.executables()) {
        const auto payload = e.decompressed();
        ipu::popef::pb::Executable proto;
        if (!proto.ParseFromString(payload)) continue;
        ipu::executable plan;
        ipu::popef::plan_from_proto(proto.plan(), plan, e.blob.location);
        try {
          ipu::popef::check_plan(plan, e.blob.location);  // against an empty graph: must refuse, not crash
        } catch (const ipu::error&) {
        }
        // The graph, each weight bound to zeros.
        plan.model = ipu::popef::graph_from_executable(proto, zeros, e.blob.location);
        ipu::popef::check_plan(plan, e.blob.location);
      }
      const ipu::popef::model_builder builder(r);
      for (const auto& name : builder.model_names()) (void)builder.create_model(name);
    } catch (const ipu::error&) {
      // Refusing bad input with a clear error is the expected outcome.
    }
  }
  return 0;
}
