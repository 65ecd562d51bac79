#include "ipu/ops/kernels/loss.hpp"

#include <doctest/doctest.h>

#include <cmath>

#include "tensor_kernel_harness.hpp"

namespace test_loss {

using namespace tk;

TEST_CASE("loss: NegativeLogLikelihoodLoss reductions, weights and ignore_index") {
  auto x = f32({2, 3}, {-1, -2, -3, -0.5f, -1.5f, -2.5f});
  auto t = i64({2}, {2, 0});
  auto nll = [&](std::vector<input> in, shape out, std::vector<attribute> a) {
    return values<float>(run1("NegativeLogLikelihoodLoss", std::move(in), f32_info(std::move(out)), std::move(a)));
  };
  CHECK(nll({x, t}, {2}, {attr("reduction", "none")}) == std::vector<float>{3, 0.5f});
  CHECK(nll({x, t}, {}, {attr("reduction", "sum")}) == std::vector<float>{3.5f});
  CHECK(nll({x, t}, {}, {}) == std::vector<float>{1.75f});  // mean by default
  auto w = f32({3}, {1, 2, 3});
  CHECK(nll({x, t, w}, {2}, {attr("reduction", "none")}) == std::vector<float>{9, 0.5f});
  CHECK(nll({x, t, w}, {}, {}) == std::vector<float>{9.5f / 4});  // divided by the weights used
  CHECK(nll({x, t}, {}, {attr("ignore_index", 0)}) == std::vector<float>{3});
  CHECK(nll({x, t, w}, {2}, {attr("ignore_index", 2), attr("reduction", "none")}) == std::vector<float>{0, 0.5f});
  // A target that is not a class (and not ignored) is an error.
  CHECK_THROWS_AS(nll({x, i64({2}, {3, 0})}, {}, {}), ipu::error);
}

TEST_CASE("loss: NegativeLogLikelihoodLoss over spatial dimensions") {
  // [N=1, C=2, d=3]; targets pick class 1, 0, 1.
  auto x = f32({1, 2, 3}, {-1, -2, -3, -4, -5, -6});
  auto y = run1("NegativeLogLikelihoodLoss", {x, i32({1, 3}, {1, 0, 1})}, f32_info({1, 3}), {attr("reduction", "none")});
  CHECK(values<float>(y) == std::vector<float>{4, 2, 6});
}

TEST_CASE("loss: SoftmaxCrossEntropyLoss and its log_prob output") {
  const float ln3 = std::log(3.0f);
  auto scores = f32({2, 2}, {0, 0, ln3, 0});
  auto labels = i64({2}, {1, 0});
  auto out = run("SoftmaxCrossEntropyLoss", {scores, labels}, {f32_info({}), f32_info({2, 2})});
  // Row 0: softmax (1/2, 1/2); row 1: (3/4, 1/4).
  check_close(values<float>(out[0]), {(std::log(2.0f) + std::log(4.0f / 3.0f)) / 2});
  check_close(values<float>(out[1]), {-std::log(2.0f), -std::log(2.0f), std::log(0.75f), std::log(0.25f)});
  auto none = run1("SoftmaxCrossEntropyLoss", {scores, labels, f32({2}, {2, 0.5f})}, f32_info({2}),
                   {attr("reduction", "none")});
  check_close(values<float>(none), {0.5f * std::log(2.0f), 2 * std::log(4.0f / 3.0f)});
  auto ignored = run1("SoftmaxCrossEntropyLoss", {scores, labels}, f32_info({}), {attr("ignore_index", 1)});
  check_close(values<float>(ignored), {std::log(4.0f / 3.0f)});
  // Large scores do not overflow.
  auto big = run1("SoftmaxCrossEntropyLoss", {f32({1, 2}, {1000, 0}), i64({1}, {0})}, f32_info({}));
  check_close(values<float>(big), {0.0f}, 0, 1e-6f);
}

}  // namespace test_loss
