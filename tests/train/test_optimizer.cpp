// Optimizers (include/ipu/train/optimizer.hpp, optimizer_update.hpp) against PyTorch training the
// same models on the same data (tests/train/torch_optimizers.py, torch_training.py): RMSprop and
// Adagrad as torch.optim, LAMB as its paper writes it, gradient accumulation as PopTorch defines it;
// loss and velocity scaling, constant and variable attributes, accumulator types and the state dict.
#include "ipu/train/optimizer.hpp"

#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/train/session.hpp"
#include "pytorch_reference.hpp"

namespace test_optimizer {

namespace {

namespace train = ipu::train;
using train::loss_kind;

train::training_options with(const train::optimizer& opt, std::int64_t accumulation = 1,
                             train::accumulation_reduction reduction = train::accumulation_reduction::mean) {
  train::training_options o;
  o.loss.kind = loss_kind::cross_entropy;
  o.opt = opt;
  o.gradient_accumulation = accumulation;
  o.reduction = reduction;
  return o;
}

void check(const std::string& name, const train::training_options& o, std::int64_t steps = 10, double tolerance = 1e-4) {
  ipu_test::check_training("torch_optimizers.py", name, o, steps, tolerance);
}

/// A linear model y = x w with one weight [3, 2], and a batch of 2.
ipu::graph linear() {
  ipu::builder b("linear");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  b.add_output(b.matmul(x, w, "y"));
  return b.build();
}
const auto linear_x = ipu::host_tensor::from<float>({2, 3}, {1, 0, 0, 0, 1, 0.5f});
const auto linear_target = ipu::host_tensor::from<float>({2, 2}, {0, 1, 1, 0});

train::training_options mse(const train::optimizer& opt) {
  train::training_options o;
  o.opt = opt;
  return o;
}

std::vector<float> values(const ipu::host_tensor& t) { return {t.as<float>().begin(), t.as<float>().end()}; }

bool is_step_input(const train::training_session& s, std::string_view name) {
  const auto& g = s.graph_of_step().step;
  for (auto t : g.inputs())
    if (g.tensor(t).name == name) return true;
  return false;
}

}  // namespace

TEST_CASE("RMSprop, plain and centered with momentum and weight decay, as torch.optim.RMSprop") {
  check("mlp_rmsprop", with(train::rmsprop{.lr = 0.01}));
  check("mlp_rmsprop_centered_momentum",
        with(train::rmsprop{.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.01, .momentum = 0.5, .centered = true}));
}

TEST_CASE("Adagrad with learning-rate decay, weight decay and an initial accumulator, as torch.optim.Adagrad") {
  check("mlp_adagrad",
        with(train::adagrad{.lr = 0.1, .lr_decay = 0.05, .weight_decay = 0.01, .initial_accumulator_value = 0.1}));
}

TEST_CASE("LAMB and LambNoBias with a clipped weight norm, as the paper's formulas") {
  check("mlp_lamb", with(train::lamb{.lr = 0.01, .eps = 1e-6, .weight_decay = 0.01}));
  check("mlp_lamb_nobias_clipped", with(train::lamb{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6,
                                                    .weight_decay = 0.02, .bias_correction = false,
                                                    .max_weight_norm = 0.5}));
}

TEST_CASE("binary cross-entropy on probabilities, as torch.nn.BCELoss") {
  auto o = with(train::adam{.lr = 0.02});
  o.loss.kind = loss_kind::bce;
  check("mlp_bce_adam", o);
  CHECK(train::parse_loss_kind("bce") == loss_kind::bce);
}

TEST_CASE("BCE stays finite where a sigmoid saturates to exactly 0 or 1") {
  ipu::builder b("saturated");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2, 1}}, "x");
  const auto w = b.add_initialized_input(ipu::make_scalar<float>(100), "w");
  b.add_output(b.sigmoid(b.mul(x, w), "p"));  // sigmoid(100) and sigmoid(-100) round to exactly 1 and 0
  auto o = mse(train::sgd{.lr = 0.01});
  o.loss.kind = loss_kind::bce;
  train::training_session s(b.build(), o);
  const auto xs = ipu::host_tensor::from<float>({2, 1}, {1, -1});
  // Both probabilities are below the smallest normal float on the wrong side: each log is taken at
  // 1.2e-38 (PyTorch clamps at -100 instead; in F32 1 / p would overflow).
  const auto wrong = ipu::host_tensor::from<float>({2, 1}, {0, 1});
  const auto r = s.run({{"x", xs.view()}}, wrong.view());
  CHECK(r.loss == doctest::Approx(-std::log(1.1754943508222875e-38)).epsilon(1e-5));
  CHECK(std::isfinite(s.weight("w").as<float>()[0]));
}

