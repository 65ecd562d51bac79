// PopART's TrainingSession over a Builder model ending in aiGraphcore.nllloss (seed
// popart-importing-graphs 2.1), against SGD worked out by hand in double precision.
#include "ipu/popart/training_session.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/train/loss.hpp"

namespace test_training_session {

namespace {

using ipu::data_type;

constexpr int kIn = 3, kClasses = 2;
const std::vector<float> kW0{0.2f, -0.1f, 0.05f, 0.3f, -0.25f, 0.15f};  // [3, 2]
const std::vector<float> kB0{0.01f, -0.02f};

struct linear_model {
  ipu::graph g;
  std::string loss, probs;
};

/// x [n, 3] -> MatMul W [3, 2] + b -> Softmax -> nllloss(labels [n] S32).
linear_model make_model(std::int64_t n, ipu::train::popart_reduction r = ipu::train::popart_reduction::mean,
                        std::optional<std::int64_t> ignore = {}) {
  ipu::builder b("linear");
  const auto x = b.add_input_tensor({data_type::F32, {n, kIn}}, "x");
  const auto labels = b.add_input_tensor({data_type::S32, {n}}, "labels");
  const auto w = b.add_initialized_input(ipu::make_constant<float>({kIn, kClasses}, kW0), "W");
  const auto bias = b.add_initialized_input(ipu::make_constant<float>({kClasses}, kB0), "b");
  const auto probs = b.softmax(b.add(b.matmul(x, w), bias), -1, "probs");
  const auto loss = ipu::train::nllloss(b, probs, labels, r, ignore);
  b.add_output(probs);
  linear_model m{{}, b.name_of(loss), b.name_of(probs)};
  m.g = std::move(b).build();
  return m;
}

/// SGD on the same model in double: returns the loss before each update; updates w and b.
std::vector<double> reference_sgd(const std::vector<float>& x, const std::vector<std::int32_t>& y, std::int64_t rows_per_update,
                                  int updates, double lr, std::vector<double>& w, std::vector<double>& b) {
  std::vector<double> losses;
  for (int u = 0; u < updates; ++u) {
    std::vector<double> dw(w.size(), 0), db(b.size(), 0);
    double loss = 0;
    for (std::int64_t i = 0; i < rows_per_update; ++i) {
      const auto row = static_cast<std::size_t>(u * rows_per_update + i);
      double logits[kClasses], p[kClasses], sum = 0;
      for (int c = 0; c < kClasses; ++c) {
        logits[c] = b[static_cast<std::size_t>(c)];
        for (int k = 0; k < kIn; ++k)
          logits[c] += static_cast<double>(x[row * kIn + static_cast<std::size_t>(k)]) * w[static_cast<std::size_t>(k * kClasses + c)];
      }
      const double mx = std::max(logits[0], logits[1]);
      for (int c = 0; c < kClasses; ++c) sum += (p[c] = std::exp(logits[c] - mx));
      for (double& v : p) v /= sum;
      loss -= std::log(p[y[row]]);
      for (int c = 0; c < kClasses; ++c) {
        const double d = (p[c] - (c == y[row] ? 1.0 : 0.0)) / static_cast<double>(rows_per_update);
        db[static_cast<std::size_t>(c)] += d;
        for (int k = 0; k < kIn; ++k)
          dw[static_cast<std::size_t>(k * kClasses + c)] += static_cast<double>(x[row * kIn + static_cast<std::size_t>(k)]) * d;
      }
    }
    losses.push_back(loss / static_cast<double>(rows_per_update));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= lr * dw[i];
    for (std::size_t i = 0; i < b.size(); ++i) b[i] -= lr * db[i];
  }
  return losses;
}

std::vector<float> inputs(std::size_t rows) {
  std::vector<float> x(rows * kIn);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i) + 0.3));
  return x;
}

std::vector<std::int32_t> labels_for(std::size_t rows) {
  std::vector<std::int32_t> y(rows);
  for (std::size_t i = 0; i < rows; ++i) y[i] = static_cast<std::int32_t>((i * 7 + 1) % kClasses);
  return y;
}

std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

void check_weights(ipu::runtime::training_session& s, const std::vector<double>& w, const std::vector<double>& b) {
  ipu::host_tensor w_out(ipu::tensor_info{data_type::F32, {kIn, kClasses}}), b_out(ipu::tensor_info{data_type::F32, {kClasses}});
  s.weights_to_host();
  s.read_weights({{"W", w_out.view()}, {"b", b_out.view()}});
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(w_out.as<float>()[i] == doctest::Approx(w[i]).epsilon(1e-5));
  for (std::size_t i = 0; i < b.size(); ++i) CHECK(b_out.as<float>()[i] == doctest::Approx(b[i]).epsilon(1e-5));
}

}  // namespace

