#pragma once
// The ops an optimizer adds to the step for one weight (ipu/train/optimizer.hpp says what each
// optimizer is). Each update turns the weight, its gradient and its state into the new weight and
// state, with torch.optim's arithmetic:
//   SGD      g += wd w;  with momentum: b = g on the first step, else m b + (1 - dampening) g;
//            g = nesterov ? g + m b : b;  w -= lr g
//            (velocity scaling vs: b is stored as vs b, and w -= lr / vs (vs g ...))
//   Adam     g += wd w;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2;
//            w -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps)
//   AdamW    as Adam without the g += wd w, and w *= 1 - lr wd first
//   RMSprop  g += wd w;  v = a v + (1 - a) g^2;  centered: c = a c + (1 - a) g, v' = v - c^2;
//            d = sqrt(v') + eps (TensorFlow's form: sqrt(v' + eps));
//            with momentum: b = m b + g / d, w -= lr b; else w -= lr g / d
//   Adagrad  g += wd w;  s += g^2;  w -= lr / (1 + (t - 1) lr_decay) * g / (sqrt(s) + eps)
//   LAMB     m, v as Adam;  u = m^ / (sqrt(v^) + eps) + wd w  (m^, v^ bias-corrected unless LambNoBias);
//            r1 = min(|w|, max_weight_norm), r2 = |u|;  w -= lr (r1 > 0 and r2 > 0 ? r1 / r2 : 1) u
// The gradient arrives multiplied by the loss scaling and summed over the step's micro-batches;
// "optimizer/gradient_scale" undoes both first. Arithmetic runs in the widest of the weight's, the
// gradients' (accum_type) and the state's types; state is stored in its accumulator type.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/half.hpp"
#include "ipu/train/optimizer.hpp"

