#pragma once
// Arithmetic precisions of the IPU's matrix engine (the AMP: accumulating matrix product unit).
//
// The AMP rate depends on the input type and on the type of the partial sums it accumulates:
// FP32 (32-bit in, 32-bit partials), FP16.16 (16-bit in, 16-bit partials) and FP16.32 (16-bit in,
// 32-bit partials). Figures per precision live in the architecture traits (architecture.hpp).
#include <cstdint>
#include <optional>
#include <string_view>

#include "ipu/data_type.hpp"

namespace ipu {

enum class precision : std::uint8_t { fp32, fp16_16, fp16_32 };

inline constexpr precision all_precisions[] = {precision::fp32, precision::fp16_16, precision::fp16_32};

/// Graphcore's spelling: "FP32", "FP16.16", "FP16.32".
constexpr std::string_view to_string(precision p) noexcept {
  switch (p) {
    case precision::fp32: return "FP32";
    case precision::fp16_16: return "FP16.16";
    case precision::fp16_32: return "FP16.32";
  }
  return "?";
}

/// Parses "FP32", "FP16.16", "FP16.32" (also "fp32", "fp16.16", "fp16" = FP16.16); nullopt otherwise.
constexpr std::optional<precision> precision_from_string(std::string_view s) noexcept {
  auto lower = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  };
  if (lower(s, "fp32")) return precision::fp32;
  if (lower(s, "fp16.16") || lower(s, "fp16")) return precision::fp16_16;
  if (lower(s, "fp16.32")) return precision::fp16_32;
  return std::nullopt;
}

/// Element type of the AMP inputs.
constexpr data_type input_type(precision p) noexcept { return p == precision::fp32 ? data_type::F32 : data_type::F16; }

/// Element type of the partial sums the AMP reads and writes back.
constexpr data_type partials_type(precision p) noexcept {
  return p == precision::fp16_16 ? data_type::F16 : data_type::F32;
}

constexpr std::uint32_t input_bytes(precision p) noexcept { return static_cast<std::uint32_t>(size_of(input_type(p))); }
constexpr std::uint32_t partials_bytes(precision p) noexcept {
  return static_cast<std::uint32_t>(size_of(partials_type(p)));
}

/// The precision for inputs of type `in` accumulated in `partials`; nullopt when the AMP has no such
/// mode (integers, FP64 and FP8 run on the vector units in this model, not on the AMP).
constexpr std::optional<precision> precision_for(data_type in, data_type partials) noexcept {
  if (in == data_type::F32 && partials == data_type::F32) return precision::fp32;
  if (in == data_type::F16 && partials == data_type::F16) return precision::fp16_16;
  if (in == data_type::F16 && partials == data_type::F32) return precision::fp16_32;
  return std::nullopt;
}

}  // namespace ipu