TEST_CASE("a training session runs batches-per-step SGD updates and returns the anchors the data flow asks for") {
  constexpr std::int64_t n = 4, bps = 3;
  auto m = make_model(n);
  ipu::data_flow flow(bps, {{m.loss, ipu::anchor_return_type::all()}, {m.probs, ipu::anchor_return_type::final()}});
  ipu::runtime::training_session s(m.g, flow, m.loss, ipu::train::const_sgd(0.1), ipu::device_from_name("mk2", 1));
  CHECK_FALSE(s.is_prepared());
  CHECK(s.input_array_info("x") == ipu::tensor_info{data_type::F32, {bps, n, kIn}});
  s.prepare_device();
  CHECK(s.executable().plan.predicted.samples_per_second > 0);

  const auto x = inputs(bps * n);
  const auto y = labels_for(bps * n);
  auto xs = ipu::host_tensor::from<float>({bps, n, kIn}, x);
  auto ys = ipu::host_tensor::from<std::int32_t>({bps, n}, y);
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
  s.run(io);
  CHECK(s.updates() == bps);

  auto w = widen(kW0), b = widen(kB0);
  const auto losses = reference_sgd(x, y, n, bps, 0.1, w, b);
  const auto got = anchors.at(m.loss).as<float>();
  REQUIRE(got.size() == static_cast<std::size_t>(bps));
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == doctest::Approx(losses[i]).epsilon(1e-5));
  check_weights(s, w, b);
  // Final: the probabilities of the last batch, before its update.
  CHECK(anchors.at(m.probs).info() == ipu::tensor_info{data_type::F32, {n, kClasses}});
}

TEST_CASE("gradient accumulation: two micro-batches per update descend as one batch of both") {
  constexpr std::int64_t n = 4;
  auto m = make_model(n);
  ipu::options o;
  o.gradient_accumulation(2);
  ipu::runtime::training_session s(m.g, ipu::data_flow(1, {{m.loss, ipu::anchor_return_type::sum()}}), m.loss,
                                   ipu::train::const_sgd(0.5), {}, o);
  s.prepare_device();
  CHECK(s.input_array_info("x") == ipu::tensor_info{data_type::F32, {2, n, kIn}});
  const auto x = inputs(2 * n);
  const auto y = labels_for(2 * n);
  auto xs = ipu::host_tensor::from<float>({2, n, kIn}, x);
  auto ys = ipu::host_tensor::from<std::int32_t>({2, n}, y);
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
  s.run(io);
  auto w = widen(kW0), b = widen(kB0);
  const auto losses = reference_sgd(x, y, 2 * n, 1, 0.5, w, b);
  // Sum: both micro-batches' mean losses added, i.e. twice the mean over all eight rows.
  CHECK(anchors.at(m.loss).as<float>()[0] == doctest::Approx(2 * losses[0]).epsilon(1e-5));
  check_weights(s, w, b);
}

TEST_CASE("nllloss: ignore_index rows count for nothing, and mean divides by the rows that count") {
  constexpr std::int64_t n = 4;
  auto m = make_model(n, ipu::train::popart_reduction::mean, -1);
  ipu::runtime::training_session s(m.g, ipu::data_flow(1, {{m.loss, ipu::anchor_return_type::all()}}), m.loss,
                                   ipu::train::const_sgd(0.1));
  s.prepare_device();
  const auto x = inputs(n);
  std::vector<std::int32_t> y{1, -1, 0, -1};
  auto xs = ipu::host_tensor::from<float>({n, kIn}, x);
  auto ys = ipu::host_tensor::from<std::int32_t>({n}, y);
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
  s.run(io);
  // The reference on rows 0 and 2 alone.
  const std::vector<float> kept{x[0], x[1], x[2], x[6], x[7], x[8]};
  auto w = widen(kW0), b = widen(kB0);
  const auto losses = reference_sgd(kept, {1, 0}, 2, 1, 0.1, w, b);
  CHECK(anchors.at(m.loss).as<float>()[0] == doctest::Approx(losses[0]).epsilon(1e-5));
  check_weights(s, w, b);
}

