// PopART's ai.graphcore loss nodes (Nll, L1, IdentityLoss) in ONNX files, written out at import as
// standard ops: loss values against hand-computed ones, a training run from such a file against
// the same model built with ipu::train::nllloss, and the malformed nodes refused.
#include "ipu/onnx/graphcore_losses.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/popart/training_session.hpp"
#include "ipu/train/loss.hpp"
#include "onnx_run_util.hpp"

namespace test_graphcore_losses {

using namespace ipu;
using test_onnx::attr;
using test_onnx::import_error;
using test_onnx::model;
using test_onnx::node;
using test_onnx::run;

namespace {

constexpr const char* gc = "ai.graphcore";
constexpr int f32_type = ::onnx::TensorProto_DataType_FLOAT;
constexpr int s32_type = ::onnx::TensorProto_DataType_INT32;
constexpr int s64_type = ::onnx::TensorProto_DataType_INT64;

model popart_model() {
  model m(13);
  m.import_domain(gc, 1);
  return m;
}


host_tensor f32(shape s, std::vector<float> v) { return host_tensor::from<float>(std::move(s), std::span<const float>(v)); }

const std::vector<float> kProbs{0.7f, 0.2f, 0.1f, 0.25f, 0.5f, 0.25f, 0.1f, 0.1f, 0.8f};  // [3, 3], rows sum to 1

}  // namespace

TEST_CASE("Nll: -log probs[label], mean over the rows whose label is not ignoreIndex") {
  auto m = popart_model();
  m.input("probs", {3, 3}).input("labels", {3}, s32_type).output("loss", {});
  m.add(node("Nll", {"probs", "labels"}, {"loss"}, {attr("reduction", 1), attr("ignoreIndex", 2)}, "nll", gc));
  auto g = ipu::onnx::load_model_from_bytes(m.bytes());
  for (const auto& op : g.ops()) CHECK(op.domain != gc);  // nothing is left for a kernel
  CHECK(test_onnx::op_types(g) == std::vector<std::string>{"Log", "NegativeLogLikelihoodLoss"});
  // Labels 0, 2 (ignored), 1: (-log 0.7 - log 0.1) / 2 rows that count.
  const std::vector<std::int32_t> labels{0, 2, 1};
  auto out = run(m, {f32({3, 3}, kProbs), host_tensor::from<std::int32_t>({3}, labels)});
  const double want = -(std::log(0.7) + std::log(0.1)) / 2;
  CHECK(out[0].as<float>()[0] == doctest::Approx(want).epsilon(1e-6));
}

TEST_CASE("Nll on log-probabilities with the classes last, [N, d, C], summed; NoReduction keeps one value per sample") {
  // log-probabilities [2, 2, 3]; the writer brings the classes to axis 1 before ONNX's NLL.
  std::vector<float> logp(12);
  for (std::size_t i = 0; i < logp.size(); ++i) logp[i] = -0.1f * static_cast<float>(i + 1);
  const std::vector<std::int64_t> labels{2, 0, 1, 2};  // [2, 2]
  // Sample (n, d) reads logp[(n * 2 + d) * 3 + label].
  const std::vector<double> per_sample{0.3, 0.4, 0.8, 1.2};
  for (const char* reduction : {"Sum", "NoReduction"}) {
    CAPTURE(reduction);
    const bool sum = std::string(reduction) == "Sum";
    auto m = popart_model();
    m.input("logp", {2, 2, 3}).input("labels", {2, 2}, s64_type);
    if (sum) m.output("loss", {});
    else m.output("loss", {2, 2});
    m.add(node("Nll", {"logp", "labels"}, {"loss"}, {attr("reduction", reduction), attr("inputIsLogProbability", 1)},
               "nll", gc));
    auto out = run(m, {f32({2, 2, 3}, logp), host_tensor::from<std::int64_t>({2, 2}, labels)});
    const auto got = out[0].as<float>();
    if (sum) {
      REQUIRE(got.size() == 1);
      CHECK(got[0] == doctest::Approx(0.3 + 0.4 + 0.8 + 1.2).epsilon(1e-6));
    } else {
      REQUIRE(got.size() == 4);
      for (std::size_t i = 0; i < 4; ++i) CHECK(got[i] == doctest::Approx(per_sample[i]).epsilon(1e-6));
    }
  }
}

TEST_CASE("L1: lambda times |x|, summed or per element; IdentityLoss: x reduced") {
  const std::vector<float> x{1.5f, -2, 0.25f, -0.5f, 3, -1};  // sum |x| = 8.25
  {
    auto m = popart_model();
    m.input("x", {2, 3}).output("loss", {});
    m.add(node("L1", {"x"}, {"loss"}, {attr("lambda", 0.5f), attr("reduction", 0)}, "l1", gc));
    CHECK(run(m, {f32({2, 3}, x)})[0].as<float>()[0] == doctest::Approx(0.5 * 8.25).epsilon(1e-6));
  }
  {
    auto m = popart_model();
    m.input("x", {2, 3}).output("loss", {2, 3});
    m.add(node("L1", {"x"}, {"loss"}, {attr("lambda", 2.0f), attr("reduction", "NoReduction")}, "l1", gc));
    const auto out = run(m, {f32({2, 3}, x)});
    const auto got = out[0].as<float>();
    REQUIRE(got.size() == x.size());
    for (std::size_t i = 0; i < x.size(); ++i) CHECK(got[i] == doctest::Approx(2 * std::abs(x[i])));
  }
  {
    // Mean by default (PopART's), as reduction 1 and "Mean" say.
    for (int form = 0; form < 3; ++form) {
      CAPTURE(form);
      auto m = popart_model();
      m.input("x", {2, 3}).output("loss", {});
      std::initializer_list<::onnx::AttributeProto> at{};
      auto n = node("IdentityLoss", {"x"}, {"loss"}, at, "id", gc);
      if (form == 1) *n.add_attribute() = attr("reduction", 1);
      if (form == 2) *n.add_attribute() = attr("reduction", "Mean");
      m.add(n);
      const double mean = (1.5 - 2 + 0.25 - 0.5 + 3 - 1) / 6;
      CHECK(run(m, {f32({2, 3}, x)})[0].as<float>()[0] == doctest::Approx(mean).epsilon(1e-6));
    }
  }
  {
    // A loss feeding ordinary ops is typed for them: 2 * IdentityLoss(x, Sum).
    auto m = popart_model();
    m.input("x", {2, 3}).output("twice", {});
    m.initializer(test_onnx::float_tensor("two", {}, {2}));
    m.add(node("IdentityLoss", {"x"}, {"loss"}, {attr("reduction", "Sum")}, "id", gc));
    m.add(node("Mul", {"loss", "two"}, {"twice"}));
    CHECK(run(m, {f32({2, 3}, x)})[0].as<float>()[0] == doctest::Approx(2 * 1.25).epsilon(1e-6));
  }
}

TEST_CASE("training from an ONNX file ending in ai.graphcore Nll moves the weights as the Builder's nllloss does") {
  constexpr std::int64_t n = 4, bps = 3;
  const std::vector<float> w0{0.2f, -0.1f, 0.05f, 0.3f, -0.25f, 0.15f}, b0{0.01f, -0.02f};
  // x [4, 3] -> MatMul W [3, 2] + b -> Softmax -> Nll(labels [4] S32), mean, ignoring class 1.
  auto m = popart_model();
  m.input("x", {n, 3}).input("labels", {n}, s32_type).output("loss", {});
  m.initializer(test_onnx::float_tensor("W", {3, 2}, w0)).initializer(test_onnx::float_tensor("b", {2}, b0));
  m.add(node("MatMul", {"x", "W"}, {"xw"}));
  m.add(node("Add", {"xw", "b"}, {"logits"}));
  m.add(node("Softmax", {"logits"}, {"probs"}, {attr("axis", -1)}));
  m.add(node("Nll", {"probs", "labels"}, {"loss"}, {attr("reduction", 1), attr("ignoreIndex", 1)}, "nll", gc));
  test_onnx::scratch_dir dir("graphcore_losses");
  const auto file = dir.path / "linear.onnx";
  std::ofstream(file, std::ios::binary) << m.bytes();

  builder b("linear");
  const auto x = b.add_input_tensor({data_type::F32, {n, 3}}, "x");
  const auto labels = b.add_input_tensor({data_type::S32, {n}}, "labels");
  const auto w = b.add_initialized_input(make_constant<float>({3, 2}, w0), "W");
  const auto bias = b.add_initialized_input(make_constant<float>({2}, b0), "b");
  const auto probs = b.softmax(b.add(b.matmul(x, w), bias), -1, "probs");
  const auto loss = b.name_of(train::nllloss(b, probs, labels, train::popart_reduction::mean, 1));
  b.add_output(probs);

  std::vector<float> xs(bps * n * 3);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  std::vector<std::int32_t> ys(bps * n);
  for (std::size_t i = 0; i < ys.size(); ++i) ys[i] = static_cast<std::int32_t>((i * 5 + 1) % 2);
  auto train_run = [&](runtime::training_session s, const std::string& loss_name) {
    s.prepare_device();
    auto xt = host_tensor::from<float>({bps, n, 3}, xs);
    auto yt = host_tensor::from<std::int32_t>({bps, n}, ys);
    auto anchors = s.init_anchor_arrays();
    step_io io({{"x", xt.view()}, {"labels", yt.view()}}, anchors);
    s.run(io);
    host_tensor w_out(tensor_info{data_type::F32, {3, 2}}), b_out(tensor_info{data_type::F32, {2}});
    s.weights_to_host();
    s.read_weights({{"W", w_out.view()}, {"b", b_out.view()}});
    std::vector<float> out(w_out.as<float>().begin(), w_out.as<float>().end());
    out.insert(out.end(), b_out.as<float>().begin(), b_out.as<float>().end());
    const auto l = anchors.at(loss_name).as<float>();
    out.insert(out.end(), l.begin(), l.end());
    return out;
  };
  const auto from_file = train_run(
      runtime::training_session(file, data_flow(bps, {{"loss", anchor_return_type::all()}}), "loss", train::const_sgd(0.1)),
      "loss");
  const auto from_builder = train_run(runtime::training_session(std::move(b).build(),
                                                                data_flow(bps, {{loss, anchor_return_type::all()}}), loss,
                                                                train::const_sgd(0.1)),
                                      loss);
  REQUIRE(from_file.size() == 6 + 2 + bps);
  CHECK(from_file == from_builder);
  // The weights moved: the loss is not constant.
  CHECK(from_file[0] != w0[0]);
}

TEST_CASE("ai.graphcore losses that are malformed are refused, saying what and where") {
  auto nll = [](std::initializer_list<std::string> inputs, std::initializer_list<::onnx::AttributeProto> at,
                int label_type = s32_type) {
    auto m = popart_model();
    m.input("probs", {3, 3}).input("labels", {3}, label_type).output("loss", {});
    m.add(node("Nll", inputs, {"loss"}, at, "nll", gc));
    return m;
  };
  CHECK(import_error(nll({"probs"}, {})).find("Nll has 1 inputs; it takes 2") != std::string::npos);
  CHECK(import_error(nll({"probs", "labels"}, {}, f32_type)).find("labels 'labels' are FLOAT") != std::string::npos);
  CHECK(import_error(nll({"probs", "labels"}, {attr("reduction", 3)})).find("reduction 3 is not a PopART ReductionType") !=
        std::string::npos);
  CHECK(import_error(nll({"probs", "labels"}, {attr("reduction", "Average")})).find("'Average'") != std::string::npos);
  CHECK(import_error(nll({"probs", "labels"}, {attr("inputIsLogProbability", 2)})).find("not 0 or 1") != std::string::npos);
  CHECK(import_error(nll({"probs", "labels"}, {attr("ignore_index", 1)})).find("no attribute 'ignore_index'") !=
        std::string::npos);
  {
    auto m = popart_model();
    m.input("x", {3}, s32_type).output("loss", {});
    m.add(node("IdentityLoss", {"x"}, {"loss"}, {}, "id", gc));
    CHECK(import_error(m).find("the input 'x' is INT32, not floating point") != std::string::npos);
  }
  {
    auto m = popart_model();
    m.input("x", {3}).output("loss", {});
    m.add(node("L1", {"x"}, {"loss"}, {attr("reduction", 0)}, "l1", gc));
    CHECK(import_error(m).find("L1 has no float attribute lambda") != std::string::npos);
  }
  {
    // Other ai.graphcore ops are the op table's business: an unknown one is listed as unsupported.
    auto m = popart_model();
    m.input("x", {3}).output("loss", {});
    m.add(node("CtcLoss", {"x"}, {"loss"}, {}, "ctc", gc));
    const auto e = import_error(m);
    CHECK(e.find("CtcLoss") != std::string::npos);
    CHECK(e.find("ai.graphcore") != std::string::npos);
  }
  {
    // Inside an If branch: refused (PopART's Builder computes its loss in the main graph).
    auto m = popart_model();
    m.input("cond", {}, ::onnx::TensorProto_DataType_BOOL).input("x", {3}).output("loss", {});
    ::onnx::GraphProto then_g, else_g;
    then_g.set_name("then");
    *then_g.add_output() = test_onnx::value("t_out", f32_type, {});
    *then_g.add_node() = node("IdentityLoss", {"x"}, {"t_out"}, {attr("reduction", 0)}, "id", gc);
    else_g.set_name("else");
    *else_g.add_output() = test_onnx::value("e_out", f32_type, {});
    *else_g.add_node() = node("ReduceMax", {"x"}, {"e_out"}, {attr("keepdims", 0)});
    m.add(node("If", {"cond"}, {"loss"}, {attr("then_branch", then_g), attr("else_branch", else_g)}, "branch"));
    CHECK(import_error(m).find("is inside subgraph 'then'") != std::string::npos);
  }
  {
    model m(13);
    m.import_domain(gc, 2);
    m.input("x", {3}).output("loss", {});
    m.add(node("IdentityLoss", {"x"}, {"loss"}, {}, "id", gc));
    CHECK(import_error(m).find("ai.graphcore opset 2") != std::string::npos);
  }
}

}  // namespace test_graphcore_losses
