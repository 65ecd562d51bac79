#pragma once
// Optimizers as PopTorch offers them (poptorch.optim: SGD, Adam, AdamW, RMSprop, LAMB, plus
// torch.optim's Adagrad), with PopTorch's float16 aids: loss scaling, SGD's velocity scaling and
// the accumulators' types. The arithmetic is torch.optim's; LAMB is the paper's (You et al., 2019,
// Algorithm 2), with PopART's LambNoBias when bias correction is off. The ops each update writes
// are in ipu/train/optimizer_update.hpp.
//
// Constant and variable attributes (poptorch-features 4.5.4): a variable attribute is a scalar
// input of the step, fed each step, so set_optimizer can change it; a constant one is compiled into
// the step, and changing it afterwards is an error. As in poptorch.optim, a value the user gives is
// variable and one left at its default is constant; mark_as_constant / mark_as_variable override.
// An attribute that is constant and neutral (momentum 0, weight decay 0, loss scaling 1) adds no op.
#include <array>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/error.hpp"

namespace ipu::train {

/// An optimizer attribute: its value, and whether it is fed each step (variable) or compiled in.
class hyperparameter {
 public:
  /// A value the user gives: variable, as poptorch.optim makes an attribute passed to its constructor.
  constexpr hyperparameter(double value) noexcept : value_(value), variable_(true) {}  // NOLINT: a value converts
  /// A default: constant.
  static constexpr hyperparameter by_default(double value) noexcept {
    hyperparameter h(value);
    h.variable_ = false;
    return h;
  }
  [[nodiscard]] constexpr double value() const noexcept { return value_; }
  [[nodiscard]] constexpr bool is_variable() const noexcept { return variable_; }
  constexpr hyperparameter& mark_as_constant() noexcept {
    variable_ = false;
    return *this;
  }
  constexpr hyperparameter& mark_as_variable() noexcept {
    variable_ = true;
    return *this;
  }
  /// Whether the step needs ops for it: it may change, or it is not `neutral`.
  [[nodiscard]] constexpr bool active(double neutral) const noexcept { return variable_ || value_ != neutral; }
  friend constexpr bool operator==(const hyperparameter&, const hyperparameter&) = default;

