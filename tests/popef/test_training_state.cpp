// A training step's state in PopEF: the optimizer of every kind survives the round trip (values,
// constness, flags, types), and a damaged state is refused by name.
#include "ipu/popef/training_state.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"

namespace test_training_state {

namespace {

using ipu::data_type;
namespace pb = ipu::popef::pb;

/// x [2, 3] -> MatMul W -> ReduceMean: a scalar loss.
ipu::popef::training_state state_with(ipu::train::optimizer opt) {
  ipu::builder b("tiny");
  const auto x = b.add_input_tensor({data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>({3, 1}, {1, 2, 3}), "W");
  const auto loss = b.reduce_mean(b.matmul(x, w), {0, 1}, false, "loss");
  b.add_output(loss);
  ipu::popef::training_state s;
  s.model = std::move(b).build();
  s.loss = "loss";
  s.opt = std::move(opt);
  s.gradient_accumulation = 3;
  s.reduction = ipu::train::accumulation_reduction::sum;
  s.updates = 11;
  return s;
}

ipu::byte_buffer weight_w(const std::string& name, const ipu::tensor_info& info) {
  REQUIRE(name == "W");
  REQUIRE(info == ipu::tensor_info{data_type::F32, {3, 1}});
  return ipu::byte_buffer::from_values(std::span<const float>(std::vector<float>{4, 5, 6}));
}

ipu::popef::training_state round_trip(const pb::TrainingState& p) {
  pb::TrainingState q;
  REQUIRE(q.ParseFromString(p.SerializeAsString()));
  return ipu::popef::training_state_from_proto(q, weight_w, "test");
}

void refused(const pb::TrainingState& p, const std::string& needle) {
  try {
    (void)round_trip(p);
    FAIL("not refused: " << needle);
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::popef);
    CHECK_MESSAGE(std::string(e.what()).find(needle) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_CASE("every optimizer survives the training state's round trip: values, constness, flags and types") {
  ipu::train::sgd sgd{.lr = 0.1, .momentum = 0.9, .nesterov = true};
  sgd.velocity_scaling = 4;
  sgd.velocity_scaling.mark_as_constant();
  sgd.accum_type = data_type::F32;
  ipu::train::adam adamw{.lr = 0.002, .weight_decay = 0.1, .decoupled_weight_decay = true, .bias_correction = false};
  adamw.second_order_momentum_accum_type = data_type::F16;
  ipu::train::rmsprop rms{.lr = 0.03, .momentum = 0.5, .centered = true, .use_tf_variant = true};
  ipu::train::adagrad ada{.lr = 0.4, .initial_accumulator_value = 0.25};
  ipu::train::lamb lamb{.lr = 0.005, .bias_correction = false, .max_weight_norm = 3.5};
  lamb.beta2.mark_as_variable();
  for (const ipu::train::optimizer& opt : std::vector<ipu::train::optimizer>{sgd, ipu::train::adam{}, adamw, rms, ada, lamb,
                                                                             ipu::train::const_sgd(0.01, 0.001, 64)}) {
    CAPTURE(ipu::train::optimizer_name(opt));
    const auto back = round_trip(ipu::popef::training_state_to_proto(state_with(opt)));
    CHECK(back.opt == opt);
    CHECK(back.loss == "loss");
    CHECK(back.gradient_accumulation == 3);
    CHECK(back.reduction == ipu::train::accumulation_reduction::sum);
    CHECK(back.updates == 11);
    // The weight comes from where the reader says (its TensorData), not from the message.
    const auto& w = back.model.tensor(*back.model.find_tensor("W"));
    CHECK(w.data.bytes().size() == 12);
    float first = 0;
    std::memcpy(&first, w.data.bytes().data(), sizeof first);
    CHECK(first == 4.0f);
  }
}

TEST_CASE("a damaged training state is refused, naming what is wrong") {
  const auto good = ipu::popef::training_state_to_proto(state_with(ipu::train::adam{.lr = 0.01}));
  {
    auto p = good;
    p.set_optimizer("adadelta");
    refused(p, "unknown kind 'adadelta'");
  }
  {
    auto p = good;
    p.mutable_attributes()->RemoveLast();
    refused(p, "attribute 'loss_scaling' is missing");
  }
  {
    auto p = good;
    *p.add_attributes() = p.attributes(0);
    refused(p, "attribute 'lr' is given twice");
  }
  {
    auto p = good;
    p.mutable_attributes(0)->set_name("momentum");
    refused(p, "no attribute 'momentum' in adam");
  }
  {
    auto p = good;
    p.mutable_attributes(1)->set_value(1.5);  // beta1
    refused(p, "betas must be in [0, 1)");
  }
  {
    auto p = good;
    for (auto& x : *p.mutable_settings())
      if (x.name() == "bias_correction") x.set_value(2);
    refused(p, "setting 'bias_correction' = 2");
  }
  {
    auto p = good;
    for (auto& x : *p.mutable_settings())
      if (x.name() == "accum_type") x.set_value(static_cast<double>(static_cast<int>(data_type::S32)));
    refused(p, "an accumulator type must be F16, F32 or F64");
  }
  {
    auto p = good;
    p.mutable_settings()->RemoveLast();
    refused(p, "its settings are not those of adam");
  }
  {
    auto p = good;
    auto* x = p.add_settings();
    x->set_name("nesterov");
    x->set_value(1);
    refused(p, "setting 'nesterov'");
  }
  {
    auto p = good;
    p.set_loss("W");
    refused(p, "no scalar tensor of its model");
  }
  {
    auto p = good;
    p.set_gradient_accumulation(0);
    refused(p, "gradient accumulation is 0");
  }
  {
    auto p = good;
    p.clear_model();
    refused(p, "holds no model");
  }
}

}  // namespace test_training_state
