// few_rows_gemm (a recurrent layer's step product) against the plain loop it must equal bit for
// bit: each element its start value plus the products summed over k in order, a multiply and an
// add each; through both block widths and every vector copy the host runs, on sizes that leave
// partial blocks of rows and columns. And a recurrent op keeps its transposed R for the plan.
// few_rows_gemm_bt (a fully connected layer's product, B stored [n x k]) against the order it
// promises, in every copy and blocking, against a product in double, and through the Gemm op.
#include "ipu/ops/kernels/few_rows_gemm.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ipu/ops/kernels/gemm.hpp"
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

namespace {

/// A row of A dotted with a row of B in few_rows_gemm_bt's order: sixteen lanes by k mod 16 (the
/// last k % 16 products in the first lanes), each a multiply then an add, then the lanes as a tree.
float dot_in_lanes(const float* a, const float* b, std::size_t k) {
  float lane[16] = {};
  const std::size_t whole = k - k % 16;
  for (std::size_t p = 0; p < k; ++p) {
    const float product = a[p] * b[p];
    lane[p < whole ? p % 16 : p - whole] += product;
  }
  for (std::size_t w = 8; w > 0; w /= 2)
    for (std::size_t l = 0; l < w; ++l) lane[l] += lane[l + w];
  return lane[0];
}

struct bt_problem {
  std::size_t rows, inner, cols, lda, ldb, ldc;
  std::vector<float> a, b, c;
};

bt_problem make_bt(std::size_t rows, std::size_t inner, std::size_t cols) {
  bt_problem p{rows, inner, cols, inner + 3, inner + 7, cols + 2, {}, {}, {}};
  p.a = mk::random_floats(rows * p.lda, 7);
  p.b = mk::random_floats(cols * p.ldb, 8);
  p.c = mk::random_floats(rows * p.ldc, 9);
  return p;
}

std::vector<float> bt_reference(const bt_problem& p, float alpha, float beta) {
  auto c = p.c;
  for (std::size_t i = 0; i < p.rows; ++i)
    for (std::size_t j = 0; j < p.cols; ++j) {
      const float dot = alpha * dot_in_lanes(&p.a[i * p.lda], &p.b[j * p.ldb], p.inner);
      float& out = c[i * p.ldc + j];
      out = beta == 0.0f ? dot : dot + beta * out;
    }
  return c;
}

template <std::size_t Rows, std::size_t Cols>
std::vector<float> bt_blocks_on(m::vector_isa isa, const bt_problem& p, float alpha, float beta) {
  auto c = p.c;
  m::run_on(isa, [&] {
    m::few_rows_gemm_bt_blocks<Rows, Cols>(p.a.data(), p.rows, p.lda, p.b.data(), p.ldb, p.cols, p.inner, alpha, beta,
                                           c.data(), p.ldc);
  });
  return c;
}

}  // namespace

TEST_CASE("few_rows_gemm_bt: the bits of its stated order, in every copy and blocking, partial blocks included") {
  std::vector<m::vector_isa> isas{m::vector_isa::baseline};
  if (m::host_vector_isa() != m::vector_isa::baseline) isas.push_back(m::vector_isa::avx2);
  if (m::host_vector_isa() == m::vector_isa::avx512) isas.push_back(m::vector_isa::avx512);
  for (const auto& [rows, inner, cols] : {std::tuple{std::size_t{4}, std::size_t{256}, std::size_t{8}},
                                         std::tuple{std::size_t{5}, std::size_t{37}, std::size_t{11}},
                                         std::tuple{std::size_t{3}, std::size_t{15}, std::size_t{6}},
                                         std::tuple{std::size_t{16}, std::size_t{100}, std::size_t{9}}}) {
    CAPTURE(rows);
    CAPTURE(inner);
    CAPTURE(cols);
    auto p = make_bt(rows, inner, cols);
    for (const auto& [alpha, beta] : {std::pair{1.0f, 1.0f}, std::pair{0.5f, 2.0f}, std::pair{1.0f, 0.0f}}) {
      CAPTURE(beta);
      if (beta == 0.0f) p.c.assign(p.c.size(), std::numeric_limits<float>::quiet_NaN());  // not read
      const auto want = bt_reference(p, alpha, beta);
      for (const auto isa : isas) {
        CAPTURE(static_cast<int>(isa));
        CHECK(same_bits(bt_blocks_on<4, 4>(isa, p, alpha, beta), want));
        CHECK(same_bits(bt_blocks_on<4, 1>(isa, p, alpha, beta), want));
        CHECK(same_bits(bt_blocks_on<2, 3>(isa, p, alpha, beta), want));
      }
      auto c = p.c;
      if (m::few_rows_gemm_bt(p.a.data(), p.rows, p.lda, p.b.data(), p.ldb, p.cols, p.inner, alpha, beta, c.data(), p.ldc))
        CHECK(same_bits(c, want));
      else
        CHECK(same_bits(c, p.c));  // no AVX2: untouched, the caller keeps its GEMM library
    }
  }
}