namespace ipu::train {

/// One piece of optimizer state: a graph input holding its value before the step and the output
/// holding it after; `initial` is its value before the first step.
struct state_slot {
  std::string input, output;
  tensor_info info;
  double initial = 0;
};

/// What add_update added for one weight.
struct update_tensors {
  tensor_id new_weight = no_tensor;
  std::vector<state_slot> state;
};

/// How the gradient the update sees was made: summed over `micro_batches`, reduced by `reduction`.
struct update_options {
  std::int64_t micro_batches = 1;
  accumulation_reduction reduction = accumulation_reduction::mean;
};

namespace detail {

constexpr int width_of(data_type t) noexcept {
  return t == data_type::F64 ? 3 : t == data_type::F32 ? 2 : t == data_type::F16 ? 1 : 0;
}

/// A scalar constant of `type` holding `v`.
constexpr constant_tensor scalar_of(data_type type, double v) {
  if (type == data_type::F64) return make_scalar<double>(v);
  if (type == data_type::F16) return make_scalar<half>(half(static_cast<float>(v)));
  return make_scalar<float>(static_cast<float>(v));
}

/// The name of a step scalar of `type`: as is for F32, suffixed for other types (a model may mix them).
constexpr std::string scalar_name(std::string_view name, data_type type) {
  return type == data_type::F32 ? std::string(name) : std::string(name) + ":" + std::string(to_string(type));
}

}  // namespace detail

/// Adds the ops that update weight `w` (a graph input holding its value) from its gradient `g`.
/// Variable scalars are graph inputs named "optimizer/..." (step_scalars gives their values); the
/// first-step flag of SGD's momentum is the BOOL input "optimizer/first_step".
constexpr update_tensors add_update(builder& b, const optimizer& o, tensor_id w, tensor_id g, const update_options& u = {}) {
  const auto scalars = step_scalars(o, 0, u.micro_batches, u.reduction);
  const auto weight_type = b.info(w).type;
  const auto weight_shape = b.info(w).shape;
  const std::string name = b.name_of(w);

  // The widest type among the weight and its state does the arithmetic.
  auto compute = weight_type;
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        auto widen = [&](const std::optional<data_type>& t) {
          if (t && detail::width_of(*t) > detail::width_of(compute)) compute = *t;
        };
        widen(x.accum_type);  // the gradients' type: F16 weights with F32 gradients unscale them in F32
        if constexpr (std::is_same_v<T, sgd>) {
          widen(x.velocity_accum_type);
        } else if constexpr (std::is_same_v<T, adagrad>) {
          widen(x.second_order_momentum_accum_type);
        } else {
          widen(x.first_order_momentum_accum_type);
          widen(x.second_order_momentum_accum_type);
        }
      },
      o);

  auto scalar = [&](std::string_view n) -> const step_scalar& {
    for (const auto& s : scalars)
      if (s.name == n) return s;
    throw error(error_category::internal, "the optimizer has no scalar '" + std::string(n) + "'", "optimizer update");
  };
  /// Whether the ops for scalar `n` are needed: it may change, or it differs from `neutral`.
  auto wanted = [&](std::string_view n, double neutral) {
    const auto& s = scalar(n);
    return s.variable || s.value != neutral;
  };
  auto h = [&](std::string_view n) {
    const auto& s = scalar(n);
    const auto full = detail::scalar_name(n, compute);
    if (const auto t = b.current().find_tensor(full)) return *t;
    if (s.variable) return b.add_input_tensor({compute, {}}, full);
    return b.add_constant(detail::scalar_of(compute, s.value), full);
  };
  auto constant = [&](double v) { return b.add_constant(detail::scalar_of(compute, v)); };
  auto as = [&](tensor_id t, data_type type) { return b.info(t).type == type ? t : b.cast(t, type); };

  update_tensors r;
  /// A state input named "<weight>/<what>", stored as `storage`, read in the compute type.
  auto state = [&](std::string_view what, const std::optional<data_type>& storage, double initial = 0) {
    const auto in = b.add_input_tensor({storage.value_or(weight_type), weight_shape}, name + "/" + std::string(what));
    r.state.push_back({b.name_of(in), {}, b.info(in), initial});
    return as(in, compute);
  };
  /// The new value of the last state input `i`, stored in its type.
  auto keep = [&](std::size_t i, tensor_id value) {
    r.state[i].output = b.name_of(as(value, r.state[i].info.type));
  };

  /// Adam's and LAMB's moments of the gradient `g`, updated and kept as state 0 and 1.
  auto moments = [&](tensor_id g_c, const std::optional<data_type>& first, const std::optional<data_type>& second) {
    const auto m = state("exp_avg", first), v = state("exp_avg_sq", second);
    const auto m_new = b.add(b.mul(m, h("optimizer/beta1")), b.mul(g_c, h("optimizer/one_minus_beta1")));
    const auto v_new = b.add(b.mul(v, h("optimizer/beta2")), b.mul(b.mul(g_c, g_c), h("optimizer/one_minus_beta2")));
    keep(0, m_new);
    keep(1, v_new);
    return std::pair{m_new, v_new};
  };

  const auto wc = as(w, compute);
  auto gc = as(g, compute);
  if (wanted("optimizer/gradient_scale", 1)) gc = b.mul(gc, h("optimizer/gradient_scale"));
  const bool decay = wanted("optimizer/weight_decay", 0);
  tensor_id next = no_tensor;

  if (const auto* s = std::get_if<sgd>(&o)) {
    if (decay) gc = b.add(gc, b.mul(wc, h("optimizer/weight_decay")));
    // With velocity scaling every term below is in units of vs * g, and the step size is lr / vs.
    if (wanted("optimizer/velocity_scaling", 1)) gc = b.mul(gc, h("optimizer/velocity_scaling"));
    auto direction = gc;
    if (wanted("optimizer/momentum", 0)) {
      const auto v = state("momentum", s->velocity_accum_type);
      const bool damped_later = wanted("optimizer/one_minus_dampening", 1);
      const auto damped = damped_later ? b.mul(gc, h("optimizer/one_minus_dampening")) : gc;
      const auto later = b.add(b.mul(v, h("optimizer/momentum")), damped);
      // torch.optim.SGD's first step takes the gradient undamped. Without dampening and with a
      // constant momentum, the first step is the only fresh one and its buffer holds zeros, so
      // momentum * 0 + g is that already: no selection (and no pass over the weight) is needed.
      tensor_id buf = later;
      if (damped_later || scalar("optimizer/momentum").variable) {
        const auto first = [&] {
          if (const auto t = b.current().find_tensor("optimizer/first_step")) return *t;
          return b.add_input_tensor({data_type::BOOL, {}}, "optimizer/first_step");
        }();
        buf = b.op("Where", {first, gc, later}).front();
      }
      keep(0, buf);
      direction = s->nesterov ? b.add(gc, b.mul(buf, h("optimizer/momentum"))) : buf;
    }
    next = b.sub(wc, b.mul(direction, h("optimizer/lr")));
  } else if (const auto* a = std::get_if<adam>(&o)) {
    auto weight = wc;
    if (decay) {
      if (a->decoupled_weight_decay) weight = b.mul(wc, h("optimizer/decay"));
      else gc = b.add(gc, b.mul(wc, h("optimizer/weight_decay")));
    }
    const auto [m_new, v_new] = moments(gc, a->first_order_momentum_accum_type, a->second_order_momentum_accum_type);
    auto root = b.sqrt(v_new);
    if (wanted("optimizer/sqrt_bias_correction2", 1)) root = b.div(root, h("optimizer/sqrt_bias_correction2"));
    const auto denom = b.add(root, h("optimizer/eps"));
    next = b.sub(weight, b.mul(b.div(m_new, denom), h("optimizer/step_size")));
  } else if (const auto* l = std::get_if<lamb>(&o)) {
    const auto [m_new, v_new] = moments(gc, l->first_order_momentum_accum_type, l->second_order_momentum_accum_type);
    const auto mh = wanted("optimizer/bias_correction1", 1) ? b.div(m_new, h("optimizer/bias_correction1")) : m_new;
    const auto vh = wanted("optimizer/bias_correction2", 1) ? b.div(v_new, h("optimizer/bias_correction2")) : v_new;
    auto step = b.div(mh, b.add(b.sqrt(vh), h("optimizer/eps")));
    if (decay) step = b.add(step, b.mul(wc, h("optimizer/weight_decay")));
    // The trust ratio |w| / |u|, 1 when either norm is 0 (PopART's Lamb, the paper's phi = clip).
    const std::vector<attribute> all{{"keepdims", std::int64_t{0}}};
    auto r1 = b.op("ReduceL2", {wc}, all).front();
    if (l->max_weight_norm) r1 = b.op("Min", {r1, constant(*l->max_weight_norm)}).front();
    const auto r2 = b.op("ReduceL2", {step}, all).front();
    const auto zero = constant(0), one = constant(1);
    const auto r2_positive = b.op("Greater", {r2, zero}).front();
    const auto both = b.op("And", {b.op("Greater", {r1, zero}).front(), r2_positive}).front();
    const auto ratio = b.op("Where", {both, b.div(r1, b.op("Where", {r2_positive, r2, one}).front()), one}).front();
    next = b.sub(wc, b.mul(step, b.mul(ratio, h("optimizer/lr"))));
  } else if (const auto* p = std::get_if<rmsprop>(&o)) {
    if (decay) gc = b.add(gc, b.mul(wc, h("optimizer/weight_decay")));
    const auto sq = state("square_avg", p->second_order_momentum_accum_type);
    const auto sq_new = b.add(b.mul(sq, h("optimizer/alpha")), b.mul(b.mul(gc, gc), h("optimizer/one_minus_alpha")));
    keep(0, sq_new);
    auto mean_square = sq_new;
    if (p->centered) {
      const auto c = state("grad_avg", p->first_order_momentum_accum_type);
      const auto c_new = b.add(b.mul(c, h("optimizer/alpha")), b.mul(gc, h("optimizer/one_minus_alpha")));
      keep(r.state.size() - 1, c_new);
      mean_square = b.sub(sq_new, b.mul(c_new, c_new));
    }
    const auto denom = p->use_tf_variant ? b.sqrt(b.add(mean_square, h("optimizer/eps")))
                                         : b.add(b.sqrt(mean_square), h("optimizer/eps"));
    auto step = b.div(gc, denom);
    if (wanted("optimizer/momentum", 0)) {
      const auto buf = state("momentum_buffer", p->first_order_momentum_accum_type);
      step = b.add(b.mul(buf, h("optimizer/momentum")), step);
      keep(r.state.size() - 1, step);
    }
    next = b.sub(wc, b.mul(step, h("optimizer/lr")));
  } else {
    const auto& ada = std::get<adagrad>(o);
    if (decay) gc = b.add(gc, b.mul(wc, h("optimizer/weight_decay")));
    const auto sum = state("sum", ada.second_order_momentum_accum_type, ada.initial_accumulator_value);
    const auto sum_new = b.add(sum, b.mul(gc, gc));
    keep(0, sum_new);
    next = b.sub(wc, b.mul(b.div(gc, b.add(b.sqrt(sum_new), h("optimizer/eps"))), h("optimizer/lr")));
  }
  r.new_weight = as(next, weight_type);
  return r;
}

}  // namespace ipu::train
