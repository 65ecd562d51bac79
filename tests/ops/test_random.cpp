#include "ipu/ops/kernels/random.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/ops/infer.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_random {

using namespace tk;
using ints = std::vector<std::int64_t>;

/// Runs `type` once on `source` (nullptr: none), as a device does.
host_tensor draw(const std::string& type, std::vector<input> inputs, tensor_info out, std::vector<attribute> attrs,
                 ipu::random_source* source, const std::string& name = "r") {
  const auto* entry = registry().find("", type);
  REQUIRE(entry);
  ipu::op_node op;
  op.type = type;
  op.name = name;
  op.attributes = std::move(attrs);
  std::vector<ipu::const_tensor_view> in;
  for (const auto& i : inputs) in.push_back(i ? i->view() : ipu::const_tensor_view{});
  host_tensor result(std::move(out));
  const ipu::tensor_view views[] = {result.view()};
  ipu::kernel_context ctx{op, in, views, chunked_for, nullptr};
  ctx.random = source;
  entry->kernel(ctx);
  return result;
}

std::vector<attribute> shaped(ints dims, std::vector<attribute> more = {}) {
  more.push_back(attr("shape", std::move(dims)));
  return more;
}

struct moments {
  double mean = 0, variance = 0;
};
template <class T>
moments moments_of(const host_tensor& t) {
  const auto v = values<T>(t);
  double s = 0, s2 = 0;
  for (auto x : v) s += static_cast<double>(x);
  const double m = s / static_cast<double>(v.size());
  for (auto x : v) s2 += (static_cast<double>(x) - m) * (static_cast<double>(x) - m);
  return {m, s2 / static_cast<double>(v.size() - 1)};
}

constexpr std::int64_t n = 100000;

TEST_CASE("random: the same seed draws the same bits, another seed others, each call afresh") {
  const auto out = f32_info({1000});
  ipu::random_source a(7), b(7), c(8);
  for (const char* type : {"RandomNormal", "RandomUniform"}) {
    const auto first = values<float>(draw(type, {}, out, shaped({1000}), &a));
    CHECK(values<float>(draw(type, {}, out, shaped({1000}), &b)) == first);  // same seed, same call
    const auto other = values<float>(draw(type, {}, out, shaped({1000}), &c));
    CHECK(other != first);
    // The next call of the same op draws afresh; a source started over repeats the first.
    const auto second = values<float>(draw(type, {}, out, shaped({1000}), &a));
    CHECK(second != first);
    a.reseed(7);
    CHECK(values<float>(draw(type, {}, out, shaped({1000}), &a)) == first);
    CHECK(values<float>(draw(type, {}, out, shaped({1000}), &a)) == second);
    // Another op (by name) of the same seed draws independently.
    ipu::random_source d(7);
    CHECK(values<float>(draw(type, {}, out, shaped({1000}), &d, "other")) != first);
    a.reseed(7);
    b.reseed(7);
    c.reseed(8);
  }
  // Without a source every call is call 0 of the default seed.
  const auto plain = values<float>(draw("RandomUniform", {}, out, shaped({1000}), nullptr));
  CHECK(values<float>(draw("RandomUniform", {}, out, shaped({1000}), nullptr)) == plain);
  ipu::random_source fresh;
  CHECK(values<float>(draw("RandomUniform", {}, out, shaped({1000}), &fresh)) == plain);
}

TEST_CASE("random: a seed attribute replaces the run's seed") {
  const auto out = f32_info({500});
  ipu::random_source a(1), b(2);
  const auto seeded = shaped({500}, {attr("seed", 3.0f)});
  const auto x = values<float>(draw("RandomNormal", {}, out, seeded, &a));
  CHECK(values<float>(draw("RandomNormal", {}, out, seeded, &b)) == x);  // the run's seed does not matter
  CHECK(values<float>(draw("RandomNormal", {}, out, seeded, nullptr)) == x);
  CHECK(values<float>(draw("RandomNormal", {}, out, shaped({500}, {attr("seed", 4.0f)}), nullptr)) != x);
  ipu::random_source zero(0);  // the attribute's seed is not a run seed of the same value
  CHECK(values<float>(draw("RandomNormal", {}, out, shaped({500}, {attr("seed", 0.0f)}), nullptr)) !=
        values<float>(draw("RandomNormal", {}, out, shaped({500}), &zero)));
}

