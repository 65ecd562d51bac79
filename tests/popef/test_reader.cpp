// The reader against corrupt input: every truncation, every flipped byte, wrong magic, unknown blob
// types, impossible lengths, empty files. Each must be an ipu::error (category popef) that names the
// source, the blob and what is wrong — never a crash (this suite runs under ASan in CI).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "ipu/popef/reader.hpp"
#include "ipu/popef/writer.hpp"
#include "popef_test_util.hpp"

namespace test_reader {

using namespace ipu;
using namespace ipu::popef;
using test_popef::pattern;

namespace {

std::vector<std::byte> sample_bytes(bool compress = true) {
  std::stringstream s;
  {
    writer w(s);
    test_popef::write_sample(w, compress);
  }
  const auto text = s.str();
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

reader parse(const std::vector<std::byte>& bytes, reader_options opt = {}) {
  auto owner = std::make_shared<std::vector<std::byte>>(bytes);
  reader r(opt);
  r.parse_bytes(owner, *owner, "sample");
  return r;
}

/// The popef error parsing `bytes` raises; fails the test when there is none.
ipu::error parse_error(const std::vector<std::byte>& bytes, reader_options opt = {}) {
  try {
    (void)parse(bytes, opt);
  } catch (const ipu::error& e) {
    return e;
  }
  FAIL("no error");
  return ipu::error(error_category::internal, "unreachable");
}

/// Blob start offsets of a well-formed file.
std::vector<std::uint64_t> blob_offsets(const std::vector<std::byte>& bytes) {
  std::vector<std::uint64_t> out;
  const auto r = parse(bytes);  // named: the loop must not outlive the reader its blobs belong to
  for (const auto& b : r.blobs()) out.push_back(b.offset);
  return out;
}

/// Rewrites the header at `offset` through `edit`, keeping its header checksum valid.
template <class Edit>
void edit_header(std::vector<std::byte>& bytes, std::uint64_t offset, Edit edit) {
  auto h = parse_header(std::span<const std::byte>(bytes).subspan(offset), bytes.size() - offset, "edit", true);
  edit(h);
  const auto enc = encode_header(h);
  std::memcpy(bytes.data() + offset, enc.data(), enc.size());
}

/// Overwrites content bytes of the blob at `offset` and fixes its content checksum.
void edit_content(std::vector<std::byte>& bytes, std::uint64_t offset, std::uint64_t at, std::span<const std::byte> with) {
  std::memcpy(bytes.data() + offset + header_size + at, with.data(), with.size());
  edit_header(bytes, offset, [&](blob_header& h) {
    h.content_checksum = checksum(std::span<const std::byte>(bytes).subspan(offset + header_size, h.content_size));
  });
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("an empty file is an error") {
  test_popef::scratch_dir dir("empty");
  test_popef::write_bytes(dir / "e.popef", {});
  try {
    reader r(dir / "e.popef");
    FAIL("no error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == error_category::popef);
    CHECK(contains(e.what(), "empty"));
    CHECK(contains(e.what(), "e.popef"));
  }
}

TEST_CASE("a missing file is an io error naming it") {
  try {
    reader r("/nonexistent/dir/m.popef");
    FAIL("no error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == error_category::io);
    CHECK(contains(e.what(), "/nonexistent/dir/m.popef"));
  }
}

TEST_CASE("wrong magic") {
  auto bytes = sample_bytes();
  bytes[0] = std::byte{'X'};
  const auto e = parse_error(bytes);
  CHECK(e.category() == error_category::popef);
  CHECK(contains(e.what(), "not a PopEF file"));
  CHECK(contains(e.what(), "blob 0 at offset 0"));

  SUBCASE("an ONNX file given as PopEF") {
    const auto onnx = pattern(200);
    CHECK(contains(parse_error(onnx).what(), "not a PopEF file"));
  }
}

TEST_CASE("truncation at every byte is an error") {
  // Except between blobs: a file cut there is a valid file with fewer blobs (the model builder
  // reports what is then missing).
  const auto bytes = sample_bytes();
  const auto offsets = blob_offsets(bytes);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    if (n > 0 && std::find(offsets.begin(), offsets.end(), n) != offsets.end()) {
      const auto blobs = static_cast<std::size_t>(std::find(offsets.begin(), offsets.end(), n) - offsets.begin());
      CHECK(parse(cut).blobs().size() == blobs);
      continue;
    }
    bool threw = false;
    try {
      (void)parse(cut);
    } catch (const ipu::error& e) {
      threw = e.category() == error_category::popef;
    }
    if (!threw) FAIL_CHECK("no popef error for the file cut to ", n, " of ", bytes.size(), " bytes");
  }
}

TEST_CASE("truncation inside a header names the blob and offset") {
  const auto bytes = sample_bytes();
  const auto offsets = blob_offsets(bytes);
  REQUIRE(offsets.size() == 5);
  for (std::size_t b = 1; b < offsets.size(); ++b)
    for (std::uint64_t k = 1; k < header_size; ++k) {
      const std::vector<std::byte> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(offsets[b] + k));
      const auto e = parse_error(cut);
      CHECK(contains(e.what(), "blob " + std::to_string(b) + " at offset " + std::to_string(offsets[b])));
    }
}

TEST_CASE("a flipped byte anywhere is an error") {
  for (bool compress : {false, true}) {
    const auto bytes = sample_bytes(compress);
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      auto bad = bytes;
      bad[i] ^= std::byte{0x5a};
      bool threw = false;
      try {
        (void)parse(bad);
      } catch (const ipu::error& e) {
        threw = e.category() == error_category::popef;
      }
      if (!threw) FAIL_CHECK("no popef error with byte ", i, " flipped (compress ", compress, ")");
    }
  }
}

TEST_CASE("flipped header bytes say the header is corrupt") {
  const auto bytes = sample_bytes();
  const auto offsets = blob_offsets(bytes);
  for (std::size_t b = 0; b < offsets.size(); ++b)
    for (std::uint64_t k = 8; k < header_size; ++k) {  // past the magic
      auto bad = bytes;
      bad[offsets[b] + k] ^= std::byte{1};
      const auto e = parse_error(bad);
      CHECK(contains(e.what(), "blob header is corrupt"));
      CHECK(contains(e.what(), "blob " + std::to_string(b)));
    }
}

TEST_CASE("flipped content bytes fail the content checksum") {
  const auto bytes = sample_bytes();
  const auto offsets = blob_offsets(bytes);
  auto bad = bytes;
  bad[offsets[2] + header_size + 20] ^= std::byte{0x80};  // inside TensorData's info message
  const auto e = parse_error(bad);
  CHECK(contains(e.what(), "content is corrupt"));
  CHECK(contains(e.what(), "blob 2 (TensorData) at offset " + std::to_string(offsets[2])));
}

TEST_CASE("without checksums flipped content bytes never crash") {
  // Every flip must either parse or raise ipu::error; ASan catches any out-of-bounds read.
  const auto bytes = sample_bytes();
  reader_options opt;
  opt.verify_checksums = false;
  std::size_t errors = 0;
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (auto mask : {std::byte{0x01}, std::byte{0x80}, std::byte{0xff}}) {
      auto bad = bytes;
      bad[i] ^= mask;
      try {
        auto r = parse(bad, opt);
        for (const auto& e : r.executables()) (void)e.decompressed();
      } catch (const ipu::error&) {
        ++errors;
      }
    }
  }
  CHECK(errors > 0);
}

TEST_CASE("unknown blob types are skipped with a note") {
  const auto bytes = sample_bytes();
  // A blob of type 77 with valid checksums between the executable and the metadata.
  const std::vector<std::byte> content = pattern(33);
  blob_header h;
  h.type = 77;
  h.content_size = content.size();
  h.total_size = header_size + content.size();
  h.flags = 0xffff;  // unknown flags on an unknown type do not matter
  h.content_checksum = checksum(content);
  const auto header = encode_header(h);
  const auto offsets = blob_offsets(bytes);
  std::vector<std::byte> with(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(offsets[1]));
  with.insert(with.end(), header.begin(), header.end());
  with.insert(with.end(), content.begin(), content.end());
  with.insert(with.end(), bytes.begin() + static_cast<std::ptrdiff_t>(offsets[1]), bytes.end());
  // The TensorData payload is no longer page-aligned in this buffer; reading still works.
  const auto r = parse(with);
  CHECK(r.blobs().size() == 6);
  CHECK_FALSE(r.blobs()[1].known());
  REQUIRE(r.notes().size() == 1);
  CHECK(contains(r.notes()[0], "unknown type 77"));
  CHECK(contains(r.notes()[0], "blob 1 at offset " + std::to_string(offsets[1])));
  CHECK(r.metadata().size() == 1);
  CHECK(r.tensors().size() == 1);
  CHECK(r.opaque_blobs().size() == 1);
}

TEST_CASE("impossible lengths are errors") {
  const auto bytes = sample_bytes();
  const auto offsets = blob_offsets(bytes);
  SUBCASE("total size past the end of the file") {
    auto bad = bytes;
    edit_header(bad, offsets[2], [](blob_header& h) { h.total_size = std::uint64_t{1} << 62; });
    CHECK(contains(parse_error(bad).what(), "remain"));
  }
  SUBCASE("total size of all ones") {
    auto bad = bytes;
    edit_header(bad, offsets[2], [](blob_header& h) {
      h.total_size = ~std::uint64_t{0};
      h.content_size = ~std::uint64_t{0} - 10;
    });
    CHECK(parse_error(bad).category() == error_category::popef);
  }
  SUBCASE("total size below the header size") {
    auto bad = bytes;
    edit_header(bad, offsets[0], [](blob_header& h) { h.total_size = 3; });
    CHECK(contains(parse_error(bad).what(), "does not fit"));
  }
  SUBCASE("content larger than the blob") {
    auto bad = bytes;
    edit_header(bad, offsets[3], [](blob_header& h) { h.content_size = h.total_size; });
    CHECK(contains(parse_error(bad).what(), "does not fit"));
  }
  SUBCASE("info message past the end of the content") {
    auto bad = bytes;
    std::array<std::byte, 8> huge{};
    popef::detail::store(huge.data(), ~std::uint64_t{0} - 4);
    edit_content(bad, offsets[4], 0, huge);
    const auto e = parse_error(bad);
    CHECK(contains(e.what(), "info message"));
    CHECK(contains(e.what(), "blob 4 (Opaque)"));
  }
  SUBCASE("payload offset past the end of the content") {
    auto bad = bytes;
    std::array<std::byte, 8> huge{};
    popef::detail::store(huge.data(), std::uint64_t{1} << 40);
    edit_content(bad, offsets[2], 8, huge);
    CHECK(contains(parse_error(bad).what(), "payload offset"));
  }
  SUBCASE("payload smaller than the tensor") {
    auto bad = bytes;
    edit_header(bad, offsets[2], [](blob_header& h) {
      h.content_size -= 4;  // the blob's content now ends 4 bytes early
    });
    // Fix the checksum of the shortened content.
    edit_header(bad, offsets[2], [&](blob_header& h) {
      h.content_checksum = checksum(std::span<const std::byte>(bad).subspan(offsets[2] + header_size, h.content_size));
    });
    CHECK(parse_error(bad).category() == error_category::popef);
  }
  SUBCASE("a newer format version") {
    auto bad = bytes;
    edit_header(bad, offsets[1], [](blob_header& h) { h.version = format_version + 1; });
    CHECK(contains(parse_error(bad).what(), "format version " + std::to_string(format_version + 1)));
  }
  SUBCASE("an older format version (the graph as ONNX)") {
    auto bad = bytes;
    edit_header(bad, offsets[1], [](blob_header& h) { h.version = 1; });
    CHECK(contains(parse_error(bad).what(), "format version 1 is not supported"));
  }
  SUBCASE("an unknown flag on a known type") {
    auto bad = bytes;
    edit_header(bad, offsets[2], [](blob_header& h) { h.flags |= 4; });
    CHECK(contains(parse_error(bad).what(), "unknown header flags"));
  }
  SUBCASE("a compressed tensor") {
    auto bad = bytes;
    edit_header(bad, offsets[2], [](blob_header& h) { h.flags = blob_flags::compressed; });
    CHECK(contains(parse_error(bad).what(), "cannot be compressed"));
  }
  SUBCASE("trailing bytes after the last blob") {
    auto bad = bytes;
    bad.push_back(std::byte{0});
    bad.push_back(std::byte{1});
    CHECK(contains(parse_error(bad).what(), "stray bytes"));
  }
}

TEST_CASE("a corrupt compressed payload is an error when inflated") {
  const auto bytes = sample_bytes(true);
  const auto offsets = blob_offsets(bytes);
  const auto r0 = parse(bytes);
  const auto payload_at = r0.executables()[0].blob.payload_offset - offsets[0] - header_size;
  SUBCASE("garbage in the stream") {
    auto bad = bytes;
    const auto junk = pattern(16, 99);
    edit_content(bad, offsets[0], payload_at + 4, junk);
    const auto r = parse(bad);  // checksums match: the damage is inside the zlib stream
    CHECK_THROWS_AS((void)r.executables()[0].decompressed(), ipu::error);
  }
  SUBCASE("a raw size that does not match") {
    auto bad = bytes;
    edit_header(bad, offsets[0], [](blob_header& h) { h.payload_raw_size += 1; });
    const auto r = parse(bad);
    try {
      (void)r.executables()[0].decompressed();
      FAIL("no error");
    } catch (const ipu::error& e) {
      CHECK(contains(e.what(), "header records"));
      CHECK(contains(e.what(), "Executable 'exe'"));
    }
  }
  SUBCASE("a raw size beyond any deflate ratio") {
    auto bad = bytes;
    edit_header(bad, offsets[0], [](blob_header& h) { h.payload_raw_size = 0x7fff0000; });
    const auto r = parse(bad);
    CHECK_THROWS_AS((void)r.executables()[0].decompressed(), ipu::error);
  }
}

TEST_CASE("a failed source adds nothing") {
  const auto good = sample_bytes();
  auto bad = good;
  bad.resize(bad.size() - 3);
  reader r;
  auto owner = std::make_shared<std::vector<std::byte>>(good);
  r.parse_bytes(owner, *owner, "good");
  auto owner2 = std::make_shared<std::vector<std::byte>>(bad);
  CHECK_THROWS_AS(r.parse_bytes(owner2, *owner2, "bad"), ipu::error);
  CHECK(r.sources().size() == 1);
  CHECK(r.blobs().size() == 5);
  CHECK(r.executables().size() == 1);
}

}  // namespace test_reader
