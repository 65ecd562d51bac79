// Normalisation kernels against hand-computed values.
#include "ipu/ops/kernels/norm.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_norm {

using namespace mk;

/// sum(Y * r) over the first output: the loss whose dY is r.
double weighted_sum(const std::vector<host_tensor>& out, const std::vector<double>& r) {
  const auto y = out[0].as<double>();
  double l = 0;
  for (std::size_t i = 0; i < r.size(); ++i) l += y[i] * r[i];
  return l;
}

/// The central difference of f along element i of v.
template <class F>
double central(F&& f, std::vector<double> v, std::size_t i) {
  const double h = 1e-6;
  v[i] += h;
  const double up = f(v);
  v[i] -= 2 * h;
  return (up - f(v)) / (2 * h);
}

TEST_CASE("BatchNormalization (inference) uses the given statistics per channel") {
  auto x = f32({1, 2, 1, 2}, {1, 2, 3, 4});
  auto y = run1("BatchNormalization", {x, f32({2}, {1, 2}), f32({2}, {0, 1}), f32({2}, {1.5f, 3.5f}), f32({2}, {0.25f, 0.25f})},
                {data_type::F32, {1, 2, 1, 2}}, {{"epsilon", 0.0f}});
  check_close(floats(y), {-1, 1, -1, 3});
  // [N, C] input, default epsilon, F64 statistics with F32 data (mixed T / T2 since opset 15).
  auto y2 = run1("BatchNormalization", {f32({2, 1}, {0, 2}), f32({1}, {1}), f32({1}, {0}), f64({1}, {1}), f64({1}, {1})},
                 {data_type::F32, {2, 1}});
  const float s = 1 / std::sqrt(1 + 1e-5f);
  check_close(floats(y2), {-s, s});
  CHECK_THROWS_AS(run1("BatchNormalization", {x, f32({3}, {1, 1, 1}), f32({2}, {0, 0}), f32({2}, {0, 0}), f32({2}, {1, 1})},
                       {data_type::F32, {1, 2, 1, 2}}),
                  ipu::error);
}

TEST_CASE("BatchNormalization in training mode normalises with batch statistics") {
  // Channel 0: {1, 3, 5, 7} mean 4, biased var 5; channel 1: {2, 2, 2, 2} mean 2, var 0.
  auto x = f32({2, 2, 2}, {1, 3, 2, 2, 5, 7, 2, 2});
  auto out = run("BatchNormalization",
                 {x, f32({2}, {1, 1}), f32({2}, {0, 10}), f32({2}, {0, 0}), f32({2}, {1, 1})},
                 {{data_type::F32, {2, 2, 2}}, {data_type::F32, {2}}, {data_type::F32, {2}}},
                 {{"epsilon", 0.0f}, {"training_mode", std::int64_t{1}}, {"momentum", 0.5f}});
  const float r5 = 1 / std::sqrt(5.0f);
  // Channel 1 has zero variance and epsilon 0: 0 / 0 -> NaN, as the definition gives.
  auto y = floats(out[0]);
  check_close({y[0], y[1], y[4], y[5]}, {-3 * r5, -r5, r5, 3 * r5});
  check_close(floats(out[1]), {2, 1});    // 0 * 0.5 + 4 * 0.5, 0 * 0.5 + 2 * 0.5
  check_close(floats(out[2]), {3, 0.5f});  // 1 * 0.5 + 5 * 0.5, 1 * 0.5 + 0 * 0.5
}

