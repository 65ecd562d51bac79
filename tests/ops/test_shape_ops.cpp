#include "ipu/ops/kernels/shape_ops.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "tensor_kernel_harness.hpp"

namespace test_shape_ops {

using namespace tk;

TEST_CASE("shape ops: Reshape, Flatten, Squeeze, Unsqueeze and Identity keep bytes, for any type") {
  auto x = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  for (const char* type : {"Flatten", "Squeeze", "Unsqueeze", "Identity"}) {
    auto y = run1(type, {x}, info(data_type::S64, {3, 2}));
    CHECK(values<std::int64_t>(y) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  }
  auto y = run1("Reshape", {x, i64({1}, {-1})}, info(data_type::S64, {6}));
  CHECK(values<std::int64_t>(y) == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  // An output that does not hold the same number of elements is an error naming the op.
  CHECK_THROWS_WITH_AS(run1("Reshape", {x, i64({1}, {5})}, info(data_type::S64, {5})),
                       doctest::Contains("Reshape"), ipu::error);
}

TEST_CASE("shape ops: Transpose with a permutation and with the default (reversed) order") {
  auto x = iota_f32({2, 3, 4});
  auto y = run1("Transpose", {x}, f32_info({3, 4, 2}), {attr("perm", std::vector<std::int64_t>{1, 2, 0})});
  // y[j][k][i] = x[i][j][k] = 12 i + 4 j + k
  std::vector<float> want;
  for (int j = 0; j < 3; ++j)
    for (int k = 0; k < 4; ++k)
      for (int i = 0; i < 2; ++i) want.push_back(static_cast<float>(12 * i + 4 * j + k));
  CHECK(values<float>(y) == want);

  auto r = run1("Transpose", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}, f32_info({3, 2}));
  CHECK(values<float>(r) == std::vector<float>{1, 4, 2, 5, 3, 6});

  // F16 and BOOL move the same way.
  auto b = run1("Transpose", {boolean({2, 2}, {1, 0, 0, 0})}, info(data_type::BOOL, {2, 2}));
  CHECK(values<bool>(b) == std::vector<bool>{true, false, false, false});
  auto wrong = std::vector<attribute>{attr("perm", std::vector<std::int64_t>{0, 0, 1})};
  CHECK_THROWS_AS(run1("Transpose", {x}, f32_info({2, 2, 3}), wrong), ipu::error);
}

TEST_CASE("shape ops: DepthToSpace in DCR and CRD modes, SpaceToDepth") {
  auto x = iota_f32({1, 8, 2, 3});
  auto dcr = run1("DepthToSpace", {x}, f32_info({1, 2, 4, 6}), {attr("blocksize", 2)});
  CHECK(values<float>(dcr) == std::vector<float>{0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                                                 5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                                                 31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47});
  auto crd = run1("DepthToSpace", {x}, f32_info({1, 2, 4, 6}), {attr("blocksize", 2), attr("mode", "CRD")});
  CHECK(values<float>(crd) == std::vector<float>{0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
                                                 5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
                                                 37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47});
  auto s2d = run1("SpaceToDepth", {iota_f32({1, 1, 4, 4})}, f32_info({1, 4, 2, 2}), {attr("blocksize", 2)});
  CHECK(values<float>(s2d) == std::vector<float>{0, 2, 8, 10, 1, 3, 9, 11, 4, 6, 12, 14, 5, 7, 13, 15});
  // SpaceToDepth then DepthToSpace (DCR) is the identity.
  auto back = run1("DepthToSpace", {s2d}, f32_info({1, 1, 4, 4}), {attr("blocksize", 2)});
  CHECK(values<float>(back) == values<float>(iota_f32({1, 1, 4, 4})));
  CHECK_THROWS_AS(run1("DepthToSpace", {iota_f32({1, 6, 2, 2})}, f32_info({1, 1, 4, 4}), {attr("blocksize", 2)}),
                  ipu::error);
}

TEST_CASE("shape ops: Shape with start / end clamped like Python slices, and Size") {
  auto x = host_tensor({data_type::F16, {2, 3, 4, 5}});
  CHECK(values<std::int64_t>(run1("Shape", {x}, info(data_type::S64, {4}))) == std::vector<std::int64_t>{2, 3, 4, 5});
  CHECK(values<std::int64_t>(run1("Shape", {x}, info(data_type::S64, {2}), {attr("start", 1), attr("end", -1)})) ==
        std::vector<std::int64_t>{3, 4});
  CHECK(values<std::int64_t>(run1("Shape", {x}, info(data_type::S64, {1}), {attr("start", -10), attr("end", 1)})) ==
        std::vector<std::int64_t>{2});
  CHECK(run1("Shape", {x}, info(data_type::S64, {0}), {attr("start", 3), attr("end", 1)}).info().num_elements() == 0);
  CHECK(values<std::int64_t>(run1("Size", {x}, info(data_type::S64, {}))) == std::vector<std::int64_t>{120});
}

TEST_CASE("shape ops: Dropout is the identity in inference with an all-true mask") {
  auto x = f32({4}, {1, -2, 3, -4});
  auto out = run("Dropout", {x, f32({}, {0.5f})}, {f32_info({4}), info(data_type::BOOL, {4})});
  CHECK(values<float>(out[0]) == std::vector<float>{1, -2, 3, -4});
  CHECK(values<bool>(out[1]) == std::vector<bool>{true, true, true, true});
  // training_mode with ratio 0 is also the identity.
  out = run("Dropout", {x, f32({}, {0.0f}), boolean({}, {1})}, {f32_info({4}), info(data_type::BOOL, {4})});
  CHECK(values<float>(out[0]) == std::vector<float>{1, -2, 3, -4});
}

TEST_CASE("shape ops: Dropout in training mode drops with the given ratio and scales the rest") {
  const int n = 4000;
  auto x = f32({n}, std::vector<float>(n, 2.0f));
  auto out = run("Dropout", {x, f32({}, {0.25f}), boolean({}, {1})}, {f32_info({n}), info(data_type::BOOL, {n})},
                 {attr("seed", 7)});
  const auto y = values<float>(out[0]);
  const auto m = values<bool>(out[1]);
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(y[static_cast<std::size_t>(i)] == (m[static_cast<std::size_t>(i)] ? 2.0f / 0.75f : 0.0f));
    kept += m[static_cast<std::size_t>(i)];
  }
  // 3000 expected; the binomial standard deviation is ~27, so this cannot fail by chance in practice.
  CHECK(kept > 2800);
  CHECK(kept < 3200);
  // The same seed gives the same mask.
  auto again = run("Dropout", {x, f32({}, {0.25f}), boolean({}, {1})}, {f32_info({n}), info(data_type::BOOL, {n})},
                   {attr("seed", 7)});
  CHECK(values<bool>(again[1]) == m);
}

TEST_CASE("shape ops: a large Transpose is split over threads and matches a direct loop") {
  const std::int64_t a = 48, b = 40, c = 36;  // 69120 elements: above the parallel threshold
  auto x = iota_f32({a, b, c});
  auto y = run1("Transpose", {x}, f32_info({c, a, b}), {attr("perm", std::vector<std::int64_t>{2, 0, 1})});
  const auto got = values<float>(y);
  bool same = true;
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t i = 0; i < a; ++i)
      for (std::int64_t j = 0; j < b; ++j)
        same = same && got[static_cast<std::size_t>((k * a + i) * b + j)] == static_cast<float>((i * b + j) * c + k);
  CHECK(same);
}

