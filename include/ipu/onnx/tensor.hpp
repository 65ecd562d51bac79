#pragma once
// ONNX TensorProto <-> ipu tensors.
//
// Reading accepts every way ONNX stores data: raw_data, the typed fields (float_data, int32_data
// holding narrow types and FLOAT16 / BFLOAT16 bits, int64_data, double_data, uint64_data holding
// UINT32/64) and external data files. Data is shared rather than copied where the layout allows (raw_data,
// same-width typed fields, mapped external files) when the caller passes an owner that keeps the
// protobuf alive: weights can be hundreds of MB.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/attribute.hpp"
#include "ipu/onnx/external_data.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/onnx/types.hpp"
#include "ipu/tensor.hpp"

namespace ipu::onnx {

/// Where a TensorProto's bytes may be borrowed from.
struct tensor_source {
  /// Keeps the message (and so its byte fields) alive; when null, data is copied.
  std::shared_ptr<const void> owner;
  /// Resolves external data; when null, a tensor with external data is an error.
  external_data_resolver* external = nullptr;
};

namespace detail {

inline std::string tensor_label(const ::onnx::TensorProto& t, std::string_view fallback) {
  if (!t.name().empty()) return "tensor '" + t.name() + "'";
  return fallback.empty() ? std::string("unnamed tensor") : std::string(fallback);
}

inline tensor_info tensor_proto_info(const ::onnx::TensorProto& t, const std::string& label) {
  if (!t.has_data_type() || t.data_type() == ::onnx::TensorProto_DataType_UNDEFINED)
    throw error(error_category::onnx, label + " has no element type", {}, "set TensorProto.data_type");
  const auto type = data_type_from_onnx(t.data_type(), label);
  std::vector<std::int64_t> dims;
  dims.reserve(static_cast<std::size_t>(t.dims_size()));
  // Bound the byte count so that a corrupt shape cannot overflow the arithmetic below.
  constexpr std::uint64_t limit = std::uint64_t{1} << 50;
  std::uint64_t n = size_of(type);
  for (auto d : t.dims()) {
    if (d < 0)
      throw error(error_category::onnx, label + " has negative dimension " + std::to_string(d), {},
                  "tensor data must have a known, non-negative shape");
    if (d != 0 && n > limit / static_cast<std::uint64_t>(d))
      throw error(error_category::onnx, label + " is impossibly large (over 2^50 bytes)", {},
                  "the shape is corrupt");
    n *= static_cast<std::uint64_t>(d);
    dims.push_back(d);
  }
  return {type, shape(std::move(dims))};
}

/// Shares `size` bytes at `p` when an owner is given and `p` suits the element type; else copies.
inline byte_buffer borrow(std::shared_ptr<const void> owner, const void* p, std::size_t size, data_type type) {
  const auto* b = static_cast<const std::byte*>(p);
  if (owner && reinterpret_cast<std::uintptr_t>(p) % size_of(type) == 0)
    return byte_buffer::share(std::move(owner), b, size);
  return byte_buffer::copy({b, size});
}

/// Narrows values held in a wider typed field (int32_data for 8/16-bit types, uint64_data for
/// UINT32) to the element width, keeping the low bits as ONNX specifies.
template <class Wide>
byte_buffer narrow(const google::protobuf::RepeatedField<Wide>& values, data_type type) {
  const std::size_t w = size_of(type);
  std::vector<std::byte> out(static_cast<std::size_t>(values.size()) * w);
  for (int i = 0; i < values.size(); ++i) {
    // A BOOL is true for any non-zero value; its low byte alone could be 0 (256) or 2.
    const auto v = type == data_type::BOOL ? std::uint64_t{values.Get(i) != 0} : static_cast<std::uint64_t>(values.Get(i));
    for (std::size_t j = 0; j < w; ++j)
      out[static_cast<std::size_t>(i) * w + j] = static_cast<std::byte>((v >> (8 * j)) & 0xFF);
  }
  return byte_buffer(std::move(out));
}

/// BOOL bytes hold 0 or 1 in the library (kernels read them as C++ bool); a stored byte of any
/// other value means true, as in numpy and ONNX Runtime. Copies only when some byte needs it.
inline byte_buffer as_truth_values(byte_buffer data) {
  const auto b = data.bytes();
  if (std::all_of(b.begin(), b.end(), [](std::byte x) { return x <= std::byte{1}; })) return data;
  std::vector<std::byte> out(b.size());
  std::transform(b.begin(), b.end(), out.begin(), [](std::byte x) { return x != std::byte{0} ? std::byte{1} : std::byte{0}; });
  return byte_buffer(std::move(out));
}

inline std::uint64_t parse_external_number(const std::string& key, const std::string& value, const std::string& label) {
  std::uint64_t v = 0;
  auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
  if (ec != std::errc() || p != value.data() + value.size())
    throw error(error_category::onnx, "external data " + key + " '" + value + "' is not a number", label);
  return v;
}

inline byte_buffer external_bytes(const ::onnx::TensorProto& t, const tensor_info& info, const tensor_source& src,
                                  const std::string& label) {
  std::string location;
  std::uint64_t offset = 0;
  std::optional<std::uint64_t> length;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = parse_external_number("offset", kv.value(), label);
    else if (kv.key() == "length") length = parse_external_number("length", kv.value(), label);
  }
  if (location.empty())
    throw error(error_category::onnx, label + " is stored externally but has no location", {},
                "add a 'location' entry to external_data");
  if (!src.external)
    throw error(error_category::onnx, label + " is stored in external file '" + location + "', which cannot be read here",
                {}, "load the model from its file so external data can be found");
  auto file = src.external->open(location, t.name());
  const auto bytes = file->bytes();
  if (offset > bytes.size())
    throw error(error_category::onnx,
                label + " starts at offset " + std::to_string(offset) + " but '" + location + "' has only " +
                    std::to_string(bytes.size()) + " bytes",
                file->path().string(), "the data file is truncated or belongs to another model");
  const std::uint64_t available = bytes.size() - offset;
  const std::uint64_t n = length.value_or(available);
  if (n > available || n != info.num_bytes())
    throw error(error_category::onnx,
                label + " needs " + std::to_string(info.num_bytes()) + " bytes for " + to_string(info) + " but '" +
                    location + "' holds " + std::to_string(std::min(n, available)) + " at offset " +
                    std::to_string(offset),
                file->path().string(), "the data file is truncated or belongs to another model");
  return borrow(file, bytes.data() + offset, static_cast<std::size_t>(n), info.type);
}

}  // namespace detail