 private:
  double value_;
  bool variable_;
};

// Every optimizer carries PopTorch's loss_scaling (4.5.1: the loss is multiplied by it before the
// backward pass and the gradients divided by it before the update) and accumulator types (4.5.3:
// unset, the weight's type; accum_type is the type of the gradient accumulators that gradient
// accumulation keeps).

struct sgd {
  hyperparameter lr = 0.01;  // PopTorch's default optimizer: SGD with lr 0.01 (lr is always variable)
  hyperparameter momentum = hyperparameter::by_default(0);
  hyperparameter dampening = hyperparameter::by_default(0);
  hyperparameter weight_decay = hyperparameter::by_default(0);
  bool nesterov = false;
  hyperparameter loss_scaling = hyperparameter::by_default(1);
  /// The momentum buffer is stored multiplied by this (PopTorch's combined variant, 4.5.2).
  hyperparameter velocity_scaling = hyperparameter::by_default(1);
  std::optional<data_type> accum_type{}, velocity_accum_type{};
  friend constexpr bool operator==(const sgd&, const sgd&) = default;
};

struct adam {
  hyperparameter lr = 1e-3;
  hyperparameter beta1 = hyperparameter::by_default(0.9);
  hyperparameter beta2 = hyperparameter::by_default(0.999);
  hyperparameter eps = hyperparameter::by_default(1e-8);
  hyperparameter weight_decay = hyperparameter::by_default(0);
  bool decoupled_weight_decay = false;  // true: AdamW
  bool bias_correction = true;
  hyperparameter loss_scaling = hyperparameter::by_default(1);
  std::optional<data_type> accum_type{}, first_order_momentum_accum_type{}, second_order_momentum_accum_type{};
  friend constexpr bool operator==(const adam&, const adam&) = default;
};

struct rmsprop {
  hyperparameter lr = 0.01;
  hyperparameter alpha = hyperparameter::by_default(0.99);
  hyperparameter eps = hyperparameter::by_default(1e-8);
  hyperparameter weight_decay = hyperparameter::by_default(0);
  hyperparameter momentum = hyperparameter::by_default(0);
  bool centered = false;
  bool use_tf_variant = false;  // TensorFlow's form: epsilon inside the square root
  hyperparameter loss_scaling = hyperparameter::by_default(1);
  std::optional<data_type> accum_type{}, first_order_momentum_accum_type{}, second_order_momentum_accum_type{};
  friend constexpr bool operator==(const rmsprop&, const rmsprop&) = default;
};

struct adagrad {
  hyperparameter lr = 0.01;
  hyperparameter lr_decay = hyperparameter::by_default(0);
  hyperparameter weight_decay = hyperparameter::by_default(0);
  double initial_accumulator_value = 0;  // the sum of squares' value before the first step
  hyperparameter eps = hyperparameter::by_default(1e-10);
  hyperparameter loss_scaling = hyperparameter::by_default(1);
  std::optional<data_type> accum_type{}, second_order_momentum_accum_type{};
  friend constexpr bool operator==(const adagrad&, const adagrad&) = default;
};

struct lamb {
  hyperparameter lr = 1e-3;
  hyperparameter beta1 = hyperparameter::by_default(0.9);
  hyperparameter beta2 = hyperparameter::by_default(0.999);
  hyperparameter eps = hyperparameter::by_default(1e-8);
  hyperparameter weight_decay = hyperparameter::by_default(0.01);
  bool bias_correction = true;  // false: PopART's LambNoBias
  /// The weight's norm is clipped to this in the trust ratio; none: not clipped.
  std::optional<double> max_weight_norm{};
  hyperparameter loss_scaling = hyperparameter::by_default(1);
  std::optional<data_type> accum_type{}, first_order_momentum_accum_type{}, second_order_momentum_accum_type{};
  friend constexpr bool operator==(const lamb&, const lamb&) = default;
};

using optimizer = std::variant<sgd, adam, rmsprop, adagrad, lamb>;

/// PopART's ConstSGD: SGD whose every attribute is compiled into the step.
constexpr sgd const_sgd(double lr, double weight_decay = 0, double loss_scaling = 1) noexcept {
  sgd s;
  s.lr = hyperparameter::by_default(lr);
  s.weight_decay = hyperparameter::by_default(weight_decay);
  s.loss_scaling = hyperparameter::by_default(loss_scaling);
  return s;
}

constexpr std::string_view optimizer_name(const optimizer& o) noexcept {
  switch (o.index()) {
    case 0: return "sgd";
    case 1: return std::get<adam>(o).decoupled_weight_decay ? "adamw" : "adam";
    case 2: return "rmsprop";
    case 3: return "adagrad";
    default: return "lamb";
  }
}

/// An attribute by name, as PopTorch names it.
struct named_hyperparameter {
  std::string_view name;
  hyperparameter value;
};

namespace detail {
template <class T>
struct attribute_member {
  std::string_view name;
  hyperparameter T::*member;
};
/// The attributes of optimizer type T, in the order PopTorch lists them.
template <class T>
constexpr auto attribute_members() {
  using m = attribute_member<T>;
  if constexpr (std::is_same_v<T, sgd>)
    return std::array{m{"lr", &T::lr}, m{"momentum", &T::momentum}, m{"dampening", &T::dampening},
                      m{"weight_decay", &T::weight_decay}, m{"loss_scaling", &T::loss_scaling},
                      m{"velocity_scaling", &T::velocity_scaling}};
  else if constexpr (std::is_same_v<T, adam> || std::is_same_v<T, lamb>)
    return std::array{m{"lr", &T::lr}, m{"beta1", &T::beta1}, m{"beta2", &T::beta2}, m{"eps", &T::eps},
                      m{"weight_decay", &T::weight_decay}, m{"loss_scaling", &T::loss_scaling}};
  else if constexpr (std::is_same_v<T, rmsprop>)
    return std::array{m{"lr", &T::lr}, m{"alpha", &T::alpha}, m{"eps", &T::eps}, m{"weight_decay", &T::weight_decay},
                      m{"momentum", &T::momentum}, m{"loss_scaling", &T::loss_scaling}};
  else
    return std::array{m{"lr", &T::lr}, m{"lr_decay", &T::lr_decay}, m{"weight_decay", &T::weight_decay},
                      m{"eps", &T::eps}, m{"loss_scaling", &T::loss_scaling}};
}
}  // namespace detail

/// Every attribute of `o` that can be constant or variable.
constexpr std::vector<named_hyperparameter> attributes_of(const optimizer& o) {
  return std::visit(
      [](const auto& x) {
        std::vector<named_hyperparameter> r;
        for (const auto& a : detail::attribute_members<std::decay_t<decltype(x)>>()) r.push_back({a.name, x.*a.member});
        return r;
      },
      o);
}

/// Sets attribute `name` of `o` (value and constness); false when `o` has no attribute so named.
constexpr bool set_attribute(optimizer& o, std::string_view name, hyperparameter value) {
  return std::visit(
      [&](auto& x) {
        for (const auto& a : detail::attribute_members<std::decay_t<decltype(x)>>())
          if (a.name == name) {
            x.*a.member = value;
            return true;
          }
        return false;
      },
      o);
}

/// A setting of an optimizer that is not an attribute (a flag, a type, an initial value): always
/// compiled into the step. Flags are 0 or 1; a type is its code, -1 when unset (the weight's type).
struct optimizer_setting {
  std::string_view name;
  double value = 0;
  friend constexpr bool operator==(const optimizer_setting&, const optimizer_setting&) = default;
};

/// The settings of `o`, the optimizer's kind first (its variant index, AdamW apart from Adam).
constexpr std::vector<optimizer_setting> settings_of(const optimizer& o) {
  auto type = [](const std::optional<data_type>& t) { return t ? static_cast<double>(static_cast<int>(*t)) : -1.0; };
  std::vector<optimizer_setting> r{{"optimizer", static_cast<double>(o.index()) + (optimizer_name(o) == "adamw" ? 0.5 : 0)}};
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        r.push_back({"accum_type", type(x.accum_type)});
        if constexpr (std::is_same_v<T, sgd>) {
          r.push_back({"nesterov", x.nesterov ? 1.0 : 0.0});
          r.push_back({"velocity_accum_type", type(x.velocity_accum_type)});
        } else if constexpr (std::is_same_v<T, adagrad>) {
          r.push_back({"initial_accumulator_value", x.initial_accumulator_value});
          r.push_back({"second_order_momentum_accum_type", type(x.second_order_momentum_accum_type)});
        } else {
          if constexpr (std::is_same_v<T, adam> || std::is_same_v<T, lamb>)
            r.push_back({"bias_correction", x.bias_correction ? 1.0 : 0.0});
          if constexpr (std::is_same_v<T, rmsprop>) {
            r.push_back({"centered", x.centered ? 1.0 : 0.0});
            r.push_back({"use_tf_variant", x.use_tf_variant ? 1.0 : 0.0});
          }
          if constexpr (std::is_same_v<T, lamb>) r.push_back({"max_weight_norm", x.max_weight_norm.value_or(-1.0)});
          r.push_back({"first_order_momentum_accum_type", type(x.first_order_momentum_accum_type)});
          r.push_back({"second_order_momentum_accum_type", type(x.second_order_momentum_accum_type)});
        }
      },
      o);
  return r;
}

