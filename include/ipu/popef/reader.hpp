#pragma once
// Reads PopEF files and streams: hops from blob header to blob header, checks every size against
// what remains, verifies the XXH3 checksums, decodes the info messages, and exposes payloads as
// `byte_buffer` views of the memory-mapped file — tensor data is never copied.
//
//   ipu::popef::reader r("model.popef");         // or r.parse_file(a); r.parse_file(b);
//   for (const auto& t : r.tensors()) use(t.name, t.info, t.data);  // t.data: a shared view
//
// Several files (or streams) can be parsed into one reader to form one model. Blobs of a type this
// version does not know are skipped and reported in notes(). Anything malformed — an empty or
// truncated file, wrong magic, a flipped byte in a header or in content, an impossible length — is
// one ipu::error (category popef) naming the source, the blob index and offset, and what is wrong.
// A source that fails adds nothing to the reader.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <istream>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "ipu/log.hpp"
#include "ipu/popef/compression.hpp"
#include "ipu/popef/format.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/tensor_info.hpp"

namespace ipu::popef {

struct reader_options {
  /// Verify each blob's content checksum (header checksums are always verified). Costs one pass
  /// over the data; turn it off only for data verified by other means.
  bool verify_checksums = true;
  /// Map files with MAP_POPULATE: the pages are read in one sweep at open instead of on first
  /// touch, which is faster when (as with checksums on) every page is read anyway.
  bool populate = true;
};

/// Where a blob is and what its header says.
struct blob_info {
  std::size_t source = 0;  // index into reader::sources()
  std::size_t index = 0;   // position of the blob in its source
  std::uint64_t offset = 0;
  blob_header header;
  std::string name;                  // from the info message; metadata: the executable it names
  std::uint64_t payload_offset = 0;  // from the start of the source
  std::uint64_t payload_size = 0;    // as stored (compressed size when compressed)
  std::string location;              // "file 'm.popef', blob 2 (TensorData 'w') at offset 8192"

  [[nodiscard]] bool known() const noexcept { return header.known_type(); }
  [[nodiscard]] blob_type type() const noexcept { return static_cast<blob_type>(header.type); }
};

struct source_info {
  std::string name;  // "file 'm.popef'", "stream 'x'"
  std::uint64_t size = 0;
  bool memory_mapped = false;
};

struct executable_blob {
  std::string name;
  bool compressed = false;
  byte_buffer payload;  // as stored: a serialized pb::Executable, zlib-compressed when `compressed`
  blob_info blob;

  /// The serialized pb::Executable, inflated when compressed (checked against the header's size).
  [[nodiscard]] std::string decompressed() const {
    const auto b = payload.bytes();
    if (!compressed) return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    return detail::inflate_exactly(b, blob.header.payload_raw_size, blob.location);
  }
};

struct metadata_blob {
  popef::metadata value;
  blob_info blob;
};

/// A TensorData or FeedData blob.
struct tensor_blob {
  std::string name;
  tensor_info info;
  byte_buffer data;  // a view of the mapped file (or of the stream's bytes)
  blob_info blob;
};

struct opaque_blob {
  std::string name;
  std::string executable;
  bool compressed = false;
  byte_buffer payload;
  blob_info blob;

