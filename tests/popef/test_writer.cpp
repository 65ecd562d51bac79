// Writing and reading back every blob type; the writer's rules (one blob at a time, exact tensor
// sizes, append mode, abandoned blobs); the layout on disk (header fields, 4 KiB alignment).
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "ipu/popef/reader.hpp"
#include "ipu/popef/writer.hpp"
#include "popef_test_util.hpp"

namespace test_writer {

using namespace ipu;
using namespace ipu::popef;
using test_popef::pattern;

namespace {
bool same(const byte_buffer& b, const std::vector<std::byte>& v) {
  return b.size() == v.size() && std::memcmp(b.data(), v.data(), v.size()) == 0;
}
}  // namespace

TEST_CASE("every blob type round trips through a file") {
  test_popef::scratch_dir dir("roundtrip");
  for (bool compress : {false, true}) {
    const auto path = dir / (compress ? "c.popef" : "u.popef");
    {
      writer w(path);
      test_popef::write_sample(w, compress);
    }
    reader r(path);
    REQUIRE(r.sources().size() == 1);
    CHECK(r.sources()[0].memory_mapped);
    CHECK(r.blobs().size() == 5);
    CHECK(r.notes().empty());

    REQUIRE(r.executables().size() == 1);
    const auto& e = r.executables()[0];
    CHECK(e.name == "exe");
    CHECK(e.compressed == compress);
    const auto exe = e.decompressed();
    const auto want = pattern(10000, 7);
    REQUIRE(exe.size() == want.size());
    CHECK(std::memcmp(exe.data(), want.data(), want.size()) == 0);
    if (compress) CHECK(e.payload.size() < want.size());  // the pattern compresses well

    REQUIRE(r.metadata().size() == 1);
    CHECK(r.metadata()[0].value == test_popef::sample_metadata());

    REQUIRE(r.tensors().size() == 1);
    const auto& t = r.tensors()[0];
    CHECK(t.name == "w");
    CHECK(t.info == tensor_info{data_type::S32, shape{3, 5}});
    CHECK(t.data.is_shared());  // a view of the mapping, not a copy
    CHECK(same(t.data, pattern(60, 1)));
    CHECK(t.blob.payload_offset % tensor_alignment == 0);
    CHECK(reinterpret_cast<std::uintptr_t>(t.data.data()) % tensor_alignment == 0);

    REQUIRE(r.feeds().size() == 1);
    CHECK(r.feeds()[0].name == "x");
    CHECK(r.feeds()[0].blob.payload_offset % tensor_alignment == 0);
    CHECK(same(r.feeds()[0].data, pattern(24, 2)));

    REQUIRE(r.opaque_blobs().size() == 1);
    CHECK(r.opaque_blobs()[0].name == "popart");
    CHECK(r.opaque_blobs()[0].executable == "exe");
    CHECK(same(r.opaque_blobs()[0].payload, pattern(100, 3)));
  }
}

TEST_CASE("a BF16 tensor round trips, stored as PopEF data type 15") {
  // The file stores ipu::data_type + 1; BF16 was appended after F8152 (14), so older codes keep
  // their meaning.
  CHECK(static_cast<int>(popef::detail::to_proto(data_type::BF16)) == 15);
  CHECK(popef::detail::to_proto(data_type::BF16) == popef::pb::BF16);
  CHECK(popef::detail::data_type_from_proto(15, "t", "here") == data_type::BF16);
  CHECK_THROWS_WITH_AS((void)popef::detail::data_type_from_proto(17, "t", "here"),
                       doctest::Contains("t has unknown data type 17"), error);
  // 16 would be STRING, whose elements are addresses: no executable carries one.
  CHECK_THROWS_WITH_AS((void)popef::detail::data_type_from_proto(16, "t", "here"),
                       doctest::Contains("t has element type STRING, which PopEF files do not carry"), error);
  test_popef::scratch_dir dir("bf16");
  const std::vector<std::uint16_t> bits = {0x3f80, 0x8000, 0x7fc1, 0x0001};
  std::vector<std::byte> bytes(8);
  std::memcpy(bytes.data(), bits.data(), 8);
  {
    writer w(dir / "b.popef");
    w.write_tensor_data("b", {data_type::BF16, shape{2, 2}}, bytes);
  }
  reader r(dir / "b.popef");
  REQUIRE(r.tensors().size() == 1);
  CHECK(r.tensors()[0].info == tensor_info{data_type::BF16, shape{2, 2}});
  CHECK(same(r.tensors()[0].data, bytes));
}

TEST_CASE("blobs round trip through streams and several sources") {
  std::stringstream s1, s2;
  {
    writer w(s1, "one");
    test_popef::write_sample(w);
  }
  {
    writer w(s2, "two");
    w.write_tensor_data("v", {data_type::F64, shape{4}}, pattern(32, 9));
  }
  reader r;
  r.parse_stream(s1, "one").parse_stream(s2, "two");
  CHECK(r.sources().size() == 2);
  CHECK_FALSE(r.sources()[0].memory_mapped);
  REQUIRE(r.tensors().size() == 2);
  CHECK(r.tensors()[1].name == "v");
  CHECK(r.tensors()[1].blob.source == 1);
  CHECK(r.tensors()[1].blob.location.find("stream 'two'") != std::string::npos);
  CHECK(same(r.tensors()[1].data, pattern(32, 9)));
}

TEST_CASE("the header records sizes, flags and checksums") {
  std::stringstream s;
  {
    writer w(s);
    w.write_tensor_data("w", {data_type::U8, shape{10}}, pattern(10));
  }
  const auto text = s.str();
  std::vector<std::byte> bytes(text.size());
  std::memcpy(bytes.data(), text.data(), text.size());
  REQUIRE(bytes.size() > header_size);
  CHECK(std::memcmp(bytes.data(), "IPUPOPEF", 8) == 0);
  const auto h = parse_header(bytes, bytes.size(), "test", true);
  CHECK(h.version == format_version);
  CHECK(h.type == static_cast<std::uint16_t>(blob_type::tensor_data));
  CHECK(h.header_bytes == header_size);
  CHECK(h.total_size == bytes.size());
  CHECK(h.content_size == bytes.size() - header_size);
  CHECK(h.flags == 0);
  CHECK(h.payload_raw_size == 10);
  CHECK(h.content_checksum == checksum(std::span<const std::byte>(bytes).subspan(header_size)));
  // The payload is the last 10 bytes, at a multiple of 4096.
  CHECK(bytes.size() == tensor_alignment + 10);
  CHECK(std::memcmp(bytes.data() + tensor_alignment, pattern(10).data(), 10) == 0);
}

TEST_CASE("one blob writer at a time") {
  std::stringstream s;
  writer w(s);
  auto a = w.create_tensor_data("a", {data_type::U8, shape{2}});
  CHECK_THROWS_AS(w.create_opaque("b", "exe"), ipu::error);
  CHECK_THROWS_AS(w.write_metadata(test_popef::sample_metadata()), ipu::error);
  try {
    (void)w.create_executable("e");
  } catch (const ipu::error& e) {
    CHECK(e.category() == error_category::usage);
    CHECK(std::string(e.what()).find("TensorData 'a' is still open") != std::string::npos);
  }
  a.write(pattern(2));
  a.close();
  auto b = w.create_opaque("b", "exe");  // allowed once the first is closed
  b.close();
  CHECK_FALSE(b.is_open());
}

TEST_CASE("a tensor takes exactly its size") {
  std::stringstream s;
  writer w(s);
  auto t = w.create_tensor_data("t", {data_type::F32, shape{2}});
  CHECK_THROWS_AS(t.write(pattern(9)), ipu::error);  // 8 bytes only
  t.write(pattern(4));
  CHECK_THROWS_AS(t.close(), ipu::error);  // 4 of 8
  t.write(pattern(4));
  t.close();
  CHECK_THROWS_AS(t.write(pattern(1)), ipu::error);  // closed
}

TEST_CASE("append mode adds blobs after the existing ones") {
  test_popef::scratch_dir dir("append");
  const auto path = dir / "m.popef";
  {
    writer w(path);
    w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
  }
  {
    writer w(path, open_mode::append);
    w.write_tensor_data("b", {data_type::U8, shape{5}}, pattern(5, 1));
  }
  reader r(path);
  REQUIRE(r.tensors().size() == 2);
  CHECK(r.tensors()[0].name == "a");
  CHECK(r.tensors()[1].name == "b");
  CHECK(r.tensors()[1].blob.payload_offset % tensor_alignment == 0);
  CHECK(same(r.tensors()[1].data, pattern(5, 1)));

  SUBCASE("appending to a file that does not end on a blob boundary is refused") {
    auto bytes = test_popef::read_bytes(path);
    bytes.resize(bytes.size() - 1);
    test_popef::write_bytes(path, bytes);
    CHECK_THROWS_AS(writer(path, open_mode::append), ipu::error);
  }
  SUBCASE("appending to a file that is not PopEF is refused") {
    test_popef::write_bytes(path, pattern(100));
    CHECK_THROWS_AS(writer(path, open_mode::append), ipu::error);
  }
}

TEST_CASE("an abandoned blob is cut from a file") {
  test_popef::scratch_dir dir("abandon");
  const auto path = dir / "m.popef";
  {
    writer w(path);
    w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
    {
      auto b = w.create_tensor_data("b", {data_type::U8, shape{100}});
      b.write(pattern(50));
    }  // not closed
    w.write_opaque("c", "exe", pattern(7));
  }
  reader r(path);
  REQUIRE(r.tensors().size() == 1);
  CHECK(r.tensors()[0].name == "a");
  REQUIRE(r.opaque_blobs().size() == 1);
}

TEST_CASE("a writer closed with an open blob writer leaves a readable file") {
  test_popef::scratch_dir dir("early");
  const auto path = dir / "m.popef";
  std::optional<blob_writer> open_blob;
  {
    writer w(path);
    w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
    open_blob.emplace(w.create_opaque("late", "exe"));
  }
  CHECK_FALSE(open_blob->is_open());
  CHECK_THROWS_AS(open_blob->write(pattern(1)), ipu::error);
  reader r(path);
  CHECK(r.blobs().size() == 1);
}

TEST_CASE("a large compressed executable round trips") {
  std::stringstream s;
  std::vector<std::byte> big(3 << 20);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<std::byte>((i * 2654435761u) >> 13);
  {
    writer w(s);
    auto b = w.create_executable("big", true);
    for (std::size_t off = 0; off < big.size(); off += 100000)
      b.write(std::span<const std::byte>(big).subspan(off, std::min<std::size_t>(100000, big.size() - off)));
    b.close();
  }
  reader r;
  r.parse_stream(s);
  REQUIRE(r.executables().size() == 1);
  const auto out = r.executables()[0].decompressed();
  REQUIRE(out.size() == big.size());
  CHECK(std::memcmp(out.data(), big.data(), big.size()) == 0);
}

TEST_CASE("empty names are refused") {
  std::stringstream s;
  writer w(s);
  CHECK_THROWS_AS(w.create_executable(""), ipu::error);
  CHECK_THROWS_AS(w.create_tensor_data("", {data_type::U8, shape{1}}), ipu::error);
  metadata m;
  CHECK_THROWS_AS(w.write_metadata(m), ipu::error);
}

TEST_CASE("a new file appears only when the writer closes") {
  test_popef::scratch_dir dir("atomic");
  const auto path = dir / "m.popef";
  {
    writer w(path);
    w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
    CHECK_FALSE(std::filesystem::exists(path));
    w.close();
    CHECK(std::filesystem::exists(path));
    CHECK_THROWS_AS(w.write_opaque("late", "exe", pattern(1)), ipu::error);  // closed
  }
  std::size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) files += !e.path().empty();
  CHECK(files == 1);  // no temporary left
}