/// An optimizer of kind `name` ("sgd", "adam", "adamw", "rmsprop", "adagrad", "lamb", as
/// optimizer_name gives it) with PopTorch's defaults; none for another name.
constexpr std::optional<optimizer> optimizer_of_kind(std::string_view name) {
  if (name == "sgd") return sgd{};
  if (name == "adam") return adam{};
  if (name == "adamw") {
    adam a;
    a.decoupled_weight_decay = true;
    return a;
  }
  if (name == "rmsprop") return rmsprop{};
  if (name == "adagrad") return adagrad{};
  if (name == "lamb") return lamb{};
  return std::nullopt;
}

/// Sets setting `name` of `o` from a value as settings_of gives it (the kind, "optimizer", is not
/// set this way); false when `o` has no such setting or `value` is none it can take.
constexpr bool apply_setting(optimizer& o, std::string_view name, double value) {
  const bool flag = value == 0 || value == 1;
  auto type = [&](std::optional<data_type>& t) {
    if (value == -1) t.reset();
    else if (value >= 0 && value <= 255 && value == static_cast<double>(static_cast<int>(value)))
      t = static_cast<data_type>(static_cast<int>(value));
    else return false;
    return true;
  };
  return std::visit(
      [&](auto& x) {
        using T = std::decay_t<decltype(x)>;
        if (name == "accum_type") return type(x.accum_type);
        if constexpr (std::is_same_v<T, sgd>) {
          if (name == "nesterov" && flag) return (x.nesterov = value == 1, true);
          if (name == "velocity_accum_type") return type(x.velocity_accum_type);
        } else {
          if (name == "second_order_momentum_accum_type") return type(x.second_order_momentum_accum_type);
          if constexpr (std::is_same_v<T, adagrad>) {
            if (name == "initial_accumulator_value") return (x.initial_accumulator_value = value, true);
          } else {
            if (name == "first_order_momentum_accum_type") return type(x.first_order_momentum_accum_type);
            if constexpr (std::is_same_v<T, adam> || std::is_same_v<T, lamb>)
              if (name == "bias_correction" && flag) return (x.bias_correction = value == 1, true);
            if constexpr (std::is_same_v<T, rmsprop>) {
              if (name == "centered" && flag) return (x.centered = value == 1, true);
              if (name == "use_tf_variant" && flag) return (x.use_tf_variant = value == 1, true);
            }
            if constexpr (std::is_same_v<T, lamb>)
              if (name == "max_weight_norm")
                return (x.max_weight_norm = value == -1 ? std::nullopt : std::optional<double>(value), true);
          }
        }
        return false;
      },
      o);
}

