#pragma once
// zlib streams for compressed blob payloads (executables, opaque blobs): a streaming deflater for
// the writer and a bounded inflater for the reader, which refuses output beyond the size the blob
// header records (a corrupt or hostile stream cannot make it allocate without limit).
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>

#include "ipu/error.hpp"
#include "ipu/popef/format.hpp"

namespace ipu::popef::detail {

/// Compresses a stream of bytes; every compressed chunk goes to `out`.
class deflater {
 public:
  using output = std::function<void(std::span<const std::byte>)>;

  explicit deflater(output out, int level = Z_DEFAULT_COMPRESSION) : out_(std::move(out)) {
    if (deflateInit(&z_, level) != Z_OK) throw error(error_category::internal, "zlib deflateInit failed");
    live_ = true;
  }
  deflater(const deflater&) = delete;
  deflater& operator=(const deflater&) = delete;
  ~deflater() {
    if (live_) deflateEnd(&z_);
  }

  void set_output(output out) { out_ = std::move(out); }
  void write(std::span<const std::byte> in) { run(in, Z_NO_FLUSH); }
  void finish() { run({}, Z_FINISH); }

 private:
  void run(std::span<const std::byte> in, int flush) {
    // zlib's avail_in is 32-bit: feed large inputs in pieces.
    std::size_t done = 0;
    do {
      const std::size_t piece = std::min<std::size_t>(in.size() - done, std::size_t{1} << 30);
      z_.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in.data() + done));
      z_.avail_in = static_cast<uInt>(piece);
      const bool last = done + piece == in.size();
      const int mode = last ? flush : Z_NO_FLUSH;
      int rc = Z_OK;
      do {
        z_.next_out = reinterpret_cast<Bytef*>(buffer_);
        z_.avail_out = sizeof(buffer_);
        rc = deflate(&z_, mode);
        if (rc == Z_STREAM_ERROR) throw error(error_category::internal, "zlib deflate failed");
        const std::size_t have = sizeof(buffer_) - z_.avail_out;
        if (have) out_(std::span<const std::byte>(buffer_, have));
      } while (z_.avail_out == 0 || (mode == Z_FINISH && rc != Z_STREAM_END));
      done += piece;
    } while (done < in.size());
  }

  output out_;
  z_stream z_{};
  bool live_ = false;
  std::byte buffer_[1 << 16]{};
};

/// Inflates a zlib stream that must produce exactly `raw_size` bytes.
inline std::string inflate_exactly(std::span<const std::byte> in, std::uint64_t raw_size, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, what, where, "the file is damaged; export it again");
  };
  if (raw_size > max_message_size)
    fail("the compressed payload claims " + std::to_string(raw_size) + " bytes once inflated, over the 2 GB limit");
  // Deflate expands at most 1032:1; a larger claim is corruption, refused before allocating.
  if (raw_size > static_cast<std::uint64_t>(in.size()) * 1032 + 64)
    fail("the compressed payload (" + std::to_string(in.size()) + " bytes) cannot inflate to the " +
         std::to_string(raw_size) + " bytes its header records");
  // One spare byte: a stream that fills it holds more than the header says.
  std::string out(static_cast<std::size_t>(raw_size) + 1, '\0');
  z_stream z{};
  if (inflateInit(&z) != Z_OK) throw error(error_category::internal, "zlib inflateInit failed");
  std::size_t consumed = 0;
  int rc = Z_OK;
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  while (rc == Z_OK) {
    const std::size_t piece = std::min<std::size_t>(in.size() - consumed, std::size_t{1} << 30);
    z.next_in = const_cast<Bytef*>(reinterpret_cast<const Bytef*>(in.data() + consumed));
    z.avail_in = static_cast<uInt>(piece);
    const auto before_in = z.avail_in;
    const auto before_out = z.avail_out;
    rc = inflate(&z, Z_NO_FLUSH);
    consumed += before_in - z.avail_in;
    if (rc == Z_OK && (z.avail_out == 0 || (z.avail_in == before_in && z.avail_out == before_out))) rc = Z_BUF_ERROR;
  }
  const auto produced = static_cast<std::uint64_t>(z.total_out);
  inflateEnd(&z);
  if (produced > raw_size)
    fail("the compressed payload inflates to more than the " + std::to_string(raw_size) + " bytes its header records");
  if (rc != Z_STREAM_END)
    fail(std::string("the compressed payload is corrupt (zlib: ") + (rc == Z_BUF_ERROR ? "stream truncated" : zError(rc)) +
         ")");
  if (produced != raw_size)
    fail("the compressed payload inflates to " + std::to_string(produced) + " bytes, but its header records " +
         std::to_string(raw_size));
  if (consumed != in.size())
    fail(std::to_string(in.size() - consumed) + " bytes follow the end of the compressed payload");
  out.resize(static_cast<std::size_t>(raw_size));
  return out;
}

}  // namespace ipu::popef::detail
