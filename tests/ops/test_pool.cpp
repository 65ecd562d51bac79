// Pooling kernels against the ONNX specification's examples, hand-computed values and a direct
// loop over the window definition.
#include "ipu/ops/kernels/pool.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ipu/ops/infer.hpp"
#include "math_kernel_harness.hpp"

namespace test_pool {

using namespace mk;

namespace {
std::vector<float> iota_f(int n, float start = 1) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = start + static_cast<float>(i);
  return v;
}
}  // namespace

TEST_CASE("MaxPool: values and Indices in row- and column-major order") {
  auto x = f32({1, 1, 4, 4}, iota_f(16));
  auto out = run("MaxPool", {x}, {{data_type::F32, {1, 1, 2, 2}}, {data_type::S64, {1, 1, 2, 2}}},
                 {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}});
  check_close(floats(out[0]), {6, 8, 14, 16});
  CHECK(values<std::int64_t>(out[1]) == std::vector<std::int64_t>{5, 7, 13, 15});
  auto cm = run("MaxPool", {x}, {{data_type::F32, {1, 1, 2, 2}}, {data_type::S64, {1, 1, 2, 2}}},
                {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}, {"storage_order", std::int64_t{1}}});
  CHECK(values<std::int64_t>(cm[1]) == std::vector<std::int64_t>{5, 13, 7, 15});
  // The ONNX example: 5x5, kernel 2, strides 2, column-major.
  auto x5 = f32({1, 1, 5, 5}, iota_f(25));
  auto e = run("MaxPool", {x5}, {{data_type::F32, {1, 1, 2, 2}}, {data_type::S64, {1, 1, 2, 2}}},
               {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}, {"storage_order", std::int64_t{1}}});
  check_close(floats(e[0]), {7, 9, 17, 19});
  CHECK(values<std::int64_t>(e[1]) == std::vector<std::int64_t>{6, 16, 8, 18});
  // Indices count across batch and channel planes.
  auto x2 = f32({2, 1, 1, 2}, {1, 0, 0, 1});
  auto i2 = run("MaxPool", {x2}, {{data_type::F32, {2, 1, 1, 1}}, {data_type::S64, {2, 1, 1, 1}}}, {{"kernel_shape", ints{1, 2}}});
  CHECK(values<std::int64_t>(i2[1]) == std::vector<std::int64_t>{0, 3});
}

TEST_CASE("MaxPool: ceil_mode, dilations, padding and auto_pad") {
  auto x = f32({1, 1, 4, 4}, iota_f(16));
  check_close(floats(run1("MaxPool", {x}, {data_type::F32, {1, 1, 2, 2}},
                          {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"ceil_mode", std::int64_t{1}}})),
              {11, 12, 15, 16});
  check_close(floats(run1("MaxPool", {x}, {data_type::F32, {1, 1, 2, 2}}, {{"kernel_shape", ints{2, 2}}, {"dilations", ints{2, 2}}})),
              {11, 12, 15, 16});
  // Padding never wins, even against negative inputs.
  auto neg = f32({1, 1, 2, 2}, {-4, -3, -2, -1});
  check_close(floats(run1("MaxPool", {neg}, {data_type::F32, {1, 1, 3, 3}}, {{"kernel_shape", ints{2, 2}}, {"pads", ints{1, 1, 1, 1}}})),
              {-4, -3, -3, -2, -1, -1, -2, -1, -1});
  // SAME_UPPER: 5 -> 3 with stride 2, total padding 2 split (1, 1); SAME_LOWER the same here.
  auto x5 = f32({1, 1, 5, 5}, iota_f(25));
  check_close(floats(run1("MaxPool", {x5}, {data_type::F32, {1, 1, 3, 3}},
                          {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})),
              {7, 9, 10, 17, 19, 20, 22, 24, 25});
  // 2 outputs of 4 with kernel 2 and SAME_UPPER: padding goes at the end; SAME_LOWER at the start.
  auto x4 = f32({1, 1, 1, 4}, {4, 1, 3, 2});
  check_close(floats(run1("MaxPool", {x4}, {data_type::F32, {1, 1, 1, 4}}, {{"kernel_shape", ints{1, 2}}, {"auto_pad", std::string("SAME_UPPER")}})),
              {4, 3, 3, 2});
  check_close(floats(run1("MaxPool", {x4}, {data_type::F32, {1, 1, 1, 4}}, {{"kernel_shape", ints{1, 2}}, {"auto_pad", std::string("SAME_LOWER")}})),
              {4, 4, 3, 3});
  // int8 / uint8 inputs.
  auto xi = make<std::int8_t>({1, 1, 1, 4}, {-5, -7, 3, -1});
  CHECK(values<std::int8_t>(run1("MaxPool", {xi}, {data_type::S8, {1, 1, 1, 2}}, {{"kernel_shape", ints{1, 2}}, {"strides", ints{1, 2}}})) ==
        std::vector<std::int8_t>{-5, 3});
  CHECK_THROWS_AS(run1("MaxPool", {x}, {data_type::F32, {1, 1, 3, 3}}, {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}}), ipu::error);
  CHECK_THROWS_AS(run1("MaxPool", {x}, {data_type::F32, {1, 1, 2, 2}}), ipu::error);
}