TEST_CASE("l1loss and identityloss: lambda times the reduced absolute values, and the reduction itself") {
  ipu::builder b("l1");
  const auto x = b.add_input_tensor({data_type::F32, {2, 2}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>({2, 2}, {1.f, -2.f, 3.f, -4.f}), "w");
  const auto y = b.mul(x, w);
  const auto l1 = ipu::train::l1loss(b, y, 0.5f, ipu::train::popart_reduction::sum);
  const auto id = ipu::train::identityloss(b, y, ipu::train::popart_reduction::mean);
  b.add_output(id);
  const auto loss = b.name_of(l1), mean = b.name_of(id);
  auto g = std::move(b).build();
  ipu::runtime::training_session s(g, ipu::data_flow(1, {{loss, ipu::anchor_return_type::all()}, {mean, ipu::anchor_return_type::all()}}),
                                   loss, ipu::train::const_sgd(0.25));
  s.prepare_device();
  auto xs = ipu::host_tensor::from<float>({2, 2}, {1.f, 1.f, -1.f, 2.f});
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", xs.view()}}, anchors);
  s.run(io);
  // y = [1, -2, -3, -8]: 0.5 * (1 + 2 + 3 + 8) = 7; the mean of y is -3.
  CHECK(anchors.at(loss).as<float>()[0] == doctest::Approx(7.0));
  CHECK(anchors.at(mean).as<float>()[0] == doctest::Approx(-3.0));
  // d/dw = 0.5 * sign(y) * x = [0.5, -0.5, 0.5, -1]; w - 0.25 * that.
  ipu::host_tensor out(ipu::tensor_info{data_type::F32, {2, 2}});
  s.weights_to_host();
  s.read_weights({{"w", out.view()}});
  const std::vector<float> want{0.875f, -1.875f, 2.875f, -3.75f};
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(out.as<float>()[i] == doctest::Approx(want[i]));
}

TEST_CASE("weights move as PopART moves them: write_weights, weights_from_host, weights_to_host, model_to_host") {
  auto m = make_model(4);
  ipu::runtime::training_session s(m.g, ipu::data_flow(1, {{m.loss, ipu::anchor_return_type::all()}}), m.loss,
                                   ipu::train::const_sgd(0.1));
  ipu::host_tensor zeros(ipu::tensor_info{data_type::F32, {kIn, kClasses}});
  CHECK_THROWS_WITH_AS(s.weights_to_host(), doctest::Contains("before prepare_device()"), ipu::error);
  s.write_weights({{"W", zeros.view()}});  // the host's copy, sent by prepare_device()
  s.prepare_device();
  const auto x = inputs(4);
  const auto y = labels_for(4);
  auto xs = ipu::host_tensor::from<float>({4, kIn}, x);
  auto ys = ipu::host_tensor::from<std::int32_t>({4}, y);
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
  s.run(io);
  std::vector<double> w(kW0.size(), 0.0), b = widen(kB0);
  (void)reference_sgd(x, y, 4, 1, 0.1, w, b);
  check_weights(s, w, b);

  const auto file = std::filesystem::temp_directory_path() / "ipu_test_training_session.onnx";
  s.model_to_host(file);
  const auto trained = ipu::onnx::load_model(file);
  std::filesystem::remove(file);
  const auto& t = trained.tensor(*trained.find_tensor("W"));
  for (std::size_t i = 0; i < w.size(); ++i) CHECK(t.data.load<float>(i) == doctest::Approx(w[i]).epsilon(1e-5));

  SUBCASE("bad arrays change nothing") {
    ipu::host_tensor wrong(ipu::tensor_info{data_type::F32, {2, 2}});
    CHECK_THROWS_WITH_AS(s.write_weights({{"b", ipu::host_tensor(ipu::tensor_info{data_type::F32, {kClasses}}).view()},
                                          {"W", wrong.view()}}),
                         doctest::Contains("the array for weight 'W' is F32[2,2], the weight F32[3,2]"), ipu::error);
    CHECK_THROWS_WITH_AS(s.read_weights({{"nope", wrong.view()}}), doctest::Contains("'nope' is not a weight"), ipu::error);
  }
}

TEST_CASE("a training session refuses what it cannot do, before any work") {
  auto m = make_model(4);
  const ipu::data_flow flow(1, {{m.loss, ipu::anchor_return_type::all()}});
  SUBCASE("an option it does not apply") {
    ipu::options o;
    o.auto_round_num_ipus(true);
    CHECK_THROWS_WITH_AS(ipu::runtime::training_session(m.g, flow, m.loss, ipu::train::const_sgd(0.1), {}, o),
                         doctest::Contains("does not apply these options yet: autoRoundNumIPUs(True)"), ipu::error);
  }
  SUBCASE("a loss that is no tensor, or not a scalar") {
    CHECK_THROWS_WITH_AS(ipu::runtime::training_session(m.g, flow, "nope", ipu::train::const_sgd(0.1)),
                         doctest::Contains("the loss 'nope' is no tensor of the model"), ipu::error);
    auto per_row = make_model(4, ipu::train::popart_reduction::none);
    CHECK_THROWS_WITH_AS(ipu::runtime::training_session(per_row.g, ipu::data_flow{}, per_row.loss, ipu::train::const_sgd(0.1)),
                         doctest::Contains("a loss is a scalar"), ipu::error);
  }
  SUBCASE("run before prepare_device, and arrays of the wrong size") {
    ipu::runtime::training_session s(m.g, flow, m.loss, ipu::train::const_sgd(0.1));
    auto xs = ipu::host_tensor::from<float>({1, kIn}, {1.f, 2.f, 3.f});
    auto ys = ipu::host_tensor::from<std::int32_t>({4}, {0, 1, 0, 1});
    auto anchors = s.init_anchor_arrays();
    ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
    CHECK_THROWS_WITH_AS(s.run(io), doctest::Contains("run() before prepare_device()"), ipu::error);
    s.prepare_device();
    CHECK_THROWS_AS(s.run(io), ipu::error);
    CHECK(s.updates() == 0);
  }
  SUBCASE("a constant optimizer attribute changed after compiling") {
    ipu::runtime::training_session s(m.g, flow, m.loss, ipu::train::const_sgd(0.1));
    s.prepare_device();
    CHECK_THROWS_AS(s.update_optimizer_from_host(ipu::train::const_sgd(0.2)), ipu::error);
  }
}

namespace {

/// `s` and `t` hold the same weights, bit for bit, after weights_to_host.
void check_same_weights(ipu::runtime::training_session& s, ipu::runtime::training_session& t) {
  ipu::host_tensor w1(ipu::tensor_info{data_type::F32, {kIn, kClasses}}), b1(ipu::tensor_info{data_type::F32, {kClasses}});
  ipu::host_tensor w2 = w1, b2 = b1;
  s.weights_to_host();
  t.weights_to_host();
  s.read_weights({{"W", w1.view()}, {"b", b1.view()}});
  t.read_weights({{"W", w2.view()}, {"b", b2.view()}});
  for (std::size_t i = 0; i < w1.as<float>().size(); ++i) CHECK(w1.as<float>()[i] == w2.as<float>()[i]);
  for (std::size_t i = 0; i < b1.as<float>().size(); ++i) CHECK(b1.as<float>()[i] == b2.as<float>()[i]);
}

/// Runs one step (`bps` updates) of `s` on rows [first, first + bps * rows) of the data set.
void run_updates(ipu::runtime::training_session& s, std::int64_t bps, std::int64_t rows, std::int64_t first) {
  const auto x = inputs(static_cast<std::size_t>(first + bps * rows));
  const auto y = labels_for(static_cast<std::size_t>(first + bps * rows));
  auto xs = ipu::host_tensor::from<float>({bps * rows, kIn}, std::vector<float>(x.begin() + first * kIn, x.end()));
  auto ys = ipu::host_tensor::from<std::int32_t>({bps * rows}, std::vector<std::int32_t>(y.begin() + first, y.end()));
  auto anchors = s.init_anchor_arrays();
  ipu::step_io io({{"x", ipu::const_tensor_view(s.input_array_info("x"), xs.bytes().data())},
                   {"labels", ipu::const_tensor_view(s.input_array_info("labels"), ys.bytes().data())}},
                  anchors);
  s.run(io);
}

}  // namespace

TEST_CASE("replicated graphs: R replicas of G micro-batches train as one replica accumulating G x R, bit for bit") {
  constexpr std::int64_t n = 2, bps = 2, G = 2, R = 2;
  auto m = make_model(n);
  const ipu::data_flow flow(bps, {{m.loss, ipu::anchor_return_type::all()}, {m.probs, ipu::anchor_return_type::final()}});
  SUBCASE("bit for bit, mean and sum") for (const auto reduction : {ipu::reduction_type::mean, ipu::reduction_type::sum}) {
    CAPTURE(static_cast<int>(reduction));
    ipu::runtime::session_options so;
    so.enable_replicated_graphs = true;
    so.replicated_graph_count = R;
    so.enable_gradient_accumulation = true;
    so.accumulation_factor = G;
    so.accumulation_and_replication_reduction_type = reduction;
    ipu::runtime::training_session rep(m.g, flow, m.loss, ipu::train::sgd{.lr = 0.3, .momentum = 0.5}, {}, so.to_options());
    ipu::options plain_options;
    plain_options.gradient_accumulation(G * R).accumulation_and_replication_reduction_type(reduction);
    ipu::runtime::training_session plain(m.g, flow, m.loss, ipu::train::sgd{.lr = 0.3, .momentum = 0.5}, {}, plain_options);
    rep.prepare_device();
    plain.prepare_device();
    // StepIO: batches x accumulation x replicas x the tensor, PopART's layout, and the same bytes as
    // the plain session's batches x (accumulation x replicas).
    CHECK(rep.input_array_info("x") == ipu::tensor_info{data_type::F32, {bps, G, R, n, kIn}});
    CHECK(rep.init_anchor_arrays().at(m.probs).info() == ipu::tensor_info{data_type::F32, {R, n, kClasses}});
    const auto x = inputs(bps * G * R * n);
    const auto y = labels_for(bps * G * R * n);
    auto xs = ipu::host_tensor::from<float>({bps, G * R, n, kIn}, x);
    auto ys = ipu::host_tensor::from<std::int32_t>({bps, G * R, n}, y);
    auto ra = rep.init_anchor_arrays(), pa = plain.init_anchor_arrays();
    ipu::step_io rio({{"x", ipu::const_tensor_view(rep.input_array_info("x"), xs.bytes().data())},
                      {"labels", ipu::const_tensor_view(rep.input_array_info("labels"), ys.bytes().data())}},
                     ra);
    ipu::step_io pio({{"x", xs.view()}, {"labels", ys.view()}}, pa);
    for (int step = 0; step < 2; ++step) {
      rep.run(rio);
      plain.run(pio);
    }
    CHECK(rep.updates() == 2 * bps);
    check_same_weights(rep, plain);
    // Every micro-batch's loss, [batches][accumulation][replica] = the plain session's order.
    REQUIRE(ra.at(m.loss).bytes().size() == pa.at(m.loss).bytes().size());
    CHECK(std::equal(ra.at(m.loss).bytes().begin(), ra.at(m.loss).bytes().end(), pa.at(m.loss).bytes().begin()));
    // Final: each replica's last micro-batch, the plain session's last R micro-batches.
    const auto probs = pa.at(m.probs).bytes();
    REQUIRE(ra.at(m.probs).bytes().size() == R * probs.size());
    CHECK(std::equal(probs.begin(), probs.end(), ra.at(m.probs).bytes().begin() + static_cast<std::ptrdiff_t>(probs.size())));
  }
  SUBCASE("the step's arrays must hold batches x accumulation x replicas micro-batches") {
    ipu::options o;
    o.replication_factor(R);
    ipu::runtime::training_session s(m.g, flow, m.loss, ipu::train::const_sgd(0.1), {}, o);
    s.prepare_device();
    auto xs = ipu::host_tensor::from<float>({bps, n, kIn}, inputs(bps * n));  // one replica's rows
    auto ys = ipu::host_tensor::from<std::int32_t>({bps, R, n}, labels_for(bps * R * n));
    auto anchors = s.init_anchor_arrays();
    ipu::step_io io({{"x", xs.view()}, {"labels", ys.view()}}, anchors);
    CHECK_THROWS_WITH_AS(s.run(io), doctest::Contains("2 batches x 1 accumulation x 2 replicas"), ipu::error);
    CHECK(s.updates() == 0);
    CHECK_THROWS_WITH_AS(s.compile_and_export(std::filesystem::temp_directory_path() / "ipu_popart_replicated.popef"),
                         doctest::Contains("a PopEF training step holds no replicas yet"), ipu::error);
  }
  SUBCASE("PopART's counts without their switches, or below 1, are refused") {
    ipu::runtime::session_options so;
    so.replicated_graph_count = 2;
    CHECK_THROWS_WITH_AS((void)so.to_options(), doctest::Contains("replicatedGraphCount is 2 but enableReplicatedGraphs is off"),
                         ipu::error);
    so = {};
    so.accumulation_factor = 4;
    CHECK_THROWS_WITH_AS((void)so.to_options(), doctest::Contains("accumulationFactor is 4 but enableGradientAccumulation is off"),
                         ipu::error);
    so.enable_gradient_accumulation = true;
    so.accumulation_factor = 0;
    CHECK_THROWS_WITH_AS((void)so.to_options(), doctest::Contains("accumulationFactor is 0"), ipu::error);
    so.accumulation_factor = 4;
    CHECK(so.to_options().gradient_accumulation() == 4);
    CHECK(so.to_options().replication_factor() == 1);
  }
}

TEST_CASE("compile_and_export writes a training step that training resumes from, bit for bit") {
  constexpr std::int64_t n = 4;
  const auto dir = std::filesystem::temp_directory_path() / "ipu_test_training_export";
  std::filesystem::create_directories(dir);
  for (const std::int64_t accumulation : {1, 2}) {
    CAPTURE(accumulation);
    auto m = make_model(n);
    ipu::options o;
    o.gradient_accumulation(accumulation);
    ipu::train::adam opt{.lr = 0.05};  // Adam: its moments and step count must resume too
    opt.beta1 = 0.8;
    const ipu::data_flow flow(1, {{m.loss, ipu::anchor_return_type::all()}});
    const auto rows = n * accumulation;

    // Straight through: 5 updates.
    ipu::runtime::training_session straight(m.g, flow, m.loss, opt, ipu::device_from_name("mk2", 1), o);
    straight.prepare_device();
    for (std::int64_t u = 0; u < 5; ++u) run_updates(straight, 1, rows, u * rows);

    // 3 updates, exported, then 2 more in a session made from the file alone.
    ipu::runtime::training_session first(m.g, flow, m.loss, opt, ipu::device_from_name("mk2", 1), o);
    first.prepare_device();
    for (std::int64_t u = 0; u < 3; ++u) run_updates(first, 1, rows, u * rows);
    const auto file = dir / ("step" + std::to_string(accumulation) + ".popef");
    first.compile_and_export(file);

    auto resumed = ipu::runtime::training_session::from_executable(file, flow, ipu::device_from_name("mk2", 1));
    CHECK(resumed.is_loaded_from_file());
    CHECK(resumed.updates() == 3);
    CHECK(resumed.options().gradient_accumulation() == accumulation);
    resumed.prepare_device();
    for (std::int64_t u = 3; u < 5; ++u) run_updates(resumed, 1, rows, u * rows);
    check_same_weights(straight, resumed);
    const auto a = straight.host_session().optimizer_state(), b = resumed.host_session().optimizer_state();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      CHECK(a[i].first == b[i].first);
      CHECK(std::equal(a[i].second.bytes().begin(), a[i].second.bytes().end(), b[i].second.bytes().begin(),
                       b[i].second.bytes().end()));
    }

    // PopART's way: a session from the same model loads the file instead of planning, and resumes.
    ipu::runtime::training_session loaded(m.g, flow, m.loss, opt, ipu::device_from_name("mk2", 1), o);
    loaded.load_executable(file);
    loaded.prepare_device();
    CHECK(loaded.executable().name == first.executable().name);
    for (std::int64_t u = 3; u < 5; ++u) run_updates(loaded, 1, rows, u * rows);
    check_same_weights(straight, loaded);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a training step from PopEF is refused when it is not this session's, and an inference file is no training step") {
  constexpr std::int64_t n = 4;
  const auto dir = std::filesystem::temp_directory_path() / "ipu_test_training_refusals";
  std::filesystem::create_directories(dir);
  auto m = make_model(n);
  const ipu::data_flow flow(1, {{m.loss, ipu::anchor_return_type::all()}});
  ipu::runtime::training_session s(m.g, flow, m.loss, ipu::train::sgd{.lr = 0.1}, ipu::device_from_name("mk2", 1));
  const auto file = dir / "sgd.popef";
  s.compile_and_export(file);  // no device needed: the host's weights, a fresh optimizer

  auto refused = [&](auto&& call, std::string_view needle) {
    try {
      call();
      FAIL("not refused: " << needle);
    } catch (const ipu::error& e) {
      CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
    }
  };
  // Another optimizer kind, or a constant changed.
  refused([&] {
    ipu::runtime::training_session t(m.g, flow, m.loss, ipu::train::adam{}, ipu::device_from_name("mk2", 1));
    t.load_executable(file);
  }, "changes the shape of the compiled step");
  // Other anchors than those the step was exported with: the logits are no output of the model.
  const auto logits = m.g.tensor(m.g.ops().at(1).outputs.at(0)).name;
  refused([&] {
    (void)ipu::runtime::training_session::from_executable(
        file, ipu::data_flow(1, {{m.loss, ipu::anchor_return_type::all()}, {logits, ipu::anchor_return_type::final()}}));
  }, "anchors the step was exported with");
  // Options contradicting the file.
  refused([&] {
    ipu::options o;
    o.gradient_accumulation(3);
    (void)ipu::runtime::training_session::from_executable(file, flow, ipu::device_from_name("mk2", 1), o);
  }, "another gradient accumulation");
  // Loaded after prepare_device.
  refused([&] {
    ipu::runtime::training_session t(m.g, flow, m.loss, ipu::train::sgd{.lr = 0.1}, ipu::device_from_name("mk2", 1));
    t.prepare_device();
    t.load_executable(file);
  }, "after prepare_device");
  // An inference executable.
  const auto inference = dir / "inference.popef";
  ipu::popef::compile_and_export(make_model(n).g, ipu::options{}, ipu::device_from_name("mk2", 1), inference);
  refused([&] { (void)ipu::runtime::training_session::from_executable(inference, flow); }, "not a training step");
  // A fresh session's export trains as the session would have: the variable lr may differ.
  ipu::runtime::training_session t(m.g, flow, m.loss, ipu::train::sgd{.lr = 0.2}, ipu::device_from_name("mk2", 1));
  t.load_executable(file);
  t.prepare_device();
  run_updates(t, 1, n, 0);
  auto w = widen(kW0), b = widen(kB0);
  (void)reference_sgd(inputs(n), labels_for(n), n, 1, 0.2, w, b);
  check_weights(t, w, b);
  std::filesystem::remove_all(dir);
}

namespace {

/// make_model's network with a training-mode Dropout (ratio 0.5) after the MatMul: the model and
/// its loss's name.
std::pair<ipu::graph, std::string> dropout_model(std::int64_t n) {
    ipu::builder b("dropout");
    const auto x = b.add_input_tensor({data_type::F32, {n, kIn}}, "x");
    const auto labels = b.add_input_tensor({data_type::S32, {n}}, "labels");
    const auto w = b.add_initialized_input(ipu::make_constant<float>({kIn, kClasses}, kW0), "W");
    const auto bias = b.add_initialized_input(ipu::make_constant<float>({kClasses}, kB0), "b");
    const auto ratio = b.add_constant(ipu::make_constant<float>(ipu::shape{}, {0.5f}));
    const auto training = b.add_constant(ipu::make_constant<bool>(ipu::shape{}, {true}));
    const auto h = b.op("Dropout", {b.matmul(x, w), ratio, training}).front();
    const auto probs = b.softmax(b.add(h, bias), -1, "probs");
    const auto loss = b.name_of(ipu::train::nllloss(b, probs, labels));
    b.add_output(probs);
    return std::pair{std::move(b).build(), loss};
}

}  // namespace

TEST_CASE("randomSeed seeds the masks of training-mode Dropout: the same seed trains the same, another otherwise") {
  constexpr std::int64_t n = 4, bps = 3;
  auto make = [] { return dropout_model(n); };
  const auto x = ipu::host_tensor::from<float>({bps, n, kIn}, inputs(bps * n));
  const auto y = ipu::host_tensor::from<std::int32_t>({bps, n}, labels_for(bps * n));
  auto trained = [&](std::optional<std::uint64_t> seed) {
    auto [g, loss] = make();
    ipu::options o;
    if (seed) o.random_seed(*seed);
    ipu::runtime::training_session s(g, ipu::data_flow(bps, {{loss, ipu::anchor_return_type::all()}}), loss,
                                     ipu::train::const_sgd(0.5), ipu::device_from_name("mk2", 1), o);
    s.prepare_device();  // the step, with its seeded mask, plans for the device
    auto anchors = s.init_anchor_arrays();
    ipu::step_io io({{"x", x.view()}, {"labels", y.view()}}, anchors);
    s.run(io);
    const auto w = s.host_session().weight("W").as<float>();
    return std::vector<float>(w.begin(), w.end());
  };
  const auto a = trained(5);
  CHECK(trained(5) == a);
  CHECK(trained(6) != a);
  CHECK(trained(std::nullopt) == trained(0));  // unset, the seed is 0
  CHECK(trained(std::nullopt) != a);
}

TEST_CASE("a training step with Dropout and automatic loss scaling resumes from PopEF with its seed, masks and scale") {
  constexpr std::int64_t n = 4;
  const auto dir = std::filesystem::temp_directory_path() / "ipu_test_training_dropout_export";
  std::filesystem::create_directories(dir);
  auto [g, loss] = dropout_model(n);
  ipu::options o;
  o.random_seed(7).automatic_loss_scaling(true);
  const ipu::data_flow flow(1, {{loss, ipu::anchor_return_type::all()}});
  const auto opt = ipu::train::sgd{.lr = 0.3, .momentum = 0.5, .loss_scaling = 4};
  ipu::runtime::training_session straight(g, flow, loss, opt, ipu::device_from_name("mk2", 1), o);
  straight.prepare_device();
  for (std::int64_t u = 0; u < 5; ++u) run_updates(straight, 1, n, u * n);
  ipu::runtime::training_session first(g, flow, loss, opt, ipu::device_from_name("mk2", 1), o);
  first.prepare_device();
  for (std::int64_t u = 0; u < 3; ++u) run_updates(first, 1, n, u * n);
  const auto file = dir / "dropout.popef";
  first.compile_and_export(file);
  auto resumed = ipu::runtime::training_session::from_executable(file, flow, ipu::device_from_name("mk2", 1));
  CHECK(resumed.options().random_seed() == 7u);
  CHECK(resumed.options().automatic_loss_scaling());
  resumed.prepare_device();
  CHECK(resumed.host_session().loss_scaling() == first.host_session().loss_scaling());
  for (std::int64_t u = 3; u < 5; ++u) run_updates(resumed, 1, n, u * n);
  check_same_weights(straight, resumed);
  CHECK(resumed.host_session().loss_scaling() == straight.host_session().loss_scaling());
  CHECK(straight.host_session().loss_scaling() == 4 * 32.0);  // doubled at each of the 5 updates
  // Another seed, or no automatic loss scaling, is another step.
  ipu::options other = o;
  other.random_seed(8);
  CHECK_THROWS_WITH_AS((void)ipu::runtime::training_session::from_executable(file, flow, ipu::device_from_name("mk2", 1), other),
                       doctest::Contains("random seed 8"), ipu::error);
  ipu::options without;
  without.random_seed(7);
  ipu::runtime::training_session t(g, flow, loss, opt, ipu::device_from_name("mk2", 1), without);
  CHECK_THROWS_WITH_AS(t.load_executable(file), doctest::Contains("with automatic loss scaling"), ipu::error);
  std::filesystem::remove_all(dir);
}

}  // namespace test_training_session

