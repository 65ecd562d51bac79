#include "ipu/ops/kernels/indexing.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tensor_kernel_harness.hpp"

namespace test_indexing {

using namespace tk;

TEST_CASE("indexing: Gather along an inner axis with 2-D and negative indices") {
  auto d = iota_f32({2, 3, 4});
  auto y = run1("Gather", {d, i64({2, 2}, {0, -1, 1, 1})}, f32_info({2, 2, 2, 4}), {attr("axis", 1)});
  CHECK(values<float>(y) == std::vector<float>{0,  1,  2,  3,  8,  9,  10, 11, 4,  5,  6,  7,  4,  5,  6,  7,
                                               12, 13, 14, 15, 20, 21, 22, 23, 16, 17, 18, 19, 16, 17, 18, 19});
  // A scalar index removes the axis; INT32 indices and any element type work.
  auto s = run1("Gather", {i64({3, 2}, {1, 2, 3, 4, 5, 6}), i32({}, {2})}, info(data_type::S64, {2}));
  CHECK(values<std::int64_t>(s) == std::vector<std::int64_t>{5, 6});
  CHECK_THROWS_WITH_AS(run1("Gather", {d, i64({1}, {3})}, f32_info({2, 1, 4}), {attr("axis", 1)}),
                       doctest::Contains("out of range"), ipu::error);
}

TEST_CASE("indexing: GatherElements on both axes") {
  auto y = run1("GatherElements", {f32({2, 2}, {1, 2, 3, 4}), i64({2, 2}, {0, 0, 1, 0})}, f32_info({2, 2}),
                {attr("axis", 1)});
  CHECK(values<float>(y) == std::vector<float>{1, 1, 4, 3});
  auto z = run1("GatherElements", {iota_f32({3, 3}), i64({2, 3}, {1, 2, 0, 2, 0, -3})}, f32_info({2, 3}));
  CHECK(values<float>(z) == std::vector<float>{3, 7, 2, 6, 1, 2});
}

TEST_CASE("indexing: GatherND with whole tuples, partial tuples and batch_dims") {
  auto d = i32({2, 2}, {0, 1, 2, 3});
  CHECK(values<std::int32_t>(run1("GatherND", {d, i64({2, 2}, {0, 0, 1, 1})}, info(data_type::S32, {2}))) ==
        std::vector<std::int32_t>{0, 3});
  CHECK(values<std::int32_t>(run1("GatherND", {d, i64({2, 1}, {1, 0})}, info(data_type::S32, {2, 2}))) ==
        std::vector<std::int32_t>{2, 3, 0, 1});
  auto d3 = iota_f32({2, 2, 2});
  CHECK(values<float>(run1("GatherND", {d3, i64({2, 1}, {1, 0})}, f32_info({2, 2}), {attr("batch_dims", 1)})) ==
        std::vector<float>{2, 3, 4, 5});
  CHECK(values<float>(run1("GatherND", {d3, i64({2, 1, 2}, {0, 1, 1, 0})}, f32_info({2, 1}), {attr("batch_dims", 1)})) ==
        std::vector<float>{1, 6});
}

TEST_CASE("indexing: ScatterElements with every reduction") {
  auto data = f32({3, 3}, std::vector<float>(9, 0.0f));
  auto y = run1("ScatterElements", {data, i64({2, 3}, {1, 0, 2, 0, 2, 1}), f32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f})},
                f32_info({3, 3}));
  CHECK(values<float>(y) == std::vector<float>{2.0f, 1.1f, 0, 1.0f, 0, 2.2f, 0, 2.1f, 1.2f});
  auto row = f32({1, 5}, {1, 2, 3, 4, 5});
  auto idx = i64({1, 2}, {1, -4});  // both hit column 1
  auto upd = f32({1, 2}, {1.5f, 2.5f});
  auto red = [&](const char* r) {
    return values<float>(run1("ScatterElements", {row, idx, upd}, f32_info({1, 5}), {attr("axis", 1), attr("reduction", r)}));
  };
  CHECK(red("add") == std::vector<float>{1, 6, 3, 4, 5});
  CHECK(red("mul") == std::vector<float>{1, 7.5f, 3, 4, 5});
  CHECK(red("max") == std::vector<float>{1, 2.5f, 3, 4, 5});
  CHECK(red("min") == std::vector<float>{1, 1.5f, 3, 4, 5});
  CHECK_THROWS_AS(red("avg"), ipu::error);
}

