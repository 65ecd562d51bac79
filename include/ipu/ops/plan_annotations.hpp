#pragma once
// Per-op annotations that change how the IPU plans an op, as PopART writes them into a model:
//
//   __available_memory_proportion (FLOAT in (0, 1])    PopTorch's set_available_memory, PopART's
//       Builder::setAvailableMemoryProportion: the share of each tile's memory this Conv /
//       ConvTranspose / MatMul / Gemm may use for temporaries, in place of the compile-wide
//       setting. A lower one makes the planner serialise the op into more, smaller passes.
//   __serialize_matmul_mode (STRING) and __serialize_matmul_factor (INT >= 1)    PopTorch's
//       serializedMatMul, PopART's Builder::setSerializeMatMul: a MatMul [.., M, K] x [.., K, N]
//       computed as `factor` matmuls one after another, each on a slice of one dimension:
//       "input_channels" M, "reducing_dim" K (the slices' products are then summed),
//       "output_channels" N, "none" not serialised. Each slice is planned alone, so its
//       temporaries are a slice's, and the passes add up their cycles.
//
// Both change the plan and its memory, not the values the host computes (a reducing-dim split
// changes the order of the sums only). Anything else is refused: an annotation on an op it does
// not apply to, a value out of range, an unknown mode.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu {

inline constexpr std::string_view attr_available_memory_proportion = "__available_memory_proportion";
inline constexpr std::string_view attr_serialize_matmul_mode = "__serialize_matmul_mode";
inline constexpr std::string_view attr_serialize_matmul_factor = "__serialize_matmul_factor";

/// Which dimension of a MatMul a serialisation slices.
enum class matmul_serialization_mode : std::uint8_t { none, input_channels, reducing_dim, output_channels };

struct matmul_serialization {
  matmul_serialization_mode mode = matmul_serialization_mode::none;
  std::uint64_t factor = 1;
};

constexpr std::optional<matmul_serialization_mode> parse_matmul_serialization_mode(std::string_view s) noexcept {
  if (s == "none") return matmul_serialization_mode::none;
  if (s == "input_channels") return matmul_serialization_mode::input_channels;
  if (s == "reducing_dim") return matmul_serialization_mode::reducing_dim;
  if (s == "output_channels") return matmul_serialization_mode::output_channels;
  return std::nullopt;
}

constexpr std::string_view to_string(matmul_serialization_mode m) noexcept {
  switch (m) {
    case matmul_serialization_mode::none: return "none";
    case matmul_serialization_mode::input_channels: return "input_channels";
    case matmul_serialization_mode::reducing_dim: return "reducing_dim";
    case matmul_serialization_mode::output_channels: return "output_channels";
  }
  return "?";
}

namespace detail {

constexpr bool plans_on_the_amp(const op_node& op) {
  if (op.domain == "com.microsoft" && op.type == "FusedConv") return true;
  if (op.domain == "ipu" && op.type == "NchwcConv") return true;
  if (!op.domain.empty() && op.domain != "ai.onnx") return false;
  return op.type == "Conv" || op.type == "ConvTranspose" || op.type == "MatMul" || op.type == "Gemm";
}

}  // namespace detail

/// The op's own available memory proportion, or nullopt when it has none (the compile-wide one
/// applies). Throws for a value outside (0, 1] or an op that plans no temporaries.
constexpr std::optional<double> op_available_memory_proportion(const op_node& op) {
  const auto* a = op.find_attribute(attr_available_memory_proportion);
  if (!a) return std::nullopt;
  if (!detail::plans_on_the_amp(op))
    throw error(error_category::usage, std::string(attr_available_memory_proportion) + " is set on a " + op.type,
                "op " + graph::describe(op), "it applies to Conv, ConvTranspose, MatMul and Gemm, whose plans have temporaries");
  const auto* f = std::get_if<float>(&a->value);
  if (!f || !(*f > 0.0f && *f <= 1.0f))
    throw error(error_category::usage, std::string(attr_available_memory_proportion) + " is not a FLOAT in (0, 1]",
                "op " + graph::describe(op), "give the share of tile memory for temporaries, e.g. 0.3");
  return static_cast<double>(*f);
}

/// The op's matmul serialisation (none when it has no annotation). Throws for an unknown mode, a
/// factor below 1, one without the other, or an op that is no MatMul.
constexpr matmul_serialization op_matmul_serialization(const op_node& op) {
  const auto* mode = op.find_attribute(attr_serialize_matmul_mode);
  const auto* factor = op.find_attribute(attr_serialize_matmul_factor);
  if (!mode && !factor) return {};
  const bool is_matmul = (op.domain.empty() || op.domain == "ai.onnx") && op.type == "MatMul";
  if (!is_matmul)
    throw error(error_category::usage, "a matmul serialisation is set on a " + op.type, "op " + graph::describe(op), "serialise MatMul ops only");
  const auto* m = mode ? std::get_if<std::string>(&mode->value) : nullptr;
  const auto parsed = m ? parse_matmul_serialization_mode(*m) : std::nullopt;
  if (!parsed)
    throw error(error_category::usage, std::string(attr_serialize_matmul_mode) + " is missing or not a known mode",
                "op " + graph::describe(op), "use input_channels, reducing_dim, output_channels or none");
  matmul_serialization s{*parsed, 1};
  if (*parsed == matmul_serialization_mode::none) return s;
  const auto* f = factor ? std::get_if<std::int64_t>(&factor->value) : nullptr;
  if (!f || *f < 1)
    throw error(error_category::usage, std::string(attr_serialize_matmul_factor) + " is missing or below 1",
                "op " + graph::describe(op), "give the number of slices, 1 or more");
  s.factor = static_cast<std::uint64_t>(*f);
  return s;
}

/// Checks both annotations of `op` (each accessor throws for a bad one).
constexpr void check_plan_annotations(const op_node& op) {
  (void)op_available_memory_proportion(op);
  (void)op_matmul_serialization(op);
}

}  // namespace ipu