TEST_CASE("SGD's momentum raised from 0 starts a fresh buffer, as torch.optim.SGD (which has none at 0)") {
  train::sgd opt{.lr = 0.1, .dampening = 0.5};
  opt.momentum.mark_as_variable();  // 0 for now
  train::training_session s(linear(), mse(opt));
  train::training_session plain(linear(), mse(train::sgd{.lr = 0.1}));
  for (int k = 0; k < 2; ++k) {  // momentum 0: plain SGD, dampening has no effect
    (void)s.run({{"x", linear_x.view()}}, linear_target.view());
    (void)plain.run({{"x", linear_x.view()}}, linear_target.view());
  }
  CHECK(values(s.weight("w")) == values(plain.weight("w")));
  // Raised to 0.9: the first step with momentum takes the gradient itself as its buffer.
  opt.momentum = 0.9;
  s.set_optimizer(opt);
  const auto before = values(s.weight("w"));
  (void)s.run({{"x", linear_x.view()}}, linear_target.view());
  const auto buffer = values(s.optimizer_state().at(0).second);
  const auto after = values(s.weight("w"));
  for (std::size_t i = 0; i < after.size(); ++i) CHECK(after[i] == doctest::Approx(before[i] - 0.1f * buffer[i]));
  (void)plain.run({{"x", linear_x.view()}}, linear_target.view());  // the same gradient as s's step
  const auto g_plain = values(plain.weight("w"));
  for (std::size_t i = 0; i < after.size(); ++i) CHECK(after[i] == doctest::Approx(g_plain[i]));
}