/// The contents of a TensorProto. `what` names it in errors when it has no name.
inline constant_tensor to_constant_tensor(const ::onnx::TensorProto& t, const tensor_source& src = {},
                                          std::string_view what = {}) {
  const std::string label = detail::tensor_label(t, what);
  constant_tensor out;
  out.info = detail::tensor_proto_info(t, label);
  const auto& info = out.info;
  const auto n = static_cast<std::size_t>(info.num_elements());
  const auto nbytes = info.num_bytes();

  if (info.type == data_type::STRING) {  // ONNX keeps strings in string_data only
    if (t.has_raw_data() || (t.has_data_location() && t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL))
      throw error(error_category::onnx, label + " is STRING but has raw or external data", {},
                  "store the strings in string_data, as ONNX says");
    if (static_cast<std::size_t>(t.string_data_size()) != n)
      throw error(error_category::onnx,
                  label + " has " + std::to_string(t.string_data_size()) + " values in string_data but " +
                      to_string(info) + " has " + std::to_string(n) + " elements",
                  {}, "the tensor is truncated or its dims are wrong");
    auto held = std::make_shared<host_tensor>(info);
    for (std::size_t i = 0; i < n; ++i) held->set_string(i, t.string_data(static_cast<int>(i)));
    out.data = byte_buffer::share(held, held->data(), nbytes);
    return out;
  }
  if (t.has_data_location() && t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) {
    out.data = detail::external_bytes(t, info, src, label);
    if (info.type == data_type::BOOL) out.data = detail::as_truth_values(std::move(out.data));
    return out;
  }
  if (t.has_raw_data()) {
    if (t.raw_data().size() != nbytes)
      throw error(error_category::onnx,
                  label + " has " + std::to_string(t.raw_data().size()) + " bytes of raw_data but " + to_string(info) +
                      " needs " + std::to_string(nbytes),
                  {}, "the tensor is truncated or its dims are wrong");
    out.data = detail::borrow(src.owner, t.raw_data().data(), nbytes, info.type);
    if (info.type == data_type::BOOL) out.data = detail::as_truth_values(std::move(out.data));
    return out;
  }
  auto check_count = [&](int have, const char* field) {
    if (static_cast<std::size_t>(have) != n)
      throw error(error_category::onnx,
                  label + " has " + std::to_string(have) + " values in " + field + " but " + to_string(info) +
                      " has " + std::to_string(n) + " elements",
                  {}, "the tensor is truncated or its dims are wrong");
  };
  if (n == 0) return out;
  switch (info.type) {
    case data_type::F32:
      check_count(t.float_data_size(), "float_data");
      out.data = detail::borrow(src.owner, t.float_data().data(), nbytes, info.type);
      break;
    case data_type::F64:
      check_count(t.double_data_size(), "double_data");
      out.data = detail::borrow(src.owner, t.double_data().data(), nbytes, info.type);
      break;
    case data_type::S64:
      check_count(t.int64_data_size(), "int64_data");
      out.data = detail::borrow(src.owner, t.int64_data().data(), nbytes, info.type);
      break;
    case data_type::S32:
      check_count(t.int32_data_size(), "int32_data");
      out.data = detail::borrow(src.owner, t.int32_data().data(), nbytes, info.type);
      break;
    case data_type::U64:
      check_count(t.uint64_data_size(), "uint64_data");
      out.data = detail::borrow(src.owner, t.uint64_data().data(), nbytes, info.type);
      break;
    case data_type::U32:
      check_count(t.uint64_data_size(), "uint64_data");
      out.data = detail::narrow(t.uint64_data(), info.type);
      break;
    case data_type::BOOL:
    case data_type::U8:
    case data_type::S8:
    case data_type::U16:
    case data_type::S16:
    case data_type::F16:
    case data_type::F8143:
    case data_type::F8152:
    case data_type::BF16:  // its uint16 bit patterns, one per int32, as ONNX stores them
      check_count(t.int32_data_size(), "int32_data");
      out.data = detail::narrow(t.int32_data(), info.type);
      break;
    case data_type::STRING: break;  // read above
  }
  return out;
}

