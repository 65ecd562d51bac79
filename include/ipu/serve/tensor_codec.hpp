#pragma once
// The KServe v2 inference protocol's JSON codec, with the binary-tensor extension.
//
//   auto req = ipu::serve::decode_infer_request(body, header_length);   // header_length: from
//   // the Inference-Header-Content-Length header when present, else nullopt (all JSON)
//   ... run ... ; auto [bytes, json_length] = encode_infer_response(response);
//
// Tensors travel as {"name", "shape", "datatype", "data"} with data row-major, flat or nested; with
// the binary extension an input says {"parameters": {"binary_data_size": N}} and its N raw
// little-endian bytes follow the JSON header in the body, in input order. Everything a client sends
// is checked before anything is allocated from it: shapes are overflow-checked, element counts
// and byte sizes must match the data, so a huge declared size is an error, never an allocation.
// A bad request throws request_error with the HTTP status to answer (400).
//
// Parameters: the request's "binary_data_output" (bool) and "timeout" (microseconds, overriding
// the model's request timeout; 0: the model's), an input's "binary_data_size", an output's
// "binary_data". Any other parameter is refused: a client relying on one would be silently ignored.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/half.hpp"

namespace ipu::serve {

/// A request the server refuses, with the HTTP status to answer.
class request_error : public error {
 public:
  request_error(int status, std::string message, std::string location = {}, std::string hint = {})
      : error(error_category::usage, std::move(message), std::move(location), std::move(hint)), status_(status) {}
  [[nodiscard]] int status() const noexcept { return status_; }