TEST_CASE("random: RandomNormal's mean and variance over 100k draws, F32 and F64") {
  // mean 2, scale 3: the sample mean's standard error is 3 / sqrt(1e5) = 0.0095 and the sample
  // variance's 9 sqrt(2 / 1e5) = 0.040; the bounds are five of them.
  const auto attrs = shaped({n}, {attr("mean", 2.0f), attr("scale", 3.0f)});
  const auto f = draw("RandomNormal", {}, f32_info({n}), attrs, nullptr);
  const auto m = moments_of<float>(f);
  CHECK(std::fabs(m.mean - 2) < 0.048);
  CHECK(std::fabs(m.variance - 9) < 0.2);
  // A normal's mass within one standard deviation is 0.6827 (standard error 0.0015).
  const auto v = values<float>(f);
  const auto within = std::count_if(v.begin(), v.end(), [](float x) { return std::fabs(x - 2) < 3; });
  CHECK(std::fabs(static_cast<double>(within) / n - 0.682689) < 0.0075);
  auto attrs64 = attrs;
  attrs64.push_back(attr("dtype", std::int64_t{11}));
  const auto d = moments_of<double>(draw("RandomNormal", {}, info(data_type::F64, {n}), attrs64, nullptr));
  CHECK(std::fabs(d.mean - 2) < 0.048);
  CHECK(std::fabs(d.variance - 9) < 0.2);
}

TEST_CASE("random: RandomUniform stays in the half-open interval from low to high, with the right moments") {
  // [-1, 3): mean 1, variance 16 / 12; standard errors 0.0037 and 0.0038.
  const auto attrs = shaped({n}, {attr("low", -1.0f), attr("high", 3.0f)});
  const auto u = draw("RandomUniform", {}, f32_info({n}), attrs, nullptr);
  const auto v = values<float>(u);
  CHECK(*std::min_element(v.begin(), v.end()) >= -1.0f);
  CHECK(*std::max_element(v.begin(), v.end()) < 3.0f);
  const auto m = moments_of<float>(u);
  CHECK(std::fabs(m.mean - 1) < 0.019);
  CHECK(std::fabs(m.variance - 16.0 / 12) < 0.019);
  // Each quarter of the interval holds a quarter of the draws (standard error 0.0014).
  for (float lo : {-1.0f, 0.0f, 1.0f, 2.0f}) {
    const auto in = std::count_if(v.begin(), v.end(), [lo](float x) { return x >= lo && x < lo + 1; });
    CHECK(std::fabs(static_cast<double>(in) / n - 0.25) < 0.007);
  }
  // F16: [0, 1) rounds many draws up to 1, which must not be returned.
  const auto h = values<half>(draw("RandomUniform", {}, info(data_type::F16, {n}),
                                   shaped({n}, {attr("dtype", std::int64_t{10})}), nullptr));
  CHECK(std::all_of(h.begin(), h.end(), [](half x) { return static_cast<float>(x) >= 0 && static_cast<float>(x) < 1; }));
}

TEST_CASE("random: the -Like forms take the input's shape and, unless dtype says otherwise, its type") {
  const auto x = make<double>({2, 3}, {0, 0, 0, 0, 0, 0});
  CHECK(draw("RandomNormalLike", {x}, info(data_type::F64, {2, 3}), {}, nullptr).info() ==
        tensor_info{data_type::F64, {2, 3}});
  const auto u = draw("RandomUniformLike", {i64({4}, {1, 2, 3, 4})}, f32_info({4}),
                      {attr("dtype", std::int64_t{1}), attr("low", 5.0f), attr("high", 6.0f)}, nullptr);
  for (float v : values<float>(u)) CHECK((v >= 5.0f && v < 6.0f));
  // An integer input has no floating-point type to default to.
  CHECK_THROWS_WITH_AS(draw("RandomUniformLike", {i64({4}, {1, 2, 3, 4})}, f32_info({4}), {}, nullptr),
                       doctest::Contains("give dtype"), ipu::error);
  // The shape rules say the same.
  ipu::op_node op;
  op.type = "RandomNormal";
  op.attributes = shaped({3, 0, 2}, {attr("dtype", std::int64_t{10})});
  CHECK(ipu::infer_outputs(op, {}, 1)[0] == tensor_info{data_type::F16, {3, 0, 2}});
  op.type = "Multinomial";
  op.attributes = {attr("sample_size", std::int64_t{5}), attr("dtype", std::int64_t{7})};
  const tensor_info logits{data_type::F32, {4, 10}};
  const ipu::infer_input in[] = {{&logits, nullptr}};
  CHECK(ipu::infer_outputs(op, in, 1)[0] == tensor_info{data_type::S64, {4, 5}});
  op.type = "Bernoulli";
  op.attributes = {attr("dtype", std::int64_t{9})};
  CHECK(ipu::infer_outputs(op, in, 1)[0] == tensor_info{data_type::BOOL, {4, 10}});
  op.attributes = {};
  CHECK(ipu::infer_outputs(op, in, 1)[0] == tensor_info{data_type::F32, {4, 10}});
}