TEST_CASE("AveragePool: count_include_pad and ceil_mode") {
  auto x = f32({1, 1, 3, 3}, iota_f(9));
  const std::vector<attribute> base{{"kernel_shape", ints{3, 3}}, {"pads", ints{1, 1, 1, 1}}};
  check_close(floats(run1("AveragePool", {x}, {data_type::F32, {1, 1, 3, 3}}, base)),
              {3, 3.5f, 4, 4.5f, 5, 5.5f, 6, 6.5f, 7});
  auto with_pad = base;
  with_pad.push_back({"count_include_pad", std::int64_t{1}});
  check_close(floats(run1("AveragePool", {x}, {data_type::F32, {1, 1, 3, 3}}, with_pad)),
              {12 / 9.0f, 21 / 9.0f, 16 / 9.0f, 27 / 9.0f, 5, 33 / 9.0f, 24 / 9.0f, 39 / 9.0f, 28 / 9.0f});
  auto x4 = f32({1, 1, 4, 4}, iota_f(16));
  check_close(floats(run1("AveragePool", {x4}, {data_type::F32, {1, 1, 2, 2}},
                          {{"kernel_shape", ints{3, 3}}, {"strides", ints{2, 2}}, {"ceil_mode", std::int64_t{1}}})),
              {6, 7.5f, 12, 13.5f});
  // 1-D with a stride.
  check_close(floats(run1("AveragePool", {f32({1, 2, 5}, iota_f(10))}, {data_type::F32, {1, 2, 2}},
                          {{"kernel_shape", ints{2}}, {"strides", ints{2}}})),
              {1.5f, 3.5f, 6.5f, 8.5f});
}

TEST_CASE("LpPool and the global pools") {
  auto x = f32({1, 1, 1, 4}, {3, -4, 6, 8});
  check_close(floats(run1("LpPool", {x}, {data_type::F32, {1, 1, 1, 2}}, {{"kernel_shape", ints{1, 2}}, {"strides", ints{1, 2}}})),
              {5, 10});
  check_close(floats(run1("LpPool", {x}, {data_type::F32, {1, 1, 1, 2}},
                          {{"kernel_shape", ints{1, 2}}, {"strides", ints{1, 2}}, {"p", std::int64_t{1}}})),
              {7, 14});
  auto g = f32({2, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -4, 0, 0, 0, 8, 5, 5, 5, 5});
  check_close(floats(run1("GlobalAveragePool", {g}, {data_type::F32, {2, 2, 1, 1}})), {2.5f, -2.5f, 2, 5});
  check_close(floats(run1("GlobalMaxPool", {g}, {data_type::F32, {2, 2, 1, 1}})), {4, -1, 8, 5});
  check_close(floats(run1("GlobalLpPool", {g}, {data_type::F32, {2, 2, 1, 1}})), {std::sqrt(30.0f), std::sqrt(30.0f), 8, 10});
  auto h = run1("GlobalAveragePool", {f16({1, 1, 3}, {1, 2, 4})}, {data_type::F16, {1, 1, 1}});
  CHECK(h.as<half>()[0].bits() == half(7.0f / 3.0f).bits());
}

