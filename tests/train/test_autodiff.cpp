// Every gradient rule against central finite differences in F64, the rule's graph run on the CPU
// device: loss = sum(op(inputs) * r) for a fixed random r, so d loss / d output = r and every
// input's gradient is checked element by element. And the errors autodiff owes a user.
#include "ipu/train/autodiff.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <span>
#include <limits>
#include <string_view>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/log.hpp"
#include "ipu/ops/all.hpp"
#include "../captured_log.hpp"

namespace test_autodiff {

namespace {

using ipu::data_type;
using ipu::tensor_id;

struct input_spec {
  ipu::shape shape;
  double lo = -1, hi = 1;  // values drawn from [lo, hi]
};

/// Deterministic values in [lo, hi] (a linear congruential sequence: reproducible everywhere).
std::vector<double> values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53);
  }
  return v;
}

/// Builds loss = sum(f(inputs) * r), adds its gradients, and checks each against finite differences.
void check_gradients(const std::string& what, const std::vector<input_spec>& specs,
                     const std::function<tensor_id(ipu::builder&, const std::vector<tensor_id>&)>& f) {
  CAPTURE(what);
  ipu::builder b("grad_check");
  std::vector<tensor_id> in;
  for (std::size_t i = 0; i < specs.size(); ++i)
    in.push_back(b.add_input_tensor({data_type::F64, specs[i].shape}, "in" + std::to_string(i)));
  const auto y = f(b, in);
  const auto yi = b.info(y);  // a copy: adding tensors moves the builder's
  const auto r = b.add_constant(ipu::make_constant<double>(
      yi.shape, values(static_cast<std::size_t>(yi.num_elements()), -1, 1, 99)));
  std::vector<std::int64_t> axes;
  for (std::size_t i = 0; i < yi.shape.rank(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  const auto weighted = b.mul(y, r);
  const auto loss = axes.empty() ? b.identity(weighted) : b.reduce_sum(weighted, axes, false);
  b.add_output(loss);
  auto g = std::move(b).build();
  const auto grads = ipu::train::add_gradients(g, loss, in);
  for (auto t : grads) {
    REQUIRE(t != ipu::no_tensor);
    g.mark_output(t);
  }
  ipu::cpu::device dev(g);

  std::vector<ipu::host_tensor> x;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto n = static_cast<std::size_t>(specs[i].shape.num_elements());
    x.push_back(ipu::host_tensor::from<double>(specs[i].shape, values(n, specs[i].lo, specs[i].hi, i + 1)));
  }
  const auto out = dev.run(x);
  auto loss_at = [&](std::vector<ipu::host_tensor>& v) { return dev.run(v)[0].as<double>()[0]; };
  const double h = 1e-6;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const auto analytic = out[1 + i].as<double>();
    REQUIRE(analytic.size() == x[i].as<double>().size());
    for (std::size_t k = 0; k < analytic.size(); ++k) {
      auto v = x;
      v[i].as<double>()[k] += h;
      const double up = loss_at(v);
      v[i].as<double>()[k] -= 2 * h;
      const double down = loss_at(v);
      const double numeric = (up - down) / (2 * h);
      INFO("input " << i << " element " << k);
      CHECK(analytic[k] == doctest::Approx(numeric).epsilon(1e-6).scale(1));
    }
  }
}

ipu::attribute attr(std::string n, std::int64_t v) { return {std::move(n), v}; }
ipu::attribute attr(std::string n, float v) { return {std::move(n), v}; }
ipu::attribute attr(std::string n, std::vector<std::int64_t> v) { return {std::move(n), std::move(v)}; }
ipu::attribute attr(std::string n, const char* v) { return {std::move(n), std::string(v)}; }
tensor_id ints(ipu::builder& b, const std::vector<std::int64_t>& v) {
  return b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{static_cast<std::int64_t>(v.size())}, v));
}
/// An op with one output built by the generic builder.
tensor_id op(ipu::builder& b, std::string_view type, const std::vector<tensor_id>& in,
             const std::vector<ipu::attribute>& at = {}, const ipu::op_options& o = {}) {
  return b.op(type, in, at, o).front();
}

}  // namespace

TEST_CASE("element-wise arithmetic with broadcasting") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Add", {{{2, 3}}, {{3}}}, [](B& b, V x) { return b.add(x[0], x[1]); });
  check_gradients("Sub", {{{2, 1}}, {{1, 3}}}, [](B& b, V x) { return b.sub(x[0], x[1]); });
  check_gradients("Mul", {{{4, 1, 3}}, {{2, 1}}}, [](B& b, V x) { return b.mul(x[0], x[1]); });
  check_gradients("Div", {{{2, 3}}, {{3}, 0.5, 2}}, [](B& b, V x) { return b.div(x[0], x[1]); });
  check_gradients("Neg", {{{5}}}, [](B& b, V x) { return b.neg(x[0]); });
  check_gradients("a tensor read twice", {{{3}}}, [](B& b, V x) { return b.mul(x[0], b.add(x[0], x[0])); });
}

TEST_CASE("activations and transcendental functions") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Relu", {{{7}}}, [](B& b, V x) { return b.relu(x[0]); });
  check_gradients("Abs", {{{7}}}, [](B& b, V x) { return b.abs(x[0]); });
  check_gradients("Sigmoid", {{{2, 3}}}, [](B& b, V x) { return b.sigmoid(x[0]); });
  check_gradients("Tanh", {{{2, 3}}}, [](B& b, V x) { return b.tanh(x[0]); });
  check_gradients("Exp", {{{4}}}, [](B& b, V x) { return b.exp(x[0]); });
  check_gradients("Log", {{{4}, 0.5, 2}}, [](B& b, V x) { return b.log(x[0]); });
  check_gradients("Sqrt", {{{4}, 0.5, 2}}, [](B& b, V x) { return b.sqrt(x[0]); });
  check_gradients("Identity", {{{4}}}, [](B& b, V x) { return b.identity(x[0]); });
}