/// Throws a usage error for values PyTorch (or PopTorch) refuses as well.
constexpr void check(const optimizer& o) {
  const std::string where = "optimizer " + std::string(optimizer_name(o));
  auto fail = [&](const std::string& what) { throw error(error_category::usage, what, where, "use values PyTorch accepts"); };
  for (const auto& a : attributes_of(o))
    if (!std::isfinite(a.value.value())) fail(std::string(a.name) + " must be finite");
  auto at_least = [&](const hyperparameter& h, double low, std::string_view what) {
    if (!(h.value() >= low)) fail(std::string(what) + " must be >= " + (low == 0 ? "0" : "1"));
  };
  auto positive = [&](const hyperparameter& h, std::string_view what) {
    if (!(h.value() > 0)) fail(std::string(what) + " must be > 0");
  };
  auto beta = [&](const hyperparameter& h) {
    if (!(h.value() >= 0 && h.value() < 1)) fail("betas must be in [0, 1)");
  };
  auto types = [&](std::initializer_list<std::optional<data_type>> ts) {
    for (const auto& t : ts)
      if (t && *t != data_type::F16 && *t != data_type::F32 && *t != data_type::F64)
        fail("an accumulator type must be F16, F32 or F64, not " + std::string(to_string(*t)));
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        at_least(x.lr, 0, "the learning rate");
        at_least(x.weight_decay, 0, "weight decay");
        positive(x.loss_scaling, "loss scaling");
        if constexpr (std::is_same_v<T, sgd>) {
          at_least(x.momentum, 0, "momentum");
          if (x.nesterov && (!(x.momentum.value() > 0) || x.dampening.value() != 0))
            fail("Nesterov momentum needs momentum > 0 and dampening 0");
          positive(x.velocity_scaling, "velocity scaling");
          types({x.accum_type, x.velocity_accum_type});
        } else if constexpr (std::is_same_v<T, adam> || std::is_same_v<T, lamb>) {
          beta(x.beta1);
          beta(x.beta2);
          at_least(x.eps, 0, "epsilon");
          if constexpr (std::is_same_v<T, lamb>)
            if (x.max_weight_norm && !(*x.max_weight_norm > 0)) fail("max_weight_norm must be > 0");
          types({x.accum_type, x.first_order_momentum_accum_type, x.second_order_momentum_accum_type});
        } else if constexpr (std::is_same_v<T, rmsprop>) {
          at_least(x.alpha, 0, "alpha");
          at_least(x.eps, 0, "epsilon");
          at_least(x.momentum, 0, "momentum");
          types({x.accum_type, x.first_order_momentum_accum_type, x.second_order_momentum_accum_type});
        } else {
          at_least(x.lr_decay, 0, "lr_decay");
          at_least(x.eps, 0, "epsilon");
          if (!(x.initial_accumulator_value >= 0) || !std::isfinite(x.initial_accumulator_value))
            fail("initial_accumulator_value must be >= 0");
          types({x.accum_type, x.second_order_momentum_accum_type});
        }
      },
      o);
}