TEST_CASE("random: Bernoulli's frequency follows each element's probability") {
  // p = 0.3 over 100k draws: standard error 0.00145. p = 0 and 1 are never and always.
  std::vector<float> p(static_cast<std::size_t>(n), 0.3f);
  p[0] = 0;
  p[1] = 1;
  const auto b = values<bool>(draw("Bernoulli", {f32({n}, p)}, info(data_type::BOOL, {n}),
                                   {attr("dtype", std::int64_t{9})}, nullptr));
  CHECK_FALSE(b[0]);
  CHECK(b[1]);
  const auto ones = std::count(b.begin() + 2, b.end(), true);
  CHECK(std::fabs(static_cast<double>(ones) / (n - 2) - 0.3) < 0.0073);
  // Without dtype the draws are 0 / 1 in the input's type.
  const auto f = values<float>(draw("Bernoulli", {f32({3}, {0, 1, 1})}, f32_info({3}), {}, nullptr));
  CHECK(f == std::vector<float>{0, 1, 1});
  CHECK_THROWS_WITH_AS(draw("Bernoulli", {f32({2}, {0.5f, 1.5f})}, f32_info({2}), {}, nullptr),
                       doctest::Contains("outside [0, 1]"), ipu::error);
}

TEST_CASE("random: Multinomial's class frequencies follow the softmax of each row") {
  // Row 0: probabilities 0.1, 0.2, 0 (-inf), 0.7 as log-probabilities plus a constant (which the
  // softmax ignores); row 1: one certain class. Standard errors at most 0.0015.
  const float inf = std::numeric_limits<float>::infinity();
  const auto logits = f32({2, 4}, {std::log(0.1f) + 5, std::log(0.2f) + 5, -inf, std::log(0.7f) + 5,  //
                                   -inf, -inf, 0, -inf});
  const auto k = values<std::int64_t>(draw("Multinomial", {logits}, info(data_type::S64, {2, n}),
                                           {attr("sample_size", n), attr("dtype", std::int64_t{7})}, nullptr));
  std::vector<double> freq(4, 0);
  for (std::int64_t j = 0; j < n; ++j) freq[static_cast<std::size_t>(k[static_cast<std::size_t>(j)])] += 1.0 / n;
  CHECK(std::fabs(freq[0] - 0.1) < 0.0075);
  CHECK(std::fabs(freq[1] - 0.2) < 0.0075);
  CHECK(freq[2] == 0);
  CHECK(std::fabs(freq[3] - 0.7) < 0.0075);
  CHECK(std::all_of(k.begin() + n, k.end(), [](std::int64_t c) { return c == 2; }));
  // INT32 by default, sample_size 1.
  CHECK(draw("Multinomial", {logits}, info(data_type::S32, {2, 1}), {}, nullptr).info() ==
        tensor_info{data_type::S32, {2, 1}});
  CHECK_THROWS_WITH_AS(draw("Multinomial", {f32({1, 2}, {-inf, -inf})}, info(data_type::S32, {1, 1}), {}, nullptr),
                       doctest::Contains("probability 0"), ipu::error);
  CHECK_THROWS_WITH_AS(draw("Multinomial", {f32({1, 2}, {0, std::nanf("")})}, info(data_type::S32, {1, 1}), {}, nullptr),
                       doctest::Contains("finite log-probabilities"), ipu::error);
}

TEST_CASE("random: bad attributes are refused") {
  auto refused = [](const char* type, std::vector<attribute> attrs, const char* says) {
    CHECK_THROWS_WITH_AS(draw(type, {}, f32_info({4}), std::move(attrs), nullptr), doctest::Contains(says),
                         ipu::error);
  };
  refused("RandomNormal", shaped({4}, {attr("scale", -1.0f)}), "scale at least 0");
  refused("RandomNormal", shaped({4}, {attr("mean", std::numeric_limits<float>::infinity())}), "must be finite");
  refused("RandomUniform", shaped({4}, {attr("low", 2.0f), attr("high", 2.0f)}), "low < high");
  refused("RandomUniform", shaped({4}, {attr("dtype", std::int64_t{7})}), "not a type this op can write");
  refused("RandomUniform", {}, "shape is missing");
  refused("RandomUniform", shaped({-4}), "at least 0");
  refused("RandomUniform", shaped({5}), "the attributes and inputs make it F32[5]");
  refused("RandomUniform", shaped({4}, {attr("mean", 1.0f)}), "mean");  // RandomNormal's, not RandomUniform's
  CHECK_THROWS_WITH_AS(draw("Multinomial", {f32({1, 2}, {0, 0})}, info(data_type::S32, {1, 1}),
                            {attr("sample_size", std::int64_t{0})}, nullptr),
                       doctest::Contains("sample_size is 0"), ipu::error);
}

}  // namespace test_random