namespace test_training_session {

TEST_CASE("inputReplicaGrouping: the replicas of an input group read its one slice, by hand") {
  // y = x w (all [1, 1], w = 1), loss mean(y^2); 4 replicas, input groups of 2: the input array
  // holds 2 slices, x = 1 and 2. Consecutive groups give replicas 0..3 x = 1, 1, 2, 2; orthogonal
  // ones 1, 2, 1, 2. The mean gradient over the replicas is mean(2 x^2 w) = 2 (1 + 1 + 4 + 4) / 4 = 5
  // either way, so SGD with lr 0.1 takes w from 1 to 0.5.
  constexpr std::int64_t R = 4;
  ipu::builder b("grouped");
  const auto x = b.add_input_tensor({data_type::F32, {1, 1}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>({1, 1}, std::vector<float>{1.0f}), "w");
  const auto y = b.matmul(x, w, "y");
  const auto loss = b.reduce_mean(b.mul(y, y), {0, 1}, false, "loss");
  b.add_output(y);
  const std::string loss_name = b.name_of(loss), y_name = b.name_of(y);
  const ipu::data_flow flow(1, {{y_name, ipu::anchor_return_type::all()}});
  const auto g = std::move(b).build();
  auto weight = [](ipu::runtime::training_session& s) {
    ipu::host_tensor out(ipu::tensor_info{data_type::F32, {1, 1}});
    s.weights_to_host();
    s.read_weights({{"w", out.view()}});
    return out.as<float>()[0];
  };
  const auto xs = ipu::host_tensor::from<float>({2, 1, 1}, {1.0f, 2.0f});
  for (const auto& grouping : {std::pair{ipu::comm_group_type::consecutive, std::vector<float>{1, 1, 2, 2}},
                                std::pair{ipu::comm_group_type::orthogonal, std::vector<float>{1, 2, 1, 2}}}) {
    const auto type = grouping.first;
    const auto& ys = grouping.second;
    CAPTURE(static_cast<int>(type));
    ipu::options o;
    o.replication_factor(R).input_replica_grouping(2, type);
    ipu::runtime::training_session s(g, flow, loss_name, ipu::train::sgd{.lr = 0.1}, {}, o);
    s.prepare_device();
    CHECK(s.input_array_info("x") == ipu::tensor_info{data_type::F32, {2, 1, 1}});  // a slice per group
    auto anchors = s.init_anchor_arrays();
    REQUIRE(anchors.at(y_name).as<float>().size() == R);  // a value per replica
    ipu::step_io io({{"x", xs.view()}}, anchors);
    s.run(io);
    for (std::size_t r = 0; r < R; ++r) CHECK(anchors.at(y_name).as<float>()[r] == ys[r]);
    CHECK(weight(s) == doctest::Approx(0.5));
    s.run(io);  // w = 0.5: y halves; the gradient 2 x^2 w = 2.5, w = 0.25
    for (std::size_t r = 0; r < R; ++r) CHECK(anchors.at(y_name).as<float>()[r] == ys[r] * 0.5f);
    CHECK(weight(s) == doctest::Approx(0.25));
    // The same as every replica given its own copy of its group's slice, bit for bit.
    ipu::runtime::training_session plain(g, flow, loss_name, ipu::train::sgd{.lr = 0.1}, {},
                                         ipu::options().replication_factor(R));
    plain.prepare_device();
    auto copies = ipu::host_tensor::from<float>({R, 1, 1}, ys);
    auto plain_anchors = plain.init_anchor_arrays();
    ipu::step_io pio({{"x", copies.view()}}, plain_anchors);
    plain.run(pio);
    plain.run(pio);
    CHECK(weight(plain) == weight(s));
  }
  ipu::options bad;
  bad.replication_factor(R).input_replica_grouping(3, ipu::comm_group_type::consecutive);
  CHECK_THROWS_WITH_AS(ipu::runtime::training_session(g, flow, loss_name, ipu::train::sgd{.lr = 0.1}, {}, bad),
                       doctest::Contains("divide"), ipu::error);
}

}  // namespace test_training_session
