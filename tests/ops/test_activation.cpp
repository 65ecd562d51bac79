// Activation kernels against hand-computed values.
#include "ipu/ops/kernels/activation.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_activation {

using namespace mk;

namespace {
const float qnan = std::numeric_limits<float>::quiet_NaN();
std::vector<float> act(const std::string& op, const std::vector<float>& x, std::vector<attribute> attrs = {}) {
  const auto n = static_cast<std::int64_t>(x.size());
  return floats(run1(op, {f32({n}, x)}, {data_type::F32, {n}}, std::move(attrs)));
}
}  // namespace

TEST_CASE("ReLU family") {
  check_close(act("Relu", {-1, 0, 2, qnan}), {0, 0, 2, qnan});
  CHECK(values<std::int32_t>(run1("Relu", {i32({3}, {-5, 0, 7})}, {data_type::S32, {3}})) == std::vector<std::int32_t>{0, 0, 7});
  check_close(act("LeakyRelu", {-2, 3}), {-0.02f, 3});
  check_close(act("LeakyRelu", {-2, 3}, {{"alpha", 0.1f}}), {-0.2f, 3});
  check_close(act("ThresholdedRelu", {0.5f, 1, 2}), {0, 0, 2});
  check_close(act("ThresholdedRelu", {0.5f, 1, 2}, {{"alpha", 0.25f}}), {0.5f, 1, 2});
  // PRelu: the slope [C, 1, 1] broadcasts over [N, C, H, W].
  auto p = run1("PRelu", {f32({1, 2, 1, 2}, {-1, 2, -3, 4}), f32({2, 1, 1}, {0.5f, 2})}, {data_type::F32, {1, 2, 1, 2}});
  check_close(floats(p), {-0.5f, 2, -6, 4});
}

TEST_CASE("Clip with optional bounds, integer types and NaN") {
  auto x = f32({5}, {-3, -1, 0, 2, qnan});
  check_close(floats(run1("Clip", {x, f32({}, {-1.5f}), f32({}, {1})}, {data_type::F32, {5}})), {-1.5f, -1, 0, 1, qnan});
  check_close(floats(run1("Clip", {x, std::nullopt, f32({}, {0})}, {data_type::F32, {5}})), {-3, -1, 0, 0, qnan});
  check_close(floats(run1("Clip", {x}, {data_type::F32, {5}})), {-3, -1, 0, 2, qnan});
  auto i = run1("Clip", {i64({3}, {-10, 5, 10}), i64({}, {0}), i64({}, {6})}, {data_type::S64, {3}});
  CHECK(values<std::int64_t>(i) == std::vector<std::int64_t>{0, 5, 6});
  CHECK_THROWS_AS(run1("Clip", {x, f32({2}, {0, 1})}, {data_type::F32, {5}}), ipu::error);
}

TEST_CASE("exponential activations") {
  check_close(act("Elu", {-1, 1}, {{"alpha", 2.0f}}), {2 * (std::exp(-1.0f) - 1), 1});
  check_close(act("Selu", {-1, 2}), {-1.1113307f, 2.1014020f});
  check_close(act("Celu", {-1, 3}, {{"alpha", 2.0f}}), {2 * (std::exp(-0.5f) - 1), 3});
  check_close(act("Sigmoid", {0, 100, -100, 2}), {0.5f, 1, 0, 0.88079708f}, 1e-6f, 1e-30f);
  check_close(act("HardSigmoid", {1, -3, 3}), {0.7f, 0, 1});
  check_close(act("HardSigmoid", {1}, {{"alpha", 0.5f}, {"beta", 0.25f}}), {0.75f});
  check_close(act("HardSwish", {1, -4, 4}), {1 * (1 / 6.0f + 0.5f), 0, 4});
  check_close(act("Tanh", {0.5f, -20}), {0.46211716f, -1});
  check_close(act("Erf", {0.5f, -3}), {0.52049988f, -0.99997791f});
  check_close(act("Softplus", {0, 100, -100}), {std::log(2.0f), 100, 0}, 1e-6f, 1e-30f);
  check_close(act("Softsign", {3, -1}), {0.75f, -0.5f});
  check_close(act("Mish", {1, -1}), {0.86509836f, -0.30340144f});
}

TEST_CASE("F16 and F64 activations compute in F32 / F64") {
  auto h = run1("Sigmoid", {f16({2}, {0, 1})}, {data_type::F16, {2}});
  CHECK(h.as<half>()[1].bits() == half(1.0f / (1.0f + std::exp(-1.0f))).bits());
  auto d = run1("Tanh", {f64({1}, {0.5})}, {data_type::F64, {1}});
  CHECK(d.as<double>()[0] == std::tanh(0.5));
  CHECK_THROWS_AS(run1("Sigmoid", {i32({1}, {1})}, {data_type::S32, {1}}), ipu::error);
}

TEST_CASE("Gelu: exact, tanh approximation and the vendor domains") {
  check_close(act("Gelu", {1, -1}), {0.84134475f, -0.15865525f});
  check_close(act("Gelu", {1, -1}, {{"approximate", std::string("tanh")}}), {0.84119199f, -0.15880801f});
  CHECK_THROWS_AS(act("Gelu", {1}, {{"approximate", std::string("fast")}}), ipu::error);
  for (const char* domain : {"com.microsoft", "ai.graphcore"}) {
    const auto* e = registry().find(domain, "Gelu");
    REQUIRE(e != nullptr);
    ipu::op_node op;
    op.type = "Gelu";
    op.domain = domain;
    auto x = f32({1}, {1});
    host_tensor y({data_type::F32, {1}});
    const std::vector<ipu::const_tensor_view> in{x.view()};
    const std::vector<ipu::tensor_view> out{y.view()};
    e->kernel(ipu::kernel_context{op, in, out});
    CHECK(y.as<float>()[0] == doctest::Approx(std::string(domain) == "ai.graphcore" ? 0.84119199 : 0.84134475).epsilon(1e-6));
  }
}

TEST_CASE("Shrink") {
  check_close(act("Shrink", {-2, -0.5f, 0, 0.5f, 2}), {-2, 0, 0, 0, 2});
  check_close(act("Shrink", {-2, -0.5f, 0, 0.5f, 2}, {{"bias", 1.5f}, {"lambd", 1.0f}}), {-0.5f, 0, 0, 0, 0.5f});
  CHECK(values<std::int32_t>(run1("Shrink", {i32({3}, {-3, 1, 3})}, {data_type::S32, {3}}, {{"bias", 1.0f}, {"lambd", 1.5f}})) ==
        std::vector<std::int32_t>{-2, 0, 2});
}

}  // namespace test_activation