 private:
  int status_;
};

/// KServe v2's datatype names; nullopt for types the protocol does not name (or BYTES, not served).
constexpr std::optional<data_type> data_type_from_kserve(std::string_view s) noexcept {
  if (s == "BOOL") return data_type::BOOL;
  if (s == "UINT8") return data_type::U8;
  if (s == "UINT16") return data_type::U16;
  if (s == "UINT32") return data_type::U32;
  if (s == "UINT64") return data_type::U64;
  if (s == "INT8") return data_type::S8;
  if (s == "INT16") return data_type::S16;
  if (s == "INT32") return data_type::S32;
  if (s == "INT64") return data_type::S64;
  if (s == "FP16") return data_type::F16;
  if (s == "FP32") return data_type::F32;
  if (s == "FP64") return data_type::F64;
  return std::nullopt;
}

/// Throws request_error for types the protocol cannot carry (FP8).
inline std::string kserve_name(data_type t) {
  switch (t) {
    case data_type::BOOL: return "BOOL";
    case data_type::U8: return "UINT8";
    case data_type::U16: return "UINT16";
    case data_type::U32: return "UINT32";
    case data_type::U64: return "UINT64";
    case data_type::S8: return "INT8";
    case data_type::S16: return "INT16";
    case data_type::S32: return "INT32";
    case data_type::S64: return "INT64";
    case data_type::F16: return "FP16";
    case data_type::F32: return "FP32";
    case data_type::F64: return "FP64";
    default: break;
  }
  throw request_error(500, "the model uses " + std::string(to_string(t)) + ", which KServe v2 has no name for", "datatype",
                      "compile the model with inputs and outputs of a KServe datatype");
}

/// One tensor of a request or response: type, shape, row-major little-endian bytes.
struct wire_tensor {
  std::string name;
  data_type type = data_type::F32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> data;
  bool binary = false;  // responses: send as binary data
};

struct infer_request {
  std::string id;
  std::vector<wire_tensor> inputs;
  /// Outputs asked for by name (empty: all), and whether each is wanted as binary data.
  std::vector<std::pair<std::string, bool>> outputs;
  bool binary_outputs = false;  // request parameters' binary_data_output
  /// The request parameter "timeout": how long it may wait in the queue before its rows start
  /// (0: the model's request_timeout_microseconds).
  std::chrono::microseconds timeout{0};
};

struct infer_response {
  std::string model_name, model_version, id;
  std::vector<wire_tensor> outputs;
};

/// Elements a tensor may have (2^40): far above any simulated model, far below overflow.
inline constexpr std::uint64_t max_elements = std::uint64_t{1} << 40;
/// The longest request timeout, a request's "timeout" parameter or a model's config (an hour): a
/// deadline that far is a mistake, and it keeps steady_clock arithmetic far from overflow.
inline constexpr std::uint64_t max_request_timeout_us = 3'600'000'000;

namespace detail::codec {

inline std::string where(const std::string& name) { return "input '" + name + "'"; }

/// A client's value for an error message: scalars as sent (cut to 40 characters), arrays and
/// objects by kind, since nlohmann's dump recurses and a body of 64 MiB can nest millions deep.
inline std::string shown(const nlohmann::json& v) {
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return v.dump().substr(0, 40);
}

/// Elements of a shape; a request_error for negative, non-integer or overflowing dimensions.
inline std::uint64_t elements(const std::vector<std::int64_t>& shape, const std::string& name) {
  std::uint64_t n = 1;
  for (auto d : shape) {
    if (d < 0) throw request_error(400, "shape has a negative dimension " + std::to_string(d), where(name), "give sizes >= 0");
    if (d != 0 && n > max_elements / static_cast<std::uint64_t>(d))
      throw request_error(400, "shape has more than 2^40 elements", where(name), "send a smaller tensor");
    n *= static_cast<std::uint64_t>(d);
  }
  return n;
}

template <class T>
void put(std::byte* out, T v) {
  std::memcpy(out, &v, sizeof v);
}

template <class T>
void put_integer(std::byte* out, const nlohmann::json& v, const std::string& name) {
  bool ok = false;
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    ok = u <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    if (ok) put<T>(out, static_cast<T>(u));
  } else if (v.is_number_integer()) {
    const auto s = v.get<std::int64_t>();
    ok = std::is_signed_v<T> ? (s >= static_cast<std::int64_t>(std::numeric_limits<T>::min()) &&
                                s <= static_cast<std::int64_t>(std::numeric_limits<T>::max()))
                             : s >= 0 && static_cast<std::uint64_t>(s) <= static_cast<std::uint64_t>(std::numeric_limits<T>::max());
    if (ok) put<T>(out, static_cast<T>(s));
  }
  if (!ok)
    throw request_error(400, "value " + shown(v) + " is not an integer the datatype holds", where(name),
                        "send integers in the datatype's range");
}

/// Writes one JSON value as an element of type t.
inline void put_value(std::byte* out, data_type t, const nlohmann::json& v, const std::string& name) {
  switch (t) {
    case data_type::BOOL:
      if (!v.is_boolean()) throw request_error(400, "value " + shown(v) + " is not a boolean", where(name), "send true or false");
      put<std::uint8_t>(out, v.get<bool>() ? 1 : 0);
      return;
    case data_type::U8: return put_integer<std::uint8_t>(out, v, name);
    case data_type::U16: return put_integer<std::uint16_t>(out, v, name);
    case data_type::U32: return put_integer<std::uint32_t>(out, v, name);
    case data_type::U64: return put_integer<std::uint64_t>(out, v, name);
    case data_type::S8: return put_integer<std::int8_t>(out, v, name);
    case data_type::S16: return put_integer<std::int16_t>(out, v, name);
    case data_type::S32: return put_integer<std::int32_t>(out, v, name);
    case data_type::S64: return put_integer<std::int64_t>(out, v, name);
    default: break;
  }
  if (!v.is_number()) throw request_error(400, "value " + shown(v) + " is not a number", where(name), "send numbers");
  const double d = v.get<double>();
  if (t == data_type::F16) put<std::uint16_t>(out, half(static_cast<float>(d)).bits());
  else if (t == data_type::F32) put<float>(out, static_cast<float>(d));
  else put<double>(out, d);
}

template <class T>
T get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

inline nlohmann::json value(data_type t, const std::byte* p) {
  switch (t) {
    case data_type::BOOL: return get<std::uint8_t>(p) != 0;
    case data_type::U8: return get<std::uint8_t>(p);
    case data_type::U16: return get<std::uint16_t>(p);
    case data_type::U32: return get<std::uint32_t>(p);
    case data_type::U64: return get<std::uint64_t>(p);
    case data_type::S8: return get<std::int8_t>(p);
    case data_type::S16: return get<std::int16_t>(p);
    case data_type::S32: return get<std::int32_t>(p);
    case data_type::S64: return get<std::int64_t>(p);
    case data_type::F16: return static_cast<float>(half::from_bits(get<std::uint16_t>(p)));
    case data_type::F32: return get<float>(p);
    default: return get<double>(p);
  }
}

/// Flattens (possibly nested) JSON data into out, checking it holds exactly `count` elements.
inline void flatten(const nlohmann::json& v, data_type t, std::size_t count, std::vector<std::byte>& out,
                    std::size_t& n, const std::string& name, int depth) {
  if (depth > 64) throw request_error(400, "data is nested more than 64 deep", where(name), "send flat data");
  if (v.is_array()) {
    for (const auto& e : v) flatten(e, t, count, out, n, name, depth + 1);
    return;
  }
  if (n >= count)
    throw request_error(400, "data holds more than the shape's " + std::to_string(count) + " elements", where(name),
                        "send one value per element of the shape");
  put_value(out.data() + n * size_of(t), t, v, name);
  ++n;
}

/// The parameters object of a request, input or output (null when it has none); a parameter not
/// in `known` is refused.
inline const nlohmann::json* parameters(const nlohmann::json& o, std::initializer_list<std::string_view> known,
                                        const std::string& w) {
  if (!o.contains("parameters")) return nullptr;
  const auto& p = o["parameters"];
  if (!p.is_object()) throw request_error(400, "'parameters' is not an object", w);
  for (auto it = p.begin(); it != p.end(); ++it) {
    bool ok = false;
    for (auto k : known) ok = ok || it.key() == k;
    if (ok) continue;
    std::string names;
    for (auto k : known) names += (names.empty() ? "" : ", ") + std::string(k);
    throw request_error(400, "parameter '" + it.key().substr(0, 60) + "' is not supported", w, "the parameters here are " + names);
  }
  return &p;
}

inline bool bool_parameter(const nlohmann::json* p, const char* key, const std::string& w) {
  if (!p || !p->contains(key)) return false;
  if (!(*p)[key].is_boolean()) throw request_error(400, std::string("parameter '") + key + "' is not a boolean", w);
  return (*p)[key].get<bool>();
}

inline constexpr const char* timeout_hint = "give the longest wait in the queue in microseconds, e.g. \"timeout\": 5000 (0: the model's)";

/// A request's "timeout" once read as an integer: 0 to an hour of microseconds.
inline std::chrono::microseconds checked_timeout(std::int64_t us, const std::string& w) {
  if (us < 0) throw request_error(400, "parameter 'timeout' is " + std::to_string(us) + ", negative", w, timeout_hint);
  if (static_cast<std::uint64_t>(us) > max_request_timeout_us)
    throw request_error(400, "parameter 'timeout' is " + std::to_string(us) + " us, over the limit of " + std::to_string(max_request_timeout_us) + " (an hour)", w,
                        timeout_hint);
  return std::chrono::microseconds(us);
}

inline std::chrono::microseconds timeout_parameter(const nlohmann::json* p, const std::string& w) {
  if (!p || !p->contains("timeout")) return std::chrono::microseconds(0);
  const auto& v = (*p)["timeout"];
  if (v.is_number_unsigned() && v.get<std::uint64_t>() > max_request_timeout_us)  // may not fit an int64
    throw request_error(400, "parameter 'timeout' is " + std::to_string(v.get<std::uint64_t>()) + " us, over the limit of " +
                                 std::to_string(max_request_timeout_us) + " (an hour)", w, timeout_hint);
  if (!v.is_number_integer())
    throw request_error(400, "parameter 'timeout' is " + shown(v) + ", not a whole number of microseconds", w, timeout_hint);
  return checked_timeout(v.get<std::int64_t>(), w);
}

}  // namespace detail::codec

