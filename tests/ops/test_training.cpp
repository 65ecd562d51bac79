// ONNX's optimizer ops (ai.onnx.preview.training): Adagrad, Momentum (standard, Nesterov) and Adam
// against hand-computed updates from the specification's formulas, with regularisation, several
// tensors at once, F64, and their shape rule. (ONNX's own node tests run in tests/conformance.)
#include "ipu/ops/kernels/training.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "ipu/ops/infer.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_training {

using namespace tk;

namespace {

constexpr const char* domain = "ai.onnx.preview.training";

std::vector<host_tensor> run_opt(const std::string& type, std::vector<host_tensor> inputs,
                                 std::vector<tensor_info> outputs, std::vector<attribute> attrs) {
  return run_in(domain, type, std::vector<input>(inputs.begin(), inputs.end()), std::move(outputs), std::move(attrs));
}

host_tensor scalar_f32(float v) { return f32({}, {v}); }
host_tensor step(std::int64_t t) { return i64({}, {t}); }

}  // namespace

TEST_CASE("training: Adagrad with a decayed rate, regularisation and two tensors") {
  // r = R / (1 + T * decay) = 0.1 / (1 + 2 * 0.5) = 0.05.
  const std::vector<attribute> a = {attr("decay_factor", 0.5f), attr("norm_coefficient", 0.5f), attr("epsilon", 1.0f)};
  auto out = run_opt("Adagrad",
                     {scalar_f32(0.1f), step(2), f32({2}, {2, -1}), f32({1}, {3}), f32({2}, {1, 0.5f}), f32({1}, {-1}),
                      f32({2}, {0, 0.75f}), f32({1}, {8})},
                     {f32_info({2}), f32_info({1}), f32_info({2}), f32_info({1})}, a);
  // X1: g = 0.5 * 2 + 1 = 2, H = 0 + 4, X = 2 - 0.05 * 2 / (2 + 1); g = 0.5 * -1 + 0.5 = 0: X, H unchanged.
  check_close(values<float>(out[0]), {2 - 0.1f / 3, -1});
  // X2: g = 1.5 - 1 = 0.5, H = 8 + 0.25.
  check_close(values<float>(out[1]), {3 - 0.025f / (std::sqrt(8.25f) + 1)});
  check_close(values<float>(out[2]), {4, 0.75f});
  check_close(values<float>(out[3]), {8.25f});
  // Defaults: no decay, no regularisation, epsilon 1e-6.
  auto d = run_opt("Adagrad", {scalar_f32(1), step(5), f32({1}, {1}), f32({1}, {1}), f32({1}, {0})},
                   {f32_info({1}), f32_info({1})}, {});
  check_close(values<float>(d[0]), {1e-6f / (1 + 1e-6f)}, 1e-3f, 0);  // 1 - 1 / (1 + 1e-6)
  check_close(values<float>(d[1]), {1});
}

TEST_CASE("training: Momentum, standard and Nesterov, before and after the first step") {
  const auto x = f32({2}, {1, 2}), g = f32({2}, {2, 4}), v = f32({2}, {4, -4});
  auto momentum = [&](std::int64_t t, const char* mode, float norm) {
    return run_opt("Momentum", {scalar_f32(0.5f), step(t), x, g, v}, {f32_info({2}), f32_info({2})},
                   {attr("alpha", 0.5f), attr("beta", 0.25f), attr("norm_coefficient", norm), attr("mode", mode)});
  };
  // T = 0: beta counts as 1. V = 0.5 * V + G = [4, 2]; X = X - 0.5 * V.
  auto first = momentum(0, "standard", 0);
  check_close(values<float>(first[0]), {-1, 1});
  check_close(values<float>(first[1]), {4, 2});
  // T = 1: V = 0.5 * V + 0.25 * G = [2.5, -1].
  auto later = momentum(1, "standard", 0);
  check_close(values<float>(later[0]), {-0.25f, 2.5f});
  check_close(values<float>(later[1]), {2.5f, -1});
  // Nesterov with regularisation: g = X + G = [3, 6]; V = [2 + 0.75, -2 + 1.5];
  // X = X - 0.5 * (g + 0.5 * V).
  auto nesterov = momentum(1, "nesterov", 1);
  check_close(values<float>(nesterov[0]), {1 - 0.5f * (3 + 0.5f * 2.75f), 2 - 0.5f * (6 - 0.25f)});
  check_close(values<float>(nesterov[1]), {2.75f, -0.5f});
  // Mode and the coefficients have no default.
  CHECK_THROWS_AS(momentum(1, "heavy-ball", 0), ipu::error);
  CHECK_THROWS_AS(run_opt("Momentum", {scalar_f32(0.5f), step(0), x, g, v}, {f32_info({2}), f32_info({2})},
                          {attr("alpha", 0.5f), attr("beta", 0.25f), attr("mode", "standard")}),
                  ipu::error);
}