TEST_CASE("few_rows_gemm_bt is a matrix product: within float rounding of one summed in double") {
  const auto p = make_bt(4, 1000, 24);
  const auto got = bt_blocks_on<4, 4>(m::vector_isa::baseline, p, 1.0f, 0.0f);
  for (std::size_t i = 0; i < p.rows; ++i)
    for (std::size_t j = 0; j < p.cols; ++j) {
      double dot = 0, magnitude = 0;
      for (std::size_t q = 0; q < p.inner; ++q) {
        dot += static_cast<double>(p.a[i * p.lda + q]) * p.b[j * p.ldb + q];
        magnitude += std::abs(static_cast<double>(p.a[i * p.lda + q]) * p.b[j * p.ldb + q]);
      }
      CHECK(std::abs(got[i * p.ldc + j] - dot) <= 1e-6 * magnitude);
    }
}

TEST_CASE("Gemm with transB on a B too large for the caches takes the few-row product, whatever the thread split") {
  // 4 rows by B [1024 x 2304], 9.4 MB: above the 8 MB from which the streamed product pays.
  const std::int64_t rows = 4, inner = 2304, cols = 1024;
  const bool vector_host = m::host_vector_isa() != m::vector_isa::baseline;  // else no fast copy
  CHECK(m::few_rows_bt_pays(false, true, rows, cols, inner) == vector_host);
  CHECK_FALSE(m::few_rows_bt_pays(false, false, rows, cols, inner));  // B stored [k x n]
  CHECK_FALSE(m::few_rows_bt_pays(false, true, 1, cols, inner));      // one row: oneDNN's sgemv
  CHECK_FALSE(m::few_rows_bt_pays(false, true, 17, cols, inner));     // more rows: a GEMM library
  CHECK_FALSE(m::few_rows_bt_pays(false, true, rows, 512, inner));    // B in the caches
  const auto a = mk::random_floats(static_cast<std::size_t>(rows * inner), 10);
  const auto b = mk::random_floats(static_cast<std::size_t>(cols * inner), 11);
  const auto bias = mk::random_floats(static_cast<std::size_t>(cols), 12);
  const auto y = mk::floats(mk::run1("Gemm", {mk::f32({rows, inner}, a), mk::f32({cols, inner}, b), mk::f32({cols}, bias)},
                                     {mk::data_type::F32, {rows, cols}}, {{"transB", std::int64_t{1}}}));
  std::vector<float> want(static_cast<std::size_t>(rows * cols));
  for (std::int64_t i = 0; i < rows; ++i)
    for (std::int64_t j = 0; j < cols; ++j) {
      const auto dot = dot_in_lanes(&a[static_cast<std::size_t>(i * inner)], &b[static_cast<std::size_t>(j * inner)],
                                    static_cast<std::size_t>(inner));
      want[static_cast<std::size_t>(i * cols + j)] = dot + bias[static_cast<std::size_t>(j)];
    }
  if (vector_host)
    CHECK(same_bits(y, want));  // the harness runs the columns in three chunks, out of order
  else
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(y[i] == doctest::Approx(want[i]).epsilon(1e-5));
}

}  // namespace test_few_rows_gemm
