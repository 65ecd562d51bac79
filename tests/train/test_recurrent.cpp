// LSTM, GRU and RNN written out as ordinary ops (ipu/train/recurrent.hpp), against the library's own
// recurrent kernels (checked by hand in tests/ops/test_recurrent.cpp), both run on the CPU device:
// every direction, with and without biases and initial states, in F64 and F32. The gradients
// autodiff gives the written-out ops are checked against central finite differences of the kernel.
// And the refusals: what is not built is named, never computed wrongly.
#include "ipu/train/recurrent.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/train/autodiff.hpp"

namespace test_recurrent {

namespace {

using ipu::data_type;
using ipu::tensor_id;

/// Deterministic values in [lo, hi] (a linear congruential sequence).
std::vector<double> values(std::size_t n, double lo, double hi, std::uint64_t seed) {
  std::vector<double> v(n);
  std::uint64_t s = seed * 6364136223846793005ULL + 1442695040888963407ULL;
  for (auto& x : v) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53);
  }
  return v;
}

struct rnn_case {
  std::string type;  // LSTM, GRU, RNN
  std::string direction = "forward";
  bool bias = true, states = true;
  std::vector<ipu::attribute> extra{};
  std::size_t outputs = 0;  // 0: all of the op's
  data_type type_of = data_type::F64;
};

/// A graph holding one recurrent op over seq 4, batch 3, input 2, hidden 3; every operand an input.
ipu::graph recurrent_model(const rnn_case& c) {
  const std::int64_t seq = 4, batch = 3, in = 2, hidden = 3;
  const std::int64_t dirs = c.direction == "bidirectional" ? 2 : 1;
  const std::int64_t gates = c.type == "LSTM" ? 4 : c.type == "GRU" ? 3 : 1;
  ipu::builder b("recurrent");
  auto input = [&](std::string name, ipu::shape s) { return b.add_input_tensor({c.type_of, std::move(s)}, name); };
  std::vector<tensor_id> ins{input("X", {seq, batch, in}), input("W", {dirs, gates * hidden, in}),
                             input("R", {dirs, gates * hidden, hidden})};
  ins.push_back(c.bias ? input("B", {dirs, 2 * gates * hidden}) : ipu::no_tensor);
  ins.push_back(ipu::no_tensor);  // sequence_lens
  if (c.states) {
    ins.push_back(input("initial_h", {dirs, batch, hidden}));
    if (c.type == "LSTM") ins.push_back(input("initial_c", {dirs, batch, hidden}));
  }
  std::vector<ipu::attribute> attrs{{"hidden_size", hidden}, {"direction", c.direction}};
  attrs.insert(attrs.end(), c.extra.begin(), c.extra.end());
  const std::size_t n = c.outputs ? c.outputs : (c.type == "LSTM" ? 3 : 2);
  for (auto t : b.op(c.type, ins, attrs, ipu::op_options{.num_outputs = n})) b.add_output(t);
  return std::move(b).build();
}

/// `model` with each recurrent op written out.
ipu::graph written_out(const ipu::graph& model) {
  ipu::graph g(model.name());
  for (const auto& t : model.tensors()) g.add_tensor(t.name, t.info, t.kind, t.data);
  for (ipu::op_id id = 0; id < model.num_ops(); ++id) {
    if (ipu::train::is_recurrent(model.op(id)))
      ipu::train::write_out_recurrent(g, model.op(id), "rec/" + std::to_string(id) + "/");
    else
      g.add_op(model.op(id));
  }
  for (auto t : model.outputs()) g.mark_output(t);
  g.set_opset_imports(model.opset_imports());
  return g;
}

/// Inputs for `g`, deterministic, of its types.
std::vector<ipu::host_tensor> inputs_for(const ipu::graph& g) {
  std::vector<ipu::host_tensor> x;
  for (auto t : g.inputs()) {
    const auto& info = g.tensor(t).info;
    const auto v = values(static_cast<std::size_t>(info.num_elements()), -1, 1, x.size() + 7);
    if (info.type == data_type::F64) {
      x.push_back(ipu::host_tensor::from<double>(info.shape, v));
    } else {
      const std::vector<float> f(v.begin(), v.end());
      x.push_back(ipu::host_tensor::from<float>(info.shape, f));
    }
  }
  return x;
}

double max_abs(const ipu::host_tensor& t) {
  double m = 0;
  if (t.info().type == data_type::F64)
    for (double v : t.as<double>()) m = std::max(m, std::fabs(v));
  else
    for (float v : t.as<float>()) m = std::max(m, static_cast<double>(std::fabs(v)));
  return m;
}

double max_difference(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  REQUIRE(a.info() == b.info());
  double d = 0;
  if (a.info().type == data_type::F64) {
    for (std::size_t i = 0; i < a.as<double>().size(); ++i) d = std::max(d, std::fabs(a.as<double>()[i] - b.as<double>()[i]));
  } else {
    for (std::size_t i = 0; i < a.as<float>().size(); ++i)
      d = std::max(d, static_cast<double>(std::fabs(a.as<float>()[i] - b.as<float>()[i])));
  }
  return d;
}