TEST_CASE("shapes: Reshape, Flatten, Squeeze, Unsqueeze, Transpose") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Reshape", {{{2, 6}}}, [](B& b, V x) { return b.mul(b.reshape(x[0], {3, 4}), b.reshape(x[0], {3, 4})); });
  check_gradients("Flatten", {{{2, 3, 2}}}, [](B& b, V x) { return b.flatten(x[0], 2); });
  check_gradients("Squeeze", {{{2, 1, 3}}}, [](B& b, V x) { return b.squeeze(x[0], {1}); });
  check_gradients("Unsqueeze", {{{2, 3}}}, [](B& b, V x) { return b.unsqueeze(x[0], {0, 3}); });
  check_gradients("Transpose", {{{2, 3, 4}}}, [](B& b, V x) { return b.transpose(x[0], {1, 2, 0}); });
  check_gradients("Transpose (reversed)", {{{2, 3}}}, [](B& b, V x) { return b.transpose(x[0]); });
  check_gradients("Pad", {{{2, 3, 4}}}, [](B& b, V x) {
    const auto pads = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{6}, {0, 1, 2, 1, 0, 3}));
    return b.op("Pad", {x[0], pads}).front();
  });
}

TEST_CASE("matrix products: MatMul (batched, broadcast, 1-D) and Gemm (transposes, alpha, beta, broadcast C)") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("MatMul 2-D", {{{3, 4}}, {{4, 2}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul batched, broadcast", {{{2, 3, 4}}, {{4, 5}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul 4-D x 2-D (one product over every row for dB)", {{{2, 3, 2, 4}}, {{4, 5}}},
                  [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul broadcast batch", {{{2, 1, 3, 4}}, {{3, 4, 2}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul 1-D x 2-D", {{{4}}, {{4, 3}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul 2-D x 1-D", {{{3, 4}}, {{4}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  check_gradients("MatMul 1-D x 1-D", {{{4}}, {{4}}}, [](B& b, V x) { return b.matmul(x[0], x[1]); });
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const ipu::shape sa = ta ? ipu::shape{4, 3} : ipu::shape{3, 4}, sb = tb ? ipu::shape{2, 4} : ipu::shape{4, 2};
      check_gradients("Gemm transA " + std::to_string(ta) + " transB " + std::to_string(tb), {{sa}, {sb}, {{2}}},
                      [ta, tb](B& b, V x) {
                        return b.op("Gemm", {x[0], x[1], x[2]},
                                    {attr("transA", std::int64_t{ta}), attr("transB", std::int64_t{tb}),
                                     attr("alpha", 0.5f), attr("beta", 2.0f)})
                            .front();
                      });
    }
}

TEST_CASE("reductions, Softmax and LogSoftmax") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("ReduceSum", {{{2, 3, 4}}}, [](B& b, V x) { return b.reduce_sum(x[0], {0, 2}, true); });
  check_gradients("ReduceSum, dims dropped", {{{2, 3, 4}}}, [](B& b, V x) { return b.reduce_sum(x[0], {1}, false); });
  check_gradients("ReduceMean", {{{2, 3, 4}}}, [](B& b, V x) { return b.reduce_mean(x[0], {-1}, false); });
  check_gradients("ReduceMean, every axis", {{{2, 3}}}, [](B& b, V x) { return b.reduce_mean(x[0], {0, 1}, false); });
  check_gradients("Softmax", {{{2, 5}}}, [](B& b, V x) { return b.softmax(x[0], -1); });
  check_gradients("Softmax, middle axis", {{{2, 3, 4}}}, [](B& b, V x) { return b.softmax(x[0], 1); });
  check_gradients("LogSoftmax", {{{3, 4}}}, [](B& b, V x) { return b.log_softmax(x[0], 1); });
}

TEST_CASE("NegativeLogLikelihoodLoss: mean, sum and ignore_index") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  for (const char* reduction : {"mean", "sum"})
    for (bool ignore : {false, true}) {
      check_gradients(std::string("NLL ") + reduction + (ignore ? " ignoring class 2" : ""), {{{4, 3}}},
                      [reduction, ignore](B& b, V x) {
                        const auto t = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{4}, {0, 2, 1, 2}));
                        std::vector<ipu::attribute> at{{"reduction", std::string(reduction)}};
                        if (ignore) at.push_back(attr("ignore_index", std::int64_t{2}));
                        return b.op("NegativeLogLikelihoodLoss", {b.log_softmax(x[0], 1), t}, at).front();
                      });
    }
}

TEST_CASE("Conv: strides, dilations, pads, auto_pad, groups, bias; 1-D and 2-D") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Conv 3x3", {{{2, 2, 5, 5}}, {{3, 2, 3, 3}}, {{3}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], x[2]); });
  check_gradients("Conv strided, padded, odd size", {{{1, 2, 6, 5}}, {{2, 2, 3, 2}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], ipu::no_tensor, {.strides = {2, 2}, .pads = {1, 0, 0, 1}}); });
  check_gradients("Conv dilated", {{{1, 1, 7, 7}}, {{2, 1, 2, 3}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], ipu::no_tensor, {.dilations = {2, 1}}); });
  check_gradients("Conv SAME_UPPER", {{{1, 2, 5, 4}}, {{2, 2, 3, 3}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], ipu::no_tensor, {.strides = {2, 1}, .auto_pad = "SAME_UPPER"}); });
  check_gradients("Conv grouped", {{{2, 4, 4, 4}}, {{6, 2, 2, 2}}, {{6}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], x[2], {.group = 2}); });
  check_gradients("Conv depthwise", {{{1, 3, 4, 4}}, {{3, 1, 3, 3}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], ipu::no_tensor, {.pads = {1, 1, 1, 1}, .group = 3}); });
  check_gradients("Conv 1-D", {{{2, 3, 9}}, {{4, 3, 3}}},
                  [](B& b, V x) { return b.conv(x[0], x[1], ipu::no_tensor, {.strides = {2}}); });
}

