#pragma once
// The PopEF byte layout (docs/popef-format.md): blob types, the fixed 64-byte little-endian blob
// header, the content prefix, and the XXH3 checksums that guard both.
//
// A file is a flat sequence of blobs. Each blob is a header, then `content_size` bytes of content:
//
//   content = info_size (u64) | payload_offset (u64) | info message (protobuf) | zero padding | payload
//
// where the payload runs from `payload_offset` (counted from the start of the content) to the end
// of the content. Sizes live in the header and the prefix as u64 — never inside a protobuf message —
// so no tensor is bounded by protobuf's 2 GB limit.
#include <xxhash.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "ipu/error.hpp"

namespace ipu::popef {

/// The library version written into files and cache keys.
inline constexpr std::string_view library_version = "0.1.0";

/// The first 8 bytes of every blob.
inline constexpr std::array<char, 8> magic{'I', 'P', 'U', 'P', 'O', 'P', 'E', 'F'};
/// The layout version this library reads and writes. 2: the Executable holds the graph as its own
/// message (graph_codec.hpp) instead of a weightless ONNX model.
inline constexpr std::uint16_t format_version = 2;
inline constexpr std::uint32_t header_size = 64;
/// Bytes before the info message in a blob's content: info_size and payload_offset.
inline constexpr std::uint64_t content_prefix_size = 16;
/// TensorData and FeedData payloads start at a multiple of this from the start of the file, so a
/// memory mapping exposes them page-aligned.
inline constexpr std::uint64_t tensor_alignment = 4096;
/// Protobuf refuses messages of 2 GB and more; info messages and executables must stay below.
inline constexpr std::uint64_t max_message_size = 0x7fffffffu;

enum class blob_type : std::uint16_t {
  executable = 1,
  metadata = 2,
  tensor_data = 3,
  feed_data = 4,
  opaque = 5,
};

constexpr bool is_known_blob_type(std::uint16_t t) noexcept { return t >= 1 && t <= 5; }

/// "Executable", "Metadata", "TensorData", "FeedData", "Opaque".
constexpr std::string_view to_string(blob_type t) noexcept {
  switch (t) {
    case blob_type::executable: return "Executable";
    case blob_type::metadata: return "Metadata";
    case blob_type::tensor_data: return "TensorData";
    case blob_type::feed_data: return "FeedData";
    case blob_type::opaque: return "Opaque";
  }
  return "unknown";
}

/// Header flags. Every bit not listed here must be zero: a reader refuses a blob with a flag it
/// does not know, since it could not interpret the content.
namespace blob_flags {
inline constexpr std::uint64_t compressed = 1;  // the payload is a zlib stream
inline constexpr std::uint64_t known = compressed;
}  // namespace blob_flags

/// The fixed header, as numbers. Layout (little-endian, offsets in bytes):
///   0 magic[8] | 8 version u16 | 10 type u16 | 12 header_size u32 | 16 total_size u64 |
///   24 content_size u64 | 32 flags u64 | 40 content_checksum u64 | 48 payload_raw_size u64 |
///   56 header_checksum u64 (XXH3-64 of bytes 0..55)
struct blob_header {
  std::uint16_t version = format_version;
  std::uint16_t type = 0;
  std::uint32_t header_bytes = header_size;
  std::uint64_t total_size = 0;        // header + content (+ any trailing padding): the next blob's distance
  std::uint64_t content_size = 0;      // bytes after the header that belong to the blob
  std::uint64_t flags = 0;
  std::uint64_t content_checksum = 0;  // XXH3-64 of the content as stored
  std::uint64_t payload_raw_size = 0;  // the payload's size once decompressed (= stored size if not compressed)
  std::uint64_t header_checksum = 0;

  [[nodiscard]] bool compressed() const noexcept { return (flags & blob_flags::compressed) != 0; }
  [[nodiscard]] bool known_type() const noexcept { return is_known_blob_type(type); }
  friend bool operator==(const blob_header&, const blob_header&) = default;
};

/// XXH3-64 of `bytes`.
inline std::uint64_t checksum(std::span<const std::byte> bytes) noexcept { return XXH3_64bits(bytes.data(), bytes.size()); }

namespace detail {

static_assert(std::endian::native == std::endian::little,
              "ipu: PopEF files are little-endian and this library reads them in place; port the codec to big-endian "
              "hosts first");

template <class T>
inline void store(std::byte* out, T v) noexcept {
  std::memcpy(out, &v, sizeof(T));
}
template <class T>
inline T load(const std::byte* in) noexcept {
  T v;
  std::memcpy(&v, in, sizeof(T));
  return v;
}

/// Streaming XXH3-64, for content written piece by piece.
class checksum_state {
 public:
  checksum_state() : state_(XXH3_createState()) {
    if (!state_) throw error(error_category::internal, "cannot allocate an XXH3 state");
    XXH3_64bits_reset(state_);
  }
  checksum_state(const checksum_state&) = delete;
  checksum_state& operator=(const checksum_state&) = delete;
  ~checksum_state() { XXH3_freeState(state_); }
  void update(std::span<const std::byte> b) noexcept { XXH3_64bits_update(state_, b.data(), b.size()); }
  [[nodiscard]] std::uint64_t digest() const noexcept { return XXH3_64bits_digest(state_); }