namespace {
/// Max and average pooling straight from the definition over a 3-D window.
std::vector<float> pool_ref(bool max, const std::vector<float>& x, const ints& xs, const ints& k, const ints& s, const ints& d,
                            const ints& p, const ints& out, bool include_pad) {
  std::vector<float> y;
  const std::int64_t planes = xs[0] * xs[1];
  for (std::int64_t pl = 0; pl < planes; ++pl)
    for (std::int64_t o0 = 0; o0 < out[0]; ++o0)
      for (std::int64_t o1 = 0; o1 < out[1]; ++o1)
        for (std::int64_t o2 = 0; o2 < out[2]; ++o2) {
          double acc = max ? -1e300 : 0.0;
          std::int64_t count = 0, padded = 0;
          for (std::int64_t t0 = 0; t0 < k[0]; ++t0)
            for (std::int64_t t1 = 0; t1 < k[1]; ++t1)
              for (std::int64_t t2 = 0; t2 < k[2]; ++t2) {
                const std::array<std::int64_t, 3> i{o0 * s[0] + t0 * d[0] - p[0], o1 * s[1] + t1 * d[1] - p[1],
                                                    o2 * s[2] + t2 * d[2] - p[2]};
                bool inside = true, in_padded = true;
                for (std::size_t a = 0; a < 3; ++a) {
                  inside = inside && i[a] >= 0 && i[a] < xs[2 + a];
                  in_padded = in_padded && i[a] >= -p[a] && i[a] < xs[2 + a] + p[3 + a];
                }
                padded += in_padded ? 1 : 0;
                if (!inside) continue;
                const double v = x[static_cast<std::size_t>(((pl * xs[2] + i[0]) * xs[3] + i[1]) * xs[4] + i[2])];
                acc = max ? std::max(acc, v) : acc + v;
                ++count;
              }
          y.push_back(static_cast<float>(max ? acc : acc / static_cast<double>(include_pad ? padded : count)));
        }
  return y;
}
}  // namespace

TEST_CASE("3-D MaxPool and AveragePool against the definition") {
  const ints xs{2, 3, 5, 6, 7}, k{2, 3, 3}, s{1, 2, 2}, p{1, 1, 0, 0, 1, 1};
  auto xv = random_floats(2 * 3 * 5 * 6 * 7, 40);
  const ints out{(5 + 1 + 0 - 2) / 1 + 1, (6 + 1 + 1 - 3) / 2 + 1, (7 + 0 + 1 - 3) / 2 + 1};
  const std::vector<attribute> attrs{{"kernel_shape", k}, {"strides", s}, {"pads", p}};
  auto mx = run1("MaxPool", {f32(shape(xs), xv)}, {data_type::F32, {2, 3, out[0], out[1], out[2]}}, attrs);
  check_close(floats(mx), pool_ref(true, xv, xs, k, s, {1, 1, 1}, p, out, false));
  auto av = run1("AveragePool", {f32(shape(xs), xv)}, {data_type::F32, {2, 3, out[0], out[1], out[2]}}, attrs);
  check_close(floats(av), pool_ref(false, xv, xs, k, s, {1, 1, 1}, p, out, false));
  auto with_pad = attrs;
  with_pad.push_back({"count_include_pad", std::int64_t{1}});
  auto avp = run1("AveragePool", {f32(shape(xs), xv)}, {data_type::F32, {2, 3, out[0], out[1], out[2]}}, with_pad);
  check_close(floats(avp), pool_ref(false, xv, xs, k, s, {1, 1, 1}, p, out, true));
  // Dilated 3-D max pooling.
  const ints d{2, 1, 2}, outd{(5 + 1 - 3) / 1 + 1, (6 + 1 + 1 - 3) / 2 + 1, (7 + 1 - 5) / 2 + 1};
  auto md = run1("MaxPool", {f32(shape(xs), xv)}, {data_type::F32, {2, 3, outd[0], outd[1], outd[2]}},
                 {{"kernel_shape", k}, {"strides", s}, {"pads", p}, {"dilations", d}});
  check_close(floats(md), pool_ref(true, xv, xs, k, s, d, p, outd, false));
}

namespace {
/// Runs 2-D MaxPool with Indices on an [n, c, h, w] input and checks every output against a
/// direct loop over the window: the first maximum in window order wins, and a NaN beats any number.
void check_max_pool_indices(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w, const std::vector<float>& xv,
                            const ints& k, const ints& s, const ints& dl, const ints& p) {
  const std::int64_t oh = (h + p[0] + p[2] - dl[0] * (k[0] - 1) - 1) / s[0] + 1;
  const std::int64_t ow = (w + p[1] + p[3] - dl[1] * (k[1] - 1) - 1) / s[1] + 1;
  auto out = run("MaxPool", {f32({n, c, h, w}, xv)}, {{data_type::F32, {n, c, oh, ow}}, {data_type::S64, {n, c, oh, ow}}},
                 {{"kernel_shape", k}, {"strides", s}, {"dilations", dl}, {"pads", p}});
  const auto got_v = floats(out[0]);
  const auto got_i = values<std::int64_t>(out[1]);
  std::size_t o = 0;
  for (std::int64_t pl = 0; pl < n * c; ++pl)
    for (std::int64_t y = 0; y < oh; ++y)
      for (std::int64_t x = 0; x < ow; ++x, ++o) {
        std::int64_t arg = -1;
        for (std::int64_t a = 0; a < k[0]; ++a)
          for (std::int64_t b = 0; b < k[1]; ++b) {
            const std::int64_t iy = y * s[0] + a * dl[0] - p[0], ix = x * s[1] + b * dl[1] - p[1];
            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
            const std::int64_t at = (pl * h + iy) * w + ix;
            const float v = xv[static_cast<std::size_t>(at)];
            const float best = arg < 0 ? 0.0f : xv[static_cast<std::size_t>(arg)];
            if (arg < 0 || v > best || (std::isnan(v) && !std::isnan(best))) arg = at;
          }
        REQUIRE(arg >= 0);
        CHECK(got_i[o] == arg);
        const float want = xv[static_cast<std::size_t>(arg)];
        CHECK(((std::isnan(want) && std::isnan(got_v[o])) || got_v[o] == want));
      }
}
}  // namespace

