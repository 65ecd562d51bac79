#include "ipu/io/npy.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "ipu/io/npy_rows.hpp"
#include "numpy_scratch.hpp"

namespace test_npy {

namespace fs = std::filesystem;

namespace {
// A scratch directory per test case, and numpy snippets (numpy_scratch.hpp).
struct scratch : test_io_support::scratch {
  scratch() : test_io_support::scratch("ipu-npy-") {}
};
using test_io_support::python;

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("npy: reads every supported dtype written by numpy, in header versions 1, 2 and 3") {
  scratch s;
  REQUIRE(python(s, R"(
from numpy.lib import format as F
vals = [0, 1, 2, 3, 100, 5]
for name in ['bool', 'uint8', 'int8', 'uint16', 'int16', 'int32', 'uint32', 'int64', 'uint64',
             'float16', 'float32', 'float64']:
    a = np.array(vals, dtype=name).reshape(2, 3)
    if name.startswith('float'):
        a = a * np.array(-0.5, dtype=name)
    np.save(f'{D}/{name}.npy', a)
for v in [(1, 0), (2, 0), (3, 0)]:
    with open(f'{D}/v{v[0]}.npy', 'wb') as f:
        F.write_array(f, np.arange(12, dtype=np.float32).reshape(3, 4), version=v)
np.save(f'{D}/scalar.npy', np.float64(2.5))
np.save(f'{D}/empty.npy', np.zeros((0, 4), dtype=np.int32))
np.save(f'{D}/fortran1d.npy', np.asfortranarray(np.arange(3, dtype=np.int16)))
np.save(f'{D}/bigbool.npy', np.array([True, False, True]))
)") == 0);
  struct expect {
    const char* file;
    ipu::data_type type;
  };
  for (auto [file, type] : {expect{"bool", ipu::data_type::BOOL}, {"uint8", ipu::data_type::U8}, {"int8", ipu::data_type::S8},
                            {"uint16", ipu::data_type::U16}, {"int16", ipu::data_type::S16}, {"int32", ipu::data_type::S32},
                            {"uint32", ipu::data_type::U32}, {"int64", ipu::data_type::S64}, {"uint64", ipu::data_type::U64},
                            {"float16", ipu::data_type::F16}, {"float32", ipu::data_type::F32},
                            {"float64", ipu::data_type::F64}}) {
    CAPTURE(file);
    const auto t = ipu::io::read_npy(s / (std::string(file) + ".npy"));
    CHECK(t.info() == ipu::tensor_info{type, {2, 3}});
    const double want[] = {0, 1, 2, 3, 100, 5};
    for (std::size_t i = 0; i < 6; ++i) {
      double got = 0;
      switch (type) {
        case ipu::data_type::BOOL: got = t.as<bool>()[i]; CHECK(got == (want[i] != 0)); continue;
        case ipu::data_type::U8: got = t.as<std::uint8_t>()[i]; break;
        case ipu::data_type::S8: got = t.as<std::int8_t>()[i]; break;
        case ipu::data_type::U16: got = t.as<std::uint16_t>()[i]; break;
        case ipu::data_type::S16: got = t.as<std::int16_t>()[i]; break;
        case ipu::data_type::S32: got = t.as<std::int32_t>()[i]; break;
        case ipu::data_type::U32: got = t.as<std::uint32_t>()[i]; break;
        case ipu::data_type::S64: got = static_cast<double>(t.as<std::int64_t>()[i]); break;
        case ipu::data_type::U64: got = static_cast<double>(t.as<std::uint64_t>()[i]); break;
        case ipu::data_type::F16: got = static_cast<float>(t.as<ipu::half>()[i]) / -0.5; break;
        case ipu::data_type::F32: got = t.as<float>()[i] / -0.5; break;
        case ipu::data_type::F64: got = t.as<double>()[i] / -0.5; break;
        default: break;
      }
      CHECK(got == want[i]);
    }
  }
  for (const char* v : {"v1", "v2", "v3"}) {
    const auto t = ipu::io::read_npy(s / (std::string(v) + ".npy"));
    CHECK(t.info() == ipu::tensor_info{ipu::data_type::F32, {3, 4}});
    CHECK(t.as<float>()[11] == 11.0f);
  }
  const auto scalar = ipu::io::read_npy(s / "scalar.npy");
  CHECK(scalar.info() == ipu::tensor_info{ipu::data_type::F64, {}});
  CHECK(scalar.as<double>()[0] == 2.5);
  CHECK(ipu::io::read_npy(s / "empty.npy").info() == ipu::tensor_info{ipu::data_type::S32, {0, 4}});
  // A 1-D array is laid out the same in either order.
  CHECK(ipu::io::read_npy(s / "fortran1d.npy").as<std::int16_t>()[2] == 2);
  CHECK(ipu::io::read_npy(s / "bigbool.npy").as<bool>()[2]);
}

TEST_CASE("npy: files written here are read back by numpy with the same dtype, shape and values") {
  scratch s;
  std::vector<float> f(24);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i) * 0.25f - 3.0f;
  ipu::io::write_npy(s / "f32.npy", ipu::host_tensor::from<float>({2, 3, 4}, std::span<const float>(f)));
  ipu::io::write_npy(s / "f16.npy", ipu::host_tensor::from<ipu::half>({3}, {ipu::half(1.5f), ipu::half(-2.0f), ipu::half(65504.0f)}));
  ipu::io::write_npy(s / "b.npy", ipu::host_tensor::from<bool>({2}, {true, false}));
  ipu::io::write_npy(s / "i64.npy", ipu::host_tensor::from<std::int64_t>({1}, {-(std::int64_t{1} << 40)}));
  ipu::io::write_npy(s / "u16.npy", ipu::host_tensor::from<std::uint16_t>({}, {65535}));
  ipu::io::write_npy(s / "empty.npy", ipu::host_tensor({ipu::data_type::U8, {0}}));
  // A header over 64 KiB needs format version 2.
  std::vector<std::int64_t> many_dims(25000, 1);
  ipu::io::write_npy(s / "long_header.npy", ipu::host_tensor({ipu::data_type::S8, ipu::shape(many_dims)}));
  REQUIRE(python(s, R"(
def check(name, dtype, shape, values):
    a = np.load(f'{D}/{name}.npy', max_header_size=1 << 20)
    assert a.dtype == np.dtype(dtype), (name, a.dtype)
    assert a.shape == shape, (name, a.shape)
    assert a.flags['C_CONTIGUOUS']
    np.testing.assert_array_equal(a.ravel(), np.array(values, dtype=dtype).ravel())
check('f32', 'float32', (2, 3, 4), np.arange(24, dtype=np.float32) * 0.25 - 3)
check('f16', 'float16', (3,), [1.5, -2.0, 65504.0])
check('b', 'bool', (2,), [True, False])
check('i64', 'int64', (1,), [-(1 << 40)])
check('u16', 'uint16', (), 65535)
check('empty', 'uint8', (0,), [])
# numpy arrays have at most 32 dimensions, but numpy still parses the version 2.0 header.
from numpy.lib import format as F
with open(f'{D}/long_header.npy', 'rb') as f:
    assert F.read_magic(f) == (2, 0)
    shape, fortran, dtype = F.read_array_header_2_0(f, max_header_size=1 << 20)
    assert shape == (1,) * 25000 and not fortran and dtype == np.int8
    assert f.tell() % 64 == 0 and f.read() == b'\0'
for n in ['f32', 'b', 'u16']:
    with open(f'{D}/{n}.npy', 'rb') as f:
        raw = f.read()
    assert raw[6] == 1 and (10 + int.from_bytes(raw[8:10], 'little')) % 64 == 0, n
open(f'{D}/ok', 'w').write('ok')
)") == 0);
  CHECK(read_text(s / "ok") == "ok");
  // And they read back here unchanged.
  CHECK(ipu::io::read_npy(s / "f32.npy").as<float>()[23] == f[23]);
  CHECK(ipu::io::read_npy(s / "long_header.npy").info().shape.rank() == 25000);
}

TEST_CASE("npy: numpy's string arrays read as STRING tensors, and STRING tensors write as numpy reads them") {
  scratch s;
  REQUIRE(python(s, R"(
np.save(f'{D}/u.npy', np.array([['monday', 'caf\u00e9'], ['\U0001F600', '']]))
np.save(f'{D}/s.npy', np.array([b'ab', b'\xff\x00z', b'']))
np.save(f'{D}/bad_code_point.npy', np.frombuffer(np.array([0xD800], '<u4').tobytes(), '<U1'))
)") == 0);
  const auto u = ipu::io::read_npy(s / "u.npy");
  CHECK(u.info() == ipu::tensor_info{ipu::data_type::STRING, {2, 2}});
  CHECK(u.string_at(0) == "monday");
  CHECK(u.string_at(1) == "caf\xc3\xa9");          // UTF-32 becomes UTF-8
  CHECK(u.string_at(2) == "\xf0\x9f\x98\x80");
  CHECK(u.string_at(3).empty());
  const auto b = ipu::io::read_npy(s / "s.npy");
  CHECK(b.info() == ipu::tensor_info{ipu::data_type::STRING, {3}});
  CHECK(b.string_at(0) == "ab");
  CHECK(b.string_at(1) == std::string("\xff\0z", 3));  // bytes as they are, inner NUL kept
  CHECK(b.string_at(2).empty());
  CHECK_THROWS_WITH_AS(ipu::io::read_npy(s / "bad_code_point.npy"), doctest::Contains("not a Unicode code point"),
                       ipu::error);
  // Rows of a string array read as the whole file has them.
  {
    ipu::io::npy_row_reader rows(s / "u.npy");
    const auto last = rows.read(1, 1);
    CHECK(last.info() == ipu::tensor_info{ipu::data_type::STRING, {1, 2}});
    CHECK(last.string_at(0) == "\xf0\x9f\x98\x80");
  }

  // Written: UTF-8 as '<U', anything else as '|S'; numpy reads back the same strings.
  ipu::io::write_npy(s / "out_u.npy", u);
  ipu::io::write_npy(s / "out_s.npy", b);
  REQUIRE(python(s, R"(
a = np.load(f'{D}/out_u.npy')
assert a.dtype == np.dtype('<U6') and a.tolist() == [['monday', 'caf\u00e9'], ['\U0001F600', '']], a
b = np.load(f'{D}/out_s.npy')
assert b.dtype == np.dtype('|S3') and b.tolist() == [b'ab', b'\xff\x00z', b''], b
open(f'{D}/ok', 'w').write('ok')
)") == 0);
  CHECK(read_text(s / "ok") == "ok");
  // A trailing NUL would be taken for padding: refused rather than lost.
  CHECK_THROWS_WITH_AS(ipu::io::to_npy(ipu::host_tensor::from_strings({1}, {std::string_view("a\0", 2)})),
                       doctest::Contains("ends in a NUL character"), ipu::error);
}

TEST_CASE("npy: bad files give clear errors") {
  scratch s;
  REQUIRE(python(s, R"(
a = np.arange(10, dtype=np.float32)
np.save(f'{D}/good.npy', a)
np.save(f'{D}/fortran.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(f'{D}/big_endian.npy', a.astype('>f4'))
np.save(f'{D}/complex.npy', np.ones(2, dtype=np.complex64))
np.save(f'{D}/unicode_big_endian.npy', np.array(['ab', 'c'], dtype='>U2'))
np.save(f'{D}/structured.npy', np.zeros(2, dtype=[('x', '<f4'), ('y', '<i4')]))
np.save(f'{D}/object.npy', np.array([1, 'a'], dtype=object), allow_pickle=True)
raw = open(f'{D}/good.npy', 'rb').read()
open(f'{D}/truncated_data.npy', 'wb').write(raw[:-4])
open(f'{D}/truncated_header.npy', 'wb').write(raw[:40])
open(f'{D}/trailing.npy', 'wb').write(raw + b'xx')
open(f'{D}/garbage.npy', 'wb').write(b'hello, this is not numpy at all')
open(f'{D}/tiny.npy', 'wb').write(b'\x93NUM')
open(f'{D}/version9.npy', 'wb').write(b'\x93NUMPY\x09\x00' + raw[8:])
open(f'{D}/bad_dict.npy', 'wb').write(raw[:10] + raw[10:].replace(b"'shape'", b"'shapo'", 1))
)") == 0);
  auto fails_with = [&](const std::string& file, const std::string& text) {
    CAPTURE(file);
    try {
      (void)ipu::io::read_npy(s / file);
      FAIL("no error");
    } catch (const ipu::error& e) {
      CHECK(e.category() == ipu::error_category::io);
      CHECK_MESSAGE(std::string(e.what()).find(text) != std::string::npos, e.what());
      CHECK(std::string(e.what()).find(file) != std::string::npos);  // the error names the file
    }
  };
  CHECK(ipu::io::read_npy(s / "good.npy").as<float>()[9] == 9.0f);
  fails_with("fortran.npy", "Fortran (column-major) order");
  fails_with("big_endian.npy", "dtype '>f4' is big-endian");
  fails_with("complex.npy", "dtype '<c8' is not supported");
  fails_with("unicode_big_endian.npy", "dtype '>U2' is big-endian");
  fails_with("structured.npy", "structured dtype");
  fails_with("object.npy", "dtype '|O' is not supported");
  fails_with("truncated_data.npy", "truncated: F32[10] needs 40 bytes of data but only 36 follow");
  fails_with("truncated_header.npy", "truncated");
  fails_with("trailing.npy", "2 unexpected bytes");
  fails_with("garbage.npy", ".npy magic");
  fails_with("tiny.npy", "too short");
  fails_with("version9.npy", "version 9.0 is not supported");
  fails_with("bad_dict.npy", "unknown header key 'shapo'");
  fails_with("missing.npy", "does not exist");

  CHECK_THROWS_WITH_AS(ipu::io::write_npy(s / "no" / "such" / "dir.npy", ipu::host_tensor::from<float>({1}, {1.0f})),
                       doctest::Contains("cannot create the .npy file: No such file or directory"), ipu::error);
  // A failed write leaves nothing behind: no half file, no temporary beside it.
  ipu::io::write_npy(s / "whole.npy", ipu::host_tensor::from<float>({2}, {1.0f, 2.0f}));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(s.dir)) files += e.path().filename().string().find(".tmp.") == std::string::npos ? 0 : 1;
  CHECK(files == 0);
  CHECK(ipu::io::read_npy(s / "whole.npy").as<float>()[1] == 2.0f);
  // A directory, a FIFO or a device given as a .npy file is refused at once, without blocking.
  fails_with(".", "is a directory, not a regular file");
  CHECK_THROWS_WITH_AS((void)ipu::io::to_npy(ipu::host_tensor({ipu::data_type::F8143, {2}})),
                       doctest::Contains("F8143 has no NumPy dtype"), ipu::error);
}

TEST_CASE("npy: BF16 is refused on writing, with a hint to cast to float32") {
  CHECK_FALSE(ipu::io::npy_descr(ipu::data_type::BF16).has_value());
  try {
    (void)ipu::io::to_npy(ipu::host_tensor({ipu::data_type::BF16, {2}}));
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(std::string(e.what()).find("BF16 has no NumPy dtype") != std::string::npos);
    CHECK(e.hint().find("NumPy has no bfloat16: cast the tensor to float32") != std::string::npos);
  }
}

}  // namespace test_npy