TEST_CASE("shape ops: Transpose by every permutation of a 4-D tensor with a size-1 axis matches a direct loop") {
  // Tiled planes when the innermost axis moves, whole rows when it stays; 8-byte and 1-byte elements.
  const std::vector<std::int64_t> d{3, 1, 4, 5};
  std::vector<std::int64_t> xv(60);
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<std::int64_t>(i) * 1000003;
  std::vector<std::uint8_t> bv(60);
  for (std::size_t i = 0; i < bv.size(); ++i) bv[i] = (i * 7) % 3 == 0;
  std::vector<std::int64_t> perm{0, 1, 2, 3};
  int checked = 0;
  do {
    std::vector<std::int64_t> od;
    for (auto a : perm) od.push_back(d[static_cast<std::size_t>(a)]);
    const auto got = values<std::int64_t>(run1("Transpose", {i64(shape(d), xv)}, info(data_type::S64, shape(od)), {attr("perm", perm)}));
    const auto gotb = values<bool>(run1("Transpose", {boolean(shape(d), bv)}, info(data_type::BOOL, shape(od)), {attr("perm", perm)}));
    bool same = true;
    std::size_t o = 0;
    std::array<std::int64_t, 4> idx{};
    for (idx[0] = 0; idx[0] < od[0]; ++idx[0])
      for (idx[1] = 0; idx[1] < od[1]; ++idx[1])
        for (idx[2] = 0; idx[2] < od[2]; ++idx[2])
          for (idx[3] = 0; idx[3] < od[3]; ++idx[3], ++o) {
            std::array<std::int64_t, 4> in{};
            for (std::size_t k = 0; k < 4; ++k) in[static_cast<std::size_t>(perm[k])] = idx[k];
            const auto at = static_cast<std::size_t>(((in[0] * d[1] + in[1]) * d[2] + in[2]) * d[3] + in[3]);
            same = same && got[o] == xv[at] && gotb[o] == (bv[at] != 0);
          }
    CHECK_MESSAGE(same, "perm " << perm[0] << perm[1] << perm[2] << perm[3]);
    ++checked;
  } while (std::next_permutation(perm.begin(), perm.end()));
  CHECK(checked == 24);
}