TEST_CASE("MaxPool: Indices against the definition, with ties, NaN, padding, strides and dilations") {
  // Values from a small set so windows tie: the first maximum in window order is the one reported.
  const std::int64_t n = 2, c = 3, h = 9, w = 11;
  std::vector<float> xv(static_cast<std::size_t>(n * c * h * w));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 37) % 5);
  xv[40] = std::numeric_limits<float>::quiet_NaN();
  check_max_pool_indices(n, c, h, w, xv, {3, 2}, {2, 3}, {1, 2}, {1, 1, 1, 2});
}

TEST_CASE("MaxPool: Indices of ResNet's stem window (3x3, stride 2, pad 1) and other strides, against the definition") {
  // The row loop splits input rows by column modulo the stride: odd and even widths, strides 1 to
  // 4, and a stride wider than the row (the window-at-a-time loop). Ties, -inf, NaN and an
  // all--inf window (it reports -inf at its first element).
  const float inf = std::numeric_limits<float>::infinity();
  for (const std::int64_t w : {1, 2, 7, 8, 13}) {
    const std::int64_t n = 1, c = 2, h = 7;
    std::vector<float> xv(static_cast<std::size_t>(n * c * h * w));
    for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<float>((i * 7) % 4) - 2.0f;
    for (std::size_t i = 0; i < xv.size(); i += 5) xv[i] = -inf;
    if (w >= 2) {
      for (std::int64_t i = 0; i < 2; ++i)
        for (std::int64_t j = 0; j < 2; ++j) xv[static_cast<std::size_t>((h + i) * w + j)] = -inf;  // plane 1's corner
      xv[static_cast<std::size_t>(3 * w + 1)] = std::numeric_limits<float>::quiet_NaN();
    }
    CAPTURE(w);
    check_max_pool_indices(n, c, h, w, xv, {3, 3}, {2, 2}, {1, 1}, {1, 1, 1, 1});
    check_max_pool_indices(n, c, h, w, xv, {2, 3}, {1, 1}, {1, 1}, {0, 1, 1, 1});
    check_max_pool_indices(n, c, h, w, xv, {3, 2}, {3, 3}, {1, 2}, {1, 2, 0, 1});
    check_max_pool_indices(n, c, h, w, xv, {1, 4}, {2, 4}, {1, 1}, {0, 3, 0, 2});
    if (w >= 2) check_max_pool_indices(n, c, h, w, xv, {2, 2}, {2, w + 1}, {1, 1}, {0, 0, 0, 0});
  }
}

TEST_CASE("MaxUnpool: the specification's examples, and MaxPool's output put back where its Indices say") {
  const std::vector<attribute> attrs{{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}};
  auto idx = i64({1, 1, 2, 2}, {5, 7, 13, 15});
  auto y = run1("MaxUnpool", {f32({1, 1, 2, 2}, {1, 2, 3, 4}), idx}, {data_type::F32, {1, 1, 4, 4}}, attrs);
  CHECK(floats(y) == std::vector<float>{0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4});
  // A larger output_shape holds the unpooled 4 x 4 tensor at its origin.
  auto z = run1("MaxUnpool", {f32({1, 1, 2, 2}, {5, 6, 7, 8}), idx, i64({4}, {1, 1, 5, 5})}, {data_type::F32, {1, 1, 5, 5}},
                attrs);
  CHECK(floats(z) == std::vector<float>{0, 0, 0, 0, 0, 0, 5, 0, 6, 0, 0, 0, 0, 0, 0, 0, 7, 0, 8, 0, 0, 0, 0, 0, 0});
  // The round trip: MaxPool's values and Indices unpool to the maxima in place, zeros elsewhere.
  auto x = f32({1, 2, 4, 4}, random_floats(32, 7));
  auto pooled = run("MaxPool", {x}, {{data_type::F32, {1, 2, 2, 2}}, {data_type::S64, {1, 2, 2, 2}}}, attrs);
  auto back = floats(run1("MaxUnpool", {pooled[0], pooled[1]}, {data_type::F32, {1, 2, 4, 4}}, attrs));
  const auto xs = floats(x);
  const auto where = values<std::int64_t>(pooled[1]);
  std::vector<float> want(32, 0.0f);
  for (auto i : where) want[static_cast<std::size_t>(i)] = xs[static_cast<std::size_t>(i)];
  CHECK(back == want);
  // Integer data moves as well; 1-D with padding: (3 - 1) * 2 - 1 - 1 + 3 = 5.
  auto ints1 = run1("MaxUnpool", {i32({1, 1, 3}, {7, 8, 9}), i64({1, 1, 3}, {0, 2, 4})}, {data_type::S32, {1, 1, 5}},
                    {{"kernel_shape", ints{3}}, {"strides", ints{2}}, {"pads", ints{1, 1}}});
  CHECK(values<std::int32_t>(ints1) == std::vector<std::int32_t>{7, 0, 8, 0, 9});
}

