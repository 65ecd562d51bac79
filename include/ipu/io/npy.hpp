#pragma once
// NumPy .npy files: read and write host tensors.
//
// Format (numpy.lib.format): "\x93NUMPY", major, minor, a little-endian header length (2 bytes in
// version 1, 4 in versions 2 and 3), a Python dict literal with 'descr', 'fortran_order' and
// 'shape', padded so the data starts on a 64-byte boundary, then the raw elements. Only what maps
// onto ipu tensors is accepted: little-endian numbers and bools in C order, and fixed-width strings
// as STRING tensors: bytes ('|S<n>', kept as they are) or UTF-32 ('<U<n>', turned into UTF-8),
// each padded with NULs to its n characters, which numpy drops on reading as this reader does.
// STRING tensors are written as '<U<n>' when all their elements are UTF-8, '|S<n>' otherwise;
// an element ending in NUL is refused, since the padding would swallow it.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "ipu/tensor.hpp"
#include "ipu/utf8.hpp"

namespace ipu::io {

static_assert(std::endian::native == std::endian::little,
              "ipu: npy I/O assumes a little-endian host; add byte swapping to port it");

/// NumPy's dtype string for `t` ("<f4", "|b1", ...); nullopt for types NumPy lacks (float8,
/// bfloat16: ml_dtypes adds them, but its dtype strings are not standard .npy ones).
constexpr std::optional<std::string_view> npy_descr(data_type t) noexcept {
  switch (t) {
    case data_type::BOOL: return "|b1";
    case data_type::U8: return "|u1";
    case data_type::S8: return "|i1";
    case data_type::U16: return "<u2";
    case data_type::S16: return "<i2";
    case data_type::S32: return "<i4";
    case data_type::U32: return "<u4";
    case data_type::S64: return "<i8";
    case data_type::U64: return "<u8";
    case data_type::F16: return "<f2";
    case data_type::F32: return "<f4";
    case data_type::F64: return "<f8";
    case data_type::F8143:
    case data_type::F8152:
    case data_type::BF16:
    case data_type::STRING: return std::nullopt;  // strings are '|S<n>' / '<U<n>': their width varies
  }
  return std::nullopt;
}

namespace detail {

inline constexpr std::string_view npy_magic = "\x93NUMPY";

inline error npy_error(const std::string& what, const std::string& where, const std::string& fix = {}) {
  return error(error_category::io, what, where, fix);
}

/// A cursor over the header's Python literal: just enough grammar for what numpy writes.
class npy_header_parser {
 public:
  npy_header_parser(std::string_view text, const std::string& where) : s_(text), where_(where) {}

  struct header {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
  };

  header parse() {
    header h;
    bool has_descr = false, has_order = false, has_shape = false;
    expect('{');
    while (!peek('}')) {
      const auto key = string_literal();
      expect(':');
      if (key == "descr") {
        skip_space();
        if (!peek('\'') && !peek('"'))
          throw npy_error("the array has a structured dtype", where_,
                          "save a plain numeric array (ipu tensors have one element type)");
        h.descr = string_literal();
        has_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        has_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        has_shape = true;
      } else {
        throw bad("unknown header key '" + key + "'");
      }
      if (!peek(',')) break;
      expect(',');
    }
    expect('}');
    if (!has_descr || !has_order || !has_shape)
      throw bad(std::string("the header lacks '") + (!has_descr ? "descr" : !has_order ? "fortran_order" : "shape") +
                "'");
    return h;
  }