TEST_CASE("pooling: MaxPool (overlapping windows, pads), AveragePool, GlobalAveragePool") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("MaxPool 2x2", {{{2, 2, 4, 6}}},
                  [](B& b, V x) { return b.max_pool(x[0], {.kernel_shape = {2, 2}, .strides = {2, 2}}); });
  check_gradients("MaxPool overlapping, padded", {{{1, 2, 5, 5}}},
                  [](B& b, V x) { return b.max_pool(x[0], {.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}}); });
  check_gradients("AveragePool", {{{2, 2, 4, 6}}},
                  [](B& b, V x) { return b.average_pool(x[0], {.kernel_shape = {2, 3}, .strides = {2, 3}}); });
  check_gradients("AveragePool overlapping, padded, counting pads", {{{1, 1, 5, 5}}}, [](B& b, V x) {
    return b.average_pool(x[0], {.kernel_shape = {3, 3}, .strides = {2, 2}, .pads = {1, 1, 1, 1}, .count_include_pad = true});
  });
  check_gradients("GlobalAveragePool", {{{2, 3, 4, 5}}}, [](B& b, V x) { return b.global_average_pool(x[0]); });
}

TEST_CASE("more activations: Erf, LeakyRelu, Clip, Softplus, Pow") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Erf", {{{6}}}, [](B& b, V x) { return b.erf(x[0]); });
  check_gradients("LeakyRelu", {{{7}}}, [](B& b, V x) { return b.leaky_relu(x[0], 0.2f); });
  check_gradients("Clip", {{{9}, -2, 2}}, [](B& b, V x) { return b.clip(x[0], -0.9, 0.7); });
  check_gradients("Softplus", {{{5}}}, [](B& b, V x) { return b.op("Softplus", {x[0]}).front(); });
  check_gradients("Pow", {{{2, 3}, 0.5, 2}, {{3}}}, [](B& b, V x) { return b.pow(x[0], x[1]); });
  check_gradients("Where", {{{2, 3}}, {{3}}}, [](B& b, V x) {
    const auto cond = b.add_constant(ipu::make_constant<bool>(ipu::shape{2, 3}, {true, false, true, false, false, true}));
    return b.op("Where", {cond, x[0], x[1]}).front();
  });
}

TEST_CASE("data movement: Concat, Split, Slice, Gather, Expand, Cast") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Concat", {{{2, 2}}, {{2, 3}}}, [](B& b, V x) { return b.concat({x[0], x[1], x[0]}, 1); });
  check_gradients("Split, one part unused", {{{2, 7}}}, [](B& b, V x) {
    const auto parts = b.split(x[0], {2, 4, 1}, 1);
    return b.mul(parts[1], parts[1]);
  });
  check_gradients("Slice", {{{4, 5}}}, [](B& b, V x) { return b.slice(x[0], {1, -4}, {3, 100}); });
  check_gradients("Gather rows, repeated", {{{5, 3}}}, [](B& b, V x) {
    const auto idx = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{2, 2}, {4, 0, 4, -1}));
    return b.gather(x[0], idx, 0);
  });
  check_gradients("Gather columns", {{{2, 5}}}, [](B& b, V x) {
    const auto idx = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{3}, {1, 3, 1}));
    return b.gather(x[0], idx, 1);
  });
  check_gradients("Expand", {{{3, 1}}}, [](B& b, V x) {
    return b.op("Expand", {x[0], b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{3}, {2, 3, 4}))}).front();
  });
  // Cast's rule casts back; F64 -> F64 keeps the finite differences exact.
  check_gradients("integer results (Shape) need no gradient", {{{2, 3}}}, [](B& b, V x) {
    const auto y = b.mul(x[0], x[0]);
    return b.mul(y, b.cast(b.op("Size", {y}).front(), data_type::F64));
  });
  check_gradients("Cast", {{{4}}}, [](B& b, V x) { return b.mul(b.cast(x[0], data_type::F64), x[0]); });
}

TEST_CASE("autodiff refuses what cannot be trained, before adding anything") {
  ipu::builder b("bad");
  const auto x = b.add_input_tensor({data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{3}, {1, 2, 3}), "w");
  const auto y = b.add(x, w, "y");
  const auto lonely = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{1}, {1}), "lonely");
  const auto no_rule = b.op("Tan", {y}).front();
  const auto scalar = b.reduce_sum(no_rule, {0, 1}, false, "scalar");
  const auto ints = b.cast(scalar, data_type::S32, "ints");
  b.add_output(y);
  b.add_output(scalar);
  b.add_output(ints);
  b.add_output(lonely);
  const auto g = b.build();
  const std::vector<tensor_id> weights{w};
  auto attempt = [&](tensor_id loss, std::vector<tensor_id> ws) {
    auto copy = g;
    const auto ops_before = copy.num_ops();
    try {
      (void)ipu::train::add_gradients(copy, loss, ws);
    } catch (const ipu::error&) {
      CHECK(copy.num_ops() == ops_before);  // nothing added
      throw;
    }
  };
  CHECK_THROWS_WITH_AS(attempt(y, weights), doctest::Contains("the loss 'y' is not a scalar: F32[2,3]"), ipu::error);
  CHECK_THROWS_WITH_AS(attempt(ints, weights), doctest::Contains("not a floating-point value"), ipu::error);
  CHECK_THROWS_WITH_AS(attempt(scalar, {lonely}), doctest::Contains("depends on none of the 1 trainable weights"),
                       ipu::error);
  CHECK_THROWS_WITH_AS(attempt(scalar, weights), doctest::Contains("no gradient rule for the ops between the weights and the loss: Tan"),
                       ipu::error);
}


TEST_CASE("LayerNormalization's backward is one op when Scale and B span the normalised axes, else op by op") {
  auto backward_ops = [](const ipu::shape& scale_shape, std::size_t outputs, std::int64_t axis = -1) {
    ipu::builder b("ln");
    const auto x = b.add_input_tensor({data_type::F32, {2, 3, 4}}, "x");
    const auto s = b.add_input_tensor({data_type::F32, scale_shape}, "s");
    const auto y = b.op("LayerNormalization", {x, s}, {attr("axis", axis)}, {.opset = 17, .num_outputs = outputs})[0];
    const auto loss = b.reduce_sum(y, {0, 1, 2}, false);
    b.add_output(loss);
    auto g = std::move(b).build();
    const auto forward = g.num_ops();
    const std::vector<tensor_id> weights{x, s};
    (void)ipu::train::add_gradients(g, loss, weights);
    std::vector<std::string> types;
    for (auto id = forward; id < g.num_ops(); ++id) types.push_back(g.op(id).type);
    return std::pair{types, g};
  };
  {
    const auto [types, g] = backward_ops({4}, 3);
    CHECK(std::count(types.begin(), types.end(), "LayerNormalizationGrad") == 1);
    CHECK(types.size() <= 3);  // the loss's Expand of its seed, and the one op
    for (const auto& op : g.ops())  // it reads the forward's Mean and InvStdDev
      if (op.type == "LayerNormalizationGrad") CHECK(op.inputs.size() == 5);
  }
  {
    const auto [types, g] = backward_ops({4}, 1);
    CHECK(std::count(types.begin(), types.end(), "LayerNormalizationGrad") == 1);
    for (const auto& op : g.ops())
      if (op.type == "LayerNormalizationGrad") CHECK(op.inputs.size() == 3);
  }
  {
    const auto [types, g] = backward_ops({1, 4}, 1, -2);  // Scale broadcasts over axis 1: op by op
    CHECK(std::count(types.begin(), types.end(), "LayerNormalizationGrad") == 0);
    CHECK(types.size() > 5);
  }
}