TEST_CASE("indexing: ScatterElements on flat data (MaxPool's gradient): reductions, negative and out-of-range indices") {
  auto data = f32({5}, {1, 2, 3, 4, 5});
  auto idx = i64({4}, {1, -4, 4, -1});  // 1 twice, 4 twice
  auto upd = f32({4}, {1.5f, 2.5f, 10, 20});
  auto red = [&](const char* r) {
    return values<float>(run1("ScatterElements", {data, idx, upd}, f32_info({5}), {attr("reduction", r)}));
  };
  CHECK(red("none") == std::vector<float>{1, 2.5f, 3, 4, 20});  // the last update wins
  CHECK(red("add") == std::vector<float>{1, 6, 3, 4, 35});
  CHECK(red("mul") == std::vector<float>{1, 7.5f, 3, 4, 1000});
  CHECK(red("max") == std::vector<float>{1, 2.5f, 3, 4, 20});
  CHECK(red("min") == std::vector<float>{1, 1.5f, 3, 4, 5});
  // INT32 indices take the widening path; same answer.
  CHECK(values<float>(run1("ScatterElements", {data, i32({4}, {1, -4, 4, -1}), upd}, f32_info({5}),
                           {attr("reduction", "add")})) == std::vector<float>{1, 6, 3, 4, 35});
  // -n is the first element; n and -n - 1 (and the int64 extremes) are errors naming the index.
  CHECK(values<float>(run1("ScatterElements", {data, i64({1}, {-5}), f32({1}, {9})}, f32_info({5}))) ==
        std::vector<float>{9, 2, 3, 4, 5});
  for (const std::int64_t bad : {std::int64_t{5}, std::int64_t{-6}, std::numeric_limits<std::int64_t>::max(),
                                 std::numeric_limits<std::int64_t>::min()})
    CHECK_THROWS_WITH_AS(run1("ScatterElements", {data, i64({2}, {0, bad}), f32({2}, {1, 1})}, f32_info({5})),
                         doctest::Contains(("index " + std::to_string(bad) + " is out of range").c_str()), ipu::error);
}