 private:
  XXH3_state_t* state_;
};

inline std::string hex(std::uint64_t v) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  bool started = false;
  for (int shift = 60; shift >= 0; shift -= 4) {
    const auto d = static_cast<unsigned>((v >> shift) & 0xf);
    if (d || started || shift == 0) {
      s += digits[d];
      started = true;
    }
  }
  return s;
}

}  // namespace detail

/// The 64 header bytes of `h`, with its header checksum computed (h.header_checksum is ignored).
inline std::array<std::byte, header_size> encode_header(const blob_header& h) noexcept {
  std::array<std::byte, header_size> out{};
  std::memcpy(out.data(), magic.data(), magic.size());
  detail::store(out.data() + 8, h.version);
  detail::store(out.data() + 10, h.type);
  detail::store(out.data() + 12, h.header_bytes);
  detail::store(out.data() + 16, h.total_size);
  detail::store(out.data() + 24, h.content_size);
  detail::store(out.data() + 32, h.flags);
  detail::store(out.data() + 40, h.content_checksum);
  detail::store(out.data() + 48, h.payload_raw_size);
  detail::store(out.data() + 56, checksum(std::span<const std::byte>(out.data(), 56)));
  return out;
}

/// Parses and checks the header at the start of `bytes` (at least the header, at most the rest of
/// the source); `remaining` is the number of bytes from the blob's offset to the end of the source.
/// `where` names the blob for errors ("file 'm.popef', blob 2 at offset 4096").
/// Checks, in order: room for a header, magic, header checksum, version, header size, flags, and
/// that the sizes fit in what remains. Unknown blob types pass (the caller skips them).
inline blob_header parse_header(std::span<const std::byte> bytes, std::uint64_t remaining, const std::string& where,
                                bool first_blob) {
  auto fail = [&](const std::string& what, const std::string& hint) -> void {
    throw error(error_category::popef, what, where, hint);
  };
  if (bytes.size() < magic.size() || std::memcmp(bytes.data(), magic.data(), magic.size()) != 0) {
    if (bytes.size() < magic.size() && !first_blob)
      fail(std::to_string(bytes.size()) + " stray bytes after the last blob, too few for a blob header",
           "the file was cut short or has trailing garbage; export it again");
    if (first_blob)
      fail(bytes.empty() ? std::string("the source is empty") : std::string("not a PopEF file: wrong magic bytes"),
           "give a file written by ipu compile or ipu::popef::writer (it starts with 'IPUPOPEF')");
    fail("no blob header here: wrong magic bytes", "the previous blob's size is corrupt or the file has trailing "
                                                    "garbage; export the file again");
  }
  if (bytes.size() < header_size || remaining < header_size)
    fail("the blob header is truncated: " + std::to_string(std::min<std::uint64_t>(bytes.size(), remaining)) + " of " + std::to_string(header_size) +
             " bytes present",
         "the file was cut short; export it again");
  const std::byte* p = bytes.data();
  blob_header h;
  h.header_checksum = detail::load<std::uint64_t>(p + 56);
  const auto actual = checksum(bytes.first(56));
  if (actual != h.header_checksum)
    fail("the blob header is corrupt: its checksum is " + detail::hex(actual) + ", the header records " +
             detail::hex(h.header_checksum),
         "the file is damaged; export it again");
  h.version = detail::load<std::uint16_t>(p + 8);
  h.type = detail::load<std::uint16_t>(p + 10);
  h.header_bytes = detail::load<std::uint32_t>(p + 12);
  h.total_size = detail::load<std::uint64_t>(p + 16);
  h.content_size = detail::load<std::uint64_t>(p + 24);
  h.flags = detail::load<std::uint64_t>(p + 32);
  h.content_checksum = detail::load<std::uint64_t>(p + 40);
  h.payload_raw_size = detail::load<std::uint64_t>(p + 48);
  if (h.version != format_version)
    fail("format version " + std::to_string(h.version) + " is not supported (this library reads version " +
             std::to_string(format_version) + ")",
         h.version > format_version ? "the file was written by a newer ipu; upgrade, or export it again with this one"
                                    : "export the file again");
  if (h.header_bytes != header_size)
    fail("header size " + std::to_string(h.header_bytes) + " is not " + std::to_string(header_size),
         "the file is damaged; export it again");
  if (h.total_size < header_size || h.content_size > h.total_size - header_size)
    fail("the blob's content (" + std::to_string(h.content_size) + " bytes) does not fit in its total size (" +
             std::to_string(h.total_size) + " bytes)",
         "the file is damaged; export it again");
  if (h.total_size > remaining)
    fail("the blob claims " + std::to_string(h.total_size) + " bytes but only " + std::to_string(remaining) +
             " remain",
         "the file was cut short; export it again");
  if (h.known_type() && (h.flags & ~blob_flags::known) != 0)
    fail("unknown header flags " + detail::hex(h.flags & ~blob_flags::known),
         "the file was written by a newer ipu; upgrade, or export it again with this one");
  return h;
}

}  // namespace ipu::popef
