#pragma once
// KServe v2's gRPC messages as the HTTP codec's infer_request / infer_response (tensor_codec.hpp):
//
//   auto req = ipu::serve::decode_infer_request(model_infer_request);   // throws request_error
//   ipu::serve::encode_infer_response(std::move(response), model_infer_response);
//
// Needs only the protobuf messages (kserve_v2.pb.h), not gRPC++, so that the request fuzzer
// (tests/fuzz/fuzz_infer_request.cpp) reads requests as the server does without a server.
//
// Each input travels either as typed contents (the field of its datatype: fp32_contents for FP32,
// int_contents for INT8/16/32, ...) or, for all inputs at once, as raw_input_contents (row-major
// little-endian bytes, the only way FP16 travels). Responses answer in kind: raw outputs when the
// request sent raw inputs or an output is FP16 (no typed field holds it), typed contents otherwise.
// The request parameter "timeout" (int64_param, microseconds) is read as over HTTP; any other
// request, tensor or output parameter is refused.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/serve/kserve_v2.pb.h"
#include "ipu/serve/tensor_codec.hpp"

namespace ipu::serve {

namespace detail::grpc_codec {

template <class Map>
void refuse_parameters(const Map& parameters, const std::string& where) {
  if (parameters.empty()) return;
  throw request_error(400, "parameter '" + parameters.begin()->first.substr(0, 60) + "' is not supported", where,
                      "send no parameters: this server implements none");
}

/// The request's parameters: "timeout" (int64_param, microseconds; 0: the model's), nothing else.
template <class Map>
std::chrono::microseconds request_timeout(const Map& parameters) {
  std::chrono::microseconds timeout{0};
  for (const auto& kv : parameters) {
    if (kv.first != "timeout")
      throw request_error(400, "parameter '" + kv.first.substr(0, 60) + "' is not supported", "request",
                          "the only request parameter is timeout (int64_param, microseconds)");
    if (kv.second.parameter_choice_case() != inference::InferParameter::kInt64Param)
      throw request_error(400, "parameter 'timeout' is not an int64_param", "request", detail::codec::timeout_hint);
    timeout = detail::codec::checked_timeout(kv.second.int64_param(), "request");
  }
  return timeout;
}

/// Copies typed contents into row-major bytes of `type`, each value range-checked.
template <class T, class Field>
void copy_typed(const Field& field, std::vector<std::byte>& out, const std::string& name) {
  out.resize(static_cast<std::size_t>(field.size()) * sizeof(T));
  std::size_t k = 0;
  for (const auto v : field) {
    T t;
    if constexpr (std::is_same_v<T, std::uint8_t> && std::is_same_v<decltype(v), const bool>) {
      t = v ? 1 : 0;
    } else if constexpr (std::is_integral_v<T>) {
      if (!std::in_range<T>(v))
        throw request_error(400, "value " + std::to_string(v) + " is not an integer the datatype holds", "input '" + name + "'",
                            "send integers in the datatype's range");
      t = static_cast<T>(v);
    } else {
      t = static_cast<T>(v);
    }
    std::memcpy(out.data() + k * sizeof(T), &t, sizeof(T));
    ++k;
  }
}

inline std::size_t contents_count(const inference::InferTensorContents& c) {
  return static_cast<std::size_t>(c.bool_contents_size()) + static_cast<std::size_t>(c.int_contents_size()) +
         static_cast<std::size_t>(c.int64_contents_size()) + static_cast<std::size_t>(c.uint_contents_size()) +
         static_cast<std::size_t>(c.uint64_contents_size()) + static_cast<std::size_t>(c.fp32_contents_size()) +
         static_cast<std::size_t>(c.fp64_contents_size()) + static_cast<std::size_t>(c.bytes_contents_size());
}

/// The typed field a datatype travels in, its element count, and copies it to bytes.
inline std::pair<const char*, std::size_t> typed_field(const inference::InferTensorContents& c, data_type t) {
  switch (t) {
    case data_type::BOOL: return {"bool_contents", static_cast<std::size_t>(c.bool_contents_size())};
    case data_type::S8:
    case data_type::S16:
    case data_type::S32: return {"int_contents", static_cast<std::size_t>(c.int_contents_size())};
    case data_type::S64: return {"int64_contents", static_cast<std::size_t>(c.int64_contents_size())};
    case data_type::U8:
    case data_type::U16:
    case data_type::U32: return {"uint_contents", static_cast<std::size_t>(c.uint_contents_size())};
    case data_type::U64: return {"uint64_contents", static_cast<std::size_t>(c.uint64_contents_size())};
    case data_type::F32: return {"fp32_contents", static_cast<std::size_t>(c.fp32_contents_size())};
    case data_type::F64: return {"fp64_contents", static_cast<std::size_t>(c.fp64_contents_size())};
    default: return {nullptr, 0};  // FP16: raw contents only
  }
}

inline void decode_typed(const inference::InferTensorContents& c, wire_tensor& t) {
  switch (t.type) {
    case data_type::BOOL: return copy_typed<std::uint8_t>(c.bool_contents(), t.data, t.name);
    case data_type::S8: return copy_typed<std::int8_t>(c.int_contents(), t.data, t.name);
    case data_type::S16: return copy_typed<std::int16_t>(c.int_contents(), t.data, t.name);
    case data_type::S32: return copy_typed<std::int32_t>(c.int_contents(), t.data, t.name);
    case data_type::S64: return copy_typed<std::int64_t>(c.int64_contents(), t.data, t.name);
    case data_type::U8: return copy_typed<std::uint8_t>(c.uint_contents(), t.data, t.name);
    case data_type::U16: return copy_typed<std::uint16_t>(c.uint_contents(), t.data, t.name);
    case data_type::U32: return copy_typed<std::uint32_t>(c.uint_contents(), t.data, t.name);
    case data_type::U64: return copy_typed<std::uint64_t>(c.uint64_contents(), t.data, t.name);
    case data_type::F32: return copy_typed<float>(c.fp32_contents(), t.data, t.name);
    case data_type::F64: return copy_typed<double>(c.fp64_contents(), t.data, t.name);
    default: break;
  }
  throw error(error_category::internal, "no typed field for " + std::string(to_string(t.type)), "grpc codec");
}

template <class T, class Field>
void append_typed(const std::vector<std::byte>& data, Field* field) {
  for (std::size_t k = 0; k + sizeof(T) <= data.size(); k += sizeof(T)) {
    T v;
    std::memcpy(&v, data.data() + k, sizeof(T));
    field->Add(v);
  }
}

inline void encode_typed(const wire_tensor& t, inference::InferTensorContents& c) {
  switch (t.type) {
    case data_type::BOOL:
      for (auto b : t.data) c.add_bool_contents(b != std::byte{0});
      return;
    case data_type::S8: return append_typed<std::int8_t>(t.data, c.mutable_int_contents());
    case data_type::S16: return append_typed<std::int16_t>(t.data, c.mutable_int_contents());
    case data_type::S32: return append_typed<std::int32_t>(t.data, c.mutable_int_contents());
    case data_type::S64: return append_typed<std::int64_t>(t.data, c.mutable_int64_contents());
    case data_type::U8: return append_typed<std::uint8_t>(t.data, c.mutable_uint_contents());
    case data_type::U16: return append_typed<std::uint16_t>(t.data, c.mutable_uint_contents());
    case data_type::U32: return append_typed<std::uint32_t>(t.data, c.mutable_uint_contents());
    case data_type::U64: return append_typed<std::uint64_t>(t.data, c.mutable_uint64_contents());
    case data_type::F32: return append_typed<float>(t.data, c.mutable_fp32_contents());
    case data_type::F64: return append_typed<double>(t.data, c.mutable_fp64_contents());
    default: break;
  }
  throw error(error_category::internal, "no typed field for " + std::string(to_string(t.type)), "grpc codec");
}

}  // namespace detail::grpc_codec

/// A ModelInferRequest as the HTTP codec's infer_request: the same checks (datatype, shape
/// overflow, element and byte counts) before anything is allocated from what the client declared.
inline infer_request decode_infer_request(const inference::ModelInferRequest& m) {
  using namespace detail::grpc_codec;
  infer_request r;
  r.timeout = request_timeout(m.parameters());
  r.id = m.id();
  const bool raw = m.raw_input_contents_size() > 0;
  if (raw && m.raw_input_contents_size() != m.inputs_size())
    throw request_error(400,
                        std::to_string(m.raw_input_contents_size()) + " raw_input_contents for " + std::to_string(m.inputs_size()) +
                            " inputs",
                        "request", "send one raw_input_contents entry per input, in order, or none (typed contents)");
  for (int i = 0; i < m.inputs_size(); ++i) {
    const auto& in = m.inputs(i);
    wire_tensor t;
    t.name = in.name();
    const auto w = detail::codec::where(t.name);
    for (const auto& seen : r.inputs)
      if (seen.name == t.name) throw request_error(400, "the input is given twice", w, "send each input once");
    refuse_parameters(in.parameters(), w);
    const auto dt = data_type_from_kserve(in.datatype());
    if (!dt)
      throw request_error(400, "unsupported datatype '" + in.datatype().substr(0, 40) + "'", w,
                          "use BOOL, UINT8/16/32/64, INT8/16/32/64, FP16, FP32 or FP64");
    t.type = *dt;
    if (in.shape_size() > 32) throw request_error(400, "the shape has more than 32 dimensions", w);
    t.shape.assign(in.shape().begin(), in.shape().end());
    const auto count = detail::codec::elements(t.shape, t.name);
    const auto bytes = count * size_of(t.type);  // count <= 2^40: no overflow
    if (raw) {
      if (in.has_contents() && contents_count(in.contents()) > 0)
        throw request_error(400, "the input has both typed contents and raw_input_contents", w, "send one of them");
      const auto& b = m.raw_input_contents(i);
      if (b.size() != bytes)
        throw request_error(400,
                            "raw_input_contents holds " + std::to_string(b.size()) + " bytes, not the " + std::to_string(bytes) +
                                " of its shape and datatype",
                            w, "send the tensor's row-major little-endian bytes");
      t.data.resize(b.size());
      if (!b.empty()) std::memcpy(t.data.data(), b.data(), b.size());
      if (t.type == data_type::BOOL)  // kernels read C++ bool: any non-zero byte is true, stored as 1
        for (auto& x : t.data) x = x != std::byte{0} ? std::byte{1} : std::byte{0};
    } else {
      const auto [field, n] = typed_field(in.contents(), t.type);
      if (!field)
        throw request_error(400, in.datatype() + " has no typed contents field", w, "send it as raw_input_contents");
      if (n != count || contents_count(in.contents()) != n)
        throw request_error(400,
                            "contents hold " + std::to_string(contents_count(in.contents())) + " elements (" + std::to_string(n) +
                                " in " + field + ") but the shape has " + std::to_string(count),
                            w, "send one value per element of the shape in " + std::string(field));
      decode_typed(in.contents(), t);
    }
    r.inputs.push_back(std::move(t));
  }
  for (const auto& o : m.outputs()) {
    refuse_parameters(o.parameters(), "output '" + o.name() + "'");
    r.outputs.emplace_back(o.name(), raw);
  }
  r.binary_outputs = raw;
  return r;
}

/// The HTTP path's infer_response as a ModelInferResponse (raw or typed, see the header's comment).
inline void encode_infer_response(infer_response&& r, inference::ModelInferResponse& m) {
  using namespace detail::grpc_codec;
  m.set_model_name(r.model_name);
  m.set_model_version(r.model_version);
  m.set_id(r.id);
  bool raw = false;
  for (const auto& t : r.outputs) raw = raw || t.binary || !typed_field({}, t.type).first;
  for (auto& t : r.outputs) {
    auto* o = m.add_outputs();
    o->set_name(t.name);
    o->set_datatype(kserve_name(t.type));
    for (auto d : t.shape) o->add_shape(d);
    if (raw) m.add_raw_output_contents(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    else encode_typed(t, *o->mutable_contents());
  }
}

}  // namespace ipu::serve