/// How the gradients of one step's micro-batches become the one the update uses (PopTorch's
/// accumulationAndReplicationReductionType): their mean or their sum.
enum class accumulation_reduction : std::uint8_t { mean, sum };

/// A scalar input of the step graph: its name, its value at a step, and whether it is fed each
/// step (it depends on a variable attribute, or on the step itself) or compiled in as a constant.
struct step_scalar {
  std::string name;
  double value = 0;
  bool variable = false;
};

/// The scalars the update ops read at step `step` (0-based) when each update sees the sum of
/// `micro_batches` micro-batches' gradients, reduced by `reduction`. Ops for a scalar that is
/// constant and neutral are left out of the step (optimizer_update.hpp asks `wanted`).
constexpr std::vector<step_scalar> step_scalars(const optimizer& o, std::uint64_t step, std::int64_t micro_batches = 1,
                                                accumulation_reduction reduction = accumulation_reduction::mean) {
  std::vector<step_scalar> r;
  const double t = static_cast<double>(step + 1);
  const double divisor = reduction == accumulation_reduction::mean ? static_cast<double>(micro_batches) : 1.0;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        // The gradients arrive multiplied by the loss scaling and summed over the micro-batches.
        r.push_back({"optimizer/loss_scaling", x.loss_scaling.value(), x.loss_scaling.is_variable()});
        r.push_back({"optimizer/gradient_scale", 1 / (x.loss_scaling.value() * divisor), x.loss_scaling.is_variable()});
        r.push_back({"optimizer/weight_decay", x.weight_decay.value(), x.weight_decay.is_variable()});
        if constexpr (std::is_same_v<T, sgd>) {
          const double vs = x.velocity_scaling.value();
          const bool v = x.velocity_scaling.is_variable();
          r.push_back({"optimizer/lr", x.lr.value() / vs, x.lr.is_variable() || v});
          r.push_back({"optimizer/velocity_scaling", vs, v});
          r.push_back({"optimizer/momentum", x.momentum.value(), x.momentum.is_variable()});
          r.push_back({"optimizer/one_minus_dampening", 1 - x.dampening.value(), x.dampening.is_variable()});
        } else if constexpr (std::is_same_v<T, adam> || std::is_same_v<T, lamb>) {
          const double bc1 = x.bias_correction ? 1 - std::pow(x.beta1.value(), t) : 1.0;
          const double bc2 = x.bias_correction ? 1 - std::pow(x.beta2.value(), t) : 1.0;
          const bool b1 = x.beta1.is_variable(), b2 = x.beta2.is_variable(), by_step = x.bias_correction;
          r.push_back({"optimizer/beta1", x.beta1.value(), b1});
          r.push_back({"optimizer/one_minus_beta1", 1 - x.beta1.value(), b1});
          r.push_back({"optimizer/beta2", x.beta2.value(), b2});
          r.push_back({"optimizer/one_minus_beta2", 1 - x.beta2.value(), b2});
          r.push_back({"optimizer/eps", x.eps.value(), x.eps.is_variable()});
          if constexpr (std::is_same_v<T, adam>) {
            r.push_back({"optimizer/step_size", x.lr.value() / bc1, x.lr.is_variable() || b1 || by_step});
            r.push_back({"optimizer/sqrt_bias_correction2", std::sqrt(bc2), b2 || by_step});
            r.push_back({"optimizer/decay", 1 - x.lr.value() * x.weight_decay.value(),
                         x.lr.is_variable() || x.weight_decay.is_variable()});
          } else {
            r.push_back({"optimizer/lr", x.lr.value(), x.lr.is_variable()});
            r.push_back({"optimizer/bias_correction1", bc1, b1 || by_step});
            r.push_back({"optimizer/bias_correction2", bc2, b2 || by_step});
          }
        } else if constexpr (std::is_same_v<T, rmsprop>) {
          r.push_back({"optimizer/lr", x.lr.value(), x.lr.is_variable()});
          r.push_back({"optimizer/alpha", x.alpha.value(), x.alpha.is_variable()});
          r.push_back({"optimizer/one_minus_alpha", 1 - x.alpha.value(), x.alpha.is_variable()});
          r.push_back({"optimizer/eps", x.eps.value(), x.eps.is_variable()});
          r.push_back({"optimizer/momentum", x.momentum.value(), x.momentum.is_variable()});
        } else {
          // torch.optim.Adagrad: clr = lr / (1 + (t - 1) lr_decay), t counted from 1.
          r.push_back({"optimizer/lr", x.lr.value() / (1 + static_cast<double>(step) * x.lr_decay.value()),
                       x.lr.is_variable() || x.lr_decay.is_variable() || x.lr_decay.value() != 0});
          r.push_back({"optimizer/eps", x.eps.value(), x.eps.is_variable()});
        }
      },
      o);
  return r;
}

