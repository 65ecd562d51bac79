// few_rows_gemm (a recurrent layer's step product) against the plain loop it must equal bit for
// bit: each element its start value plus the products summed over k in order, a multiply and an
// add each; through both block widths and every vector copy the host runs, on sizes that leave
// partial blocks of rows and columns. And a recurrent op keeps its transposed R for the plan.
#include "ipu/ops/kernels/few_rows_gemm.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/ops/kernels/recurrent.hpp"
#include "math_kernel_harness.hpp"

namespace test_few_rows_gemm {

namespace {

namespace m = ipu::detail::math_ops;

struct problem {
  std::size_t rows, inner, cols, ldb, ldc;
  std::vector<float> a, b, c;
};

problem make(std::size_t rows, std::size_t inner, std::size_t cols) {
  problem p{rows, inner, cols, cols + 3 + m::few_rows_pad, cols + 5, {}, {}, {}};
  p.a = mk::random_floats(rows * inner, 1);
  p.b = mk::random_floats(inner * p.ldb, 2);
  p.c = mk::random_floats(rows * p.ldc, 3);
  return p;
}

/// The loop few_rows_gemm stands for, in the order it promises.
std::vector<float> reference(const problem& p) {
  auto c = p.c;
  for (std::size_t i = 0; i < p.rows; ++i)
    for (std::size_t j = 0; j < p.cols; ++j) {
      float acc = c[i * p.ldc + j];
      for (std::size_t k = 0; k < p.inner; ++k) {
        const float product = p.a[i * p.inner + k] * p.b[k * p.ldb + j];
        acc += product;
      }
      c[i * p.ldc + j] = acc;
    }
  return c;
}

template <std::size_t Cols>
std::vector<float> blocks_on(m::vector_isa isa, const problem& p) {
  auto c = p.c;
  m::run_on(isa, [&] { m::few_rows_gemm_blocks<Cols>(p.a.data(), p.rows, p.inner, p.b.data(), p.ldb, p.cols, c.data(), p.ldc); });
  return c;
}

bool same_bits(const std::vector<float>& x, const std::vector<float>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("few_rows_gemm: the bits of the plain loop, in every copy and block width, partial blocks included") {
  std::vector<m::vector_isa> isas{m::vector_isa::baseline};
  if (m::host_vector_isa() != m::vector_isa::baseline) isas.push_back(m::vector_isa::avx2);
  if (m::host_vector_isa() == m::vector_isa::avx512) isas.push_back(m::vector_isa::avx512);
  for (const auto& [rows, inner, cols] : {std::tuple{std::size_t{2}, std::size_t{128}, std::size_t{512}},
                                         std::tuple{std::size_t{3}, std::size_t{7}, std::size_t{5}},
                                         std::tuple{std::size_t{5}, std::size_t{33}, std::size_t{97}},
                                         std::tuple{std::size_t{16}, std::size_t{64}, std::size_t{130}}}) {
    CAPTURE(rows);
    CAPTURE(cols);
    const auto p = make(rows, inner, cols);
    const auto want = reference(p);
    for (const auto isa : isas) {
      CAPTURE(static_cast<int>(isa));
      CHECK(same_bits(blocks_on<32>(isa, p), want));
      CHECK(same_bits(blocks_on<64>(isa, p), want));
    }
    auto c = p.c;
    if (m::few_rows_gemm(p.a.data(), p.rows, p.inner, p.b.data(), p.ldb, p.cols, c.data(), p.ldc))
      CHECK(same_bits(c, want));
    else
      CHECK(c == p.c);  // no AVX2: untouched, the caller runs OpenBLAS
  }
}

TEST_CASE("a recurrent op with a constant R keeps R transposed in its cache, and gives the same bits run after run") {
  const std::int64_t S = 6, B = 4, I = 5, Hd = 7;
  const auto x = mk::f32({S, B, I}, mk::random_floats(S * B * I, 4));
  const auto w = mk::f32({2, 4 * Hd, I}, mk::random_floats(2 * 4 * Hd * I, 5));
  const auto r = mk::f32({2, 4 * Hd, Hd}, mk::random_floats(2 * 4 * Hd * Hd, 6));
  const std::vector<mk::tensor_info> out{mk::tensor_info{mk::data_type::F32, {S, 2, B, Hd}}};
  const std::vector<mk::attribute> attrs{{"hidden_size", Hd}, {"direction", std::string("bidirectional")}};
  ipu::op_registry reg;
  ipu::detail::tensor_ops::register_recurrent(reg);
  const auto* entry = reg.find("", "LSTM");
  REQUIRE(entry);
  ipu::op_node op;
  op.type = "LSTM";
  op.attributes = attrs;
  const std::vector<ipu::const_tensor_view> in{x.view(), w.view(), r.view()};
  const auto run = [&](ipu::op_cache* cache) {
    mk::host_tensor y(out[0]);
    std::vector<ipu::tensor_view> views{y.view()};
    ipu::kernel_context ctx{op, in, views, mk::chunked_for, nullptr};
    ctx.cache = cache;
    ctx.constant_inputs = 0b110;  // W and R
    entry->kernel(ctx);
    return y;
  };
  const auto plain = run(nullptr);
  ipu::op_cache cache;
  for (int i = 0; i < 3; ++i) {
    const auto y = run(&cache);
    CHECK(std::memcmp(y.data(), plain.data(), plain.info().num_bytes()) == 0);
  }
  // The cache holds R^T only where the step products read it (2 to 16 rows on an AVX2 host).
  CHECK(static_cast<bool>(cache.prepared) == (m::host_vector_isa() != m::vector_isa::baseline));
}

}  // namespace test_few_rows_gemm
