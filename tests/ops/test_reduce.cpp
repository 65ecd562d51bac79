#include "ipu/ops/kernels/reduce.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tensor_kernel_harness.hpp"

namespace test_reduce {

using namespace tk;

namespace {
const auto axes_attr = [](std::vector<std::int64_t> a) { return attr("axes", std::move(a)); };
}

TEST_CASE("reduce: ReduceSum takes axes as an input - empty axes reduce all or, with noop, nothing") {
  auto x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  CHECK(values<float>(run1("ReduceSum", {x, i64({1}, {1})}, f32_info({2, 1}))) == std::vector<float>{6, 15});
  CHECK(values<float>(run1("ReduceSum", {x, i64({1}, {-2})}, f32_info({3}), {attr("keepdims", 0)})) ==
        std::vector<float>{5, 7, 9});
  CHECK(values<float>(run1("ReduceSum", {x}, f32_info({1, 1}))) == std::vector<float>{21});
  CHECK(values<float>(run1("ReduceSum", {x, i64({0}, {})}, f32_info({2, 3}), {attr("noop_with_empty_axes", 1)})) ==
        std::vector<float>{1, 2, 3, 4, 5, 6});
  // keepdims=1 vs the IR's shape are checked.
  CHECK_THROWS_AS(run1("ReduceSum", {x, i64({1}, {1})}, f32_info({2})), ipu::error);
}

TEST_CASE("reduce: the other reductions, with axes as attributes") {
  auto x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  auto r = [&](const char* op, std::vector<std::int64_t> axes, shape out, int keep = 1) {
    return values<float>(run1(op, {x}, f32_info(std::move(out)), {axes_attr(std::move(axes)), attr("keepdims", keep)}));
  };
  CHECK(r("ReduceMean", {0}, {3}, 0) == std::vector<float>{2.5f, 3.5f, 4.5f});
  CHECK(r("ReduceMax", {1}, {2, 1}) == std::vector<float>{3, 6});
  CHECK(r("ReduceMin", {0, 1}, {}, 0) == std::vector<float>{1});
  CHECK(r("ReduceProd", {}, {1, 1}) == std::vector<float>{720});
  CHECK(r("ReduceSumSquare", {1}, {2, 1}) == std::vector<float>{14, 77});
  check_close(r("ReduceLogSum", {}, {1, 1}), {std::log(21.0f)});
  auto s = f32({3}, {-3, 4, 0});
  CHECK(values<float>(run1("ReduceL1", {s}, f32_info({1}))) == std::vector<float>{7});
  CHECK(values<float>(run1("ReduceL2", {s}, f32_info({1}))) == std::vector<float>{5});
  // LogSumExp does not overflow for large inputs.
  auto big = f32({2}, {1000, 1000});
  check_close(values<float>(run1("ReduceLogSumExp", {big}, f32_info({1}))), {1000.0f + std::log(2.0f)});
  // opset-18 style: axes as an input works for every reduction.
  CHECK(values<float>(run1("ReduceMax", {x, i64({1}, {0})}, f32_info({1, 3}))) == std::vector<float>{4, 5, 6});
}

TEST_CASE("reduce: axes that are not adjacent, against a direct loop") {
  auto x = iota_f32({2, 3, 4, 5});
  auto y = run1("ReduceSum", {x, i64({2}, {1, 3})}, f32_info({2, 4}), {attr("keepdims", 0)});
  std::vector<float> want;
  for (int a = 0; a < 2; ++a)
    for (int c = 0; c < 4; ++c) {
      float s = 0;
      for (int b = 0; b < 3; ++b)
        for (int d = 0; d < 5; ++d) s += static_cast<float>(((a * 3 + b) * 4 + c) * 5 + d);
      want.push_back(s);
    }
  CHECK(values<float>(y) == want);
}

TEST_CASE("reduce: integers, empty reductions and F16 with F32 accumulation") {
  CHECK(values<std::int32_t>(run1("ReduceMean", {i32({2, 2}, {1, 2, -1, -2})}, info(data_type::S32, {2, 1}),
                                  {axes_attr({1})})) == std::vector<std::int32_t>{1, -1});  // truncates like numpy
  CHECK(values<std::int64_t>(run1("ReduceMax", {i64({3}, {-5, -9, -7})}, info(data_type::S64, {1}))) ==
        std::vector<std::int64_t>{-5});
  auto empty = f32({2, 0}, {});
  auto e = [&](const char* op) {
    return values<float>(run1(op, {empty}, f32_info({2, 1}), {axes_attr({1})}));
  };
  CHECK(e("ReduceSum") == std::vector<float>{0, 0});
  CHECK(e("ReduceProd") == std::vector<float>{1, 1});
  CHECK(e("ReduceMax")[0] == -std::numeric_limits<float>::infinity());
  CHECK(e("ReduceMin")[1] == std::numeric_limits<float>::infinity());
  CHECK(std::isnan(e("ReduceMean")[0]));
  // 3000 ones: an F16 accumulator would stop at 2048 (2048 + 1 rounds back to 2048).
  auto h = make<half>({3000}, std::vector<half>(3000, half(1.0f)));
  CHECK(static_cast<float>(values<half>(run1("ReduceSum", {h}, info(data_type::F16, {1})))[0]) == 3000.0f);
  // NaN propagates through max.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(std::isnan(values<float>(run1("ReduceMax", {f32({3}, {1, nan, 2})}, f32_info({1})))[0]));
}

TEST_CASE("reduce: ArgMax and ArgMin with keepdims and select_last_index") {
  auto x = f32({2, 3}, {1, 5, 5, 7, 0, 0});
  auto am = [&](const char* op, int axis, int keep, int last, shape out) {
    return values<std::int64_t>(run1(op, {x}, info(data_type::S64, std::move(out)),
                                     {attr("axis", axis), attr("keepdims", keep), attr("select_last_index", last)}));
  };
  CHECK(am("ArgMax", 1, 1, 0, {2, 1}) == std::vector<std::int64_t>{1, 0});
  CHECK(am("ArgMax", 1, 0, 1, {2}) == std::vector<std::int64_t>{2, 0});
  CHECK(am("ArgMin", -1, 0, 0, {2}) == std::vector<std::int64_t>{0, 1});
  CHECK(am("ArgMin", 1, 0, 1, {2}) == std::vector<std::int64_t>{0, 2});
  CHECK(am("ArgMax", 0, 1, 0, {1, 3}) == std::vector<std::int64_t>{1, 0, 0});
}

TEST_CASE("reduce: CumSum exclusive and reverse, along any axis") {
  auto x = f32({5}, {1, 2, 3, 4, 5});
  auto c = [&](int excl, int rev) {
    return values<float>(run1("CumSum", {x, i32({}, {0})}, f32_info({5}), {attr("exclusive", excl), attr("reverse", rev)}));
  };
  CHECK(c(0, 0) == std::vector<float>{1, 3, 6, 10, 15});
  CHECK(c(1, 0) == std::vector<float>{0, 1, 3, 6, 10});
  CHECK(c(0, 1) == std::vector<float>{15, 14, 12, 9, 5});
  CHECK(c(1, 1) == std::vector<float>{14, 12, 9, 5, 0});
  auto m = run1("CumSum", {i64({2, 3}, {1, 2, 3, 4, 5, 6}), i64({1}, {-2})}, info(data_type::S64, {2, 3}));
  CHECK(values<std::int64_t>(m) == std::vector<std::int64_t>{1, 2, 3, 5, 7, 9});
}

TEST_CASE("reduce: ReduceSum and ReduceMean over contiguous runs and over rows, against a double loop") {
  // [3, 5, 7, 33]: axes {1, 3} sum contiguous runs of 33 (not a multiple of 4) per output; axes
  // {0, 2} keep the trailing 33 contiguous and sum whole rows.
  const std::vector<std::int64_t> d{3, 5, 7, 33};
  std::vector<float> v(3 * 5 * 7 * 33);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7919) % 1000) / 997.0f - 0.5f;
  auto x = f32(shape(d), v);
  auto ref = [&](bool r0, bool r1, bool r2, bool r3, bool mean) {
    const std::int64_t o1 = r1 ? 1 : d[1], o2 = r2 ? 1 : d[2], o3 = r3 ? 1 : d[3], o0 = r0 ? 1 : d[0];
    std::vector<double> s(static_cast<std::size_t>(o0 * o1 * o2 * o3), 0.0);
    for (std::int64_t a = 0; a < d[0]; ++a)
      for (std::int64_t b = 0; b < d[1]; ++b)
        for (std::int64_t c = 0; c < d[2]; ++c)
          for (std::int64_t e = 0; e < d[3]; ++e)
            s[static_cast<std::size_t>(((( r0 ? 0 : a) * o1 + (r1 ? 0 : b)) * o2 + (r2 ? 0 : c)) * o3 + (r3 ? 0 : e))] +=
                v[static_cast<std::size_t>(((a * d[1] + b) * d[2] + c) * d[3] + e)];
    const double n = static_cast<double>(x.info().shape.num_elements()) / static_cast<double>(s.size());
    std::vector<float> r;
    for (double t : s) r.push_back(static_cast<float>(mean ? t / n : t));
    return r;
  };
  check_close(values<float>(run1("ReduceSum", {x, i64({2}, {1, 3})}, f32_info({3, 1, 7, 1}))),
              ref(false, true, false, true, false));
  check_close(values<float>(run1("ReduceSum", {x, i64({2}, {0, 2})}, f32_info({5, 33}), {attr("keepdims", 0)})),
              ref(true, false, true, false, false));
  check_close(values<float>(run1("ReduceMean", {x}, f32_info({1, 5, 1, 33}), {axes_attr({0, 2})})),
              ref(true, false, true, false, true));
  check_close(values<float>(run1("ReduceMean", {x}, f32_info({3, 5, 7, 1}), {axes_attr({3})})),
              ref(false, false, false, true, true));
  // Integers summed by rows stay exact.
  auto xi = i64({4, 20}, std::vector<std::int64_t>(80, 3));
  CHECK(values<std::int64_t>(run1("ReduceSum", {xi, i64({1}, {0})}, info(data_type::S64, {1, 20}))) ==
        std::vector<std::int64_t>(20, 12));
}

}  // namespace test_reduce