/// Whether the compiled step of `compiled` can run with `next`'s values: the same settings, the
/// same attributes variable, and every constant attribute unchanged. Throws, naming the first
/// difference and what to do.
constexpr void check_same_step(const optimizer& compiled, const optimizer& next, const std::string& where) {
  const auto fix = "keep what is compiled into the step, or build a new session (mark an attribute variable before "
                   "compiling to change it later)";
  const auto a = settings_of(compiled), b = settings_of(next);
  if (a.front() != b.front())
    throw error(error_category::usage,
                "the new optimizer (" + std::string(optimizer_name(next)) + ") changes the shape of the compiled step (" +
                    std::string(optimizer_name(compiled)) + ")",
                where, fix);
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i])
      throw error(error_category::usage,
                  "the new optimizer's " + std::string(a[i].name) + " changes the shape of the compiled step", where, fix);
  const auto x = attributes_of(compiled), y = attributes_of(next);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const auto& [name, before] = x[i];
    const auto& after = y[i].value;
    if (before.is_variable() != after.is_variable())
      throw error(error_category::usage,
                  "attribute '" + std::string(name) + "' was compiled as " + (before.is_variable() ? "variable" : "constant") +
                      " and is now " + (after.is_variable() ? "variable" : "constant") +
                      ": that changes the shape of the compiled step",
                  where, fix);
    if (!before.is_variable() && before.value() != after.value())
      throw error(error_category::usage,
                  "attribute '" + std::string(name) + "' is constant in the compiled step and cannot change after compiling",
                  where, fix);
  }
}

}  // namespace ipu::train