TEST_CASE("ipu::BatchNormalizationTraining normalises with the batch's statistics and returns them") {
  // The training-mode case above: channel 0 {1, 3, 5, 7} mean 4, biased var 5; channel 1 constant 2.
  auto x = f32({2, 2, 2}, {1, 3, 2, 2, 5, 7, 2, 2});
  auto out = run_in("ipu", "BatchNormalizationTraining", {x, f32({2}, {2, 1}), f32({2}, {0.5f, 10})},
                    {{data_type::F32, {2, 2, 2}}, {data_type::F32, {2}}, {data_type::F32, {2}}}, {{"epsilon", 1.0f}});
  const float r6 = 1 / std::sqrt(6.0f);  // 1 / sqrt(var + epsilon)
  check_close(floats(out[0]), {-6 * r6 + 0.5f, -2 * r6 + 0.5f, 10, 10, 2 * r6 + 0.5f, 6 * r6 + 0.5f, 10, 10});
  check_close(floats(out[1]), {4, 2});
  check_close(floats(out[2]), {5, 0});
  CHECK_THROWS_AS(run_in("ipu", "BatchNormalizationTraining", {x, f32({3}, {1, 1, 1}), f32({2}, {0, 0})},
                         {{data_type::F32, {2, 2, 2}}, {data_type::F32, {2}}, {data_type::F32, {2}}}),
                  ipu::error);
}

TEST_CASE("ipu::BatchNormalizationTrainingGrad is the derivative of ipu::BatchNormalizationTraining") {
  // L = sum(Y * R): dY = R. Every gradient against central differences of the forward kernel (F64).
  const shape xs{2, 3, 4};
  std::vector<double> xv, rv;
  for (int i = 0; i < 24; ++i) {
    xv.push_back(std::sin(1.7 * i) * 3 + (i % 3));
    rv.push_back(std::cos(0.9 * i));
  }
  const std::vector<double> scale{1.5, -0.5, 2}, bias{0.1, 0.2, -0.3};
  const auto stat = tensor_info{data_type::F64, {3}};
  auto forward = [&](const std::vector<double>& x, const std::vector<double>& s, const std::vector<double>& b) {
    return run_in("ipu", "BatchNormalizationTraining", {f64(xs, x), f64({3}, s), f64({3}, b)},
                  {{data_type::F64, xs}, stat, stat}, {{"epsilon", 0.01f}});
  };
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& s, const std::vector<double>& b) {
    return weighted_sum(forward(x, s, b), rv);
  };
  const auto fwd = forward(xv, scale, bias);
  const auto grads = run_in("ipu", "BatchNormalizationTrainingGrad",
                            {f64(xs, rv), f64(xs, xv), f64({3}, scale), fwd[1], fwd[2]}, {{data_type::F64, xs}, stat, stat},
                            {{"epsilon", 0.01f}});
  for (std::size_t i = 0; i < xv.size(); ++i)
    CHECK(grads[0].as<double>()[i] ==
          doctest::Approx(central([&](const auto& v) { return loss(v, scale, bias); }, xv, i)).epsilon(1e-6));
  for (std::size_t c = 0; c < 3; ++c) {
    CHECK(grads[1].as<double>()[c] ==
          doctest::Approx(central([&](const auto& v) { return loss(xv, v, bias); }, scale, c)).epsilon(1e-6));
    CHECK(grads[2].as<double>()[c] ==
          doctest::Approx(central([&](const auto& v) { return loss(xv, scale, v); }, bias, c)).epsilon(1e-6));
  }
  CHECK_THROWS_AS(run_in("ipu", "BatchNormalizationTrainingGrad",
                         {f64({2, 3, 2}, std::vector<double>(12, 0)), f64(xs, xv), f64({3}, scale), fwd[1], fwd[2]},
                         {{data_type::F64, xs}, stat, stat}),
                  ipu::error);
}

TEST_CASE("InstanceNormalization normalises each (batch, channel) plane") {
  auto x = f32({2, 1, 4}, {1, 2, 3, 4, 10, 10, 20, 20});
  auto y = run1("InstanceNormalization", {x, f32({1}, {2}), f32({1}, {1})}, {data_type::F32, {2, 1, 4}}, {{"epsilon", 0.0f}});
  const float a = 1 / std::sqrt(1.25f);
  check_close(floats(y), {1 - 3 * a, 1 - a, 1 + a, 1 + 3 * a, -1, -1, 3, 3});
}

