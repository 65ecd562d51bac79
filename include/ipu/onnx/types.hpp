#pragma once
// ONNX element types (TensorProto.DataType) <-> ipu::data_type.
//
// ONNX codes are plain int32 in the protobuf (TensorProto.data_type, TypeProto.Tensor.elem_type),
// so the functions take and return int32 rather than the generated enum: a model from a newer ONNX
// may carry codes the installed headers do not name.
#include <onnx/onnx_pb.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"

namespace ipu::onnx {

/// ONNX 1.14 added Graphcore's float8 formats as FLOAT8E4M3FNUZ / FLOAT8E5M2FNUZ (bias 8 and 16,
/// no infinities, no -0, NaN = 0x80: exactly F8143 / F8152). The installed ONNX 1.12 headers do not
/// name them, and its checker refuses them, so models using them import only with newer ONNX.
inline constexpr std::int32_t onnx_float8e4m3fnuz = 18;
inline constexpr std::int32_t onnx_float8e5m2fnuz = 20;

/// The ipu type for an ONNX element type, or nullopt when the library has no such type
/// (STRING, COMPLEX64/128, UNDEFINED, unknown codes).
constexpr std::optional<data_type> to_data_type(std::int32_t onnx_type) noexcept {
  switch (onnx_type) {
    case ::onnx::TensorProto_DataType_FLOAT: return data_type::F32;
    case ::onnx::TensorProto_DataType_UINT8: return data_type::U8;
    case ::onnx::TensorProto_DataType_INT8: return data_type::S8;
    case ::onnx::TensorProto_DataType_UINT16: return data_type::U16;
    case ::onnx::TensorProto_DataType_INT16: return data_type::S16;
    case ::onnx::TensorProto_DataType_INT32: return data_type::S32;
    case ::onnx::TensorProto_DataType_INT64: return data_type::S64;
    case ::onnx::TensorProto_DataType_BOOL: return data_type::BOOL;
    case ::onnx::TensorProto_DataType_FLOAT16: return data_type::F16;
    case ::onnx::TensorProto_DataType_DOUBLE: return data_type::F64;
    case ::onnx::TensorProto_DataType_UINT32: return data_type::U32;
    case ::onnx::TensorProto_DataType_UINT64: return data_type::U64;
    case ::onnx::TensorProto_DataType_BFLOAT16: return data_type::BF16;
    case ::onnx::TensorProto_DataType_STRING: return data_type::STRING;
    case onnx_float8e4m3fnuz: return data_type::F8143;
    case onnx_float8e5m2fnuz: return data_type::F8152;
    default: return std::nullopt;
  }
}

/// The ONNX element type code for an ipu type (every ipu type has one).
constexpr std::int32_t to_onnx_type(data_type t) noexcept {
  switch (t) {
    case data_type::BOOL: return ::onnx::TensorProto_DataType_BOOL;
    case data_type::U8: return ::onnx::TensorProto_DataType_UINT8;
    case data_type::S8: return ::onnx::TensorProto_DataType_INT8;
    case data_type::U16: return ::onnx::TensorProto_DataType_UINT16;
    case data_type::S16: return ::onnx::TensorProto_DataType_INT16;
    case data_type::S32: return ::onnx::TensorProto_DataType_INT32;
    case data_type::U32: return ::onnx::TensorProto_DataType_UINT32;
    case data_type::S64: return ::onnx::TensorProto_DataType_INT64;
    case data_type::U64: return ::onnx::TensorProto_DataType_UINT64;
    case data_type::F16: return ::onnx::TensorProto_DataType_FLOAT16;
    case data_type::F32: return ::onnx::TensorProto_DataType_FLOAT;
    case data_type::F64: return ::onnx::TensorProto_DataType_DOUBLE;
    case data_type::F8143: return onnx_float8e4m3fnuz;
    case data_type::F8152: return onnx_float8e5m2fnuz;
    case data_type::BF16: return ::onnx::TensorProto_DataType_BFLOAT16;
    case data_type::STRING: return ::onnx::TensorProto_DataType_STRING;
  }
  return ::onnx::TensorProto_DataType_UNDEFINED;
}

/// ONNX's spelling of an element type code, for messages ("FLOAT", "BFLOAT16", "17?" if unknown).
inline std::string onnx_type_name(std::int32_t onnx_type) {
  switch (onnx_type) {
    case onnx_float8e4m3fnuz: return "FLOAT8E4M3FNUZ";
    case onnx_float8e5m2fnuz: return "FLOAT8E5M2FNUZ";
    default: break;
  }
  if (::onnx::TensorProto_DataType_IsValid(onnx_type))
    return ::onnx::TensorProto_DataType_Name(static_cast<::onnx::TensorProto_DataType>(onnx_type));
  return std::to_string(onnx_type) + "?";
}

/// Like to_data_type, but an unsupported code is an error naming `what` (a tensor or attribute).
inline data_type data_type_from_onnx(std::int32_t onnx_type, std::string_view what) {
  if (auto t = to_data_type(onnx_type)) return *t;
  throw error(error_category::onnx,
              std::string(what) + " has element type " + onnx_type_name(onnx_type) +
                  ", which the library does not support",
              {}, "use FLOAT, FLOAT16, BFLOAT16, DOUBLE, BOOL, STRING or an 8-64 bit integer type");
}

}  // namespace ipu::onnx