TEST_CASE("training: Momentum in F64 over two tensors") {
  auto f64 = [](shape s, std::vector<double> v) { return make<double>(std::move(s), std::move(v)); };
  auto out = run_opt("Momentum",
                     {make<double>({}, {0.5}), step(3), f64({1}, {1}), f64({2}, {1, 2}), f64({1}, {2}),
                      f64({2}, {2, 4}), f64({1}, {4}), f64({2}, {4, -4})},
                     {info(data_type::F64, {1}), info(data_type::F64, {2}), info(data_type::F64, {1}),
                      info(data_type::F64, {2})},
                     {attr("alpha", 0.5f), attr("beta", 0.25f), attr("norm_coefficient", 0.0f), attr("mode", "standard")});
  CHECK(values<double>(out[0]) == std::vector<double>{1 - 0.5 * 2.5});
  CHECK(values<double>(out[1]) == std::vector<double>{-0.25, 2.5});
  CHECK(values<double>(out[2]) == std::vector<double>{2.5});
  CHECK(values<double>(out[3]) == std::vector<double>{2.5, -1});
}

TEST_CASE("training: Adam with and without bias correction, and post-update regularisation") {
  auto adam = [&](std::int64_t t, std::vector<attribute> extra) {
    std::vector<attribute> a = {attr("alpha", 0.5f), attr("beta", 0.75f), attr("epsilon", 0.0f)};
    a.insert(a.end(), extra.begin(), extra.end());
    return run_opt("Adam", {scalar_f32(0.1f), step(t), f32({1}, {1}), f32({1}, {2}), f32({1}, {0}), f32({1}, {0})},
                   {f32_info({1}), f32_info({1}), f32_info({1})}, a);
  };
  // V = 0.5 * 0 + 0.5 * 2 = 1; H = 0.25 * 4 = 1; T = 0: X = 1 - 0.1 * 1 / 1.
  auto first = adam(0, {});
  check_close(values<float>(first[0]), {0.9f});
  check_close(values<float>(first[1]), {1});
  check_close(values<float>(first[2]), {1});
  // T = 2: the rate is 0.1 * sqrt(1 - 0.75^2) / (1 - 0.5^2).
  check_close(values<float>(adam(2, {})[0]), {1 - 0.1f * std::sqrt(1 - 0.5625f) / 0.75f});
  check_close(values<float>(adam(0, {attr("norm_coefficient_post", 0.5f)})[0]), {0.45f});
  // Regularisation before the update: g = 2 * 1 + 2 = 4, V = 2, H = 4, X = 1 - 0.1 * 2 / 2.
  auto reg = adam(0, {attr("norm_coefficient", 2.0f)});
  check_close(values<float>(reg[0]), {0.9f});
  check_close(values<float>(reg[1]), {2});
  check_close(values<float>(reg[2]), {4});
}

TEST_CASE("training: refused inputs") {
  // Three tensors per X for Adagrad: 2 + 4 inputs is not a whole number of them.
  CHECK_THROWS_AS(run_opt("Adagrad", {scalar_f32(1), step(0), f32({1}, {1}), f32({1}, {1}), f32({1}, {1}), f32({1}, {1})},
                          {f32_info({1}), f32_info({1})}, {}),
                  ipu::error);
  // A gradient of another shape than its tensor.
  CHECK_THROWS_AS(run_opt("Adagrad", {scalar_f32(1), step(0), f32({2}, {1, 2}), f32({1}, {1}), f32({2}, {0, 0})},
                          {f32_info({2}), f32_info({2})}, {}),
                  ipu::error);
  // R must be one value.
  CHECK_THROWS_AS(run_opt("Adagrad", {f32({2}, {1, 1}), step(0), f32({1}, {1}), f32({1}, {1}), f32({1}, {0})},
                          {f32_info({1}), f32_info({1})}, {}),
                  ipu::error);
}

TEST_CASE("training: the optimizers' shape rule") {
  ipu::graph g("adam");
  auto add = [&](const char* name, tensor_info i) { return g.add_tensor(name, std::move(i), ipu::tensor_kind::input); };
  const tensor_info a = f32_info({2, 3}), b = info(data_type::F32, {4});
  ipu::op_node op;
  op.type = "Adam";
  op.domain = domain;
  op.inputs = {add("R", f32_info({})), add("T", info(data_type::S64, {})), add("X1", a), add("X2", b), add("G1", a),
               add("G2", b), add("V1", a), add("V2", b), add("H1", a), add("H2", b)};
  op.outputs.resize(6, ipu::no_tensor);  // infer_outputs infers as many outputs as the op has
  auto infos = ipu::infer_outputs(g, op);
  CHECK(infos == std::vector<tensor_info>{a, b, a, b, a, b});
  // A state of another shape, or T not an integer, is refused.
  op.inputs[8] = add("H1_bad", b);
  CHECK_THROWS_AS(ipu::infer_outputs(g, op), ipu::error);
  op.inputs[8] = g.find_tensor("H1").value();
  op.inputs[1] = add("T_float", f32_info({}));
  CHECK_THROWS_AS(ipu::infer_outputs(g, op), ipu::error);
  // Momentum: outputs X then V; an unknown mode is refused.
  ipu::op_node m;
  m.type = "Momentum";
  m.domain = domain;
  m.inputs = {g.find_tensor("R").value(), g.find_tensor("T").value(), g.find_tensor("X2").value(),
              g.find_tensor("G2").value(), g.find_tensor("V2").value()};
  m.outputs.resize(2, ipu::no_tensor);
  m.attributes = {attr("alpha", 0.9f), attr("beta", 1.0f), attr("norm_coefficient", 0.0f), attr("mode", "nesterov")};
  CHECK(ipu::infer_outputs(g, m) == std::vector<tensor_info>{b, b});
  m.attributes.back() = attr("mode", "fast");
  CHECK_THROWS_AS(ipu::infer_outputs(g, m), ipu::error);
}

}  // namespace test_training
