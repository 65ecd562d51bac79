#pragma once
// Element types: the PopEF set, with sizes and names. New types go at the end: the numeric values
// are stored in PopEF files (as value + 1). STRING is ONNX's: its elements are ipu::string_ref
// (tensor.hpp), a pointer and a length into characters the tensor's owner keeps.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ipu {

enum class data_type : std::uint8_t {
  BOOL, U8, S8, U16, S16, S32, U32, S64, U64, F16, F32, F64, F8143, F8152, BF16, STRING,
};

inline constexpr data_type all_data_types[] = {
    data_type::BOOL, data_type::U8,  data_type::S8,  data_type::U16, data_type::S16,
    data_type::S32,  data_type::U32, data_type::S64, data_type::U64, data_type::F16,
    data_type::F32,  data_type::F64, data_type::F8143, data_type::F8152,
    data_type::BF16, data_type::STRING,
};

/// Bytes per element.
constexpr std::size_t size_of(data_type t) noexcept {
  switch (t) {
    case data_type::BOOL:
    case data_type::U8:
    case data_type::S8:
    case data_type::F8143:
    case data_type::F8152: return 1;
    case data_type::U16:
    case data_type::S16:
    case data_type::F16:
    case data_type::BF16: return 2;
    case data_type::S32:
    case data_type::U32:
    case data_type::F32: return 4;
    case data_type::S64:
    case data_type::U64:
    case data_type::F64: return 8;
    case data_type::STRING: return 16;  // sizeof(string_ref): a pointer and a 64-bit length
  }
  return 0;
}

/// PopEF's spelling: "F32", "S64", ...
constexpr std::string_view to_string(data_type t) noexcept {
  switch (t) {
    case data_type::BOOL: return "BOOL";
    case data_type::U8: return "U8";
    case data_type::S8: return "S8";
    case data_type::U16: return "U16";
    case data_type::S16: return "S16";
    case data_type::S32: return "S32";
    case data_type::U32: return "U32";
    case data_type::S64: return "S64";
    case data_type::U64: return "U64";
    case data_type::F16: return "F16";
    case data_type::F32: return "F32";
    case data_type::F64: return "F64";
    case data_type::F8143: return "F8143";
    case data_type::F8152: return "F8152";
    case data_type::BF16: return "BF16";
    case data_type::STRING: return "STRING";
  }
  return "?";
}

/// Parses PopEF's spelling; nullopt for an unknown name.
constexpr std::optional<data_type> data_type_from_string(std::string_view s) noexcept {
  for (auto t : all_data_types)
    if (to_string(t) == s) return t;
  return std::nullopt;
}

constexpr bool is_floating_point(data_type t) noexcept {
  return t == data_type::F16 || t == data_type::F32 || t == data_type::F64 || t == data_type::F8143 ||
         t == data_type::F8152 || t == data_type::BF16;
}

/// Numbers of some kind (BOOL included): every type but STRING.
constexpr bool is_numeric(data_type t) noexcept { return t != data_type::STRING; }

constexpr bool is_signed_integer(data_type t) noexcept {
  return t == data_type::S8 || t == data_type::S16 || t == data_type::S32 || t == data_type::S64;
}

constexpr bool is_unsigned_integer(data_type t) noexcept {
  return t == data_type::U8 || t == data_type::U16 || t == data_type::U32 || t == data_type::U64;
}

/// The type of ONNX TensorProto.DataType code `v` (the graph IR's Cast `to` and similar attributes
/// use these codes); nullopt for a code with no ipu type. Float8: 18 is FLOAT8E4M3FNUZ (F8143),
/// 20 FLOAT8E5M2FNUZ (F8152); 16 is BFLOAT16 (BF16). Kept here, not in onnx/, so the IR needs no
/// protobuf headers.
constexpr std::optional<data_type> data_type_from_onnx_code(std::int64_t v) noexcept {
  switch (v) {
    case 1: return data_type::F32;
    case 2: return data_type::U8;
    case 3: return data_type::S8;
    case 4: return data_type::U16;
    case 5: return data_type::S16;
    case 6: return data_type::S32;
    case 7: return data_type::S64;
    case 8: return data_type::STRING;
    case 9: return data_type::BOOL;
    case 10: return data_type::F16;
    case 11: return data_type::F64;
    case 12: return data_type::U32;
    case 13: return data_type::U64;
    case 16: return data_type::BF16;
    case 18: return data_type::F8143;
    case 20: return data_type::F8152;
    default: return std::nullopt;
  }
}

/// The ONNX TensorProto.DataType code of `t`.
constexpr std::int64_t onnx_code_of(data_type t) noexcept {
  for (std::int64_t v = 1; v <= 20; ++v)
    if (data_type_from_onnx_code(v) == t) return v;
  return 0;
}

}  // namespace ipu