/// Decodes an inference request. `header_length`: the Inference-Header-Content-Length header's value
/// (the JSON's byte length; binary tensors follow), nullopt when the whole body is JSON.
inline infer_request decode_infer_request(std::string_view body, std::optional<std::size_t> header_length) {
  namespace dc = detail::codec;
  const std::size_t json_len = header_length.value_or(body.size());
  if (json_len > body.size())
    throw request_error(400, "Inference-Header-Content-Length " + std::to_string(json_len) + " exceeds the body's " +
                                 std::to_string(body.size()) + " bytes",
                        "request", "give the JSON header's byte length");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body.substr(0, json_len));
  } catch (const nlohmann::json::exception& e) {
    throw request_error(400, std::string("malformed JSON: ") + e.what(), "request body", "send a KServe v2 inference request");
  }
  if (!j.is_object()) throw request_error(400, "the request is not a JSON object", "request body");
  infer_request r;
  if (j.contains("id")) {
    if (!j["id"].is_string()) throw request_error(400, "'id' is not a string", "request");
    r.id = j["id"].get<std::string>();
  }
  const auto* params = dc::parameters(j, {"binary_data_output", "timeout"}, "request");
  r.binary_outputs = dc::bool_parameter(params, "binary_data_output", "request");
  r.timeout = dc::timeout_parameter(params, "request");
  if (!j.contains("inputs") || !j["inputs"].is_array())
    throw request_error(400, "the request has no 'inputs' array", "request", "send {\"inputs\": [{\"name\", \"shape\", \"datatype\", \"data\"}]}");
  std::size_t offset = json_len;  // next binary tensor
  for (const auto& in : j["inputs"]) {
    if (!in.is_object()) throw request_error(400, "an input is not a JSON object", "request inputs");
    wire_tensor t;
    if (!in.contains("name") || !in["name"].is_string()) throw request_error(400, "an input has no 'name' string", "request inputs");
    t.name = in["name"].get<std::string>();
    const auto w = dc::where(t.name);
    for (const auto& seen : r.inputs)
      if (seen.name == t.name) throw request_error(400, "the input is given twice", w, "send each input once");
    if (!in.contains("datatype") || !in["datatype"].is_string()) throw request_error(400, "no 'datatype' string", w);
    const auto dt = data_type_from_kserve(in["datatype"].get<std::string>());
    if (!dt)
      throw request_error(400, "unsupported datatype '" + in["datatype"].get<std::string>().substr(0, 40) + "'", w,
                          "use BOOL, UINT8/16/32/64, INT8/16/32/64, FP16, FP32 or FP64");
    t.type = *dt;
    if (!in.contains("shape") || !in["shape"].is_array()) throw request_error(400, "no 'shape' array", w);
    if (in["shape"].size() > 32) throw request_error(400, "the shape has more than 32 dimensions", w);
    for (const auto& d : in["shape"]) {
      if (!d.is_number_integer()) throw request_error(400, "shape holds a non-integer: " + dc::shown(d), w, "give sizes as integers >= 0");
      if (d.is_number_unsigned() && d.get<std::uint64_t>() > max_elements)
        throw request_error(400, "shape has more than 2^40 elements", w, "send a smaller tensor");
      t.shape.push_back(d.get<std::int64_t>());
    }
    const auto count = dc::elements(t.shape, t.name);
    const auto bytes = count * size_of(t.type);  // count <= 2^40: no overflow
    std::optional<std::uint64_t> binary_size;
    if (const auto* p = dc::parameters(in, {"binary_data_size"}, w); p && p->contains("binary_data_size")) {
      if (!(*p)["binary_data_size"].is_number_unsigned()) throw request_error(400, "binary_data_size is not a non-negative integer", w);
      binary_size = (*p)["binary_data_size"].get<std::uint64_t>();
    }
    if (binary_size) {
      if (in.contains("data")) throw request_error(400, "the input has both 'data' and binary_data_size", w, "send one of them");
      if (*binary_size != bytes)
        throw request_error(400, "binary_data_size " + std::to_string(*binary_size) + " is not the " + std::to_string(bytes) +
                                     " bytes of its shape and datatype",
                            w, "send the tensor's row-major bytes");
      if (*binary_size > body.size() - offset)
        throw request_error(400, "binary data truncated: " + std::to_string(*binary_size) + " bytes declared, " +
                                     std::to_string(body.size() - offset) + " left in the body",
                            w, "send every binary tensor whole after the JSON header");
      t.data.resize(bytes);
      if (bytes) std::memcpy(t.data.data(), body.data() + offset, bytes);
      if (t.type == data_type::BOOL)  // kernels read C++ bool: any non-zero byte is true, stored as 1
        for (auto& b : t.data) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
      offset += bytes;
    } else {
      if (!in.contains("data")) throw request_error(400, "the input has no 'data'", w, "send data or binary_data_size");
      // JSON data: each element takes at least one byte of the body, so `bytes` is bounded by it.
      if (count > body.size()) throw request_error(400, "the shape's " + std::to_string(count) + " elements exceed the data sent", w);
      t.data.resize(bytes);
      std::size_t n = 0;
      dc::flatten(in["data"], t.type, count, t.data, n, t.name, 0);
      if (n != count)
        throw request_error(400, "data holds " + std::to_string(n) + " elements but shape " + nlohmann::json(t.shape).dump() +
                                     " has " + std::to_string(count),
                            w, "send one value per element of the shape");
    }
    r.inputs.push_back(std::move(t));
  }
  if (offset != body.size())
    throw request_error(400, std::to_string(body.size() - offset) + " bytes after the last binary tensor", "request body",
                        "the binary_data_size of the inputs must add up to the bytes after the JSON header");
  if (j.contains("outputs")) {
    if (!j["outputs"].is_array()) throw request_error(400, "'outputs' is not an array", "request");
    for (const auto& o : j["outputs"]) {
      if (!o.is_object() || !o.contains("name") || !o["name"].is_string())
        throw request_error(400, "a requested output has no 'name' string", "request outputs");
      const auto name = o["name"].get<std::string>();
      const auto w = "output '" + name.substr(0, 60) + "'";
      r.outputs.emplace_back(name, dc::bool_parameter(dc::parameters(o, {"binary_data"}, w), "binary_data", w) || r.binary_outputs);
    }
  }
  return r;
}