 private:
  error bad(const std::string& what) const {
    return npy_error("malformed .npy header: " + what + " (header: " + std::string(s_.substr(0, 200)) + ")", where_,
                     "the file is not a valid .npy file; write it with numpy.save");
  }
  void skip_space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\n' || s_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skip_space();
    return i_ < s_.size() && s_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) throw bad(std::string("expected '") + c + "' at offset " + std::to_string(i_));
    ++i_;
  }
  std::string string_literal() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) throw bad("expected a string at offset " + std::to_string(i_));
    const char q = s_[i_++];
    const auto end = s_.find(q, i_);
    if (end == std::string_view::npos) throw bad("unterminated string");
    std::string v(s_.substr(i_, end - i_));
    i_ = end + 1;
    return v;
  }
  bool boolean() {
    skip_space();
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    throw bad("expected True or False at offset " + std::to_string(i_));
  }
  std::vector<std::int64_t> tuple() {
    std::vector<std::int64_t> dims;
    expect('(');
    while (!peek(')')) {
      skip_space();
      std::int64_t v = 0;
      std::size_t digits = 0;
      while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') {
        if (v > (std::int64_t{1} << 50)) throw bad("a dimension is impossibly large");
        v = v * 10 + (s_[i_++] - '0');
        ++digits;
      }
      if (!digits) throw bad("expected a non-negative dimension at offset " + std::to_string(i_));
      if (i_ < s_.size() && s_[i_] == 'L') ++i_;  // Python 2 longs
      dims.push_back(v);
      if (!peek(',')) break;
      expect(',');
    }
    expect(')');
    return dims;
  }

  std::string_view s_;
  std::size_t i_ = 0;
  const std::string& where_;
};

/// A fixed-width string dtype: 'S' (bytes) or 'U' (UTF-32 code points), `width` of them each.
struct npy_string_kind {
  char code = 0;
  std::uint64_t width = 0;
  [[nodiscard]] std::uint64_t element_bytes() const noexcept { return code == 'U' ? 4 * width : width; }
};

/// The string dtype `descr` names ("|S5", "<U12"), or nullopt for any other dtype.
inline std::optional<npy_string_kind> npy_string_type(const std::string& descr, const std::string& where) {
  if (descr.size() < 3 || (descr[1] != 'S' && descr[1] != 'U')) return std::nullopt;
  std::uint64_t width = 0;
  for (std::size_t i = 2; i < descr.size(); ++i) {
    if (descr[i] < '0' || descr[i] > '9' || width > (std::uint64_t{1} << 32)) return std::nullopt;
    width = width * 10 + static_cast<std::uint64_t>(descr[i] - '0');
  }
  if (descr[1] == 'U' && descr[0] == '>')
    throw npy_error("dtype '" + descr + "' is big-endian", where,
                    "convert it in numpy first: a.astype(a.dtype.newbyteorder('<'))");
  if (descr[0] != '<' && descr[0] != '|' && descr[0] != '=' && !(descr[1] == 'S' && descr[0] == '>'))
    return std::nullopt;
  return npy_string_kind{descr[1], width};
}

inline data_type npy_type(const std::string& descr, const std::string& where) {
  if (npy_string_type(descr, where)) return data_type::STRING;
  if (descr.size() >= 2) {
    const char order = descr[0];
    const std::string_view code = std::string_view(descr).substr(1);
    for (auto t : all_data_types) {
      const auto d = npy_descr(t);
      if (!d || d->substr(1) != code) continue;
      // One-byte types have no byte order ('|'); numpy also accepts '<' or '=' for them.
      if (order == '<' || order == '|' || order == '=') return t;
      if (order == '>' && size_of(t) == 1) return t;
      if (order == '>')
        throw npy_error("dtype '" + descr + "' is big-endian", where,
                        "convert it in numpy first: a.astype(a.dtype.newbyteorder('<'))");
    }
  }
  throw npy_error("dtype '" + descr + "' is not supported", where,
                  "use bool, (u)int8/16/32/64, float16, float32, float64 or fixed-width strings (S or U)");
}

inline std::uint64_t read_le(std::span<const std::byte> b) {
  std::uint64_t v = 0;
  for (std::size_t i = b.size(); i-- > 0;) v = (v << 8) | static_cast<std::uint8_t>(b[i]);
  return v;
}

}  // namespace detail

