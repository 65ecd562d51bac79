#pragma once
// Optimizers, written into the training graph as ordinary ops that turn each weight, its gradient
// and its state into the updated weight and state. The formulas are PyTorch's (torch.optim), which
// PopTorch's optimizers follow:
//   SGD    g += wd w;  with momentum: b = g on the first step, else m b + (1 - dampening) g;
//          g = nesterov ? g + m b : b;  w -= lr g
//   Adam   g += wd w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//          w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW  as Adam without the g += wd w, and w *= 1 - lr wd first.
//
// Every hyperparameter is a scalar graph input fed each step (PopART's "variable" optimizer
// values): changing the learning rate between steps needs no recompilation. What shapes the graph
// (momentum or not, nesterov, weight decay or not, the optimizer's kind) is fixed when the graph is
// built, and the session refuses a change to it.
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/error.hpp"
#include "ipu/format.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu::train {

struct sgd {
  double lr = 0.01;  // PopTorch's default optimizer: SGD with lr 0.01
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

struct adam {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;  // true: AdamW
};

using optimizer = std::variant<sgd, adam>;

constexpr std::string_view optimizer_name(const optimizer& o) noexcept {
  if (const auto* a = std::get_if<adam>(&o)) return a->decoupled_weight_decay ? "adamw" : "adam";
  return "sgd";
}

/// Throws a usage error for values PyTorch refuses as well.
constexpr void check(const optimizer& o) {
  auto fail = [&](const std::string& what) {
    throw error(error_category::usage, what, "optimizer " + std::string(optimizer_name(o)),
                "use values PyTorch accepts");
  };
  if (const auto* s = std::get_if<sgd>(&o)) {
    if (!(s->lr >= 0)) fail("the learning rate must be >= 0");
    if (!(s->momentum >= 0)) fail("momentum must be >= 0");
    if (!(s->weight_decay >= 0)) fail("weight decay must be >= 0");
    if (s->nesterov && (s->momentum <= 0 || s->dampening != 0)) fail("Nesterov momentum needs momentum > 0 and dampening 0");
  } else {
    const auto& a = std::get<adam>(o);
    if (!(a.lr >= 0)) fail("the learning rate must be >= 0");
    if (!(a.eps >= 0)) fail("epsilon must be >= 0");
    if (!(a.beta1 >= 0 && a.beta1 < 1) || !(a.beta2 >= 0 && a.beta2 < 1)) fail("betas must be in [0, 1)");
    if (!(a.weight_decay >= 0)) fail("weight decay must be >= 0");
  }
}

/// The graph's shape an optimizer implies: two optimizers with equal structure run the same graph.
struct optimizer_structure {
  int kind = 0;  // 0 sgd, 1 adam
  bool momentum = false, nesterov = false, weight_decay = false, decoupled = false;
  friend constexpr bool operator==(const optimizer_structure&, const optimizer_structure&) = default;
};
constexpr optimizer_structure structure_of(const optimizer& o) {
  if (const auto* s = std::get_if<sgd>(&o)) return {0, s->momentum != 0, s->nesterov, s->weight_decay != 0, false};
  const auto& a = std::get<adam>(o);
  return {1, false, false, a.weight_decay != 0, a.decoupled_weight_decay};
}

/// The scalar hyperparameter inputs of step `step` (0-based), by name, as the update ops read them.
inline std::vector<std::pair<std::string, double>> hyperparameters(const optimizer& o, std::uint64_t step) {
  std::vector<std::pair<std::string, double>> h;
  if (const auto* s = std::get_if<sgd>(&o)) {
    h.push_back({"optimizer/lr", s->lr});
    if (s->weight_decay != 0) h.push_back({"optimizer/weight_decay", s->weight_decay});
    if (s->momentum != 0) {
      h.push_back({"optimizer/momentum", s->momentum});
      h.push_back({"optimizer/one_minus_dampening", 1 - s->dampening});
    }
    return h;
  }
  const auto& a = std::get<adam>(o);
  const double t = static_cast<double>(step + 1);
  const double bc1 = 1 - std::pow(a.beta1, t), bc2 = 1 - std::pow(a.beta2, t);
  h.push_back({"optimizer/beta1", a.beta1});
  h.push_back({"optimizer/one_minus_beta1", 1 - a.beta1});
  h.push_back({"optimizer/beta2", a.beta2});
  h.push_back({"optimizer/one_minus_beta2", 1 - a.beta2});
  h.push_back({"optimizer/step_size", a.lr / bc1});
  h.push_back({"optimizer/sqrt_bias_correction2", std::sqrt(bc2)});
  h.push_back({"optimizer/eps", a.eps});
  if (a.weight_decay != 0) {
    if (a.decoupled_weight_decay) h.push_back({"optimizer/decay", 1 - a.lr * a.weight_decay});
    else h.push_back({"optimizer/weight_decay", a.weight_decay});
  }
  return h;
}

/// One piece of optimizer state: a graph input holding its value before the step and the output
/// holding it after.
struct state_slot {
  std::string input, output;
  tensor_info info;
};

/// What add_update added for one weight.
struct update_tensors {
  tensor_id new_weight = no_tensor;
  std::vector<state_slot> state;
};

namespace detail {
/// The hyperparameter input `name` of `type`, added once.
constexpr tensor_id hyper(builder& b, std::string_view name, data_type type) {
  if (const auto t = b.current().find_tensor(name)) return *t;
  return b.add_input_tensor({type, {}}, name);
}
}  // namespace detail

/// Adds the ops that update weight `w` (a graph input holding its value) from its gradient `g`.
/// The first-step flag (SGD with momentum) is the BOOL input "optimizer/first_step".
constexpr update_tensors add_update(builder& b, const optimizer& o, tensor_id w, tensor_id g) {
  const auto type = b.info(w).type;
  const std::string name = b.name_of(w);
  auto h = [&](std::string_view n) { return detail::hyper(b, n, type); };
  auto state_input = [&](std::string_view what) { return b.add_input_tensor(b.info(w), name + "/" + std::string(what)); };
  update_tensors r;
  auto keep = [&](tensor_id in, tensor_id out) {
    r.state.push_back({b.name_of(in), b.name_of(out), b.info(in)});
  };
  if (const auto* s = std::get_if<sgd>(&o)) {
    if (s->weight_decay != 0) g = b.add(g, b.mul(w, h("optimizer/weight_decay")));
    if (s->momentum != 0) {
      const auto v = state_input("momentum");
      const auto first = detail::hyper(b, "optimizer/first_step", data_type::BOOL);
      const auto later = b.add(b.mul(v, h("optimizer/momentum")), b.mul(g, h("optimizer/one_minus_dampening")));
      const auto buf = b.op("Where", {first, g, later}).front();
      keep(v, buf);
      g = s->nesterov ? b.add(g, b.mul(buf, h("optimizer/momentum"))) : buf;
    }
    r.new_weight = b.sub(w, b.mul(g, h("optimizer/lr")));
    return r;
  }
  const auto& a = std::get<adam>(o);
  auto weight = w;
  if (a.weight_decay != 0) {
    if (a.decoupled_weight_decay) weight = b.mul(w, h("optimizer/decay"));
    else g = b.add(g, b.mul(w, h("optimizer/weight_decay")));
  }
  const auto m = state_input("exp_avg"), v = state_input("exp_avg_sq");
  const auto m_new = b.add(b.mul(m, h("optimizer/beta1")), b.mul(g, h("optimizer/one_minus_beta1")));
  const auto v_new = b.add(b.mul(v, h("optimizer/beta2")), b.mul(b.mul(g, g), h("optimizer/one_minus_beta2")));
  keep(m, m_new);
  keep(v, v_new);
  const auto denom = b.add(b.div(b.sqrt(v_new), h("optimizer/sqrt_bias_correction2")), h("optimizer/eps"));
  r.new_weight = b.sub(weight, b.mul(b.div(m_new, denom), h("optimizer/step_size")));
  return r;
}

}  // namespace ipu::train
