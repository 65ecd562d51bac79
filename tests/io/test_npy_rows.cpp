#include "ipu/io/npy_rows.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ipu/io/npy.hpp"
#include "numpy_scratch.hpp"

namespace test_npy_rows {

namespace fs = std::filesystem;

namespace {
// A scratch directory per test case, and numpy snippets (numpy_scratch.hpp).
struct scratch : test_io_support::scratch {
  scratch() : test_io_support::scratch("ipu-npy-rows-") {}
};
using test_io_support::python;

// Rows [first, first + count) of a whole tensor, as their bytes.
std::vector<std::byte> rows_of(const ipu::host_tensor& all, std::int64_t first, std::int64_t count) {
  const auto row = all.info().shape[0] ? all.bytes().size() / static_cast<std::size_t>(all.info().shape[0]) : 0;
  const auto from = all.bytes().begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(first) * row);
  return {from, from + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(count) * row)};
}

std::vector<std::byte> bytes_of(const ipu::host_tensor& t) { return {t.bytes().begin(), t.bytes().end()}; }

// The message a reader of `file` throws, or "" when it does not.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const ipu::error& e) {
    return e.what();
  }
  return {};
}
}  // namespace

TEST_CASE("npy rows: every range of rows equals the whole file's, for every dtype and header version") {
  scratch s;
  REQUIRE(python(s, R"(
from numpy.lib import format as F
for name in ['uint8', 'int8', 'uint16', 'int16', 'int32', 'uint32', 'int64', 'uint64',
             'float16', 'float32', 'float64']:
    np.save(f'{D}/{name}.npy', (np.arange(5 * 3 * 2) * 7 - 20).astype(name).reshape(5, 3, 2))
# numpy's truth is any nonzero byte: rows read must be 0/1 as the whole file's are.
np.save(f'{D}/bool.npy', np.array([0, 1, 2, 0, 255, 1], dtype=np.uint8).view(np.bool_).reshape(3, 2))
np.save(f'{D}/vector.npy', np.arange(7, dtype=np.float32))
for v in [(1, 0), (2, 0), (3, 0)]:
    with open(f'{D}/v{v[0]}.npy', 'wb') as f:
        F.write_array(f, np.arange(12, dtype=np.float32).reshape(4, 3), version=v)
np.save(f'{D}/empty.npy', np.zeros((0, 4), dtype=np.int32))
)") == 0);
  for (const char* name : {"uint8", "int8", "uint16", "int16", "int32", "uint32", "int64", "uint64", "float16", "float32",
                           "float64", "bool", "vector", "v1", "v2", "v3"}) {
    CAPTURE(name);
    const auto path = s / (std::string(name) + ".npy");
    const auto whole = ipu::io::read_npy(path);
    ipu::io::npy_row_reader r(path);
    CHECK(r.info() == whole.info());
    const auto rows = r.rows();
    REQUIRE(rows == whole.info().shape[0]);
    CHECK(r.row_bytes() * static_cast<std::uint64_t>(rows) == whole.bytes().size());
    for (std::int64_t first = 0; first < rows; ++first)
      for (std::int64_t count = 0; first + count <= rows; ++count) {
        CAPTURE(first);
        CAPTURE(count);
        const auto t = r.read(first, count);
        auto dims = whole.info().shape.dims();
        dims[0] = count;
        CHECK(t.info() == ipu::tensor_info{whole.info().type, ipu::shape(dims)});
        CHECK(bytes_of(t) == rows_of(whole, first, count));
      }
  }
  // The bools are normalised: the third byte (2) and the fifth (255) read as 1.
  ipu::io::npy_row_reader b(s / "bool.npy");
  const auto last = b.read(2, 1);
  CHECK(last.as<bool>()[0]);
  CHECK(static_cast<int>(last.bytes()[0]) == 1);
  // An array of no rows reads as such, and nothing beyond it.
  ipu::io::npy_row_reader empty(s / "empty.npy");
  CHECK(empty.rows() == 0);
  CHECK(empty.read(0, 0).info() == ipu::tensor_info{ipu::data_type::S32, {0, 4}});
  CHECK_THROWS_AS((void)empty.read(0, 1), ipu::error);
}

TEST_CASE("npy rows: only the rows asked for are read, first and last included") {
  scratch s;
  std::vector<float> f(100 * 4);
  for (std::size_t i = 0; i < f.size(); ++i) f[i] = static_cast<float>(i);
  ipu::io::write_npy(s / "x.npy", ipu::host_tensor::from<float>({100, 4}, std::span<const float>(f)));
  const auto size = fs::file_size(s / "x.npy");
  const auto header = size - f.size() * sizeof(float);
  ipu::io::npy_row_reader r(s / "x.npy");
  CHECK(r.bytes_read() == header);  // the header alone
  const auto first = r.read(0, 1);
  CHECK(first.info() == ipu::tensor_info{ipu::data_type::F32, {1, 4}});
  CHECK(first.as<float>()[3] == 3.0f);
  const auto last = r.read(99, 1);
  CHECK(last.as<float>()[0] == 396.0f);
  CHECK(last.as<float>()[3] == 399.0f);
  const auto middle = r.read(10, 5);
  CHECK(middle.as<float>()[0] == 40.0f);
  CHECK(r.bytes_read() == header + 7 * 16);
  CHECK(r.bytes_read() < size);
  // Out of range: refused, naming the range and the array, nothing read.
  for (auto [from, count] : {std::pair<std::int64_t, std::int64_t>{100, 1}, {99, 2}, {-1, 1}, {0, -1}, {0, 101},
                             {101, 0}, {1, std::numeric_limits<std::int64_t>::max()}}) {
    CAPTURE(from);
    CAPTURE(count);
    CHECK_THROWS_WITH_AS((void)r.read(from, count), doctest::Contains(("rows from row " + std::to_string(from) + " of F32[100,4]").c_str()),
                         ipu::error);
  }
  CHECK(r.bytes_read() == header + 7 * 16);
  CHECK(r.read(100, 0).info() == ipu::tensor_info{ipu::data_type::F32, {0, 4}});
}

TEST_CASE("npy rows: bad files give parse_npy's errors; scalars, truncated and grown files are refused") {
  scratch s;
  REQUIRE(python(s, R"(
a = np.arange(10, dtype=np.float32)
np.save(f'{D}/good.npy', a)
np.save(f'{D}/fortran.npy', np.asfortranarray(np.ones((2, 3), dtype=np.float32)))
np.save(f'{D}/big_endian.npy', a.astype('>f4'))
np.save(f'{D}/complex.npy', np.ones(2, dtype=np.complex64))
np.save(f'{D}/structured.npy', np.zeros(2, dtype=[('x', '<f4'), ('y', '<i4')]))
np.save(f'{D}/scalar.npy', np.float64(2.5))
raw = open(f'{D}/good.npy', 'rb').read()
open(f'{D}/truncated_data.npy', 'wb').write(raw[:-4])
open(f'{D}/truncated_header.npy', 'wb').write(raw[:40])
open(f'{D}/truncated_length.npy', 'wb').write(b'\x93NUMPY\x02\x00\x10\x00\x00')
open(f'{D}/trailing.npy', 'wb').write(raw + b'xx')
open(f'{D}/garbage.npy', 'wb').write(b'hello, this is not numpy at all')
open(f'{D}/tiny.npy', 'wb').write(b'\x93NUM')
open(f'{D}/empty_file.npy', 'wb').write(b'')
open(f'{D}/version9.npy', 'wb').write(b'\x93NUMPY\x09\x00' + raw[8:])
open(f'{D}/bad_dict.npy', 'wb').write(raw[:10] + raw[10:].replace(b"'shape'", b"'shapo'", 1))
)") == 0);
  for (const char* name : {"fortran", "big_endian", "complex", "structured", "truncated_data", "truncated_header",
                           "truncated_length", "trailing", "garbage", "tiny", "empty_file", "version9", "bad_dict",
                           "missing"}) {
    CAPTURE(name);
    const auto path = s / (std::string(name) + ".npy");
    const auto whole = error_of([&] { (void)ipu::io::read_npy(path); });
    CHECK(!whole.empty());
    CHECK(error_of([&] { ipu::io::npy_row_reader r(path); }) == whole);
  }
  CHECK(error_of([&] { ipu::io::npy_row_reader r(s.dir); }) == error_of([&] { (void)ipu::io::read_npy(s.dir); }));
  CHECK_THROWS_WITH_AS(ipu::io::npy_row_reader(s / "scalar.npy"), doctest::Contains("(F64[]), which has no rows to read"), ipu::error);

  // A file rewritten while it is read: shorter is a short read, longer a changed size; both errors.
  fs::copy_file(s / "good.npy", s / "shrinks.npy");
  ipu::io::npy_row_reader shrinks(s / "shrinks.npy");
  CHECK(shrinks.read(8, 2).as<float>()[1] == 9.0f);
  fs::resize_file(s / "shrinks.npy", fs::file_size(s / "good.npy") - 8);
  CHECK_THROWS_WITH_AS((void)shrinks.read(8, 2), doctest::Contains("the file changed while it was read: it ended at byte"),
                       ipu::error);
  // Rows still there are refused too: the file is no longer the one whose header was read.
  CHECK_THROWS_WITH_AS((void)shrinks.read(0, 2), doctest::Contains("the file changed while it was read: it holds"),
                       ipu::error);
  fs::copy_file(s / "good.npy", s / "grows.npy");
  ipu::io::npy_row_reader grows(s / "grows.npy");
  fs::resize_file(s / "grows.npy", fs::file_size(s / "good.npy") + 4);
  CHECK_THROWS_WITH_AS((void)grows.read(0, 1), doctest::Contains("the file changed while it was read: it holds"),
                       ipu::error);
}

}  // namespace test_npy_rows