  [[nodiscard]] std::string decompressed() const {
    const auto b = payload.bytes();
    if (!compressed) return std::string(reinterpret_cast<const char*>(b.data()), b.size());
    return detail::inflate_exactly(b, blob.header.payload_raw_size, blob.location);
  }
};

namespace detail {

/// A read-only mapping of a whole file, alive while anything shares it.
class file_mapping {
 public:
  file_mapping(const std::filesystem::path& path, bool populate) {
    const std::string where = "file '" + path.string() + "'";
    auto file = open_regular_file(path, "PopEF file");
    const int fd = file.fd();
    size_ = static_cast<std::size_t>(file.size());
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
      if (p == MAP_FAILED) {
        const int e = errno;
        throw error(error_category::io, std::string("cannot map the PopEF file: ") + std::strerror(e), where);
      }
      data_ = static_cast<const std::byte*>(p);
    }
  }  // the mapping keeps the file when the descriptor closes
  file_mapping(const file_mapping&) = delete;
  file_mapping& operator=(const file_mapping&) = delete;
  ~file_mapping() {
    if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
  }
  [[nodiscard]] std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

/// The blobs of one source, gathered before they are added to the reader (all or nothing).
struct parsed_source {
  std::vector<blob_info> blobs;
  std::vector<executable_blob> executables;
  std::vector<metadata_blob> metadata;
  std::vector<tensor_blob> tensors;
  std::vector<tensor_blob> feeds;
  std::vector<opaque_blob> opaque;
  std::vector<std::string> notes;
};

inline std::string blob_label(const std::string& source, std::size_t index, std::uint64_t offset) {
  return source + ", blob " + std::to_string(index) + " at offset " + std::to_string(offset);
}

inline std::string blob_label(const std::string& source, std::size_t index, std::uint64_t offset, blob_type t,
                              const std::string& name) {
  std::string s = source + ", blob " + std::to_string(index) + " (" + std::string(to_string(t));
  if (!name.empty()) s += " '" + name + "'";
  return s + ") at offset " + std::to_string(offset);
}

/// Parses every blob of `bytes` (kept alive by `owner`).
inline parsed_source parse_source(std::shared_ptr<const void> owner, std::span<const std::byte> bytes,
                                  const std::string& source, std::size_t source_index, const reader_options& opt) {
  parsed_source out;
  if (bytes.empty())
    throw error(error_category::popef, "the source is empty", source,
                "give a file written by ipu compile or ipu::popef::writer");
  std::uint64_t offset = 0;
  for (std::size_t index = 0; offset < bytes.size(); ++index) {
    std::string where = blob_label(source, index, offset);
    const auto rest = bytes.subspan(static_cast<std::size_t>(offset));
    const auto h = parse_header(rest, rest.size(), where, index == 0);
    blob_info info;
    info.source = source_index;
    info.index = index;
    info.offset = offset;
    info.header = h;
    info.location = where;
    if (!h.known_type()) {
      std::string note = where + ": skipped a blob of unknown type " + std::to_string(h.type) + " (" +
                         std::to_string(h.total_size) + " bytes)";
      log::info(note);
      out.notes.push_back(std::move(note));
      out.blobs.push_back(std::move(info));
      offset += h.total_size;
      continue;
    }
    const auto type = static_cast<blob_type>(h.type);
    where = blob_label(source, index, offset, type, {});
    auto fail = [&](const std::string& what) -> void {
      throw error(error_category::popef, what, where, "the file is damaged; export it again");
    };
    const auto content = bytes.subspan(static_cast<std::size_t>(offset + header_size), static_cast<std::size_t>(h.content_size));
    if (opt.verify_checksums) {
      const auto actual = checksum(content);
      if (actual != h.content_checksum)
        fail("the blob's content is corrupt: its checksum is " + hex(actual) + ", the header records " +
             hex(h.content_checksum));
    }
    if (content.size() < content_prefix_size)
      fail("the content is " + std::to_string(content.size()) + " bytes, too short for its " +
           std::to_string(content_prefix_size) + "-byte prefix");
    const auto info_size = load<std::uint64_t>(content.data());
    const auto payload_offset = load<std::uint64_t>(content.data() + 8);
    if (info_size > content.size() - content_prefix_size)
      fail("the info message (" + std::to_string(info_size) + " bytes) runs past the end of the content (" +
           std::to_string(content.size()) + " bytes)");
    if (payload_offset < content_prefix_size + info_size || payload_offset > content.size())
      fail("the payload offset " + std::to_string(payload_offset) + " is outside the content (info ends at " +
           std::to_string(content_prefix_size + info_size) + ", content size " + std::to_string(content.size()) + ")");
    const auto info_bytes = content.subspan(content_prefix_size, static_cast<std::size_t>(info_size));
    const auto payload = content.subspan(static_cast<std::size_t>(payload_offset));
    info.payload_offset = offset + header_size + payload_offset;
    info.payload_size = payload.size();
    const bool compressed = h.compressed();
    if (!compressed && h.payload_raw_size != payload.size())
      fail("the header records a payload of " + std::to_string(h.payload_raw_size) + " bytes but the blob holds " +
           std::to_string(payload.size()));
    auto view = [&](std::span<const std::byte> b) { return byte_buffer::share(owner, b.data(), b.size()); };
    auto no_compression = [&] {
      if (compressed) fail("a " + std::string(to_string(type)) + " blob cannot be compressed");
    };
    auto finish = [&](const std::string& name) {
      info.name = name;
      info.location = blob_label(source, index, offset, type, name);
      where = info.location;
    };

    switch (type) {
      case blob_type::executable: {
        pb::ExecutableInfo m;
        parse_message(m, info_bytes, "the executable's info message", where);
        if (m.name().empty()) fail("the executable has no name");
        finish(m.name());
        if (payload.empty()) fail("the executable is empty");
        out.executables.push_back({m.name(), compressed, view(payload), info});
        break;
      }
      case blob_type::metadata: {
        no_compression();
        if (!payload.empty()) fail("a Metadata blob has no payload, but this one has " + std::to_string(payload.size()) + " bytes");
        pb::Metadata m;
        parse_message(m, info_bytes, "the metadata message", where);
        finish(m.executable());
        out.metadata.push_back({metadata_from_proto(m, where), info});
        break;
      }
      case blob_type::tensor_data:
      case blob_type::feed_data: {
        no_compression();
        pb::TensorDataInfo m;
        parse_message(m, info_bytes, "the tensor's info message", where);
        if (m.name().empty()) fail("the tensor has no name");
        finish(m.name());
        const auto ti = tensor_info_from_proto(m.info(), "tensor '" + m.name() + "'", where);
        const std::uint64_t want = static_cast<std::uint64_t>(ti.num_elements()) * size_of(ti.type);
        if (payload.size() != want)
          fail("the tensor " + to_string(ti) + " needs " + std::to_string(want) + " bytes but the blob holds " +
               std::to_string(payload.size()));
        tensor_blob t{m.name(), ti, view(payload), info};
        (type == blob_type::tensor_data ? out.tensors : out.feeds).push_back(std::move(t));
        break;
      }
      case blob_type::opaque: {
        pb::OpaqueInfo m;
        parse_message(m, info_bytes, "the opaque blob's info message", where);
        if (m.name().empty()) fail("the opaque blob has no name");
        finish(m.name());
        out.opaque.push_back({m.name(), m.executable(), compressed, view(payload), info});
        break;
      }
    }
    out.blobs.push_back(std::move(info));
    offset += h.total_size;
  }
  return out;
}

}  // namespace detail

class reader {
 public:
  reader() = default;
  explicit reader(reader_options options) : options_(options) {}
  explicit reader(const std::filesystem::path& file, reader_options options = {}) : options_(options) { parse_file(file); }
  explicit reader(std::span<const std::filesystem::path> files, reader_options options = {}) : options_(options) {
    for (const auto& f : files) parse_file(f);
  }