TEST_CASE("normalisation: LayerNormalization (axis, epsilon, broadcast Scale and B), ipu::BatchNormalizationTraining, InstanceNormalization") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("LayerNormalization, last axis", {{{2, 3, 4}}, {{4}, 0.5, 2}, {{4}}},
                  [](B& b, V x) { return op(b, "LayerNormalization", {x[0], x[1], x[2]}, {}, {.opset = 17}); });
  check_gradients("LayerNormalization, axis 1, epsilon, broadcast B", {{{2, 3, 4}}, {{3, 4}, 0.5, 2}, {{4}}}, [](B& b, V x) {
    return op(b, "LayerNormalization", {x[0], x[1], x[2]}, {attr("axis", std::int64_t{1}), attr("epsilon", 0.1f)},
              {.opset = 17});
  });
  check_gradients("LayerNormalization, broadcast Scale, no B, statistics asked for", {{{3, 2, 4}}, {{1, 4}, 0.5, 2}},
                  [](B& b, V x) {
                    const auto outs = b.op("LayerNormalization", {x[0], x[1]}, {attr("axis", std::int64_t{-2})},
                                           {.opset = 17, .num_outputs = 3});
                    return outs[0];
                  });
  // Scale and B spanning the normalised axes: the backward is one op, ipu::LayerNormalizationGrad,
  // reading the forward's statistics when it wrote them.
  check_gradients("LayerNormalization, axis 1, Scale and B over [3, 4], statistics written", {{{2, 3, 4}}, {{3, 4}, 0.5, 2}, {{3, 4}}},
                  [](B& b, V x) {
                    return b.op("LayerNormalization", {x[0], x[1], x[2]}, {attr("axis", std::int64_t{1}), attr("epsilon", 0.1f)},
                                {.opset = 17, .num_outputs = 3})[0];
                  });
  // The library's training-mode BatchNormalization (a training graph writes one for each
  // BatchNormalization): its gradient is one op, ipu::BatchNormalizationTrainingGrad.
  check_gradients("ipu::BatchNormalizationTraining 2-D", {{{3, 2, 2, 3}}, {{2}, 0.5, 2}, {{2}}}, [](B& b, V x) {
    return b.op("BatchNormalizationTraining", {x[0], x[1], x[2]}, {attr("epsilon", 0.01f)},
                {.opset = 1, .num_outputs = 3, .domain = "ipu"})[0];
  });
  check_gradients("ipu::BatchNormalizationTraining [N, C]", {{{4, 3}}, {{3}, 0.5, 2}, {{3}}}, [](B& b, V x) {
    return b.op("BatchNormalizationTraining", {x[0], x[1], x[2]}, {attr("epsilon", 1e-5f)},
                {.opset = 1, .num_outputs = 3, .domain = "ipu"})[0];
  });
  check_gradients("InstanceNormalization 1-D", {{{2, 3, 5}}, {{3}, 0.5, 2}, {{3}}},
                  [](B& b, V x) { return op(b, "InstanceNormalization", {x[0], x[1], x[2]}); });
  check_gradients("InstanceNormalization 2-D, epsilon", {{{1, 2, 3, 3}}, {{2}, 0.5, 2}, {{2}}}, [](B& b, V x) {
    return op(b, "InstanceNormalization", {x[0], x[1], x[2]}, {attr("epsilon", 0.05f)});
  });
}

TEST_CASE("ConvTranspose: strides, pads, output_padding, dilations, groups, auto_pad, output_shape, bias") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("ConvTranspose 2x2", {{{1, 2, 3, 3}}, {{2, 3, 2, 2}}, {{3}}},
                  [](B& b, V x) { return op(b, "ConvTranspose", {x[0], x[1], x[2]}); });
  check_gradients("ConvTranspose strided, padded, output_padding", {{{1, 2, 3, 4}}, {{2, 2, 3, 3}}}, [](B& b, V x) {
    return op(b, "ConvTranspose", {x[0], x[1]},
              {attr("strides", {2, 2}), attr("pads", {1, 0, 0, 1}), attr("output_padding", {1, 0})});
  });
  check_gradients("ConvTranspose dilated, grouped", {{{2, 4, 3, 3}}, {{4, 1, 2, 2}}, {{2}}}, [](B& b, V x) {
    return op(b, "ConvTranspose", {x[0], x[1], x[2]}, {attr("dilations", {2, 1}), attr("group", std::int64_t{2})});
  });
  check_gradients("ConvTranspose grouped, 2 channels per group, strided", {{{1, 4, 2, 3}}, {{4, 3, 2, 2}}},
                  [](B& b, V x) {
                    return op(b, "ConvTranspose", {x[0], x[1]},
                              {attr("strides", {2, 1}), attr("group", std::int64_t{2}), attr("pads", {0, 1, 1, 0})});
                  });
  check_gradients("ConvTranspose 1-D", {{{2, 3, 5}}, {{3, 2, 3}}},
                  [](B& b, V x) { return op(b, "ConvTranspose", {x[0], x[1]}, {attr("strides", std::vector<std::int64_t>{3})}); });
  check_gradients("ConvTranspose SAME_UPPER", {{{1, 1, 3, 3}}, {{1, 2, 3, 3}}}, [](B& b, V x) {
    return op(b, "ConvTranspose", {x[0], x[1]}, {attr("strides", {2, 2}), attr("auto_pad", "SAME_UPPER")});
  });
  check_gradients("ConvTranspose output_shape", {{{1, 1, 3, 3}}, {{1, 1, 3, 3}}}, [](B& b, V x) {
    return op(b, "ConvTranspose", {x[0], x[1]}, {attr("strides", {2, 2}), attr("output_shape", {6, 5})});
  });
}