namespace detail {

/// Where a .npy file's header text lies, from its first bytes: the magic, the version and the
/// header's length, checked against the file's size.
struct npy_preamble {
  std::size_t text_offset = 0;  // the header's Python literal starts here
  std::size_t text_size = 0;
};

/// The first bytes of every .npy file: enough of them for npy_preamble to read it (or all of a
/// shorter file).
inline constexpr std::size_t npy_preamble_bytes = 12;

/// Reads the preamble from `head`, the file's first min(file_size, npy_preamble_bytes) bytes or
/// more; `file_size` is the whole file's.
inline npy_preamble read_npy_preamble(std::span<const std::byte> head, std::uint64_t file_size, const std::string& where) {
  if (file_size < 10 || std::memcmp(head.data(), npy_magic.data(), npy_magic.size()) != 0)
    throw npy_error(file_size < 10 ? "the file is too short to be a .npy file (" + std::to_string(file_size) + " bytes)"
                                   : "the file does not start with the .npy magic \"\\x93NUMPY\"",
                    where, "pass a file written by numpy.save");
  const auto major = static_cast<std::uint8_t>(head[6]);
  const auto minor = static_cast<std::uint8_t>(head[7]);
  if (major < 1 || major > 3)
    throw npy_error(".npy format version " + std::to_string(major) + "." + std::to_string(minor) + " is not supported",
                    where, "write it with numpy.save (versions 1.0, 2.0 and 3.0 are read)");
  const std::size_t len_bytes = major == 1 ? 2 : 4;
  if (file_size < 8 + len_bytes) throw npy_error("the file is truncated inside the header length", where);
  const auto header_len = read_le(head.subspan(8, len_bytes));
  const std::uint64_t data_start = 8 + len_bytes + header_len;
  if (header_len > file_size || data_start > file_size)
    throw npy_error("the file is truncated: the header claims " + std::to_string(header_len) + " bytes but the file has " +
                        std::to_string(file_size) + " bytes in all",
                    where, "the file is incomplete; write it again");
  return {8 + len_bytes, static_cast<std::size_t>(header_len)};
}

/// What a .npy header says: the array and where its data lies in the file.
struct npy_layout {
  tensor_info info;
  std::uint64_t data_offset = 0;
  std::uint64_t data_bytes = 0;
  npy_string_kind strings{};  // for STRING: how the file holds each element
};

/// Parses the header `text` found at `p` and checks that the file's `file_size` bytes hold the
/// array's data exactly: neither truncated nor followed by anything.
inline npy_layout read_npy_header(std::string_view text, const npy_preamble& p, std::uint64_t file_size,
                                  const std::string& where) {
  const auto h = npy_header_parser(text, where).parse();
  const auto type = npy_type(h.descr, where);
  if (h.fortran_order && h.shape.size() > 1)
    throw npy_error("the array is stored in Fortran (column-major) order", where,
                    "save a C-ordered array: numpy.save(path, numpy.ascontiguousarray(a))");
  tensor_info info{type, shape(h.shape)};
  const auto strings = type == data_type::STRING ? *npy_string_type(h.descr, where) : npy_string_kind{};
  std::uint64_t bytes = type == data_type::STRING ? strings.element_bytes() : size_of(type);
  for (auto d : h.shape) {
    if (d != 0 && bytes > (std::uint64_t{1} << 50) / static_cast<std::uint64_t>(d))
      throw npy_error("the shape " + to_string(info.shape) + " is impossibly large", where, "the header is corrupt");
    bytes *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t data_start = p.text_offset + p.text_size;  // at most file_size: read_npy_preamble checked
  const std::uint64_t have = file_size - data_start;
  if (have < bytes)
    throw npy_error("the file is truncated: " + to_string(info) + " needs " + std::to_string(bytes) +
                        " bytes of data but only " + std::to_string(have) + " follow the header",
                    where, "the file is incomplete; write it again");
  if (have > bytes)
    throw npy_error(std::to_string(have - bytes) + " unexpected bytes follow the " + to_string(info) + " array data",
                    where, "save one array per .npy file");
  if (type == data_type::STRING && strings.width == 0) {
    // Zero-width strings take no bytes, so the file's size does not bound how many there are.
    constexpr std::uint64_t most = std::uint64_t{1} << 16;
    std::uint64_t n = 1;
    for (auto d : h.shape) {
      if (d != 0 && n > most / static_cast<std::uint64_t>(d))
        throw npy_error("the shape " + to_string(info.shape) + " holds more than " + std::to_string(most) +
                            " zero-width strings",
                        where, "save the strings with a width of at least 1 (numpy does by default)");
      n *= static_cast<std::uint64_t>(d);
    }
  }
  return {info, data_start, bytes, strings};
}

/// Element i of a string array's data, NUL padding dropped, as UTF-8.
inline std::string npy_string_element(std::span<const std::byte> data, const npy_string_kind& k, std::uint64_t i,
                                      const std::string& where) {
  const auto* at = data.data() + i * k.element_bytes();
  std::string s;
  if (k.code == 'S') {
    std::size_t n = static_cast<std::size_t>(k.width);
    while (n > 0 && at[n - 1] == std::byte{0}) --n;
    s.assign(reinterpret_cast<const char*>(at), n);
    return s;
  }
  std::size_t n = static_cast<std::size_t>(k.width);
  auto unit = [&](std::size_t j) { return static_cast<char32_t>(read_le(std::span(at + 4 * j, 4))); };
  while (n > 0 && unit(n - 1) == 0) --n;
  for (std::size_t j = 0; j < n; ++j) {
    const char32_t cp = unit(j);
    if (!utf8::is_scalar_value(cp))
      throw npy_error("string element " + std::to_string(i) + " holds " + std::to_string(cp) +
                          ", which is not a Unicode code point",
                      where, "the file is damaged; write it again with numpy.save");
    utf8::append(s, cp);
  }
  return s;
}

/// A STRING tensor of `info` from a string array's data.
inline host_tensor npy_strings(const tensor_info& info, std::span<const std::byte> data, const npy_string_kind& k,
                               const std::string& where) {
  host_tensor t(info);
  const auto n = static_cast<std::uint64_t>(info.num_elements());
  for (std::uint64_t i = 0; i < n; ++i) t.set_string(static_cast<std::size_t>(i), npy_string_element(data, k, i, where));
  return t;
}

/// numpy's truth (any nonzero byte) as ipu's bools (0 or 1).
inline void normalize_npy_bools(std::span<std::byte> bytes) noexcept {
  for (auto& b : bytes) b = b != std::byte{0} ? std::byte{1} : std::byte{0};
}

}  // namespace detail

/// Parses an in-memory .npy file; `where` names it in errors.
inline host_tensor parse_npy(std::span<const std::byte> file, const std::string& where = "npy data") {
  const auto p = detail::read_npy_preamble(file, file.size(), where);
  const std::string_view text(reinterpret_cast<const char*>(file.data()) + p.text_offset, p.text_size);
  const auto layout = detail::read_npy_header(text, p, file.size(), where);
  if (layout.info.type == data_type::STRING)
    return detail::npy_strings(layout.info, file.subspan(static_cast<std::size_t>(layout.data_offset)), layout.strings,
                               where);
  host_tensor t(layout.info);
  if (layout.data_bytes) std::memcpy(t.data(), file.data() + layout.data_offset, layout.data_bytes);
  if (layout.info.type == data_type::BOOL) detail::normalize_npy_bools(t.bytes());
  return t;
}

/// Reads a .npy file into a host tensor.
inline host_tensor read_npy(const std::filesystem::path& path) {
  const std::string where = "file '" + path.string() + "'";
  const auto raw = read_regular_file(path, ".npy file", UINT64_MAX);
  return parse_npy(std::as_bytes(std::span<const char>(raw.data(), raw.size())), where);
}

namespace detail {
/// A STRING tensor's elements as a string array's data: its dtype and bytes.
inline std::pair<std::string, std::vector<std::byte>> npy_string_data(const tensor_info& info,
                                                                     std::span<const std::byte> bytes) {
  const auto n = static_cast<std::size_t>(info.num_elements());
  std::vector<std::string_view> s(n);
  bool utf8_all = true;
  std::size_t width = 0;
  for (std::size_t i = 0; i < n && !bytes.empty(); ++i) {
    string_ref r;
    std::memcpy(&r, bytes.data() + i * sizeof r, sizeof r);
    s[i] = r.view();
    if (!s[i].empty() && s[i].back() == '\0')
      throw error(error_category::io, "string element " + std::to_string(i) + " ends in a NUL character", "writing .npy",
                  "numpy's fixed-width strings drop trailing NULs: remove them, or write the tensor another way");
    utf8_all = utf8_all && utf8::is_valid(s[i]);
  }
  for (auto v : s) {
    std::size_t chars = v.size();
    if (utf8_all) {
      chars = 0;
      for (std::size_t j = 0; j < v.size(); j += utf8::decode(v, j).length) ++chars;
    }
    width = std::max(width, chars);
  }
  width = std::max<std::size_t>(width, 1);  // numpy writes at least one character
  const std::size_t element = utf8_all ? 4 * width : width;
  std::vector<std::byte> data(n * element);
  for (std::size_t i = 0; i < n; ++i) {
    auto* at = data.data() + i * element;
    if (!utf8_all) {
      if (!s[i].empty()) std::memcpy(at, s[i].data(), s[i].size());
      continue;
    }
    for (std::size_t j = 0, k = 0; j < s[i].size(); ++k) {
      const auto d = utf8::decode(s[i], j);
      for (int b = 0; b < 4; ++b) at[4 * k + static_cast<std::size_t>(b)] = static_cast<std::byte>((d.code_point >> (8 * b)) & 0xff);
      j += d.length;
    }
  }
  return {(utf8_all ? "<U" : "|S") + std::to_string(width), std::move(data)};
}
}  // namespace detail

/// The .npy bytes of any tensor (version 1.0, or 2.0 when the header needs it).
template <tensor T>
std::vector<std::byte> to_npy(const T& t) {
  const tensor_info info = t.info();
  std::pair<std::string, std::vector<std::byte>> strings;
  if (info.type == data_type::STRING) strings = detail::npy_string_data(info, std::span<const std::byte>(t.bytes()));
  const auto descr = info.type == data_type::STRING ? std::optional<std::string_view>(strings.first) : npy_descr(info.type);
  if (!descr)
    throw error(error_category::io, std::string(to_string(info.type)) + " has no NumPy dtype", "writing .npy",
                info.type == data_type::BF16 ? "NumPy has no bfloat16: cast the tensor to float32 (exact) first"
                                             : "cast the tensor to float16 or float32 first");
  std::string dict = "{'descr': '" + std::string(*descr) + "', 'fortran_order': False, 'shape': (";
  for (std::size_t i = 0; i < info.shape.rank(); ++i) dict += std::to_string(info.shape[i]) + ", ";
  if (info.shape.rank() > 1) dict.resize(dict.size() - 2);
  if (info.shape.rank() == 1) dict.pop_back();
  dict += "), }";
  // Pad with spaces and end with '\n' so the data starts on a 64-byte boundary, as numpy does.
  auto header_for = [&](std::size_t prefix) {
    std::string h = dict;
    const std::size_t total = prefix + h.size() + 1;
    h.append((64 - total % 64) % 64, ' ');
    return h + '\n';
  };
  std::string header = header_for(10);
  const int major = header.size() > 0xffff ? 2 : 1;
  if (major == 2) header = header_for(12);
  std::vector<std::byte> out;
  auto span = info.type == data_type::STRING ? std::span<const std::byte>(strings.second) : std::span<const std::byte>(t.bytes());
  out.reserve(12 + header.size() + span.size());
  for (char c : detail::npy_magic) out.push_back(static_cast<std::byte>(c));
  out.push_back(static_cast<std::byte>(major));
  out.push_back(std::byte{0});
  for (std::size_t i = 0; i < (major == 1 ? 2u : 4u); ++i) out.push_back(static_cast<std::byte>((header.size() >> (8 * i)) & 0xff));
  for (char c : header) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), span.begin(), span.end());
  return out;
}

/// Writes any tensor as a .npy file.
template <tensor T>
void write_npy(const std::filesystem::path& path, const T& t) {
  write_file_atomically(path, to_npy(t), ".npy file");
}

}  // namespace ipu::io