  /// Maps `file` and adds its blobs.
  reader& parse_file(const std::filesystem::path& file) {
    auto mapping = std::make_shared<const detail::file_mapping>(file, options_.populate);
    const auto bytes = mapping->bytes();
    return add(std::move(mapping), bytes, "file '" + file.string() + "'", true);
  }

  /// Reads `in` to its end and adds its blobs (a stream cannot be mapped: its bytes are kept).
  reader& parse_stream(std::istream& in, std::string_view name = "stream") {
    auto data = std::make_shared<std::vector<std::byte>>();
    std::vector<char> chunk(std::size_t{1} << 20);
    while (in) {
      in.read(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      const auto got = static_cast<std::size_t>(in.gcount());
      const auto* p = reinterpret_cast<const std::byte*>(chunk.data());
      data->insert(data->end(), p, p + got);
    }
    if (in.bad())
      throw error(error_category::io, "reading the PopEF stream failed", "stream '" + std::string(name) + "'");
    const std::span<const std::byte> bytes(data->data(), data->size());
    return add(std::move(data), bytes, "stream '" + std::string(name) + "'", false);
  }

  /// Adds the blobs of bytes that `owner` keeps alive (payload views share them).
  reader& parse_bytes(std::shared_ptr<const void> owner, std::span<const std::byte> bytes, std::string_view name = "bytes") {
    return add(std::move(owner), bytes, "buffer '" + std::string(name) + "'", false);
  }

  [[nodiscard]] const std::vector<source_info>& sources() const noexcept { return sources_; }
  /// Every blob, known or not, in source and file order.
  [[nodiscard]] const std::vector<blob_info>& blobs() const noexcept { return blobs_; }
  [[nodiscard]] const std::vector<executable_blob>& executables() const noexcept { return executables_; }
  [[nodiscard]] const std::vector<metadata_blob>& metadata() const noexcept { return metadata_; }
  [[nodiscard]] const std::vector<tensor_blob>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const std::vector<tensor_blob>& feeds() const noexcept { return feeds_; }
  [[nodiscard]] const std::vector<opaque_blob>& opaque_blobs() const noexcept { return opaque_; }
  /// What was skipped (blobs of unknown types), one line each.
  [[nodiscard]] const std::vector<std::string>& notes() const noexcept { return notes_; }

 private:
  reader& add(std::shared_ptr<const void> owner, std::span<const std::byte> bytes, std::string name, bool mapped) {
    auto parsed = detail::parse_source(std::move(owner), bytes, name, sources_.size(), options_);
    sources_.push_back({std::move(name), bytes.size(), mapped});
    auto append = [](auto& to, auto& from) {
      for (auto& x : from) to.push_back(std::move(x));
    };
    append(blobs_, parsed.blobs);
    append(executables_, parsed.executables);
    append(metadata_, parsed.metadata);
    append(tensors_, parsed.tensors);
    append(feeds_, parsed.feeds);
    append(opaque_, parsed.opaque);
    append(notes_, parsed.notes);
    return *this;
  }

  reader_options options_;
  std::vector<source_info> sources_;
  std::vector<blob_info> blobs_;
  std::vector<executable_blob> executables_;
  std::vector<metadata_blob> metadata_;
  std::vector<tensor_blob> tensors_;
  std::vector<tensor_blob> feeds_;
  std::vector<opaque_blob> opaque_;
  std::vector<std::string> notes_;
};

}  // namespace ipu::popef