TEST_CASE("Einsum: products, sums, transposes, outer products, implicit outputs, ellipses, broadcasting") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  auto einsum = [](const char* eq) {
    return [eq](B& b, V x) { return op(b, "Einsum", x, {attr("equation", eq)}); };
  };
  check_gradients("ij,jk->ik", {{{2, 3}}, {{3, 4}}}, einsum("ij,jk->ik"));
  check_gradients("bij,bjk->bik", {{{2, 2, 3}}, {{2, 3, 2}}}, einsum("bij,bjk->bik"));
  check_gradients("bij,bjk->bik, batch broadcast", {{{1, 2, 3}}, {{2, 3, 2}}}, einsum("bij,bjk->bik"));
  check_gradients("ij-> (everything summed)", {{{2, 3}}}, einsum("ij->"));
  check_gradients("ij->ji", {{{2, 3}}}, einsum("ij->ji"));
  check_gradients("i,j->ij", {{{2}}, {{3}}}, einsum("i,j->ij"));
  check_gradients("ij,j (implicit output)", {{{2, 3}}, {{3}}}, einsum("ij,j"));
  check_gradients("ijk,jl->il (k only in the first operand)", {{{2, 3, 2}}, {{3, 2}}}, einsum("ijk,jl->il"));
  check_gradients("...ij,...jk->...ik", {{{2, 2, 3}}, {{3, 2}}}, einsum("...ij,...jk->...ik"));
  check_gradients("bhqd,bhkd->bhqk (attention scores)", {{{1, 2, 3, 2}}, {{1, 2, 2, 2}}}, einsum("bhqd,bhkd->bhqk"));
  check_gradients("i,i,i-> (three operands)", {{{3}}, {{3}}, {{3}}}, einsum("i,i,i->"));
  ipu::builder b("diag");
  const auto x = b.add_input_tensor({data_type::F32, {3, 3}}, "x");
  const auto y = b.reduce_sum(op(b, "Einsum", {x}, {attr("equation", "ii->i")}), {0}, false);
  b.add_output(y);
  auto g = std::move(b).build();
  const std::vector<tensor_id> ws{x};
  CHECK_THROWS_WITH_AS((void)ipu::train::add_gradients(g, y, ws), doctest::Contains("label 'i' repeats within one operand"),
                       ipu::error);
}

TEST_CASE("activations: Elu, Selu, Celu, HardSigmoid, HardSwish, Softsign, Mish, Gelu, Swish, PRelu, ThresholdedRelu, Shrink") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Elu", {{{9}, -2, 2}}, [](B& b, V x) { return op(b, "Elu", {x[0]}, {attr("alpha", 0.7f)}); });
  check_gradients("Selu", {{{9}, -2, 2}}, [](B& b, V x) { return op(b, "Selu", {x[0]}); });
  check_gradients("Selu, attributes", {{{9}, -2, 2}},
                  [](B& b, V x) { return op(b, "Selu", {x[0]}, {attr("alpha", 1.5f), attr("gamma", 0.5f)}); });
  check_gradients("Celu", {{{9}, -2, 2}}, [](B& b, V x) { return op(b, "Celu", {x[0]}, {attr("alpha", 1.5f)}); });
  check_gradients("HardSigmoid", {{{12}, -4, 4}},
                  [](B& b, V x) { return op(b, "HardSigmoid", {x[0]}, {attr("alpha", 0.3f), attr("beta", 0.4f)}); });
  check_gradients("HardSwish", {{{12}, -5, 5}}, [](B& b, V x) { return op(b, "HardSwish", {x[0]}); });
  check_gradients("Softsign", {{{7}, -3, 3}}, [](B& b, V x) { return op(b, "Softsign", {x[0]}); });
  check_gradients("Mish", {{{7}, -3, 3}}, [](B& b, V x) { return op(b, "Mish", {x[0]}); });
  check_gradients("Gelu", {{{7}, -3, 3}}, [](B& b, V x) { return op(b, "Gelu", {x[0]}, {}, {.opset = 20}); });
  check_gradients("Gelu tanh", {{{7}, -3, 3}},
                  [](B& b, V x) { return op(b, "Gelu", {x[0]}, {attr("approximate", "tanh")}, {.opset = 20}); });
  check_gradients("com.microsoft Gelu", {{{7}, -3, 3}},
                  [](B& b, V x) { return op(b, "Gelu", {x[0]}, {}, {.opset = 1, .domain = "com.microsoft"}); });
  check_gradients("ai.graphcore Gelu", {{{7}, -3, 3}},
                  [](B& b, V x) { return op(b, "Gelu", {x[0]}, {}, {.opset = 1, .domain = "ai.graphcore"}); });
  check_gradients("ai.graphcore Swish", {{{9}, -4, 4}},
                  [](B& b, V x) { return op(b, "Swish", {x[0]}, {}, {.opset = 1, .domain = "ai.graphcore"}); });
  check_gradients("PRelu, slope per channel", {{{2, 3, 4}}, {{3, 1}}}, [](B& b, V x) { return op(b, "PRelu", {x[0], x[1]}); });
  check_gradients("PRelu, slope per last axis", {{{2, 3, 4}}, {{4}}}, [](B& b, V x) { return op(b, "PRelu", {x[0], x[1]}); });
  check_gradients("PRelu, one slope", {{{2, 3}}, {{1}}}, [](B& b, V x) { return op(b, "PRelu", {x[0], x[1]}); });
  check_gradients("ThresholdedRelu", {{{9}, -2, 2}},
                  [](B& b, V x) { return op(b, "ThresholdedRelu", {x[0]}, {attr("alpha", 0.3f)}); });
  check_gradients("Shrink", {{{9}, -2, 2}},
                  [](B& b, V x) { return op(b, "Shrink", {x[0]}, {attr("lambd", 0.4f), attr("bias", 0.1f)}); });
}