/// The written-out op gives the kernel's outputs.
void check_forward(const rnn_case& c) {
  CAPTURE(c.type);
  CAPTURE(c.direction);
  CAPTURE(c.bias);
  CAPTURE(c.states);
  const auto model = recurrent_model(c);
  const auto unrolled = written_out(model);
  for (const auto& op : unrolled.ops()) REQUIRE_FALSE(ipu::train::is_recurrent(op));
  const auto x = inputs_for(model);
  ipu::cpu::device kernel(model), ops(unrolled);
  const auto want = kernel.run(x), got = ops.run(x);
  REQUIRE(want.size() == got.size());
  const double tolerance = c.type_of == data_type::F64 ? 1e-13 : 2e-6;
  for (std::size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(max_abs(want[i]) > 0.05);  // a real signal, not zeros compared with zeros
    CHECK(max_difference(got[i], want[i]) < tolerance);
  }
}

/// d loss / d every input of the written-out op, loss = sum_k sum(output_k * r_k), against central
/// finite differences of the same loss over the kernel.
void check_gradients(const rnn_case& c) {
  CAPTURE(c.type);
  CAPTURE(c.direction);
  auto with_loss = [](ipu::graph g) {
    ipu::builder b(std::move(g));
    const auto outs = b.current().outputs();
    tensor_id loss = ipu::no_tensor;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      const auto info = b.info(outs[k]);
      const auto r = b.add_constant(ipu::make_constant<double>(
          info.shape, values(static_cast<std::size_t>(info.num_elements()), -1, 1, 50 + k)));
      std::vector<std::int64_t> axes(info.shape.rank());
      for (std::size_t a = 0; a < axes.size(); ++a) axes[a] = static_cast<std::int64_t>(a);
      const auto s = b.reduce_sum(b.mul(outs[k], r), axes, false);
      loss = loss == ipu::no_tensor ? s : b.add(loss, s);
    }
    b.add_output(loss);
    return std::pair{std::move(b).build(), loss};
  };
  const auto model = recurrent_model(c);
  auto [g, loss] = with_loss(written_out(model));
  const std::vector<tensor_id> in(g.inputs().begin(), g.inputs().end());
  const auto grads = ipu::train::add_gradients(g, loss, in);
  for (auto t : grads) {
    REQUIRE(t != ipu::no_tensor);
    g.mark_output(t);
  }
  ipu::cpu::device dev(std::move(g));
  ipu::cpu::device reference(with_loss(model).first);
  auto x = inputs_for(model);
  const auto out = dev.run(x);
  const auto n_out = out.size() - in.size();
  const double h = 1e-6;
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto analytic = out[n_out + i].as<double>();
    for (std::size_t k = 0; k < analytic.size(); ++k) {
      auto v = x;
      v[i].as<double>()[k] += h;
      const double up = reference.run(v).back().as<double>()[0];
      v[i].as<double>()[k] -= 2 * h;
      const double down = reference.run(v).back().as<double>()[0];
      INFO("input " << model.tensor(model.inputs()[i]).name << " element " << k);
      CHECK(analytic[k] == doctest::Approx((up - down) / (2 * h)).epsilon(1e-6).scale(1));
    }
  }
}

}  // namespace

TEST_CASE("LSTM written out gives the kernel's Y, Y_h and Y_c: every direction, with and without B and initial states") {
  for (const char* d : {"forward", "reverse", "bidirectional"})
    for (bool with : {true, false}) check_forward({.type = "LSTM", .direction = d, .bias = with, .states = with});
  check_forward({.type = "LSTM", .direction = "bidirectional", .type_of = data_type::F32});
  check_forward({.type = "LSTM", .direction = "reverse", .outputs = 1});  // Y alone
}

TEST_CASE("GRU written out gives the kernel's Y and Y_h: linear_before_reset 1 (PyTorch's) and 0, every direction") {
  for (std::int64_t lbr : {1, 0})
    for (const char* d : {"forward", "reverse", "bidirectional"})
      for (bool with : {true, false})
        check_forward({.type = "GRU", .direction = d, .bias = with, .states = with, .extra = {{"linear_before_reset", lbr}}});
  check_forward({.type = "GRU", .direction = "forward", .extra = {{"linear_before_reset", std::int64_t{1}}},
                 .type_of = data_type::F32});
}

TEST_CASE("RNN written out gives the kernel's Y and Y_h: tanh and relu, every direction") {
  for (const char* d : {"forward", "reverse", "bidirectional"})
    for (bool with : {true, false}) check_forward({.type = "RNN", .direction = d, .bias = with, .states = with});
  check_forward({.type = "RNN", .direction = "bidirectional",
                 .extra = {{"activations", std::vector<std::string>{"Relu", "Relu"}}}});
  check_forward({.type = "RNN", .direction = "forward", .extra = {{"activations", std::vector<std::string>{"relu"}}}});
  // Explicit LSTM activations, one list per direction, checked the same way.
  check_forward({.type = "LSTM", .direction = "bidirectional",
                 .extra = {{"activations", std::vector<std::string>{"Sigmoid", "Tanh", "Relu", "Sigmoid", "Relu", "Tanh"}}}});
}