TEST_CASE("indexing: ScatterND replaces or reduces slices") {
  auto data = i64({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto y = run1("ScatterND", {data, i64({4, 1}, {4, 3, 1, 7}), i64({4}, {9, 10, 11, 12})}, info(data_type::S64, {8}));
  CHECK(values<std::int64_t>(y) == std::vector<std::int64_t>{1, 11, 3, 10, 9, 6, 7, 12});
  auto m = iota_f32({2, 2});
  auto s = run1("ScatterND", {m, i64({2, 1}, {1, 1}), f32({2, 2}, {1, 1, 10, 10})}, f32_info({2, 2}),
                {attr("reduction", "add")});
  CHECK(values<float>(s) == std::vector<float>{0, 1, 13, 14});
  CHECK_THROWS_AS(run1("ScatterND", {m, i64({1, 1}, {0}), f32({3}, {1, 1, 1})}, f32_info({2, 2})), ipu::error);
}

TEST_CASE("indexing: Compress with and without an axis, checked against the IR's shape") {
  auto x = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  CHECK(values<float>(run1("Compress", {x, boolean({3}, {0, 1, 1})}, f32_info({2, 2}), {attr("axis", 0)})) ==
        std::vector<float>{3, 4, 5, 6});
  CHECK(values<float>(run1("Compress", {x, boolean({5}, {0, 1, 0, 0, 1})}, f32_info({2}))) == std::vector<float>{2, 5});
  CHECK(values<float>(run1("Compress", {x, boolean({2}, {0, 1})}, f32_info({3, 1}), {attr("axis", -1)})) ==
        std::vector<float>{2, 4, 6});
  CHECK_THROWS_AS(run1("Compress", {x, boolean({3}, {1, 1, 1})}, f32_info({2, 2}), {attr("axis", 0)}), ipu::error);
}

TEST_CASE("indexing: Unique without an axis, sorted and in order of first occurrence") {
  auto x = f32({6}, {2, 1, 1, 3, 4, 3});
  const std::vector<tensor_info> outs{f32_info({4}), info(data_type::S64, {4}), info(data_type::S64, {6}),
                                      info(data_type::S64, {4})};
  auto s = run("Unique", {x}, outs);
  CHECK(values<float>(s[0]) == std::vector<float>{1, 2, 3, 4});
  CHECK(values<std::int64_t>(s[1]) == std::vector<std::int64_t>{1, 0, 3, 4});
  CHECK(values<std::int64_t>(s[2]) == std::vector<std::int64_t>{1, 0, 0, 2, 3, 2});
  CHECK(values<std::int64_t>(s[3]) == std::vector<std::int64_t>{2, 1, 2, 1});
  auto u = run("Unique", {x}, outs, {attr("sorted", 0)});
  CHECK(values<float>(u[0]) == std::vector<float>{2, 1, 3, 4});
  CHECK(values<std::int64_t>(u[1]) == std::vector<std::int64_t>{0, 1, 3, 4});
  CHECK(values<std::int64_t>(u[2]) == std::vector<std::int64_t>{0, 1, 1, 2, 3, 2});
  CHECK(values<std::int64_t>(u[3]) == std::vector<std::int64_t>{1, 2, 2, 1});
  // A matrix is flattened; Y alone may be asked for; NaNs are one value, after every number.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto n = run1("Unique", {f32({2, 2}, {nan, 1, nan, -1})}, f32_info({3}));
  CHECK(values<float>(n)[0] == -1);
  CHECK(values<float>(n)[1] == 1);
  CHECK(std::isnan(values<float>(n)[2]));
  CHECK_THROWS_WITH_AS(run1("Unique", {x}, f32_info({5})), doctest::Contains("re-run shape inference"), ipu::error);
}

TEST_CASE("indexing: Unique along an axis compares whole slices") {
  auto x = f32({3, 3}, {1, 0, 0, 1, 0, 0, 2, 3, 4});
  auto r = run("Unique", {x}, {f32_info({2, 3}), info(data_type::S64, {2}), info(data_type::S64, {3}), info(data_type::S64, {2})},
               {attr("axis", 0)});
  CHECK(values<float>(r[0]) == std::vector<float>{1, 0, 0, 2, 3, 4});
  CHECK(values<std::int64_t>(r[1]) == std::vector<std::int64_t>{0, 2});
  CHECK(values<std::int64_t>(r[2]) == std::vector<std::int64_t>{0, 0, 1});
  CHECK(values<std::int64_t>(r[3]) == std::vector<std::int64_t>{2, 1});
  // Columns (1, 2), (0, 3), (1, 2): sorted, (0, 3) comes first; unsorted keeps (1, 2) first.
  auto c = i32({2, 3}, {1, 0, 1, 2, 3, 2});
  const std::vector<tensor_info> outs{info(data_type::S32, {2, 2}), info(data_type::S64, {2}), info(data_type::S64, {3}),
                                      info(data_type::S64, {2})};
  auto sorted = run("Unique", {c}, outs, {attr("axis", -1)});
  CHECK(values<std::int32_t>(sorted[0]) == std::vector<std::int32_t>{0, 1, 3, 2});
  CHECK(values<std::int64_t>(sorted[1]) == std::vector<std::int64_t>{1, 0});
  CHECK(values<std::int64_t>(sorted[2]) == std::vector<std::int64_t>{1, 0, 1});
  CHECK(values<std::int64_t>(sorted[3]) == std::vector<std::int64_t>{1, 2});
  auto kept = run("Unique", {c}, outs, {attr("axis", 1), attr("sorted", 0)});
  CHECK(values<std::int32_t>(kept[0]) == std::vector<std::int32_t>{1, 0, 2, 3});
  CHECK(values<std::int64_t>(kept[2]) == std::vector<std::int64_t>{0, 1, 0});
  CHECK_THROWS_AS(run("Unique", {c}, outs, {attr("axis", 2)}), ipu::error);
  CHECK_THROWS_WITH_AS(run("Unique", {c}, outs, {attr("sort", 0)}), doctest::Contains("attribute 'sort'"), ipu::error);
}

TEST_CASE("indexing: NonZero lists the indices of non-zero elements, axis by axis") {
  CHECK(values<std::int64_t>(run1("NonZero", {boolean({2, 2}, {1, 0, 1, 1})}, info(data_type::S64, {2, 3}))) ==
        std::vector<std::int64_t>{0, 1, 1, 0, 0, 1});
  // -0 is zero and NaN is not.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(values<std::int64_t>(run1("NonZero", {f32({4}, {0, -0.0f, nan, 2})}, info(data_type::S64, {1, 2}))) ==
        std::vector<std::int64_t>{2, 3});
  CHECK(run1("NonZero", {i32({}, {5})}, info(data_type::S64, {0, 1})).info().num_elements() == 0);
  CHECK_THROWS_AS(run1("NonZero", {i32({3}, {0, 1, 2})}, info(data_type::S64, {1, 3})), ipu::error);
  CHECK_THROWS_WITH_AS(run1("NonZero", {i32({3}, {0, 1, 2})}, info(data_type::S64, {1, 2}), {attr("axis", 0)}),
                       doctest::Contains("remove it"), ipu::error);
}

}  // namespace test_indexing