TEST_CASE("element-wise: Reciprocal, Sin, Cos, variadic Max, Min, Sum, Mean with broadcasting") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Reciprocal", {{{5}, 0.5, 2}}, [](B& b, V x) { return op(b, "Reciprocal", {x[0]}); });
  check_gradients("Sin", {{{5}, -3, 3}}, [](B& b, V x) { return op(b, "Sin", {x[0]}); });
  check_gradients("Cos", {{{5}, -3, 3}}, [](B& b, V x) { return op(b, "Cos", {x[0]}); });
  for (const char* t : {"Max", "Min", "Sum", "Mean"}) {
    check_gradients(std::string(t) + " of three, broadcast", {{{2, 3}}, {{3}}, {{2, 1}}},
                    [t](B& b, V x) { return op(b, t, {x[0], x[1], x[2]}); });
    check_gradients(std::string(t) + " of one", {{{4}}}, [t](B& b, V x) { return op(b, t, {x[0]}); });
  }
  check_gradients("Max of an input with itself (a tie goes to the first)", {{{4}}},
                  [](B& b, V x) { return op(b, "Max", {x[0], x[0]}); });
}

TEST_CASE("reductions: Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare; CumSum") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  for (const char* t : {"ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2", "ReduceLogSum",
                        "ReduceLogSumExp", "ReduceSumSquare"}) {
    const double lo = std::string(t) == "ReduceLogSum" || std::string(t) == "ReduceProd" ? 0.5 : -1;
    check_gradients(std::string(t) + ", axes attribute, keepdims 0", {{{3, 4}, lo, 2}},
                    [t](B& b, V x) { return op(b, t, {x[0]}, {attr("axes", std::vector<std::int64_t>{1}), attr("keepdims", std::int64_t{0})}); });
    check_gradients(std::string(t) + ", axes input, kept", {{{2, 3, 2}, lo, 2}},
                    [t](B& b, V x) { return op(b, t, {x[0], ints(b, {0, -1})}, {}, {.opset = 18}); });
    check_gradients(std::string(t) + ", every axis", {{{2, 3}, lo, 2}},
                    [t](B& b, V x) { return op(b, t, {x[0]}, {attr("keepdims", std::int64_t{0})}, {.opset = 18}); });
    check_gradients(std::string(t) + ", noop_with_empty_axes", {{{2, 3}, lo, 2}}, [t](B& b, V x) {
      return b.mul(op(b, t, {x[0]}, {attr("noop_with_empty_axes", std::int64_t{1})}, {.opset = 18}), x[0]);
    });
  }
  for (int exclusive = 0; exclusive < 2; ++exclusive)
    for (int reverse = 0; reverse < 2; ++reverse)
      check_gradients("CumSum exclusive " + std::to_string(exclusive) + " reverse " + std::to_string(reverse),
                      {{{3, 4}}}, [=](B& b, V x) {
                        const auto axis = b.add_constant(ipu::make_scalar<std::int64_t>(-1));
                        return op(b, "CumSum", {x[0], axis},
                                  {attr("exclusive", std::int64_t{exclusive}), attr("reverse", std::int64_t{reverse})});
                      });
}

TEST_CASE("data movement: Slice with steps, Tile, GatherElements, GlobalMaxPool, Dropout") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  check_gradients("Slice, step 2", {{{5, 4}}}, [](B& b, V x) { return b.slice(x[0], {0, 1}, {5, 4}, {0, 1}, {2, 1}); });
  check_gradients("Slice, negative step", {{{5, 4}}},
                  [](B& b, V x) { return b.slice(x[0], {-1, 3}, {-100, 0}, {0, 1}, {-2, -1}); });
  check_gradients("Slice, reversed", {{{6}}}, [](B& b, V x) {
    return b.slice(x[0], {std::numeric_limits<std::int64_t>::max()}, {std::numeric_limits<std::int64_t>::min()}, {0}, {-1});
  });
  check_gradients("Slice, step 3 on the last axis only", {{{2, 3, 7}}},
                  [](B& b, V x) { return b.slice(x[0], {1}, {7}, {-1}, {3}); });
  check_gradients("Tile", {{{2, 3}}}, [](B& b, V x) { return op(b, "Tile", {x[0], ints(b, {3, 2})}); });
  check_gradients("Tile, one axis", {{{2, 1, 3}}}, [](B& b, V x) { return op(b, "Tile", {x[0], ints(b, {1, 4, 1})}); });
  check_gradients("GatherElements, repeated and negative indices", {{{3, 4}}}, [](B& b, V x) {
    const auto idx = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{2, 4}, {0, 2, -1, 1, 2, 2, 0, -3}));
    return op(b, "GatherElements", {x[0], idx});
  });
  check_gradients("GatherElements, axis 1", {{{2, 3}}}, [](B& b, V x) {
    const auto idx = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{2, 4}, {0, 2, 2, 1, 1, 1, 0, 2}));
    return op(b, "GatherElements", {x[0], idx}, {attr("axis", std::int64_t{1})});
  });
  check_gradients("GlobalMaxPool", {{{2, 3, 2, 3}}}, [](B& b, V x) { return op(b, "GlobalMaxPool", {x[0]}); });
  check_gradients("Dropout in inference", {{{2, 3}}}, [](B& b, V x) {
    const auto ratio = b.add_constant(ipu::make_scalar<double>(0.5));
    const auto training = b.add_constant(ipu::make_scalar<bool>(false));
    return b.op("Dropout", {x[0], ratio, training}, {}, {.num_outputs = 2}).front();
  });
  check_gradients("Dropout without training_mode", {{{2, 3}}}, [](B& b, V x) { return op(b, "Dropout", {x[0]}); });
  for (bool computed : {false, true}) {
    ipu::builder b("dropout");
    const auto x = b.add_input_tensor({data_type::F32, {2, 3}}, "x");
    const auto flag = b.add_input_tensor({data_type::BOOL, {}}, "flag");
    const auto training = computed ? flag : b.add_constant(ipu::make_scalar<bool>(true));
    const auto y = b.reduce_sum(op(b, "Dropout", {x, ipu::no_tensor, training}), {0, 1}, false);
    b.add_output(y);
    auto g = std::move(b).build();
    const std::vector<tensor_id> ws{x};
    CHECK_THROWS_WITH_AS((void)ipu::train::add_gradients(g, y, ws),
                         doctest::Contains(computed ? "training_mode is computed at run time" : "Dropout in training mode"),
                         ipu::error);
  }
}

