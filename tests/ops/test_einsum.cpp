#include "ipu/ops/kernels/einsum.hpp"

#include <doctest/doctest.h>

#include "tensor_kernel_harness.hpp"

namespace test_einsum {

using namespace tk;

namespace {
ipu::host_tensor einsum(const char* eq, std::vector<input> in, shape out, data_type t = data_type::F32) {
  return run1("Einsum", std::move(in), info(t, std::move(out)), {attr("equation", eq)});
}
}  // namespace

TEST_CASE("einsum: matrix and batched matrix products") {
  auto a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto b = f32({3, 2}, {1, 0, 0, 1, 2, -1});
  CHECK(values<float>(einsum("ij,jk->ik", {a, b}, {2, 2})) == std::vector<float>{7, -1, 16, -1});
  // Spaces are allowed.
  CHECK(values<float>(einsum("ij, jk -> ik", {a, b}, {2, 2})) == std::vector<float>{7, -1, 16, -1});
  auto x = iota_f32({2, 2, 3});
  auto y = iota_f32({2, 3, 2});
  CHECK(values<float>(einsum("bij,bjk->bik", {x, y}, {2, 2, 2})) ==
        std::vector<float>{10, 13, 28, 40, 172, 193, 244, 274});
}

TEST_CASE("einsum: diagonals, traces, full sums and implicit outputs") {
  auto m = iota_f32({3, 3});
  CHECK(values<float>(einsum("ii->i", {m}, {3})) == std::vector<float>{0, 4, 8});
  CHECK(values<float>(einsum("ii", {m}, {})) == std::vector<float>{12});  // implicit: i is repeated, so summed
  auto a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values<float>(einsum("ij->", {a}, {})) == std::vector<float>{21});
  CHECK(values<float>(einsum("ba", {a}, {3, 2})) == std::vector<float>{1, 4, 2, 5, 3, 6});  // implicit: sorted -> ab
  CHECK(values<float>(einsum("i,i", {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})}, {})) == std::vector<float>{32});
}

TEST_CASE("einsum: ellipsis, with broadcasting between operands") {
  auto x = iota_f32({2, 2, 3});
  CHECK(values<float>(einsum("...ij->...ji", {x}, {2, 3, 2})) ==
        std::vector<float>{0, 3, 1, 4, 2, 5, 6, 9, 7, 10, 8, 11});
  CHECK(values<float>(einsum("...i,...i->...", {iota_f32({2, 3}), f32({3}, {1, 2, 3})}, {2})) ==
        std::vector<float>{8, 26});
  // Integers accumulate exactly.
  auto r = einsum("ij,j->i", {i64({2, 2}, {1, 2, 3, 4}), i64({2}, {10, 100})}, {2}, data_type::S64);
  CHECK(values<std::int64_t>(r) == std::vector<std::int64_t>{210, 430});
}

TEST_CASE("einsum: malformed equations and mismatched shapes are errors") {
  auto a = iota_f32({2, 3});
  CHECK_THROWS_AS(einsum("ij,jk->ik", {a}, {2, 2}), ipu::error);           // one operand missing
  CHECK_THROWS_AS(einsum("ij,jk->ik", {a, a}, {2, 3}), ipu::error);        // j is 3 and 2
  CHECK_THROWS_AS(einsum("ijk->i", {a}, {2}), ipu::error);                 // too many labels
  CHECK_THROWS_AS(einsum("ij->iz", {a}, {2, 1}), ipu::error);              // z is not an input label
  CHECK_THROWS_AS(einsum("i1->i", {iota_f32({2, 2})}, {2}), ipu::error);   // not a letter
}

}  // namespace test_einsum
