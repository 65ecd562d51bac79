// Conv and ConvTranspose against the ONNX specification's worked examples and a direct
// (definition-following) loop on random data, across the algorithms Conv picks by shape.
#include "ipu/ops/kernels/conv.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

#include "ipu/cpu/thread_pool.hpp"
#include "math_kernel_harness.hpp"

namespace test_conv {

using namespace mk;

namespace {
struct conv_case {
  ints x{};  // [N, C, spatial...]
  std::int64_t m = 1;
  ints kernel{};
  std::int64_t group = 1;
  ints strides{}, dilations{}, pads{};  // empty: defaults
  bool bias = false;
};

ints or_fill(const ints& v, std::size_t n, std::int64_t fill) { return v.empty() ? ints(n, fill) : v; }

std::vector<attribute> conv_attrs(const conv_case& c) {
  std::vector<attribute> a{{"group", c.group}};
  if (!c.strides.empty()) a.push_back({"strides", c.strides});
  if (!c.dilations.empty()) a.push_back({"dilations", c.dilations});
  if (!c.pads.empty()) a.push_back({"pads", c.pads});
  return a;
}

/// Y[n, oc, o] = B[oc] + sum_{c, t} X[n, g * cg + c, o * s + t * d - pad] * W[oc, c, t], straight from
/// the definition, in double, over a 3-D index space (missing leading dimensions have size 1).
struct ref_result {
  ints shape;
  std::vector<float> y;
};
ref_result conv_ref(const conv_case& c, const std::vector<float>& x, const std::vector<float>& w,
                    const std::vector<float>& b) {
  const std::size_t r = c.kernel.size();
  const auto s = or_fill(c.strides, r, 1), d = or_fill(c.dilations, r, 1), p = or_fill(c.pads, 2 * r, 0);
  std::array<std::int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, st{1, 1, 1}, dl{1, 1, 1}, pb{0, 0, 0}, out{1, 1, 1};
  ints shape{c.x[0], c.m};
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t j = 3 - r + i;
    in[j] = c.x[2 + i];
    k[j] = c.kernel[i];
    st[j] = s[i];
    dl[j] = d[i];
    pb[j] = p[i];
    out[j] = (in[j] + p[i] + p[r + i] - ((k[j] - 1) * dl[j] + 1)) / st[j] + 1;
    shape.push_back(out[j]);
  }
  const std::int64_t n_ = c.x[0], ci = c.x[1], cg = ci / c.group, mg = c.m / c.group;
  std::vector<float> y;
  for (std::int64_t n = 0; n < n_; ++n)
    for (std::int64_t oc = 0; oc < c.m; ++oc)
      for (std::int64_t o0 = 0; o0 < out[0]; ++o0)
        for (std::int64_t o1 = 0; o1 < out[1]; ++o1)
          for (std::int64_t o2 = 0; o2 < out[2]; ++o2) {
            double acc = b.empty() ? 0.0 : b[static_cast<std::size_t>(oc)];
            const std::int64_t g = oc / mg;
            for (std::int64_t cc = 0; cc < cg; ++cc)
              for (std::int64_t t0 = 0; t0 < k[0]; ++t0)
                for (std::int64_t t1 = 0; t1 < k[1]; ++t1)
                  for (std::int64_t t2 = 0; t2 < k[2]; ++t2) {
                    const std::int64_t i0 = o0 * st[0] + t0 * dl[0] - pb[0];
                    const std::int64_t i1 = o1 * st[1] + t1 * dl[1] - pb[1];
                    const std::int64_t i2 = o2 * st[2] + t2 * dl[2] - pb[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    const std::int64_t xi = (((n * ci + g * cg + cc) * in[0] + i0) * in[1] + i1) * in[2] + i2;
                    const std::int64_t wi = (((oc * cg + cc) * k[0] + t0) * k[1] + t1) * k[2] + t2;
                    acc += static_cast<double>(x[static_cast<std::size_t>(xi)]) * static_cast<double>(w[static_cast<std::size_t>(wi)]);
                  }
            y.push_back(static_cast<float>(acc));
          }
  return {shape, y};
}

std::int64_t product(const ints& v) {
  std::int64_t p = 1;
  for (auto e : v) p *= e;
  return p;
}

void check_conv(const conv_case& c, ipu::parallel_for_fn pf = chunked_for, data_type type = data_type::F32) {
  ints ws{c.m, c.x[1] / c.group};
  ws.insert(ws.end(), c.kernel.begin(), c.kernel.end());
  auto xv = random_floats(static_cast<std::size_t>(product(c.x)), 100);
  auto wv = random_floats(static_cast<std::size_t>(product(ws)), 101);
  std::vector<float> bv = c.bias ? random_floats(static_cast<std::size_t>(c.m), 102) : std::vector<float>{};
  if (type == data_type::F16) {  // use F16-exact inputs so the reference sees the same values
    for (auto* v : {&xv, &wv, &bv})
      for (auto& e : *v) e = static_cast<float>(half(e));
  }
  const auto want = conv_ref(c, xv, wv, bv);
  auto make_t = [&](ints s, const std::vector<float>& v) -> host_tensor {
    if (type == data_type::F16) return f16(shape(s), v);
    if (type == data_type::F64) return f64(shape(s), std::vector<double>(v.begin(), v.end()));
    return f32(shape(s), v);
  };
  std::vector<input> ins{make_t(c.x, xv), make_t(ws, wv)};
  if (c.bias) ins.push_back(make_t({c.m}, bv));
  auto y = run1("Conv", ins, {type, shape(want.shape)}, conv_attrs(c), std::move(pf));
  const float tol = type == data_type::F16 ? 2e-3f : 1e-5f;
  check_close(floats(y), want.y, tol, tol);
}
}  // namespace

TEST_CASE("Conv: the ONNX specification example, with and without padding") {
  std::vector<float> xv(25);
  for (int i = 0; i < 25; ++i) xv[static_cast<std::size_t>(i)] = static_cast<float>(i);
  auto x = f32({1, 1, 5, 5}, xv);
  auto w = f32({1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  check_close(floats(run1("Conv", {x, w}, {data_type::F32, {1, 1, 5, 5}}, {{"pads", ints{1, 1, 1, 1}}})),
              {12, 21, 27, 33, 24, 33, 54, 63, 72, 51, 63, 99, 108, 117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  check_close(floats(run1("Conv", {x, w}, {data_type::F32, {1, 1, 3, 3}})), {54, 63, 72, 99, 108, 117, 144, 153, 162});
  // 7x5 input, strides 2, pads 1.
  std::vector<float> x7(35);
  for (int i = 0; i < 35; ++i) x7[static_cast<std::size_t>(i)] = static_cast<float>(i);
  check_close(floats(run1("Conv", {f32({1, 1, 7, 5}, x7), w}, {data_type::F32, {1, 1, 4, 3}},
                          {{"pads", ints{1, 1, 1, 1}}, {"strides", ints{2, 2}}})),
              {12, 27, 24, 63, 108, 81, 123, 198, 141, 112, 177, 124});
  // auto_pad SAME_LOWER pads the start more: 5x5, kernel 3, stride 2 -> 3x3 with pads (1,1).
  check_close(floats(run1("Conv", {x, w}, {data_type::F32, {1, 1, 3, 3}},
                          {{"auto_pad", std::string("SAME_LOWER")}, {"strides", ints{2, 2}}})),
              {12, 27, 24, 63, 108, 81, 72, 117, 84});
}

TEST_CASE("Conv: im2col + GEMM path against the definition") {
  check_conv({.x = {2, 3, 9, 8}, .m = 4, .kernel = {3, 3}, .pads = {1, 1, 1, 1}, .bias = true});
  check_conv({.x = {1, 2, 11, 10}, .m = 3, .kernel = {3, 2}, .strides = {2, 3}, .dilations = {2, 1}, .pads = {0, 1, 2, 1}});
  check_conv({.x = {2, 4, 6, 7}, .m = 6, .kernel = {3, 2}, .group = 2, .pads = {1, 0, 1, 1}, .bias = true});
  // Enough output columns for several column blocks.
  check_conv({.x = {1, 16, 40, 40}, .m = 8, .kernel = {3, 3}, .pads = {1, 1, 1, 1}, .bias = true});
  // A 1x1 kernel with stride 2 is not the direct-GEMM case.
  check_conv({.x = {1, 5, 9, 9}, .m = 3, .kernel = {1, 1}, .strides = {2, 2}});
}

TEST_CASE("Conv: pointwise (1x1) and depthwise paths against the definition") {
  check_conv({.x = {2, 8, 7, 7}, .m = 16, .kernel = {1, 1}, .bias = true});
  check_conv({.x = {2, 12, 30, 30}, .m = 4, .kernel = {1, 1}, .group = 2});
  check_conv({.x = {2, 5, 9, 8}, .m = 5, .kernel = {3, 3}, .group = 5, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .bias = true});
  check_conv({.x = {1, 3, 10, 12}, .m = 6, .kernel = {3, 3}, .group = 3, .pads = {1, 2, 0, 1}});
  check_conv({.x = {1, 4, 12, 12}, .m = 4, .kernel = {3, 3}, .group = 4, .dilations = {2, 2}, .pads = {2, 2, 2, 2}});
  check_conv({.x = {1, 2, 9, 9}, .m = 2, .kernel = {5, 5}, .group = 2, .strides = {3, 2}, .pads = {2, 1, 2, 0}});
  // F32 pointwise as one GEMM per image: batch 1 splits the 40 output channels in two, batch 3 with a
  // bias does not; a 1-D pointwise too.
  check_conv({.x = {1, 24, 7, 9}, .m = 40, .kernel = {1, 1}});
  check_conv({.x = {3, 8, 5, 5}, .m = 16, .kernel = {1, 1}, .bias = true});
  check_conv({.x = {2, 6, 11}, .m = 3, .kernel = {1}, .bias = true});
  // F32 depthwise taps: stride 1 with asymmetric pads and a kernel wider than the pads, stride 2.
  check_conv({.x = {2, 3, 8, 9}, .m = 3, .kernel = {5, 3}, .group = 3, .pads = {2, 0, 1, 2}, .bias = true});
  check_conv({.x = {1, 4, 9, 10}, .m = 4, .kernel = {3, 3}, .group = 4, .strides = {2, 2}, .pads = {1, 1, 1, 1}});
  // Square kernels summed in registers from a padded plane: 7x7 with uneven pads, 5x5 stride 2 over
  // an odd width (the odd-column plane is one shorter), pads wider than the kernel (whole rows and
  // columns of padding), no pads, and stride 2 down the rows with stride 1 along them.
  check_conv({.x = {1, 3, 11, 13}, .m = 3, .kernel = {7, 7}, .group = 3, .pads = {3, 2, 1, 3}, .bias = true});
  check_conv({.x = {2, 2, 15, 17}, .m = 2, .kernel = {5, 5}, .group = 2, .strides = {2, 2}, .pads = {2, 2, 2, 2}});
  check_conv({.x = {1, 2, 6, 7}, .m = 2, .kernel = {3, 3}, .group = 2, .pads = {4, 3, 2, 5}, .bias = true});
  check_conv({.x = {1, 2, 6, 7}, .m = 2, .kernel = {3, 3}, .group = 2});
  check_conv({.x = {1, 3, 10, 9}, .m = 3, .kernel = {5, 5}, .group = 3, .strides = {2, 1}, .pads = {1, 2, 2, 1}});
  // Outputs narrower than 16 columns run eight channels at a time, interleaved: 19 channels (two
  // whole blocks and a block of three), two images, each square kernel and both column strides;
  // 20 output columns stay on the plane-at-a-time path.
  check_conv({.x = {2, 19, 9, 9}, .m = 19, .kernel = {3, 3}, .group = 19, .pads = {1, 1, 1, 1}, .bias = true});
  check_conv({.x = {2, 19, 14, 14}, .m = 19, .kernel = {5, 5}, .group = 19, .strides = {2, 2}, .pads = {2, 2, 2, 2}});
  check_conv({.x = {1, 17, 7, 7}, .m = 17, .kernel = {7, 7}, .group = 17, .pads = {3, 3, 3, 3}, .bias = true});
  check_conv({.x = {1, 9, 8, 20}, .m = 9, .kernel = {3, 3}, .group = 9, .pads = {1, 1, 1, 1}, .bias = true});
}

TEST_CASE("Conv: kernels longer than the output (the weight gradient's shape) against the definition") {
  // Conv's weight gradient: X [C, N, 12, 12] by dY [M, N, 12, 12] with pads 1 gives a 3x3 output.
  check_conv({.x = {3, 4, 12, 12}, .m = 5, .kernel = {12, 12}, .pads = {1, 1, 1, 1}, .bias = true});
  // ... of a stride-2 Conv: the stride becomes the dilation; uneven pads.
  check_conv({.x = {3, 2, 14, 14}, .m = 4, .kernel = {7, 7}, .dilations = {2, 2}, .pads = {1, 0, 1, 1}});
  check_conv({.x = {2, 3, 13, 11}, .m = 2, .kernel = {6, 11}, .strides = {2, 1}, .pads = {0, 1, 0, 1}});
  check_conv({.x = {2, 2, 5, 9, 9}, .m = 3, .kernel = {4, 8, 8}, .pads = {1, 0, 1, 0, 0, 1}, .bias = true});
  // Batch rows split over several blocks of the column scratch, on one thread and on a pool; in F64,
  // as F32 sums of 80000 products differ from the reference's by more than the F32 tolerance.
  const conv_case long_1d{.x = {5, 2, 40000}, .m = 3, .kernel = {39990}, .pads = {1, 1}, .bias = true};
  check_conv(long_1d, chunked_for, data_type::F64);
  ipu::thread_pool pool({.threads = 2});
  check_conv(
      long_1d,
      [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
        pool.parallel_for(count, body);
      },
      data_type::F64);
}

TEST_CASE("Conv: 1-D and 3-D against the definition") {
  check_conv({.x = {2, 3, 20}, .m = 2, .kernel = {5}, .strides = {3}, .dilations = {2}, .pads = {1, 2}, .bias = true});
  check_conv({.x = {2, 3, 20}, .m = 3, .kernel = {3}, .group = 3, .pads = {1, 1}});
  check_conv({.x = {1, 2, 5, 6, 7}, .m = 3, .kernel = {2, 3, 3}, .strides = {1, 2, 1}, .pads = {1, 1, 1, 1, 1, 1}});
  check_conv({.x = {1, 2, 4, 5, 5}, .m = 2, .kernel = {3, 3, 3}, .group = 2, .pads = {1, 1, 1, 1, 1, 1}, .bias = true});
}

TEST_CASE("Conv: F64, F16 and a real thread pool") {
  const conv_case c{.x = {2, 3, 9, 8}, .m = 4, .kernel = {3, 3}, .pads = {1, 1, 1, 1}, .bias = true};
  check_conv(c, chunked_for, data_type::F64);
  check_conv(c, chunked_for, data_type::F16);
  check_conv({.x = {2, 6, 9, 8}, .m = 6, .kernel = {3, 3}, .group = 6, .pads = {1, 1, 1, 1}}, chunked_for, data_type::F16);
  ipu::thread_pool pool({.threads = 2});
  auto pf = [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
    pool.parallel_for(count, body);
  };
  check_conv({.x = {4, 16, 30, 30}, .m = 16, .kernel = {3, 3}, .pads = {1, 1, 1, 1}, .bias = true}, pf);
  check_conv({.x = {4, 16, 30, 30}, .m = 16, .kernel = {3, 3}, .group = 16, .pads = {1, 1, 1, 1}}, pf);
  check_conv({.x = {4, 16, 30, 30}, .m = 32, .kernel = {1, 1}}, pf);
}

namespace {
/// ipu::ConvWeightsGrad of a Conv `c` against the definition: dW[oc, cc, t] = sum over n and o of
/// dY[n, oc, o] * X[n, g * cg + cc, o * s + t * d - pad], in double. The Conv's own reference gives
/// the output shape (its values are not used).
void check_weights_grad(const conv_case& c, ipu::parallel_for_fn pf = chunked_for, data_type type = data_type::F32) {
  ints ws{c.m, c.x[1] / c.group};
  ws.insert(ws.end(), c.kernel.begin(), c.kernel.end());
  const std::size_t r = c.kernel.size();
  const auto xv = random_floats(static_cast<std::size_t>(product(c.x)), 200);
  const auto ys = conv_ref(c, xv, std::vector<float>(static_cast<std::size_t>(product(ws)), 0.0f), {}).shape;
  const auto dyv = random_floats(static_cast<std::size_t>(product(ys)), 201);
  const auto st = or_fill(c.strides, r, 1), dl = or_fill(c.dilations, r, 1), pd = or_fill(c.pads, 2 * r, 0);
  std::array<std::int64_t, 3> in{1, 1, 1}, k{1, 1, 1}, out{1, 1, 1}, s3{1, 1, 1}, d3{1, 1, 1}, p3{0, 0, 0};
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t j = 3 - r + i;
    in[j] = c.x[2 + i], k[j] = c.kernel[i], out[j] = ys[2 + i], s3[j] = st[i], d3[j] = dl[i], p3[j] = pd[i];
  }
  const std::int64_t ci = c.x[1], cg = ci / c.group, mg = c.m / c.group;
  std::vector<float> want;
  for (std::int64_t oc = 0; oc < c.m; ++oc)
    for (std::int64_t cc = 0; cc < cg; ++cc)
      for (std::int64_t t0 = 0; t0 < k[0]; ++t0)
        for (std::int64_t t1 = 0; t1 < k[1]; ++t1)
          for (std::int64_t t2 = 0; t2 < k[2]; ++t2) {
            double acc = 0;
            for (std::int64_t n = 0; n < c.x[0]; ++n)
              for (std::int64_t o0 = 0; o0 < out[0]; ++o0)
                for (std::int64_t o1 = 0; o1 < out[1]; ++o1)
                  for (std::int64_t o2 = 0; o2 < out[2]; ++o2) {
                    const std::int64_t i0 = o0 * s3[0] + t0 * d3[0] - p3[0], i1 = o1 * s3[1] + t1 * d3[1] - p3[1],
                                       i2 = o2 * s3[2] + t2 * d3[2] - p3[2];
                    if (i0 < 0 || i0 >= in[0] || i1 < 0 || i1 >= in[1] || i2 < 0 || i2 >= in[2]) continue;
                    const std::int64_t xi = (((n * ci + oc / mg * cg + cc) * in[0] + i0) * in[1] + i1) * in[2] + i2;
                    const std::int64_t yi = (((n * c.m + oc) * out[0] + o0) * out[1] + o1) * out[2] + o2;
                    acc += static_cast<double>(xv[static_cast<std::size_t>(xi)]) * dyv[static_cast<std::size_t>(yi)];
                  }
            want.push_back(static_cast<float>(acc));
          }
  auto make_t = [&](const ints& sh, const std::vector<float>& v) -> host_tensor {
    if (type == data_type::F64) return f64(shape(sh), std::vector<double>(v.begin(), v.end()));
    return f32(shape(sh), v);
  };
  auto attrs = conv_attrs(c);
  attrs.push_back({"kernel_shape", c.kernel});
  const auto dw = run_in("ipu", "ConvWeightsGrad", {make_t(ys, dyv), make_t(c.x, xv)}, {{type, shape(ws)}}, attrs, pf);
  check_close(floats(dw[0]), want, 1e-4f, 1e-4f);
}
}  // namespace

TEST_CASE("ipu::ConvWeightsGrad, a Conv's weight gradient, against the definition: oneDNN and im2col paths") {
  // F32 1-D and 2-D run on oneDNN; F64 and 3-D on im2col + GEMM.
  for (const auto type : {data_type::F32, data_type::F64}) {
    CAPTURE(type);
    check_weights_grad({.x = {2, 3, 7, 6}, .m = 4, .kernel = {3, 3}, .pads = {1, 1, 1, 1}}, chunked_for, type);
    check_weights_grad({.x = {2, 4, 9, 8}, .m = 6, .kernel = {3, 2}, .group = 2, .strides = {2, 1},
                        .dilations = {1, 2}, .pads = {1, 0, 0, 1}},
                       chunked_for, type);
    check_weights_grad({.x = {3, 4, 8, 8}, .m = 4, .kernel = {3, 3}, .group = 4, .pads = {1, 1, 1, 1}}, chunked_for, type);
    check_weights_grad({.x = {2, 3, 11}, .m = 5, .kernel = {3}, .strides = {2}}, chunked_for, type);
    check_weights_grad({.x = {1, 2, 4, 5, 4}, .m = 3, .kernel = {2, 3, 2}, .pads = {0, 1, 0, 1, 0, 1}}, chunked_for, type);
  }
  // Slices of oc on a real pool of two threads.
  ipu::thread_pool pool({.threads = 2});
  auto pf = [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
    pool.parallel_for(count, body);
  };
  check_weights_grad({.x = {4, 16, 14, 14}, .m = 24, .kernel = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}, pf);
  // dY that no Conv of X with these attributes makes, and a group that does not divide C.
  const auto x = f32({1, 2, 5, 5}, std::vector<float>(50, 1.0f));
  CHECK_THROWS_AS(run_in("ipu", "ConvWeightsGrad", {f32({1, 3, 4, 4}, std::vector<float>(48, 1.0f)), x},
                         {{data_type::F32, {3, 2, 3, 3}}}, {{"kernel_shape", ints{3, 3}}}),
                  ipu::error);
  CHECK_THROWS_AS(run_in("ipu", "ConvWeightsGrad", {f32({1, 3, 3, 3}, std::vector<float>(27, 1.0f)), x},
                         {{data_type::F32, {3, 1, 3, 3}}}, {{"kernel_shape", ints{3, 3}}, {"group", std::int64_t{3}}}),
                  ipu::error);
}

TEST_CASE("Conv: auto_pad SAME_UPPER / SAME_LOWER equal the explicit pads they imply") {
  // 7 wide, kernel 4, stride 2 -> 4 outputs; total padding 3: upper (1, 2), lower (2, 1).
  std::vector<float> xv = random_floats(49, 7), wv = random_floats(16, 8);
  auto x = f32({1, 1, 7, 7}, xv);
  auto w = f32({1, 1, 4, 4}, wv);
  auto upper = run1("Conv", {x, w}, {data_type::F32, {1, 1, 4, 4}}, {{"auto_pad", std::string("SAME_UPPER")}, {"strides", ints{2, 2}}});
  auto lower = run1("Conv", {x, w}, {data_type::F32, {1, 1, 4, 4}}, {{"auto_pad", std::string("SAME_LOWER")}, {"strides", ints{2, 2}}});
  const auto ru = conv_ref({.x = {1, 1, 7, 7}, .kernel = {4, 4}, .strides = {2, 2}, .pads = {1, 1, 2, 2}}, xv, wv, {});
  const auto rl = conv_ref({.x = {1, 1, 7, 7}, .kernel = {4, 4}, .strides = {2, 2}, .pads = {2, 2, 1, 1}}, xv, wv, {});
  check_close(floats(upper), ru.y);
  check_close(floats(lower), rl.y);
  auto valid = run1("Conv", {x, w}, {data_type::F32, {1, 1, 2, 2}}, {{"auto_pad", std::string("VALID")}, {"strides", ints{2, 2}}});
  check_close(floats(valid), conv_ref({.x = {1, 1, 7, 7}, .kernel = {4, 4}, .strides = {2, 2}}, xv, wv, {}).y);
}

TEST_CASE("Conv: inconsistent shapes and attributes are errors") {
  auto x = f32({1, 4, 5, 5}, std::vector<float>(100, 1.0f));
  auto w = f32({2, 2, 3, 3}, std::vector<float>(36, 1.0f));
  CHECK_THROWS_AS(run1("Conv", {x, w}, {data_type::F32, {1, 2, 3, 3}}), ipu::error);  // C/group mismatch
  CHECK_NOTHROW(run1("Conv", {x, w}, {data_type::F32, {1, 2, 3, 3}}, {{"group", std::int64_t{2}}}));
  CHECK_THROWS_AS(run1("Conv", {x, w}, {data_type::F32, {1, 2, 4, 4}}, {{"group", std::int64_t{2}}}), ipu::error);
  CHECK_THROWS_AS(run1("Conv", {x, w, f32({3}, {1, 2, 3})}, {data_type::F32, {1, 2, 3, 3}}, {{"group", std::int64_t{2}}}),
                  ipu::error);
  CHECK_THROWS_AS(run1("Conv", {x, w}, {data_type::F32, {1, 2, 3, 3}}, {{"group", std::int64_t{2}}, {"kernel_shape", ints{2, 2}}}),
                  ipu::error);
}

// --- ConvTranspose -----------------------------------------------------------------------------
namespace {
/// Y[n, g * mg + m, i * s + t * d - pad] += X[n, g * cg + c, i] * W[g * cg + c, m, t], 2-D.
std::vector<float> conv_transpose_ref(const ints& xs, std::int64_t m, std::int64_t group, const ints& k, const ints& s,
                                      const ints& d, const ints& pads, const ints& out, const std::vector<float>& x,
                                      const std::vector<float>& w) {
  const std::int64_t n_ = xs[0], ci = xs[1], cg = ci / group, mg = m / group;
  std::vector<double> y(static_cast<std::size_t>(n_ * m * out[0] * out[1]), 0.0);
  for (std::int64_t n = 0; n < n_; ++n)
    for (std::int64_t c = 0; c < ci; ++c)
      for (std::int64_t i0 = 0; i0 < xs[2]; ++i0)
        for (std::int64_t i1 = 0; i1 < xs[3]; ++i1)
          for (std::int64_t mm = 0; mm < mg; ++mm)
            for (std::int64_t t0 = 0; t0 < k[0]; ++t0)
              for (std::int64_t t1 = 0; t1 < k[1]; ++t1) {
                const std::int64_t o0 = i0 * s[0] + t0 * d[0] - pads[0], o1 = i1 * s[1] + t1 * d[1] - pads[1];
                if (o0 < 0 || o0 >= out[0] || o1 < 0 || o1 >= out[1]) continue;
                const std::int64_t oc = (c / cg) * mg + mm;
                y[static_cast<std::size_t>(((n * m + oc) * out[0] + o0) * out[1] + o1)] +=
                    static_cast<double>(x[static_cast<std::size_t>(((n * ci + c) * xs[2] + i0) * xs[3] + i1)]) *
                    static_cast<double>(w[static_cast<std::size_t>(((c * mg + mm) * k[0] + t0) * k[1] + t1)]);
              }
  return {y.begin(), y.end()};
}

const std::vector<float> x33{0, 1, 2, 3, 4, 5, 6, 7, 8};
const std::vector<float> ones18(18, 1.0f);
const std::vector<float> example_10x8{0, 0, 1, 1, 3, 2, 2, 0, 0, 0, 1, 1, 3, 2, 2, 0, 0, 0, 1, 1, 3, 2, 2, 0,
                                      3, 3, 7, 4, 9, 5, 5, 0, 3, 3, 7, 4, 9, 5, 5, 0, 3, 3, 7, 4, 9, 5, 5, 0,
                                      6, 6, 13, 7, 15, 8, 8, 0, 6, 6, 13, 7, 15, 8, 8, 0, 6, 6, 13, 7, 15, 8, 8, 0,
                                      0, 0, 0, 0, 0, 0, 0, 0};
std::vector<float> twice(const std::vector<float>& v) {
  auto r = v;
  r.insert(r.end(), v.begin(), v.end());
  return r;
}
}  // namespace

TEST_CASE("ConvTranspose: the ONNX specification examples") {
  auto x = f32({1, 1, 3, 3}, x33);
  auto w = f32({1, 2, 3, 3}, ones18);
  const std::vector<float> plane{0, 1, 3, 3, 2, 3, 8, 15, 12, 7, 9, 21, 36, 27, 15, 9, 20, 33, 24, 13, 6, 13, 21, 15, 8};
  check_close(floats(run1("ConvTranspose", {x, w}, {data_type::F32, {1, 2, 5, 5}})), twice(plane));
  // output_shape larger than the full result pads the end with zeros; output_padding does the same.
  check_close(floats(run1("ConvTranspose", {x, w}, {data_type::F32, {1, 2, 10, 8}},
                          {{"strides", ints{3, 2}}, {"output_shape", ints{10, 8}}})),
              twice(example_10x8));
  check_close(floats(run1("ConvTranspose", {x, w}, {data_type::F32, {1, 2, 10, 8}},
                          {{"strides", ints{3, 2}}, {"output_padding", ints{1, 1}}})),
              twice(example_10x8));
  check_close(floats(run1("ConvTranspose", {x, w}, {data_type::F32, {1, 2, 7, 3}},
                          {{"strides", ints{3, 2}}, {"pads", ints{1, 2, 1, 2}}})),
              twice({1, 1, 3, 1, 1, 3, 7, 4, 9, 7, 4, 9, 7, 4, 9, 13, 7, 15, 13, 7, 15}));
  check_close(floats(run1("ConvTranspose", {x, w}, {data_type::F32, {1, 2, 6, 6}},
                          {{"strides", ints{2, 2}}, {"auto_pad", std::string("SAME_UPPER")}})),
              twice({0, 0, 1, 1, 3, 2, 0, 0, 1, 1, 3, 2, 3, 3, 8, 5, 12, 7, 3, 3, 7, 4, 9, 5, 9, 9, 20, 11, 24, 13, 6, 6, 13, 7, 15, 8}));
  auto xd = f32({1, 1, 3, 3}, {3, 8, 1, 9, 5, 7, 3, 2, 6});
  auto wd = f32({1, 1, 2, 2}, {7, 2, 1, 9});
  check_close(floats(run1("ConvTranspose", {xd, wd}, {data_type::F32, {1, 1, 5, 5}}, {{"dilations", ints{2, 2}}})),
              {21, 56, 13, 16, 2, 63, 35, 67, 10, 14, 24, 22, 76, 76, 21, 9, 5, 88, 45, 63, 3, 2, 33, 18, 54});
  // 1-D.
  check_close(floats(run1("ConvTranspose", {f32({1, 1, 3}, {0, 1, 2}), f32({1, 2, 3}, std::vector<float>(6, 1.0f))},
                          {data_type::F32, {1, 2, 5}})),
              {0, 1, 3, 3, 2, 0, 1, 3, 3, 2});
}

TEST_CASE("ConvTranspose: groups, strides, dilations, pads and bias against the definition") {
  const ints xs{2, 4, 5, 4};
  const std::int64_t m = 6, group = 2;
  const ints k{3, 2}, s{2, 3}, d{1, 2}, pads{1, 0, 0, 2};
  auto xv = random_floats(2 * 4 * 5 * 4, 30);
  auto wv = random_floats(static_cast<std::size_t>(4 * 3 * 3 * 2), 31);
  const ints out{s[0] * 4 + (k[0] - 1) * d[0] + 1 - pads[0] - pads[2], s[1] * 3 + (k[1] - 1) * d[1] + 1 - pads[1] - pads[3]};
  auto want = conv_transpose_ref(xs, m, group, k, s, d, pads, out, xv, wv);
  const std::vector<float> bias{1, 2, 3, 4, 5, 6};
  for (std::size_t i = 0; i < want.size(); ++i) want[i] += bias[(i / static_cast<std::size_t>(out[0] * out[1])) % 6];
  auto y = run1("ConvTranspose", {f32(shape(xs), xv), f32({4, 3, 3, 2}, wv), f32({6}, bias)},
                {data_type::F32, {2, 6, out[0], out[1]}},
                {{"group", group}, {"strides", s}, {"dilations", d}, {"pads", pads}});
  check_close(floats(y), want, 1e-5f, 1e-5f);
  CHECK_THROWS_AS(run1("ConvTranspose", {f32(shape(xs), xv), f32({4, 3, 3, 2}, wv)}, {data_type::F32, {2, 6, 9, 9}},
                       {{"group", group}, {"strides", s}, {"dilations", d}, {"pads", pads}}),
                  ipu::error);
}

TEST_CASE("Conv and ConvTranspose in F32 (oneDNN): the same bits run to run on a pool, near F64 (the library's own kernels)") {
  ipu::thread_pool pool({.threads = 2});
  const ipu::parallel_for_fn pf = [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
    pool.parallel_for(count, body);
  };
  // Batch 5 over 2 threads: slices of 2 and 3 images, two plans.
  const auto xv = random_floats(5 * 6 * 13 * 11, 40), wv = random_floats(6 * 3 * 3 * 2, 41), bv = random_floats(6, 42);
  const std::vector<attribute> at{{"group", std::int64_t{2}}, {"strides", ints{2, 1}}, {"dilations", ints{1, 2}},
                                  {"pads", ints{1, 0, 0, 2}}};
  for (const char* op : {"Conv", "ConvTranspose"}) {
    CAPTURE(op);
    const bool conv = std::string_view(op) == "Conv";
    const ints ws{6, 3, 3, 2};  // Conv [M, C/g, k] and ConvTranspose [C, M/g, k] alike
    const ints ys = conv ? ints{5, 6, 6, 11} : ints{5, 6, 26, 11};
    auto run = [&](data_type type) {
      auto make = [&](const ints& s, const std::vector<float>& v) -> host_tensor {
        return type == data_type::F64 ? f64(shape(s), std::vector<double>(v.begin(), v.end())) : f32(shape(s), v);
      };
      return run1(op, {make({5, 6, 13, 11}, xv), make(ws, wv), make({6}, bv)}, {type, shape(ys)}, at, pf);
    };
    const auto a = run(data_type::F32), b = run(data_type::F32), wide = run(data_type::F64);
    CHECK(std::memcmp(a.bytes().data(), b.bytes().data(), a.bytes().size()) == 0);
    const auto d = wide.as<double>();
    check_close(floats(a), std::vector<float>(d.begin(), d.end()), 1e-5f, 1e-5f);
  }
}

TEST_SUITE("concurrent") {
  TEST_CASE("Conv and ConvTranspose (oneDNN) from two threads at once, each through its own pool: the bits of one thread alone") {
    // Two executor stages running convolutions at the same time, as the pipelined executor does;
    // under ThreadSanitizer this also checks that oneDNN's OpenMP and primitive cache stay hidden.
    const auto xv = random_floats(3 * 8 * 10 * 10, 50), wv = random_floats(8 * 4 * 3 * 3, 51);
    const std::vector<attribute> at{{"group", std::int64_t{2}}, {"pads", ints{1, 1, 1, 1}}};
    auto stage = [&](const char* op, std::vector<host_tensor>& results) {
      ipu::thread_pool pool({.threads = 2});
      const ipu::parallel_for_fn pf = [&pool](std::size_t count, const std::function<void(std::size_t, std::size_t)>& body) {
        pool.parallel_for(count, body);
      };
      for (int i = 0; i < 3; ++i)
        results.push_back(run1(op, {f32({3, 8, 10, 10}, xv), f32({8, 4, 3, 3}, wv)}, {data_type::F32, {3, 8, 10, 10}}, at, pf));
    };
    std::vector<host_tensor> alone_conv, alone_transpose, conv, transpose;
    stage("Conv", alone_conv);
    stage("ConvTranspose", alone_transpose);
    std::thread a([&] { stage("Conv", conv); }), b([&] { stage("ConvTranspose", transpose); });
    a.join();
    b.join();
    for (std::size_t i = 0; i < 3; ++i) {
      CHECK(std::memcmp(conv[i].bytes().data(), alone_conv[0].bytes().data(), alone_conv[0].bytes().size()) == 0);
      CHECK(std::memcmp(transpose[i].bytes().data(), alone_transpose[0].bytes().data(), alone_transpose[0].bytes().size()) == 0);
    }
  }
}

}  // namespace test_conv