TEST_CASE("the written-out ops' gradients equal finite differences of the recurrent kernels") {
  check_gradients({.type = "LSTM", .direction = "bidirectional"});
  check_gradients({.type = "GRU", .direction = "reverse", .extra = {{"linear_before_reset", std::int64_t{1}}}});
  check_gradients({.type = "GRU", .direction = "forward", .extra = {{"linear_before_reset", std::int64_t{0}}}});
  check_gradients({.type = "RNN", .direction = "bidirectional"});
}

TEST_CASE("a constant sequence_lens of the full length changes nothing; anything else is refused by name") {
  auto with_lens = [](std::vector<std::int32_t> lens, bool constant) {
    ipu::builder b("lens");
    const auto x = b.add_input_tensor({data_type::F32, {2, 2, 1}}, "X");
    const auto w = b.add_input_tensor({data_type::F32, {1, 1, 1}}, "W");
    const auto r = b.add_input_tensor({data_type::F32, {1, 1, 1}}, "R");
    const auto l = constant ? b.add_constant(ipu::make_constant<std::int32_t>(ipu::shape{2}, lens), "lens")
                            : b.add_input_tensor({data_type::S32, {2}}, "lens");
    for (auto t : b.op("RNN", {x, w, r, ipu::no_tensor, l}, {{"hidden_size", std::int64_t{1}}}, {.num_outputs = 2}))
      b.add_output(t);
    return std::move(b).build();
  };
  const auto whole = with_lens({2, 2}, true);
  const auto unrolled = written_out(whole);
  const auto x = ipu::host_tensor::from<float>({2, 2, 1}, {1, -2, 0.5f, 3});
  const auto w = ipu::host_tensor::from<float>({1, 1, 1}, {0.7f});
  const auto r = ipu::host_tensor::from<float>({1, 1, 1}, {-0.4f});
  const std::vector<ipu::host_tensor> in{x, w, r};
  ipu::cpu::device a(whole), b(unrolled);
  CHECK(max_difference(a.run(in)[0], b.run(in)[0]) < 1e-6);
  CHECK_THROWS_WITH_AS(written_out(with_lens({2, 1}, true)), doctest::Contains("per-batch sequence lengths"), ipu::error);
  CHECK_THROWS_WITH_AS(written_out(with_lens({2, 2}, false)), doctest::Contains("RNN with per-batch sequence lengths"),
                       ipu::error);
}

TEST_CASE("what is not built is refused, naming the op and what to do") {
  auto refused = [](const rnn_case& c, const std::string& what) {
    CAPTURE(what);
    CHECK_THROWS_WITH_AS(written_out(recurrent_model(c)), doctest::Contains(what.c_str()), ipu::error);
  };
  refused({.type = "LSTM", .extra = {{"clip", 3.0f}}}, "LSTM with cell clipping");
  refused({.type = "LSTM", .extra = {{"input_forget", std::int64_t{1}}}}, "LSTM with input_forget");
  refused({.type = "GRU", .extra = {{"activations", std::vector<std::string>{"HardSigmoid", "Tanh"}}}},
          "GRU with activation 'HardSigmoid'");
  refused({.type = "RNN", .extra = {{"activations", std::vector<std::string>{"Tanh", "Tanh", "Tanh"}}}},
          "expected 1 activations, got 3");
  // Peepholes and layout 1 need operands the case builder does not make.
  ipu::builder b("peep");
  const auto x = b.add_input_tensor({data_type::F32, {2, 1, 1}}, "X");
  const auto w = b.add_input_tensor({data_type::F32, {1, 4, 1}}, "W");
  const auto r = b.add_input_tensor({data_type::F32, {1, 4, 1}}, "R");
  const auto p = b.add_input_tensor({data_type::F32, {1, 3}}, "P");
  const auto n = ipu::no_tensor;
  b.add_output(b.op("LSTM", {x, w, r, n, n, n, n, p}, {{"hidden_size", std::int64_t{1}}})[0]);
  CHECK_THROWS_WITH_AS(written_out(std::move(b).build()), doctest::Contains("LSTM with peepholes (input P)"), ipu::error);
  ipu::builder l("layout");
  const auto xl = l.add_input_tensor({data_type::F32, {1, 2, 1}}, "X");
  const auto wl = l.add_input_tensor({data_type::F32, {1, 1, 1}}, "W");
  const auto rl = l.add_input_tensor({data_type::F32, {1, 1, 1}}, "R");
  l.add_output(l.op("RNN", {xl, wl, rl}, {{"hidden_size", std::int64_t{1}}, {"layout", std::int64_t{1}}})[0]);
  CHECK_THROWS_WITH_AS(written_out(std::move(l).build()), doctest::Contains("RNN with layout 1"), ipu::error);
}

}  // namespace test_recurrent
