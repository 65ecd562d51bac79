// The AVX2 copy of the element-wise loops gives the same bits as the baseline copy: the loops the
// kernels run (Sigmoid's, a multiply-add that an FMA would fuse, a division) over a sweep of the
// float line, through both copies.
#include "ipu/ops/kernels/vector_isa.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "ipu/ops/kernels/fast_math.hpp"
#include "math_kernel_harness.hpp"

namespace test_vector_isa {

namespace {

namespace m = ipu::detail::math_ops;

/// Every 4099th finite float bit pattern, both signs: a million values.
std::vector<float> float_sweep() {
  std::vector<float> v;
  for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 4099) {
    v.push_back(std::bit_cast<float>(bits));
    v.push_back(-std::bit_cast<float>(bits));
  }
  return v;
}

template <class F>
std::vector<float> map_on(m::vector_isa isa, const std::vector<float>& x, F f) {
  std::vector<float> y(x.size());
  const float* in = x.data();
  float* out = y.data();
  const std::size_t n = x.size();
  m::run_on(isa, [&] {
    for (std::size_t i = 0; i < n; ++i) out[i] = f(in[i]);
  });
  return y;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

/// Whether the kernel says the CPU has AVX2, from /proc/cpuinfo's flags (nullopt without it): a
/// witness independent of the compiler's __builtin_cpu_supports, which host_vector_isa() uses.
std::optional<bool> cpuinfo_has_avx2() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0) return (line + " ").find(" avx2 ") != std::string::npos;
  return std::nullopt;
}

TEST_CASE("the host's copy is AVX2 exactly when the CPU has it") {
#if IPU_AVX2_COPY
  const auto avx2 = cpuinfo_has_avx2();
  if (!avx2) return;  // no /proc/cpuinfo (not Linux): nothing independent to compare with
  CHECK((m::host_vector_isa() == m::vector_isa::avx2) == *avx2);
#else
  CHECK(m::host_vector_isa() == m::vector_isa::baseline);
#endif
}

TEST_CASE("the AVX2 and baseline copies of a loop give the same bits") {
  if (m::host_vector_isa() != m::vector_isa::avx2) {
    MESSAGE("this host runs only the baseline copy; nothing to compare");
    return;
  }
  const auto x = float_sweep();
  SUBCASE("Sigmoid's polynomial") {
    auto f = [](float v) { return m::sigmoid_vectorisable(v); };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, f), map_on(m::vector_isa::avx2, x, f)));
  }
  SUBCASE("a multiply-add, which a fused multiply-add would round once") {
    // 1/3 and 0.1 are inexact, so a * x + b rounds differently fused: the check fails if the copy
    // is ever built with FMA.
    auto f = [](float v) { return v * 0.333333343f + 0.1f; };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, f), map_on(m::vector_isa::avx2, x, f)));
  }
  SUBCASE("a division") {
    auto f = [](float v) { return 1.0f / (1.0f + v); };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, f), map_on(m::vector_isa::avx2, x, f)));
  }
}

TEST_CASE("the Sigmoid kernel, whose blocks run in the host's copy, gives the baseline copy's bits") {
  const auto x = float_sweep();
  const auto n = static_cast<std::int64_t>(x.size());
  const auto y = mk::run1("Sigmoid", {mk::f32({n}, x)}, {ipu::data_type::F32, {n}});
  const auto span = y.as<float>();
  const std::vector<float> got(span.begin(), span.end());
  CHECK(same_bits(got, map_on(m::vector_isa::baseline, x, [](float v) { return m::sigmoid_vectorisable(v); })));
}

}  // namespace test_vector_isa
