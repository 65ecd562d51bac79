// The AVX2 and AVX-512 copies of the element-wise loops give the same bits as the baseline copy:
// the loops the kernels run (Sigmoid's, a multiply-add that an FMA would fuse, a division) over a
// sweep of the float line, through every copy the host can run.
#include "ipu/ops/kernels/vector_isa.hpp"

#include <doctest/doctest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ipu/ops/kernels/fast_math.hpp"
#include "../proc_cpuinfo.hpp"
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

/// The copies this build has that the host can run, past the baseline.
std::vector<m::vector_isa> wider_copies() {
  std::vector<m::vector_isa> isas;
  if (m::host_vector_isa() == m::vector_isa::baseline) return isas;
  isas.push_back(m::vector_isa::avx2);
  if (m::host_vector_isa() == m::vector_isa::avx512) isas.push_back(m::vector_isa::avx512);
  return isas;
}

const char* name_of(m::vector_isa isa) { return isa == m::vector_isa::avx512 ? "AVX-512" : "AVX2"; }

TEST_CASE("the host's copy is the widest the CPU has and the build holds") {
#if IPU_AVX2_COPY
  const auto info = ipu_test::first_processor_cpuinfo();
  if (!info.contains("flags")) return;  // no /proc/cpuinfo (not Linux): nothing independent to compare with
  const auto& flags = info.at("flags");
  const auto expected = IPU_AVX512_COPY && ipu_test::has_kernels_avx512(flags) ? m::vector_isa::avx512
                        : ipu_test::has_cpu_flag(flags, "avx2")               ? m::vector_isa::avx2
                                                                               : m::vector_isa::baseline;
  CHECK(m::host_vector_isa() == expected);
#else
  CHECK(m::host_vector_isa() == m::vector_isa::baseline);
#endif
}

TEST_CASE("every wider copy of a loop gives the baseline copy's bits") {
  const auto isas = wider_copies();
  if (isas.empty()) {
    MESSAGE("this host runs only the baseline copy; nothing to compare");
    return;
  }
  const auto x = float_sweep();
  for (const auto isa : isas) {
    CAPTURE(name_of(isa));
    // Sigmoid's polynomial.
    const auto sigmoid = [](float v) { return m::sigmoid_vectorisable(v); };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, sigmoid), map_on(isa, x, sigmoid)));
    // A multiply-add: 1/3 and 0.1 are inexact, so a * x + b rounds differently fused, and the check
    // fails if the copy is ever built with FMA.
    const auto multiply_add = [](float v) { return v * 0.333333343f + 0.1f; };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, multiply_add), map_on(isa, x, multiply_add)));
    // A division.
    const auto divide = [](float v) { return 1.0f / (1.0f + v); };
    CHECK(same_bits(map_on(m::vector_isa::baseline, x, divide), map_on(isa, x, divide)));
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