TEST_CASE("a step that fails part-way leaves the session as it was") {
  // NLL on y as log-probabilities: micro-batch 0 is fine, micro-batch 1 names class 5 of 2.
  auto o = mse(train::sgd{.lr = 0.1, .momentum = 0.9});
  o.loss.kind = loss_kind::nll;
  o.gradient_accumulation = 2;
  train::training_session s(linear(), o);
  const auto before = values(s.weight("w"));
  const auto x4 = ipu::host_tensor::from<float>({4, 3}, {1, 0, 0, 0, 1, 0.5f, 0, 0, 1, 1, 1, 1});
  const auto bad = ipu::host_tensor::from<std::int64_t>({4}, {0, 1, 0, 5});
  CHECK_THROWS_WITH_AS((void)s.run({{"x", x4.view()}}, bad.view()), doctest::Contains("target 5 is not a class"),
                       ipu::error);
  CHECK(s.steps() == 0);
  CHECK(values(s.weight("w")) == before);
  // The next good step is the session's first: the same as a fresh session's.
  const auto good = ipu::host_tensor::from<std::int64_t>({4}, {0, 1, 0, 1});
  train::training_session fresh(linear(), o);
  (void)s.run({{"x", x4.view()}}, good.view());
  (void)fresh.run({{"x", x4.view()}}, good.view());
  CHECK(values(s.weight("w")) == values(fresh.weight("w")));
  CHECK(values(s.optimizer_state().at(0).second) == values(fresh.optimizer_state().at(0).second));
  train::training_options f16;
  f16.gradient_accumulation = 2;
  ipu::builder b("half");
  const auto x = b.add_input_tensor({ipu::data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>(ipu::shape{3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  const auto y = b.matmul(x, w, "y");
  b.add_output(y);
  b.add_output(b.cast(y, ipu::data_type::F16, "y16"));
  f16.output = "y";
  CHECK_THROWS_WITH_AS(train::training_session(b.build(), f16, {}, train::output_mode::sum),
                       doctest::Contains("output_mode::sum adds F32, F64, S32 or S64 outputs"), ipu::error);
}

TEST_CASE("gradient accumulation: the mean or the sum of the micro-batches' gradients, one update per step") {
  SUBCASE("Adam, 4 micro-batches, mean") { check("mlp_adam_accumulate4", with(train::adam{.lr = 0.01}, 4), 6); }
  SUBCASE("SGD with momentum, 3 micro-batches, sum") {
    check("mlp_sgd_accumulate3_sum",
          with(train::sgd{.lr = 0.02, .momentum = 0.9}, 3, train::accumulation_reduction::sum), 6);
  }
  SUBCASE("AdamW through BatchNormalization, 2 micro-batches: running statistics move once per micro-batch") {
    check("cnn_bn_adamw_accumulate2", with(train::adam{.lr = 0.01, .weight_decay = 0.05, .decoupled_weight_decay = true}, 2),
          6);
  }
}

TEST_CASE("gradient accumulation: the step graph accumulates, the update graph applies the optimizer once") {
  auto o = mse(train::sgd{.lr = 0.1});
  o.gradient_accumulation = 2;
  train::training_session s(linear(), o);
  const auto& tg = s.graph_of_step();
  CHECK(tg.micro_batches == 2);
  REQUIRE(tg.accumulators.size() == 1);
  CHECK(tg.accumulators[0].input == "w/accum");
  CHECK(tg.update.num_ops() > 0);
  // The micro-batches are stacked along the first axis: a step takes 4 rows here.
  const auto x4 = ipu::host_tensor::from<float>({4, 3}, {1, 0, 0, 0, 1, 0.5f, 0, 0, 1, 1, 1, 1});
  const auto t4 = ipu::host_tensor::from<float>({4, 2}, {0, 1, 1, 0, 1, 1, 0, 0});
  // One update with the mean gradient of the two micro-batches equals one update of a session
  // without accumulation on the 4 rows at once (MSE's mean makes them the same loss).
  ipu::builder b4("linear4");
  const auto x = b4.add_input_tensor({ipu::data_type::F32, {4, 3}}, "x");
  const auto w = b4.add_initialized_input(ipu::make_constant<float>(ipu::shape{3, 2}, {1, 2, 3, 4, 5, 6}), "w");
  b4.add_output(b4.matmul(x, w, "y"));
  train::training_session whole(b4.build(), mse(train::sgd{.lr = 0.1}));
  const auto r = s.run({{"x", x4.view()}}, t4.view());
  const auto r_whole = whole.run({{"x", x4.view()}}, t4.view());
  CHECK(r.loss == doctest::Approx(r_whole.loss).epsilon(1e-6));
  REQUIRE(r.micro_batch_losses.size() == 2);
  const auto a = values(s.weight("w")), b = values(whole.weight("w"));
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == doctest::Approx(b[i]).epsilon(1e-6));
  CHECK_THROWS_WITH_AS((void)s.run({{"x", linear_x.view()}}, linear_target.view()),
                       doctest::Contains("'labels' is F32[2,2]; a step takes 2 micro-batches of F32[2,2]"), ipu::error);
  o.gradient_accumulation = 0;
  CHECK_THROWS_WITH_AS(train::training_session(linear(), o), doctest::Contains("gradient accumulation of 0"), ipu::error);
}

TEST_CASE("output modes with gradient accumulation: the last micro-batch's outputs, all of them, or their sum") {
  const auto x4 = ipu::host_tensor::from<float>({4, 3}, {1, 0, 0, 0, 1, 0.5f, 0, 0, 1, 1, 1, 1});
  const auto t4 = ipu::host_tensor::from<float>({4, 2}, {0, 1, 1, 0, 1, 1, 0, 0});
  auto o = mse(train::sgd{.lr = 0.1});
  o.gradient_accumulation = 2;
  // Outputs are computed before the update, with the initial w = [[1, 2], [3, 4], [5, 6]].
  const std::vector<float> y{1, 2, 5.5f, 7, 5, 6, 9, 12};
  train::training_session all(linear(), o, {}, train::output_mode::all);
  CHECK(values(all.run({{"x", x4.view()}}, t4.view()).outputs.at(0)) == y);
  train::training_session last(linear(), o, {}, train::output_mode::final);
  CHECK(values(last.run({{"x", x4.view()}}, t4.view()).outputs.at(0)) == std::vector<float>(y.begin() + 4, y.end()));
  train::training_session sum(linear(), o, {}, train::output_mode::sum);
  CHECK(values(sum.run({{"x", x4.view()}}, t4.view()).outputs.at(0)) == std::vector<float>{6, 8, 14.5f, 19});
}

TEST_CASE("loss scaling and velocity scaling change the numbers the step holds, not the training") {
  auto o = with(train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .loss_scaling = 1024});
  ipu_test::check_training("torch_training.py", "mlp_ce_sgd_momentum", o, 10, 1e-4);
  o.opt = train::sgd{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01, .loss_scaling = 64,
                     .velocity_scaling = 8};
  ipu_test::check_training("torch_training.py", "mlp_ce_sgd_momentum", o, 10, 1e-4);
  // The velocity is stored scaled.
  train::training_session plain(linear(), mse(train::sgd{.lr = 0.1, .momentum = 0.9}));
  train::training_session scaled(linear(), mse(train::sgd{.lr = 0.1, .momentum = 0.9, .velocity_scaling = 8}));
  for (int k = 0; k < 2; ++k) {
    (void)plain.run({{"x", linear_x.view()}}, linear_target.view());
    (void)scaled.run({{"x", linear_x.view()}}, linear_target.view());
  }
  const auto a = values(plain.optimizer_state().at(0).second), b = values(scaled.optimizer_state().at(0).second);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == doctest::Approx(8 * a[i]).epsilon(1e-6));
  // Loss scaling in a step: the scaled loss is what autodiff starts from; the reported loss is not scaled.
  train::training_session ls(linear(), mse(train::adam{.lr = 0.1, .loss_scaling = 512}));
  train::training_session no_ls(linear(), mse(train::adam{.lr = 0.1}));
  CHECK(ls.run({{"x", linear_x.view()}}, linear_target.view()).loss ==
        doctest::Approx(no_ls.run({{"x", linear_x.view()}}, linear_target.view()).loss));
  CHECK(is_step_input(ls, "optimizer/loss_scaling"));
  CHECK_FALSE(is_step_input(no_ls, "optimizer/loss_scaling"));
}

TEST_CASE("constant and variable attributes: given values are variable, defaults constant, as poptorch.optim") {
  SUBCASE("what the step graph holds") {
    train::training_session s(linear(), mse(train::sgd{.lr = 0.1}));
    CHECK(is_step_input(s, "optimizer/lr"));
    CHECK_FALSE(is_step_input(s, "optimizer/momentum"));  // constant 0: no momentum at all
    CHECK(s.optimizer_state().size() == 1);               // only "step"
    train::training_session c(linear(), mse(train::const_sgd(0.1)));  // PopART's ConstSGD
    CHECK_FALSE(is_step_input(c, "optimizer/lr"));
    CHECK(c.graph_of_step().step.find_tensor("optimizer/lr"));  // a constant of the step
  }
  SUBCASE("set_optimizer changes variable attributes and refuses constant ones") {
    train::sgd opt{.lr = 0.1, .loss_scaling = 4};
    opt.loss_scaling.mark_as_constant();
    train::training_session s(linear(), mse(opt));
    auto next = opt;
    next.lr = 0.2;
    s.set_optimizer(next);
    next.loss_scaling = train::hyperparameter(8).mark_as_constant();
    CHECK_THROWS_WITH_AS(s.set_optimizer(next), doctest::Contains("'loss_scaling' is constant in the compiled step"),
                         ipu::error);
    CHECK_THROWS_WITH_AS(s.set_optimizer(train::sgd{.lr = 0.1, .momentum = 0.9, .loss_scaling = 4}),
                         doctest::Contains("'momentum' was compiled as constant"), ipu::error);
    CHECK_THROWS_WITH_AS(s.set_optimizer(train::rmsprop{}), doctest::Contains("changes the shape of the compiled step"),
                         ipu::error);
    train::training_session c(linear(), mse(train::const_sgd(0.1)));
    CHECK_THROWS_WITH_AS(c.set_optimizer(train::const_sgd(0.2)), doctest::Contains("'lr' is constant"), ipu::error);
  }
  SUBCASE("an attribute marked variable at 0 can be raised later") {
    train::sgd opt{.lr = 0.1};
    opt.momentum.mark_as_variable();
    train::training_session s(linear(), mse(opt));
    CHECK(s.optimizer_state().size() == 2);  // the momentum buffer, and "step"
    (void)s.run({{"x", linear_x.view()}}, linear_target.view());
    opt.momentum = 0.9;
    s.set_optimizer(opt);
    (void)s.run({{"x", linear_x.view()}}, linear_target.view());
    CHECK(values(s.optimizer_state().at(0).second) != std::vector<float>(6, 0.0f));
  }
}

TEST_CASE("SGD with a constant momentum and no dampening needs no first-step selection, and trains bit for bit the same") {
  train::sgd variable{.lr = 0.1, .momentum = 0.9};
  train::sgd constant = variable;
  constant.momentum.mark_as_constant();
  train::training_session with_flag(linear(), mse(variable)), without(linear(), mse(constant));
  CHECK(is_step_input(with_flag, "optimizer/first_step"));
  CHECK_FALSE(is_step_input(without, "optimizer/first_step"));  // a fresh buffer of zeros: 0.9 * 0 + g is g
  for (const auto& op : without.graph_of_step().step.ops()) CHECK(op.type != "Where");
  for (int step = 0; step < 3; ++step) {
    (void)with_flag.run({{"x", linear_x.view()}}, linear_target.view());
    (void)without.run({{"x", linear_x.view()}}, linear_target.view());
    CHECK(values(with_flag.weight("w")) == values(without.weight("w")));
  }
  // Dampening scales every gradient but the first: the selection stays.
  train::sgd damped = constant;
  damped.dampening = train::hyperparameter(0.5).mark_as_constant();
  train::training_session d(linear(), mse(damped));
  CHECK(is_step_input(d, "optimizer/first_step"));
}

TEST_CASE("the optimizer's state dict: saved and loaded, training resumes exactly") {
  const auto opt = train::adam{.lr = 0.05, .weight_decay = 0.01};
  train::training_session through(linear(), mse(opt));
  for (int k = 0; k < 5; ++k) (void)through.run({{"x", linear_x.view()}}, linear_target.view());
  train::training_session first(linear(), mse(opt));
  for (int k = 0; k < 3; ++k) (void)first.run({{"x", linear_x.view()}}, linear_target.view());
  const auto state = first.optimizer_state();
  REQUIRE(state.size() == 3);
  CHECK(state[0].first == "w/exp_avg");
  CHECK(state[1].first == "w/exp_avg_sq");
  CHECK(state[2].first == "step");
  train::training_session resumed(linear(), mse(opt));
  resumed.set_weight("w", first.weight("w").view());
  resumed.load_optimizer_state(state);
  CHECK(resumed.steps() == 3);
  for (int k = 0; k < 2; ++k) (void)resumed.run({{"x", linear_x.view()}}, linear_target.view());
  CHECK(values(resumed.weight("w")) == values(through.weight("w")));
  // Bad state: nothing changes.
  auto bad = state;
  bad[0].first = "v/exp_avg";
  CHECK_THROWS_WITH_AS(resumed.load_optimizer_state(bad), doctest::Contains("no state named 'v/exp_avg'"), ipu::error);
  bad = state;
  bad[1].second = ipu::host_tensor::from<float>({2}, {0, 0});
  CHECK_THROWS_WITH_AS(resumed.load_optimizer_state(bad), doctest::Contains("state 'w/exp_avg_sq' is F32[2] but must be F32[3,2]"), ipu::error);
  bad = state;
  bad.pop_back();
  CHECK_THROWS_WITH_AS(resumed.load_optimizer_state(bad), doctest::Contains("'step' is missing"), ipu::error);
  CHECK(resumed.steps() == 5);
  CHECK_THROWS_WITH_AS(resumed.set_weight("w", linear_x.view()), doctest::Contains("weight 'w' is F32[2,3] but must be F32[3,2]"), ipu::error);
}

TEST_CASE("accumulator types: Adam's moments stored in F16, the arithmetic in F32") {
  auto opt = train::adam{.lr = 0.01, .weight_decay = 0.01};
  opt.first_order_momentum_accum_type = ipu::data_type::F16;
  opt.second_order_momentum_accum_type = ipu::data_type::F16;
  // Against Adam's arithmetic with its moments rounded to F16 between steps (torch_optimizers.py).
  check("mlp_adam_f16_moments", with(opt));
  train::training_session s(ipu::graph(linear()), mse(opt));
  (void)s.run({{"x", linear_x.view()}}, linear_target.view());
  CHECK(s.optimizer_state().at(0).second.info().type == ipu::data_type::F16);
  CHECK(s.weight("w").info().type == ipu::data_type::F32);
}

TEST_CASE("optimizer values PyTorch refuses are refused") {
  auto refused = [](const train::optimizer& o, const char* what) {
    CHECK_THROWS_WITH_AS(train::check(o), doctest::Contains(what), ipu::error);
  };
  refused(train::sgd{.lr = -1}, "learning rate");
  refused(train::sgd{.lr = 0.1, .nesterov = true}, "Nesterov");
  refused(train::adam{.beta1 = 1}, "betas");
  refused(train::rmsprop{.alpha = -0.5}, "alpha");
  refused(train::adagrad{.lr_decay = -1}, "lr_decay");
  refused(train::lamb{.max_weight_norm = 0}, "max_weight_norm");
  refused(train::sgd{.loss_scaling = 0}, "loss scaling");
  refused(train::adam{.lr = std::numeric_limits<double>::infinity()}, "lr must be finite");
  train::adam a;
  a.accum_type = ipu::data_type::S32;
  refused(a, "accumulator type");
}

}  // namespace test_optimizer