/// The response's body, and the length of its JSON part when binary tensors follow (for the
/// Inference-Header-Content-Length header), else nullopt.
struct encoded_response {
  std::string body;
  std::optional<std::size_t> header_length;
};

inline encoded_response encode_infer_response(const infer_response& r) {
  nlohmann::json j;
  j["model_name"] = r.model_name;
  j["model_version"] = r.model_version;
  if (!r.id.empty()) j["id"] = r.id;
  j["outputs"] = nlohmann::json::array();
  std::string binary;
  for (const auto& t : r.outputs) {
    nlohmann::json o;
    o["name"] = t.name;
    o["datatype"] = kserve_name(t.type);
    o["shape"] = t.shape;
    if (t.binary) {
      o["parameters"]["binary_data_size"] = t.data.size();
      binary.append(reinterpret_cast<const char*>(t.data.data()), t.data.size());
    } else {
      auto data = nlohmann::json::array();
      const auto size = size_of(t.type);
      for (std::size_t k = 0; k + size <= t.data.size(); k += size) data.push_back(detail::codec::value(t.type, t.data.data() + k));
      o["data"] = std::move(data);
    }
    j["outputs"].push_back(std::move(o));
  }
  encoded_response e;
  e.body = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);  // names from a stranger's model
  bool any_binary = false;
  for (const auto& t : r.outputs) any_binary = any_binary || t.binary;
  if (any_binary) {
    e.header_length = e.body.size();
    e.body += binary;
  }
  return e;
}