TEST_CASE("losses: SoftmaxCrossEntropyLoss (reductions, ignore_index, weights, log_prob), weighted NLL") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  for (const char* reduction : {"mean", "sum", "none"})
    for (bool ignore : {false, true})
      for (bool weighted : {false, true}) {
        const std::string what = std::string(reduction) + (ignore ? ", ignoring class 2" : "") + (weighted ? ", weighted" : "");
        auto attrs = [=] {
          std::vector<ipu::attribute> at{attr("reduction", reduction)};
          if (ignore) at.push_back(attr("ignore_index", std::int64_t{2}));
          return at;
        };
        check_gradients("SoftmaxCrossEntropyLoss " + what, {{{4, 3}}}, [=](B& b, V x) {
          const auto t = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{4}, {0, 2, 1, 2}));
          const auto w = b.add_constant(ipu::make_constant<double>(ipu::shape{3}, {0.5, 2, 1.5}));
          return op(b, "SoftmaxCrossEntropyLoss", weighted ? std::vector<tensor_id>{x[0], t, w} : std::vector<tensor_id>{x[0], t},
                    attrs());
        });
        check_gradients("SoftmaxCrossEntropyLoss [N, C, d] " + what, {{{2, 3, 2}}}, [=](B& b, V x) {
          const auto t = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{2, 2}, {2, 0, 1, 2}));
          const auto w = b.add_constant(ipu::make_constant<double>(ipu::shape{3}, {0.5, 2, 1.5}));
          return op(b, "SoftmaxCrossEntropyLoss", weighted ? std::vector<tensor_id>{x[0], t, w} : std::vector<tensor_id>{x[0], t},
                    attrs());
        });
        check_gradients("NegativeLogLikelihoodLoss " + what, {{{4, 3}}}, [=](B& b, V x) {
          const auto t = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{4}, {0, 2, 1, 2}));
          const auto w = b.add_constant(ipu::make_constant<double>(ipu::shape{3}, {0.5, 2, 1.5}));
          const auto lp = b.log_softmax(x[0], 1);
          return op(b, "NegativeLogLikelihoodLoss", weighted ? std::vector<tensor_id>{lp, t, w} : std::vector<tensor_id>{lp, t},
                    attrs());
        });
      }
  check_gradients("SoftmaxCrossEntropyLoss, loss and log_prob both used", {{{3, 4}}}, [](B& b, V x) {
    const auto t = b.add_constant(ipu::make_constant<std::int64_t>(ipu::shape{3}, {3, 0, 1}));
    const auto outs = b.op("SoftmaxCrossEntropyLoss", {x[0], t}, {}, {.num_outputs = 2});
    return b.add(outs[0], b.reduce_sum(b.mul(outs[1], outs[1]), {1}, false));
  });
}

// F32 Conv, its input gradient (ConvTranspose) and its weight gradient (the batch-swapped Conv) run
// by the CPU device's F32 kernels (oneDNN for 2-D) against PyTorch's autograd, computed at test time.
namespace test_autodiff_conv {

namespace fs = std::filesystem;

/// Max |a - b| over max |b|.
double relative(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double diff = 0, scale = 1e-6;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::fabs(static_cast<double>(a[i]) - static_cast<double>(b[i])));
    scale = std::max(scale, std::fabs(static_cast<double>(b[i])));
  }
  return diff / scale;
}

void check_case(const fs::path& dir, std::size_t threads) {
  CAPTURE(dir.string());
  CAPTURE(threads);
  const auto read = [&](const char* name) { return ipu::io::read_npy(dir / (std::string(name) + ".npy")); };
  const auto spec = read("shape");
  const auto c = spec.as<std::int64_t>();  // N C H W M kh kw group sh sw dh dw pt pl pb pr bias
  REQUIRE(c.size() == 17);
  const auto x = read("x"), w = read("w"), b = read("b"), dy = read("dy");
  const bool with_bias = c[16] != 0;
  ipu::builder bld("conv_grads");
  const auto xi = bld.add_input_tensor(x.info(), "x");
  const auto wi = bld.add_input_tensor(w.info(), "w");
  const auto bi = bld.add_input_tensor(b.info(), "b");
  std::vector<tensor_id> conv_in{xi, wi};
  if (with_bias) conv_in.push_back(bi);
  const auto y = bld.op("Conv", conv_in,
                        {{"group", c[7]},
                         {"strides", std::vector<std::int64_t>{c[8], c[9]}},
                         {"dilations", std::vector<std::int64_t>{c[10], c[11]}},
                         {"pads", std::vector<std::int64_t>{c[12], c[13], c[14], c[15]}}})
                     .front();
  // loss = sum(y * dY): d loss / dy = dY, as PyTorch's y.backward(dY).
  const auto r = bld.add_input_tensor(dy.info(), "dy");
  const auto loss = bld.reduce_sum(bld.mul(y, r), {0, 1, 2, 3}, false);
  bld.add_output(y);
  auto g = std::move(bld).build();
  std::vector<tensor_id> wrt{xi, wi};
  if (with_bias) wrt.push_back(bi);
  const auto grads = ipu::train::add_gradients(g, loss, wrt);
  for (auto t : grads) {
    REQUIRE(t != ipu::no_tensor);
    g.mark_output(t);
  }
  ipu::cpu::device dev(g, {.threads = threads});
  const auto out = dev.run(std::vector<ipu::host_tensor>{x, w, b, dy});
  // F32 sums in another order than PyTorch's: relative to the largest value.
  CHECK(relative(out[0].as<float>(), read("y").as<float>()) < 1e-5);
  CHECK(relative(out[1].as<float>(), read("dx").as<float>()) < 1e-5);
  CHECK(relative(out[2].as<float>(), read("dw").as<float>()) < 1e-5);
  if (with_bias) CHECK(relative(out[3].as<float>(), read("db").as<float>()) < 1e-5);
  // Run to run, the same bits at the same thread count.
  const auto again = dev.run(std::vector<ipu::host_tensor>{x, w, b, dy});
  for (std::size_t i = 0; i < out.size(); ++i) {
    CAPTURE(i);
    CHECK(std::memcmp(out[i].bytes().data(), again[i].bytes().data(), out[i].bytes().size()) == 0);
  }
}

}  // namespace test_autodiff_conv

