#include <doctest/doctest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ios>
#include <sstream>
#include <string>
#include <limits>
#include <string>
#include <vector>

#include "ipu/half.hpp"

namespace test_half {

namespace {

namespace fs = std::filesystem;

// The tables numpy computes at test time (tests/data/half_table.py).
struct half_tables {
  std::vector<std::uint32_t> half_to_float;  // 65536 float bit patterns
  std::vector<std::uint32_t> float_inputs;
  std::vector<std::uint16_t> float_to_half;  // numpy's result for each input
};

template <class T>
std::vector<T> read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open ", p.string());
  const auto n = fs::file_size(p);
  REQUIRE(n % sizeof(T) == 0);
  std::vector<T> v(n / sizeof(T));
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n));
  REQUIRE(in.good());
  return v;  // the files are little-endian, like every machine this suite runs on
}

const half_tables& tables() {
  static const half_tables t = [] {
    const fs::path dir = fs::temp_directory_path() / ("ipu_half_table_" + std::to_string(::getpid()));
    const std::string cmd = std::string("\"") + IPU_PYTHON + "\" \"" + IPU_SOURCE_DIR + "/tests/data/half_table.py\" \"" +
                            dir.string() + "\"";
    const int rc = std::system(cmd.c_str());
    REQUIRE_MESSAGE(rc == 0, "generating the numpy half table failed: ", cmd);
    half_tables r{read_all<std::uint32_t>(dir / "half_to_float.u32"), read_all<std::uint32_t>(dir / "float_inputs.u32"),
                  read_all<std::uint16_t>(dir / "float_to_half.u16")};
    fs::remove_all(dir);
    return r;
  }();
  return t;
}

std::string hex(std::uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

bool is_nan_half(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }

}  // namespace

TEST_CASE("half -> float matches numpy for all 65536 bit patterns") {
  const auto& t = tables();
  REQUIRE(t.half_to_float.size() == 65536);
  int mismatches = 0;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    const auto got = std::bit_cast<std::uint32_t>(ipu::half::to_float(static_cast<std::uint16_t>(h)));
    if (got != t.half_to_float[h] && ++mismatches <= 10)
      FAIL_CHECK("half " << hex(h) << ": got " << hex(got) << ", numpy " << hex(t.half_to_float[h]));
  }
  CHECK(mismatches == 0);
}

TEST_CASE("float -> half matches numpy: every half, ties, neighbours of ties, random floats") {
  const auto& t = tables();
  REQUIRE(t.float_inputs.size() == t.float_to_half.size());
  REQUIRE(t.float_inputs.size() > 400000);
  int mismatches = 0;
  std::size_t nans = 0;
  for (std::size_t i = 0; i < t.float_inputs.size(); ++i) {
    const float f = std::bit_cast<float>(t.float_inputs[i]);
    const std::uint16_t got = ipu::half::from_float(f);
    const std::uint16_t want = t.float_to_half[i];
    bool ok = got == want;
    if (std::isnan(f)) {
      // numpy keeps signalling NaNs signalling; half makes them quiet (as F16C and IPU hardware do).
      ++nans;
      ok = is_nan_half(got) && is_nan_half(want) && (got & 0x8000u) == (want & 0x8000u) && (got & 0x200u) &&
           (got & 0x1ffu) == (want & 0x1ffu);
    }
    if (!ok && ++mismatches <= 10)
      FAIL_CHECK("float " << hex(t.float_inputs[i]) << " (" << f << "): got " << hex(got) << ", numpy " << hex(want));
  }
  CHECK(mismatches == 0);
  CHECK(nans > 0);  // the random inputs include NaNs
}

TEST_CASE("every half round-trips through float, NaNs come back quiet") {
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto h = static_cast<std::uint16_t>(b);
    const std::uint16_t back = ipu::half::from_float(ipu::half::to_float(h));
    if (is_nan_half(h))
      CHECK(back == (h | 0x200u));
    else
      CHECK(back == h);
  }
}

TEST_CASE("half: hand-checked specials, rounding and overflow") {
  using ipu::half;
  CHECK(half::from_float(0.0f) == 0x0000);
  CHECK(half::from_float(-0.0f) == 0x8000);
  CHECK(half::from_float(1.0f) == 0x3c00);
  CHECK(half::from_float(-2.0f) == 0xc000);
  CHECK(half::from_float(65504.0f) == 0x7bff);
  CHECK(half::from_float(65519.99f) == 0x7bff);                  // below the overflow tie
  CHECK(half::from_float(65520.0f) == 0x7c00);                   // the tie rounds to even: infinity
  CHECK(half::from_float(1e6f) == 0x7c00);                       // overflow -> inf
  CHECK(half::from_float(-1e6f) == 0xfc00);
  CHECK(half::from_float(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(is_nan_half(half::from_float(std::numeric_limits<float>::quiet_NaN())));
  CHECK(half::from_float(0x1p-24f) == 0x0001);                   // smallest subnormal
  CHECK(half::from_float(0x1p-25f) == 0x0000);                   // tie with 0: even is 0
  CHECK(half::from_float(0x1.000002p-25f) == 0x0001);            // just above the tie
  CHECK(half::from_float(0x3p-25f) == 0x0002);                   // 1.5 subnormal units: tie -> even 2
  CHECK(half::from_float(0x1p-14f) == 0x0400);                   // smallest normal
  CHECK(half::from_float(0x1.ffcp-15f) == 0x0400);               // subnormal that rounds up into the normals
  CHECK(half::from_float(1.0f + 0x1p-11f) == 0x3c00);            // tie -> even (down)
  CHECK(half::from_float(1.0f + 0x3p-11f) == 0x3c02);            // tie -> even (up)
  CHECK(half::from_float(0x1.002002p0f) == 0x3c01);              // just above a tie: up
  CHECK(half::from_float(0x1.001ffep0f) == 0x3c00);              // just below a tie: down
  CHECK(static_cast<float>(half::from_bits(0x3555)) == 0x1.554p-2f);
  CHECK(static_cast<float>(half::from_bits(0x0001)) == 0x1p-24f);
  CHECK(std::isinf(static_cast<float>(half::from_bits(0xfc00))));
  CHECK(half(0.5f).identical(half::from_bits(0x3800)));
  CHECK_FALSE(half(0.0f).identical(half(-0.0f)));
}

TEST_CASE("half conversions work in constant expressions") {
  static_assert(ipu::half(1.0f).bits() == 0x3c00);
  static_assert(static_cast<float>(ipu::half::from_bits(0xc000)) == -2.0f);
  static_assert(ipu::half::from_float(65520.0f) == 0x7c00);
  static_assert(ipu::half::to_float(0x0001) == 0x1p-24f);
  CHECK(true);
}

}  // namespace test_half