TEST_CASE("shape ops: a seeded training Dropout draws its mask like numpy's RandomState(seed).uniform") {
  // The reference mask comes from numpy at test time: keep where uniform(0, 1) >= ratio.
  const std::string cmd = std::string("\"") + IPU_PYTHON +
                          "\" -c \"import numpy as np; np.random.seed(11); "
                          "print(''.join('1' if k else '0' for k in np.random.uniform(0, 1, 64) >= 0.3))\"";
  std::FILE* p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  char buf[128] = {};
  const bool read = std::fgets(buf, sizeof buf, p) != nullptr;
  REQUIRE(pclose(p) == 0);
  REQUIRE(read);
  const std::string want(buf, 64);
  auto out = run("Dropout", {f32({64}, std::vector<float>(64, 1.4f)), f32({}, {0.3f}), boolean({}, {1})},
                 {f32_info({64}), info(data_type::BOOL, {64})}, {attr("seed", 11)});
  std::string got;
  for (bool k : values<bool>(out[1])) got += k ? '1' : '0';
  CHECK(got == want);
  std::vector<float> want_y;
  for (char k : got) want_y.push_back(k == '1' ? 2.0f : 0.0f);  // 1.4 / (1 - 0.3)
  check_close(values<float>(out[0]), want_y);
}

namespace {
/// Runs ipu::DropoutMask over a tensor of `n` elements: the mask.
std::vector<bool> dropout_mask(std::int64_t n, float ratio, std::uint64_t seed, std::uint64_t step, std::uint64_t micro,
                               std::int64_t stream = 0) {
  const auto* entry = registry().find("ipu", "DropoutMask");
  REQUIRE(entry);
  ipu::op_node op;
  op.domain = "ipu";
  op.type = "DropoutMask";
  op.name = "mask";
  op.attributes = {attr("stream", stream)};
  const host_tensor x({data_type::F16, {n}});
  const auto r = f32({}, {ratio});
  const auto s = host_tensor::from<std::uint64_t>(ipu::shape{3}, {seed, step, micro});
  std::vector<ipu::const_tensor_view> in{x.view(), r.view(), s.view()};
  host_tensor mask(info(data_type::BOOL, {n}));
  std::vector<ipu::tensor_view> out{mask.view()};
  ipu::kernel_context ctx{op, in, out, chunked_for, nullptr};
  entry->kernel(ctx);
  return values<bool>(mask);
}
std::string hex(const std::array<std::uint32_t, 4>& w) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x %08x %08x %08x", w[0], w[1], w[2], w[3]);
  return buf;
}
}  // namespace

TEST_CASE("DropoutMask's generator is Philox4x32-10: Random123's known-answer vectors") {
  using ipu::detail::tensor_ops::philox4x32_10;
  // Random123 v1.14, tests/kat_vectors, the three "philox4x32 10" lines.
  CHECK(hex(philox4x32_10({0, 0, 0, 0}, {0, 0})) == "6627e8d5 e169c58d bc57ac4c 9b00dbd8");
  CHECK(hex(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff})) ==
        "408f276d 41c83b0e a20bc7c6 6d5451fd");
  CHECK(hex(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0})) ==
        "d16cfe09 94fdcceb 5001e420 24126ea1");
}

TEST_CASE("DropoutMask drops a ratio of the elements, the same for the same (seed, step, micro-batch, stream)") {
  const std::int64_t n = 100000;
  for (const float ratio : {0.1f, 0.5f, 0.9f}) {
    CAPTURE(ratio);
    const auto m = dropout_mask(n, ratio, 42, 3, 1);
    std::int64_t dropped = 0;
    for (bool k : m) dropped += k ? 0 : 1;
    // Binomial: within 5 standard deviations (0.0015 at ratio 0.5), a bound chance cannot cross.
    const double p = static_cast<double>(ratio), sigma = std::sqrt(p * (1 - p) / static_cast<double>(n));
    CHECK(std::fabs(static_cast<double>(dropped) / static_cast<double>(n) - p) < 5 * sigma);
    CHECK(dropout_mask(n, ratio, 42, 3, 1) == m);
  }
  // Any other seed, step, micro-batch or stream draws another mask: about half the elements differ.
  const auto base = dropout_mask(4096, 0.5f, 42, 3, 1, 0);
  auto differing = [&](const std::vector<bool>& other) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < base.size(); ++i) d += base[i] != other[i];
    return d;
  };
  for (const auto& other : {dropout_mask(4096, 0.5f, 43, 3, 1, 0), dropout_mask(4096, 0.5f, 42 + (1ull << 32), 3, 1, 0),
                            dropout_mask(4096, 0.5f, 42, 4, 1, 0), dropout_mask(4096, 0.5f, 42, 3, 0, 0),
                            dropout_mask(4096, 0.5f, 42, 3, 1, 1)}) {
    CHECK(differing(other) > 1700);
    CHECK(differing(other) < 2400);
  }
  // Ratio 0 keeps everything; a ratio outside [0, 1) is an error saying so.
  for (bool k : dropout_mask(1000, 0.0f, 42, 0, 0)) CHECK(k);
  for (const float bad : {1.0f, -0.25f, 1.5f})
    CHECK_THROWS_WITH_AS(dropout_mask(8, bad, 1, 0, 0), doctest::Contains("outside [0, 1)"), ipu::error);
}

}  // namespace test_shape_ops