TEST_CASE("LayerNormalization over the trailing axes, with Mean and InvStdDev") {
  auto x = f32({2, 3}, {1, 2, 3, 2, 4, 6});
  const float eps = 1e-5f;
  auto out = run("LayerNormalization", {x, f32({3}, {1, 2, 1}), f32({3}, {0, 0, 1})},
                 {{data_type::F32, {2, 3}}, {data_type::F32, {2, 1}}, {data_type::F32, {2, 1}}});
  const float i0 = 1 / std::sqrt(2 / 3.0f + eps), i1 = 1 / std::sqrt(8 / 3.0f + eps);
  check_close(floats(out[0]), {-i0, 0, i0 + 1, -2 * i1, 0, 2 * i1 + 1}, 1e-5f, 1e-5f);
  check_close(floats(out[1]), {2, 4});
  check_close(floats(out[2]), {i0, i1});
  // axis 0 normalises everything; a scalar Scale broadcasts.
  auto all = run1("LayerNormalization", {f32({2, 2}, {1, 1, 3, 3}), f32({}, {2})}, {data_type::F32, {2, 2}},
                  {{"axis", std::int64_t{0}}, {"epsilon", 0.0f}});
  check_close(floats(all), {-2, -2, 2, 2});
  auto h = run1("LayerNormalization", {f16({1, 2}, {1, 3}), f16({2}, {1, 1})}, {data_type::F16, {1, 2}}, {{"epsilon", 0.0f}});
  check_close(floats(h), {-1, 1}, 0, 0);
  // Values close to a large mean keep their digits: the centring is not done against a rounded mean.
  std::vector<float> near(64);
  for (std::size_t i = 0; i < near.size(); ++i) near[i] = 4096.0f + 0.015625f * static_cast<float>(i % 7) + (i % 2 ? 0.0f : 0.0078125f);
  double mean = 0, var = 0;
  for (auto v : near) mean += v / 64.0;
  for (auto v : near) var += (v - mean) * (v - mean) / 64.0;
  std::vector<float> want;
  for (auto v : near) want.push_back(static_cast<float>((v - mean) / std::sqrt(var)));
  auto centred = run1("LayerNormalization", {f32({64}, near), f32({64}, std::vector<float>(64, 1.0f))},
                      {data_type::F32, {64}}, {{"epsilon", 0.0f}});
  check_close(floats(centred), want, 1e-5f, 1e-5f);
}