TEST_CASE("MaxUnpool: refuses indices outside the unpooled tensor, a smaller output_shape and a wrong declared shape") {
  const std::vector<attribute> attrs{{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}};
  auto x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(run1("MaxUnpool", {x, i64({1, 1, 2, 2}, {5, 7, 13, 16})}, {data_type::F32, {1, 1, 4, 4}}, attrs),
                       doctest::Contains("index 16"), ipu::error);
  auto idx = i64({1, 1, 2, 2}, {5, 7, 13, 15});
  CHECK_THROWS_WITH_AS(run1("MaxUnpool", {x, idx, i64({4}, {1, 1, 3, 3})}, {data_type::F32, {1, 1, 3, 3}}, attrs),
                       doctest::Contains("output_shape"), ipu::error);
  CHECK_THROWS_AS(run1("MaxUnpool", {x, idx}, {data_type::F32, {1, 1, 5, 5}}, attrs), ipu::error);
  CHECK_THROWS_WITH_AS(run1("MaxUnpool", {x, idx}, {data_type::F32, {1, 1, 4, 4}}), doctest::Contains("kernel_shape"),
                       ipu::error);
  const auto huge = std::numeric_limits<std::int64_t>::max();
  CHECK_THROWS_WITH_AS(run1("MaxUnpool", {x, idx}, {data_type::F32, {1, 1, 4, 4}},
                            {{"kernel_shape", ints{2, 2}}, {"pads", ints{huge, 0, huge, 0}}}),
                       doctest::Contains("no valid unpooled size"), ipu::error);
  CHECK_THROWS_WITH_AS(run1("MaxUnpool", {x, idx}, {data_type::F32, {1, 1, 4, 4}},
                            {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}, {"storage_order", std::int64_t{1}}}),
                       doctest::Contains("attribute 'storage_order'"), ipu::error);
}

TEST_CASE("MaxUnpool's shape rule takes output_shape as INT64 only, as the specification and the kernel") {
  ipu::op_node op{"MaxUnpool", "", 11, "unpool", {}, {}, {{"kernel_shape", ints{2, 2}}, {"strides", ints{2, 2}}}, {}};
  const tensor_info x{data_type::F32, {1, 1, 2, 2}}, idx{data_type::S64, {1, 1, 2, 2}};
  const tensor_info shape64{data_type::S64, {4}}, shape32{data_type::S32, {4}};
  const auto v64 = ipu::byte_buffer::from_values<std::int64_t>(std::vector<std::int64_t>{1, 1, 5, 5});
  const auto v32 = ipu::byte_buffer::from_values<std::int32_t>(std::vector<std::int32_t>{1, 1, 5, 5});
  const std::vector<ipu::infer_input> good{{&x, nullptr}, {&idx, nullptr}, {&shape64, &v64}};
  CHECK(ipu::infer_outputs(op, good, 1).at(0) == tensor_info{data_type::F32, {1, 1, 5, 5}});
  const std::vector<ipu::infer_input> bad{{&x, nullptr}, {&idx, nullptr}, {&shape32, &v32}};
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, bad, 1), doctest::Contains("the specification takes INT64"), ipu::error);
  // Unknown at build time, the type is refused all the same.
  const std::vector<ipu::infer_input> unknown{{&x, nullptr}, {&idx, nullptr}, {&shape32, nullptr}};
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, unknown, 1), doctest::Contains("INT64"), ipu::error);
}

}  // namespace test_pool