TEST_CASE("a writer unwound by an exception leaves nothing behind") {
  test_popef::scratch_dir dir("unwind");
  const auto path = dir / "m.popef";
  SUBCASE("a new file is not created") {
    try {
      writer w(path);
      w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    CHECK_FALSE(std::filesystem::exists(path));
    CHECK(std::filesystem::is_empty(dir.path()));
  }
  SUBCASE("an appended file is cut back") {
    {
      writer w(path);
      w.write_tensor_data("a", {data_type::U8, shape{3}}, pattern(3));
    }
    const auto before = std::filesystem::file_size(path);
    try {
      writer w(path, open_mode::append);
      w.write_tensor_data("b", {data_type::U8, shape{3}}, pattern(3));
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
    CHECK(std::filesystem::file_size(path) == before);
    CHECK(reader(path).tensors().size() == 1);
  }
}

TEST_CASE("overwriting a file keeps a reader's views of the old one valid") {
  test_popef::scratch_dir dir("overwrite");
  const auto path = dir / "m.popef";
  {
    writer w(path);
    w.write_tensor_data("a", {data_type::U8, shape{4096}}, pattern(4096, 1));
  }
  const reader old(path);
  {
    writer w(path);  // the same path, while `old` maps it
    w.write_tensor_data("a", {data_type::U8, shape{4096}}, pattern(4096, 2));
  }
  CHECK(same(old.tensors()[0].data, pattern(4096, 1)));  // the old pages, not a truncated file
  CHECK(same(reader(path).tensors()[0].data, pattern(4096, 2)));
}

}  // namespace test_writer