TEST_CASE("ipu::LayerNormalizationGrad is the derivative of LayerNormalization, with or without its statistics") {
  // L = sum(Y * R): dY = R. Every gradient against central differences of the forward kernel (F64),
  // normalising the trailing [3, 4] of [2, 3, 4].
  const shape xs{2, 3, 4}, ns{3, 4}, stats{2, 1, 1};
  std::vector<double> xv, rv, scale, bias;
  for (int i = 0; i < 24; ++i) {
    xv.push_back(std::sin(1.7 * i) * 3 + (i % 3));
    rv.push_back(std::cos(0.9 * i));
  }
  for (int i = 0; i < 12; ++i) {
    scale.push_back(1.5 - 0.25 * i);
    bias.push_back(0.1 * i - 0.3);
  }
  const std::vector<attribute> attrs{{"axis", std::int64_t{1}}, {"epsilon", 0.01f}};
  const tensor_info stat{data_type::F64, stats}, param{data_type::F64, ns};
  auto forward = [&](const std::vector<double>& x, const std::vector<double>& s, const std::vector<double>& b) {
    return run("LayerNormalization", {f64(xs, x), f64(ns, s), f64(ns, b)}, {{data_type::F64, xs}, stat, stat}, attrs);
  };
  auto loss = [&](const std::vector<double>& x, const std::vector<double>& s, const std::vector<double>& b) {
    return weighted_sum(forward(x, s, b), rv);
  };
  const auto fwd = forward(xv, scale, bias);
  const auto with_stats = run_in("ipu", "LayerNormalizationGrad", {f64(xs, rv), f64(xs, xv), f64(ns, scale), fwd[1], fwd[2]},
                                 {{data_type::F64, xs}, param, param}, attrs);
  const auto without = run_in("ipu", "LayerNormalizationGrad", {f64(xs, rv), f64(xs, xv), f64(ns, scale)},
                              {{data_type::F64, xs}, param, param}, attrs);
  for (const auto* grads : {&with_stats, &without}) {
    for (std::size_t i = 0; i < xv.size(); ++i)
      CHECK((*grads)[0].as<double>()[i] ==
            doctest::Approx(central([&](const auto& v) { return loss(v, scale, bias); }, xv, i)).epsilon(1e-6));
    for (std::size_t c = 0; c < 12; ++c) {
      CHECK((*grads)[1].as<double>()[c] ==
            doctest::Approx(central([&](const auto& v) { return loss(xv, v, bias); }, scale, c)).epsilon(1e-6));
      CHECK((*grads)[2].as<double>()[c] ==
            doctest::Approx(central([&](const auto& v) { return loss(xv, scale, v); }, bias, c)).epsilon(1e-6));
    }
  }
  // F32 agrees with F64 to float rounding.
  std::vector<float> xf(xv.begin(), xv.end()), rf(rv.begin(), rv.end()), sf(scale.begin(), scale.end());
  const tensor_info param32{data_type::F32, ns};
  const auto single = run_in("ipu", "LayerNormalizationGrad", {f32(xs, rf), f32(xs, xf), f32(ns, sf)},
                             {{data_type::F32, xs}, param32, param32}, attrs);
  for (std::size_t k = 0; k < 3; ++k) {
    const auto want = with_stats[k].as<double>();
    check_close(floats(single[k]), std::vector<float>(want.begin(), want.end()), 1e-5f, 1e-5f);
  }
  CHECK_THROWS_WITH_AS(run_in("ipu", "LayerNormalizationGrad", {f64(xs, rv), f64(xs, xv), f64({12}, scale)},
                              {{data_type::F64, xs}, param, param}, {{"axis", std::int64_t{2}}}),
                       doctest::Contains("Scale has 12 values for rows of 4"), ipu::error);
  CHECK_THROWS_AS(run_in("ipu", "LayerNormalizationGrad", {f64({2, 12}, rv), f64(xs, xv), f64(ns, scale)},
                         {{data_type::F64, xs}, param, param}, attrs),
                  ipu::error);
}

TEST_CASE("LRN sums squares over neighbouring channels") {
  auto x = f32({1, 3, 1, 1}, {1, 2, 3});
  // alpha / size = 1, beta = 1, bias = 1: y = x / (1 + sum of squares of channels c-1..c+1).
  auto y = run1("LRN", {x}, {data_type::F32, {1, 3, 1, 1}}, {{"size", std::int64_t{3}}, {"alpha", 3.0f}, {"beta", 1.0f}});
  check_close(floats(y), {1 / 6.0f, 2 / 15.0f, 3 / 14.0f});
  // An even size looks one channel further ahead than behind: size 2 -> channels c..c+1.
  auto y2 = run1("LRN", {x}, {data_type::F32, {1, 3, 1, 1}}, {{"size", std::int64_t{2}}, {"alpha", 2.0f}, {"beta", 1.0f}});
  check_close(floats(y2), {1 / 6.0f, 2 / 14.0f, 3 / 10.0f});
  CHECK_THROWS_AS(run1("LRN", {x}, {data_type::F32, {1, 3, 1, 1}}), ipu::error);
}

TEST_CASE("MeanVarianceNormalization over the default and given axes") {
  auto x = f32({2, 1, 1, 2}, {1, 3, 5, 7});
  const float r = 1 / std::sqrt(5.0f);
  check_close(floats(run1("MeanVarianceNormalization", {x}, {data_type::F32, {2, 1, 1, 2}})), {-3 * r, -r, r, 3 * r});
  check_close(floats(run1("MeanVarianceNormalization", {x}, {data_type::F32, {2, 1, 1, 2}}, {{"axes", ints{3}}})),
              {-1, 1, -1, 1});
}

}  // namespace test_norm