/// A host tensor holding a copy of a TensorProto's contents.
inline host_tensor to_host_tensor(const ::onnx::TensorProto& t, external_data_resolver* external = nullptr) {
  // Borrow (no owner needed: the message outlives this call) and copy once into the host tensor.
  auto alias = std::shared_ptr<const void>(&t, [](const void*) {});
  auto c = to_constant_tensor(t, {alias, external});
  return host_tensor::copy_of(const_tensor_view(c.info, c.data.data()));
}

/// A TensorProto holding a copy of `data` as raw_data.
inline ::onnx::TensorProto to_tensor_proto(const tensor_info& info, std::span<const std::byte> data,
                                           std::string_view name = {}) {
  if (data.size() != info.num_bytes())
    throw error(error_category::usage,
                std::to_string(data.size()) + " bytes given for " + to_string(info) + ", which needs " +
                    std::to_string(info.num_bytes()),
                name.empty() ? std::string() : "tensor '" + std::string(name) + "'");
  ::onnx::TensorProto t;
  if (!name.empty()) t.set_name(std::string(name));
  t.set_data_type(to_onnx_type(info.type));
  for (auto d : info.shape) t.add_dims(d);
  if (info.type == data_type::STRING) {  // the bytes are addresses: write the characters
    for (std::size_t i = 0; i < data.size(); i += sizeof(string_ref)) {
      string_ref r;
      std::memcpy(&r, data.data() + i, sizeof r);
      t.add_string_data(std::string(r.view()));
    }
    return t;
  }
  t.set_raw_data(reinterpret_cast<const char*>(data.data()), data.size());
  return t;
}

inline ::onnx::TensorProto to_tensor_proto(const constant_tensor& c, std::string_view name = {}) {
  return to_tensor_proto(c.info, c.data.bytes(), name);
}

template <tensor T>
::onnx::TensorProto to_tensor_proto(const T& t, std::string_view name = {}) {
  return to_tensor_proto(tensor_info(t.info()), std::span<const std::byte>(t.bytes()), name);
}

/// Reads a serialized TensorProto (`.pb`, as in ONNX's node tests). External data is looked up
/// next to the file.
inline host_tensor load_tensor(const std::filesystem::path& path) {
  auto proto = std::make_shared<::onnx::TensorProto>();
  read_proto_file(*proto, path, "ONNX tensor");
  try {
    if (!proto->has_data_type())
      throw error(error_category::onnx, "the file has no element type, so it is not an ONNX TensorProto", {},
                  "check that this is a tensor .pb file, not a model or another message");
    external_data_resolver resolver(path.parent_path());
    auto c = to_constant_tensor(*proto, {proto, &resolver}, "tensor");
    return host_tensor::copy_of(const_tensor_view(c.info, c.data.data()));
  } catch (const error& e) {
    throw error(e.category(), e.message(), path.string() + (e.location().empty() ? "" : ", " + e.location()),
                e.hint());
  }
}

/// Writes a tensor as a serialized TensorProto.
template <tensor T>
void save_tensor(const T& t, const std::filesystem::path& path, std::string_view name = {}) {
  write_proto_file(to_tensor_proto(t, name), path);
}

}  // namespace ipu::onnx