/// An input or output of a served model as clients see it (KServe's tensor metadata).
struct tensor_metadata {
  std::string name;
  data_type type = data_type::F32;
  std::vector<std::int64_t> shape;  // -1 for the batch dimension when batching
};

namespace detail::codec {
inline std::string names(const std::vector<tensor_metadata>& v) {
  std::string s;
  for (const auto& m : v) s += (s.empty() ? "" : ", ") + m.name;
  return "the model's are: " + s;
}
}  // namespace detail::codec

/// A request's inputs in the order of a model's signature, and its rows (1 without batching).
struct matched_inputs {
  std::uint64_t rows = 1;
  std::vector<std::span<const std::byte>> data;  // views of the request's tensors
};

/// Checks a decoded request's inputs against a model's signature (`inputs`; -1 leads each shape
/// when max_batch > 0): every input named once, of its datatype and shape, all with one batch of
/// at most max_batch rows. Throws request_error (400) saying which input does not fit, where.
inline matched_inputs match_inputs(const infer_request& r, const std::vector<tensor_metadata>& inputs, std::uint64_t max_batch,
                                   const std::string& where) {
  std::optional<std::int64_t> rows;
  matched_inputs m;
  m.data.resize(inputs.size());
  std::vector<bool> given(inputs.size(), false);
  for (const auto& t : r.inputs) {
    const auto it = std::find_if(inputs.begin(), inputs.end(), [&](const auto& s) { return s.name == t.name; });
    if (it == inputs.end()) throw request_error(400, "'" + t.name + "' is not an input of the model", where, detail::codec::names(inputs));
    const auto k = static_cast<std::size_t>(it - inputs.begin());
    if (given[k]) throw request_error(400, "the input is given twice", detail::codec::where(t.name), "send each input once");
    const auto want = "the model takes " + kserve_name(it->type) + nlohmann::json(it->shape).dump();
    if (t.type != it->type) throw request_error(400, "input '" + t.name + "' is " + kserve_name(t.type), where, want);
    bool fits = t.shape.size() == it->shape.size();
    for (std::size_t d = 0; fits && d < t.shape.size(); ++d) fits = it->shape[d] == -1 || it->shape[d] == t.shape[d];
    if (!fits) throw request_error(400, "input '" + t.name + "' has shape " + nlohmann::json(t.shape).dump(), where, want);
    if (max_batch) {
      if (rows && *rows != t.shape[0])
        throw request_error(400, "inputs disagree on the batch: " + std::to_string(*rows) + " and " + std::to_string(t.shape[0]) + " rows",
                            where, "give every input the same leading dimension");
      rows = t.shape[0];
      if (static_cast<std::uint64_t>(*rows) > max_batch)
        throw request_error(400, "a batch of " + std::to_string(*rows) + " exceeds max_batch_size " + std::to_string(max_batch), where,
                            "split the request");
    }
    m.data[k] = std::span<const std::byte>(t.data);
    given[k] = true;
  }
  for (std::size_t k = 0; k < inputs.size(); ++k)
    if (!given[k]) throw request_error(400, "no tensor for input '" + inputs[k].name + "'", where, detail::codec::names(inputs));
  m.rows = static_cast<std::uint64_t>(rows.value_or(1));
  return m;
}

}  // namespace ipu::serve