TEST_CASE("Conv in F32: forward, input and weight gradients against PyTorch; groups, strides, dilations, asymmetric pads") {
  const auto dir = std::filesystem::temp_directory_path() / ("ipu_conv_grads_" + std::to_string(std::random_device{}()));
  const std::string cmd = std::string(IPU_PYTHON) + " " + IPU_SOURCE_DIR + "/tests/train/torch_conv_grads.py " + dir.string();
  REQUIRE(std::system(cmd.c_str()) == 0);
  for (std::size_t k = 0; std::filesystem::exists(dir / std::to_string(k)); ++k)
    for (const std::size_t threads : {1, 2}) test_autodiff_conv::check_case(dir / std::to_string(k), threads);
  CHECK(std::filesystem::exists(dir / "5"));  // every case ran
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

TEST_CASE("PopART's ai.graphcore ops: DynamicSlice, DynamicUpdate, DynamicAdd (offsets clamped), GroupNormalization, MultiConv, Nop, PrintTensor") {
  using B = ipu::builder;
  using V = const std::vector<tensor_id>&;
  for (bool no_overlap : {false, true}) {
    CAPTURE(no_overlap);
    check_gradients("DynamicSlice", {{{3, 4}}},
                    [&](B& b, V x) { return b.dynamic_slice(x[0], ints(b, {1, 2}), {0, 1}, {2, 2}, no_overlap); });
    check_gradients("DynamicSlice, offset clamped", {{{3, 4}}},
                    [&](B& b, V x) { return b.dynamic_slice(x[0], ints(b, {9}), {1}, {3}, no_overlap); });
  }
  check_gradients("DynamicUpdate", {{{3, 4}}, {{3, 2}}},
                  [](B& b, V x) { return b.dynamic_update(x[0], ints(b, {1}), x[1], {1}, {2}); });
  check_gradients("DynamicUpdate, offset clamped", {{{3, 4}}, {{1, 4}}},
                  [](B& b, V x) { return b.dynamic_update(x[0], ints(b, {-4}), x[1], {0}, {1}); });
  check_gradients("DynamicAdd", {{{3, 4}}, {{2, 4}}},
                  [](B& b, V x) { return b.dynamic_add(x[0], ints(b, {1}), x[1], {0}, {2}); });
  check_gradients("GroupNormalization", {{{2, 4, 3}}, {{4}}, {{4}}},
                  [](B& b, V x) { return b.group_normalization(x[0], x[1], x[2], 2, 1e-3f)[0]; });
  check_gradients("GroupNormalization, rank 2", {{{2, 6}}, {{6}}, {{6}}},
                  [](B& b, V x) { return b.group_normalization(x[0], x[1], x[2], 3)[0]; });
  // MultiConv: each conv's gradients by Conv's rule; both outputs flattened into one.
  check_gradients("MultiConv", {{{1, 2, 5, 4}}, {{3, 2, 3, 3}}, {{3}}, {{2, 4, 6}}, {{2, 2, 2}}},
                  [](B& b, V x) {
                    const auto ys = b.multi_conv({{x[0], x[1], x[2], {2, 1}, {1, 1, 0, 1}, {}},
                                                  {x[3], x[4], ipu::no_tensor, {}, {}, {2}}});
                    return b.concat({b.reshape(ys[0], {-1}), b.reshape(ys[1], {-1})}, 0);
                  });
  check_gradients("Nop", {{{5}}}, [](B& b, V x) { return b.nop(x[0]); });
  std::vector<std::string> printed;
  {
    const ipu_test::captured_log log(ipu::log::get_level());
    check_gradients("PrintTensor", {{{2}}}, [](B& b, V x) { return b.print_tensor(x[0], "p"); });
    printed = log.messages();
  }
  CHECK(std::count_if(printed.begin(), printed.end(), [](const std::string& m) { return m.starts_with("Gradient of p: ["); }) > 0);
  CHECK(std::count_if(printed.begin(), printed.end(), [](const std::string& m) { return m.starts_with("p: ["); }) > 0);
}

TEST_CASE("ai.graphcore gradients take PopART's form: noOverlap picks DynamicUpdate or DynamicAdd; print_gradient prints dY") {
  auto backward_types = [](auto&& forward) {
    ipu::builder b("g");
    const auto x = b.add_input_tensor({data_type::F32, {4, 2}}, "x");
    const auto y = forward(b, x);
    const auto loss = b.reduce_sum(y, {0, 1}, false);
    b.add_output(loss);
    auto g = std::move(b).build();
    const auto before = g.ops().size();
    (void)ipu::train::add_gradients(g, loss, std::vector<tensor_id>{x});
    std::vector<std::string> types;
    for (std::size_t i = before; i < g.ops().size(); ++i)
      if (g.ops()[i].domain == "ai.graphcore") types.push_back(g.ops()[i].type);
    return types;
  };
  const auto off = [](ipu::builder& b) { return b.add_constant(ipu::make_constant<std::int32_t>(ipu::shape{1}, {1})); };
  CHECK(backward_types([&](ipu::builder& b, tensor_id x) { return b.dynamic_slice(x, off(b), {0}, {2}, true); }) ==
        std::vector<std::string>{"DynamicUpdate"});
  CHECK(backward_types([&](ipu::builder& b, tensor_id x) { return b.dynamic_slice(x, off(b), {0}, {2}, false); }) ==
        std::vector<std::string>{"DynamicAdd"});
  CHECK(backward_types([](ipu::builder& b, tensor_id x) { return b.print_tensor(x, "x"); }) ==
        std::vector<std::string>{"PrintTensor"});
  CHECK(backward_types([](ipu::builder& b, tensor_id x) { return b.print_tensor(x, "x", false); }).empty());
}

}  // namespace test_autodiff
