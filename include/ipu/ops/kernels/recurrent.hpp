#pragma once
// Recurrent layers: RNN, GRU and LSTM with forward, reverse and bidirectional directions, both
// layouts, per-batch sequence lengths, initial states, custom activations (with alpha/beta), cell
// clipping, GRU linear_before_reset, and LSTM peepholes and input_forget.
//
// Steps past a batch entry's sequence length write zeros to Y; Y_h / Y_c hold the state after its
// last valid step. F16 and F32 are computed in F32, F64 in F64.
//
// When every batch entry has the same length (no sequence_lens, or equal ones) a direction runs as
// GEMMs: the input projection of every time step at once ([seq x batch, input] x W^T), then per
// step one GEMM of the whole batch's state by R^T (GRU without linear_before_reset: two, the
// candidate's after the reset gate), and the gate arithmetic over the batch; buffers are made
// once per call. For 2 to 16 F32 entries the step GEMMs read an R^T made once (few_rows_gemm.hpp;
// OpenBLAS would pack R every step), kept in the op's cache when R is a constant, and the gate
// arithmetic runs in the host's widest vector copy. Directions run in parallel. Otherwise each
// (direction, batch entry) runs on its own, matrix-vector products per step: entries of different
// lengths reach a time step at different steps in reverse.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "ipu/ops/kernels/blas.hpp"
#include "ipu/ops/kernels/fast_math.hpp"
#include "ipu/ops/kernels/few_rows_gemm.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

struct rnn_activation {
  enum kind { relu, tanh_, sigmoid, affine, leaky_relu, thresholded_relu, scaled_tanh, hard_sigmoid, elu, softsign,
              softplus };
  kind k = tanh_;
  double alpha = 0, beta = 0;

  template <class F>
  F operator()(F x) const {
    const auto a = static_cast<F>(alpha), b = static_cast<F>(beta);
    switch (k) {
      case relu: return x > 0 ? x : F{0};
      case tanh_:
        if constexpr (std::is_same_v<F, float>) return math_ops::tanh_vectorisable(x);
        else return std::tanh(x);
      case sigmoid:
        if constexpr (std::is_same_v<F, float>) return math_ops::sigmoid_vectorisable(x);
        else return F{1} / (F{1} + std::exp(-x));
      case affine: return a * x + b;
      case leaky_relu: return x >= 0 ? x : a * x;
      case thresholded_relu: return x > a ? x : F{0};
      case scaled_tanh: return a * std::tanh(b * x);
      case hard_sigmoid: return std::clamp(a * x + b, F{0}, F{1});
      case elu: return x >= 0 ? x : a * (std::exp(x) - F{1});
      case softsign: return x / (F{1} + std::fabs(x));
      case softplus: return std::log1p(std::exp(x));
    }
    return x;
  }

  /// v[i] = f(v[i]) for n values, the function chosen once so that the loop vectorises for F32's
  /// sigmoid and tanh, the cells' defaults.
  template <class F>
  void apply(F* v, std::size_t n) const {
    if constexpr (std::is_same_v<F, float>) {
      if (k == sigmoid) {
        for (std::size_t i = 0; i < n; ++i) v[i] = math_ops::sigmoid_vectorisable(v[i]);
        return;
      }
      if (k == tanh_) {
        for (std::size_t i = 0; i < n; ++i) v[i] = math_ops::tanh_vectorisable(v[i]);
        return;
      }
    }
    for (std::size_t i = 0; i < n; ++i) v[i] = (*this)(v[i]);
  }
};

/// The `activations` attribute (or the defaults), one group per direction. alpha / beta values are
/// consumed in order by the functions that take them; missing ones use the ONNX op defaults.
inline std::vector<rnn_activation> rnn_activations(const kernel_context& ctx, std::vector<std::string> defaults,
                                                   std::size_t directions) {
  std::vector<std::string> names;
  if (const attribute* a = ctx.op.find_attribute("activations")) {
    const auto* v = std::get_if<std::vector<std::string>>(&a->value);
    if (!v) throw ctx.fail("attribute 'activations' is not a list of strings", "fix the model");
    names = *v;
  }
  const std::size_t per_dir = defaults.size();
  if (names.empty())
    for (std::size_t d = 0; d < directions; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if (names.size() == per_dir && directions == 2) names.insert(names.end(), names.begin(), names.end());
  if (names.size() != per_dir * directions)
    throw ctx.fail("expected " + std::to_string(per_dir * directions) + " activations, got " + std::to_string(names.size()),
                   "give " + std::to_string(per_dir) + " activation(s) per direction");
  const auto alphas = ctx.attr_floats("activation_alpha");
  const auto betas = ctx.attr_floats("activation_beta");
  std::size_t ai = 0, bi = 0;
  std::vector<rnn_activation> out;
  for (auto name : names) {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    rnn_activation f;
    double da = 0, db = 0;
    bool uses_alpha = false, uses_beta = false;
    if (name == "relu") f.k = rnn_activation::relu;
    else if (name == "tanh") f.k = rnn_activation::tanh_;
    else if (name == "sigmoid") f.k = rnn_activation::sigmoid;
    else if (name == "affine") f.k = rnn_activation::affine, da = 1, uses_alpha = uses_beta = true;
    else if (name == "leakyrelu") f.k = rnn_activation::leaky_relu, da = 0.01, uses_alpha = true;
    else if (name == "thresholdedrelu") f.k = rnn_activation::thresholded_relu, da = 1, uses_alpha = true;
    else if (name == "scaledtanh") f.k = rnn_activation::scaled_tanh, da = 1, db = 1, uses_alpha = uses_beta = true;
    else if (name == "hardsigmoid") f.k = rnn_activation::hard_sigmoid, da = 0.2, db = 0.5, uses_alpha = uses_beta = true;
    else if (name == "elu") f.k = rnn_activation::elu, da = 1, uses_alpha = true;
    else if (name == "softsign") f.k = rnn_activation::softsign;
    else if (name == "softplus") f.k = rnn_activation::softplus;
    else throw ctx.fail("unknown activation '" + name + "'", "use one of the activations listed in the ONNX RNN spec");
    f.alpha = uses_alpha && ai < alphas.size() ? alphas[ai++] : da;
    f.beta = uses_beta && bi < betas.size() ? betas[bi++] : db;
    out.push_back(f);
  }
  return out;
}

enum class rnn_cell { rnn, gru, lstm };

/// R transposed for the step products (few_rows_gemm), kept in a recurrent op's cache when R is
/// a constant: `source` is R's address, which a constant keeps from run to run.
template <class F>
struct transposed_weights {
  const void* source = nullptr;
  std::vector<F> values;
};

template <rnn_cell Cell>
void recurrent_kernel(const kernel_context& ctx) {
  constexpr std::size_t gates = Cell == rnn_cell::rnn ? 1 : Cell == rnn_cell::gru ? 3 : 4;
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  const shape ws = ctx.input(1).info().shape;
  const shape rs = ctx.input(2).info().shape;
  const bool batch_major = ctx.attr_int("layout", 0) != 0;
  const std::string direction = ctx.attr_string("direction", "forward");
  const std::size_t dirs = direction == "bidirectional" ? 2 : 1;
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional")
    throw ctx.fail("unknown direction '" + direction + "'", "use forward, reverse or bidirectional");
  if (xs.rank() != 3 || ws.rank() != 3 || rs.rank() != 3)
    throw ctx.fail("X, W and R must be 3-D", "fix the input shapes");
  const std::int64_t seq = batch_major ? xs[1] : xs[0], batch = batch_major ? xs[0] : xs[1], in_size = xs[2];
  const std::int64_t hidden = ctx.attr_int("hidden_size", rs[2]);
  const auto G = static_cast<std::int64_t>(gates);
  if (ws != shape{static_cast<std::int64_t>(dirs), G * hidden, in_size} ||
      rs != shape{static_cast<std::int64_t>(dirs), G * hidden, hidden})
    throw ctx.fail("W " + to_string(ws) + " or R " + to_string(rs) + " does not fit " + std::to_string(dirs) +
                       " direction(s), hidden size " + std::to_string(hidden) + " and input size " + std::to_string(in_size),
                   "fix the weight shapes or hidden_size");
  const bool has_clip = ctx.has_attr("clip");
  const double clip = ctx.attr_float("clip", 0.0f);
  const bool lbr = ctx.attr_int("linear_before_reset", 0) != 0;
  const bool input_forget = ctx.attr_int("input_forget", 0) != 0;
  const auto acts = rnn_activations(ctx,
                                    Cell == rnn_cell::rnn   ? std::vector<std::string>{"Tanh"}
                                    : Cell == rnn_cell::gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"},
                                    dirs);
  const std::size_t acts_per_dir = acts.size() / dirs;
  std::vector<std::int64_t> lens(static_cast<std::size_t>(batch), seq);
  if (ctx.has_input(4)) {
    lens = read_ints(ctx, ctx.inputs[4], "sequence_lens");
    if (lens.size() != static_cast<std::size_t>(batch)) throw ctx.fail("sequence_lens needs one entry per batch", "fix it");
    for (auto l : lens)
      if (l < 0 || l > seq) throw ctx.fail("sequence length " + std::to_string(l) + " is out of range", "use [0, seq_length]");
  }
  // Outputs: Y, Y_h and (LSTM) Y_c; any may be omitted.
  const bool want_y = has_output(ctx, 0), want_h = has_output(ctx, 1), want_c = Cell == rnn_cell::lstm && has_output(ctx, 2);
  const auto D = static_cast<std::int64_t>(dirs);
  if (want_y)
    check_output_shape(ctx, 0, batch_major ? shape{batch, seq, D, hidden} : shape{seq, D, batch, hidden});
  const shape state_shape = batch_major ? shape{batch, D, hidden} : shape{D, batch, hidden};
  if (want_h) check_output_shape(ctx, 1, state_shape);
  if (want_c) check_output_shape(ctx, 2, state_shape);
  auto state_index = [&](std::int64_t d, std::int64_t b) { return batch_major ? (b * D + d) * hidden : (d * batch + b) * hidden; };

  visit_float(x.info().type, ctx, [&]<class T>() {
    using F = std::conditional_t<std::is_same_v<T, double>, double, float>;
    // Input i as F: the tensor itself when it is F already, else a converted copy kept in `held`
    // (a deque: its elements stay where they are as it grows).
    std::deque<std::vector<F>> held;
    auto load = [&](std::size_t i) -> std::span<const F> {
      if (!ctx.has_input(i)) return {};
      if (ctx.inputs[i].info().type != x.info().type) throw ctx.fail("inputs must share X's type", "cast them");
      const T* p = data_as<T>(ctx.inputs[i]);
      const auto n = static_cast<std::size_t>(ctx.inputs[i].info().num_elements());
      if constexpr (std::is_same_v<T, F>) {
        return {p, n};
      } else {
        auto& v = held.emplace_back(n);
        for (std::size_t k = 0; k < n; ++k) v[k] = static_cast<F>(p[k]);
        return v;
      }
    };
    const auto X = load(0), W = load(1), R = load(2), B = load(3), H0 = load(5);
    const auto C0 = Cell == rnn_cell::lstm ? load(6) : std::span<const F>{};
    const auto P = Cell == rnn_cell::lstm ? load(7) : std::span<const F>{};
    const auto GH = static_cast<std::size_t>(G * hidden);
    if (!B.empty() && B.size() != dirs * 2 * GH) throw ctx.fail("B has the wrong size", "B is [num_directions, 2*gates*hidden]");
    if (!P.empty() && P.size() != dirs * 3 * static_cast<std::size_t>(hidden))
      throw ctx.fail("P has the wrong size", "P is [num_directions, 3*hidden]");
    const auto state_size = static_cast<std::size_t>(D * batch * hidden);
    if ((!H0.empty() && H0.size() != state_size) || (!C0.empty() && C0.size() != state_size))
      throw ctx.fail("initial_h / initial_c have the wrong size", "they are shaped like Y_h");
    T* y = want_y ? data_as<T>(ctx.outputs[0]) : nullptr;
    T* yh = want_h ? data_as<T>(ctx.outputs[1]) : nullptr;
    T* yc = want_c ? data_as<T>(ctx.outputs[2]) : nullptr;
    if (y) std::fill(y, y + ctx.outputs[0].info().num_elements(), T{});
    const auto H = static_cast<std::size_t>(hidden);
    auto clipped = [&](F v) { return has_clip ? std::clamp(v, static_cast<F>(-clip), static_cast<F>(clip)) : v; };

    bool uniform = true;
    for (const auto l : lens) uniform = uniform && l == lens.front();
    if (uniform && batch > 0) {
      const auto L = lens.front();
      const auto NB = static_cast<std::size_t>(batch), IN = static_cast<std::size_t>(in_size);
      const auto rows = static_cast<std::size_t>(seq) * NB;
      // A few F32 rows take the step products from R^T (few_rows_gemm.hpp: OpenBLAS would pack R
      // on every step), padded as few_rows_gemm reads it; made once per call, or once for the plan
      // when R is a constant (kept in the op's cache).
      const auto isa = math_ops::host_vector_isa();
      const bool few_rows = std::is_same_v<F, float> && NB >= math_ops::few_rows_min && NB <= math_ops::few_rows_max &&
                            isa != math_ops::vector_isa::baseline;
      const auto RT_ld = GH + math_ops::few_rows_pad;
      const std::vector<F>* rt_all = nullptr;
      std::shared_ptr<transposed_weights<F>> rt_made;
      if (few_rows) {
        const void* source = ctx.inputs[2].data();
        auto* kept = ctx.cache && ctx.input_is_constant(2)
                         ? static_cast<transposed_weights<F>*>(ctx.cache->prepared.get())
                         : nullptr;  // only this kernel writes a recurrent op's cache
        if (kept && kept->source == source && kept->values.size() == dirs * H * RT_ld) {
          rt_all = &kept->values;
        } else {
          rt_made = std::make_shared<transposed_weights<F>>();
          rt_made->source = source;
          rt_made->values.assign(dirs * H * RT_ld, F{0});
          for (std::size_t dd = 0; dd < dirs; ++dd) {
            const F* r = R.data() + dd * GH * H;
            F* out = rt_made->values.data() + dd * H * RT_ld;
            for (std::size_t k0 = 0; k0 < H; k0 += 16)  // 16 of R's columns at a time: reads stay in order
              for (std::size_t j = 0; j < GH; ++j)
                for (std::size_t k = k0; k < std::min(H, k0 + 16); ++k) out[k * RT_ld + j] = r[j * H + k];
          }
          rt_all = &rt_made->values;
          if (ctx.cache && ctx.input_is_constant(2)) ctx.cache->prepared = rt_made;
        }
      }
      ctx.parallel_for(dirs, [&](std::size_t d0, std::size_t d1) {
        std::vector<F> xg(rows * GH), rhs(NB * GH), h(NB * H), c(NB * H), hn(NB * H), reset_h(NB * H), cand(NB * H);
        for (std::size_t dd = d0; dd < d1; ++dd) {
          const auto d = static_cast<std::int64_t>(dd);
          const bool reverse = direction == "reverse" || d == 1;
          const F* w = W.data() + dd * GH * IN;
          const F* r = R.data() + dd * GH * H;
          const F* wb = B.empty() ? nullptr : B.data() + dd * 2 * GH;
          const F* rb = B.empty() ? nullptr : wb + GH;
          const F* p = P.empty() ? nullptr : P.data() + dd * 3 * H;
          const rnn_activation* act = acts.data() + dd * acts_per_dir;
          // Every step's W x + Wb at once; row (t, b) of X is row (t, b) here.
          for (std::size_t row = 0; row < rows; ++row)
            for (std::size_t j = 0; j < GH; ++j) xg[row * GH + j] = wb ? wb[j] : F{0};
          math_ops::gemm<F>(false, true, static_cast<std::int64_t>(rows), static_cast<std::int64_t>(GH), in_size, F{1},
                            X.data(), in_size, w, in_size, F{1}, xg.data(), static_cast<std::int64_t>(GH));
          for (std::size_t b = 0; b < NB; ++b) {
            const auto si = static_cast<std::size_t>(state_index(d, static_cast<std::int64_t>(b)));
            for (std::size_t k = 0; k < H; ++k) {
              h[b * H + k] = H0.empty() ? F{0} : H0[si + k];
              c[b * H + k] = C0.empty() ? F{0} : C0[si + k];
            }
          }
          const F* rt = few_rows ? rt_all->data() + dd * H * RT_ld : nullptr;
          // out [NB x cols] += in [NB x H] times rows [first, first + cols) of R, transposed.
          auto times_rt = [&](const F* in, std::size_t first, std::size_t cols, F* out, std::size_t ld_out) {
            if constexpr (std::is_same_v<F, float>)
              if (few_rows && math_ops::few_rows_gemm(in, NB, H, rt + first, RT_ld, cols, out, ld_out)) return;
            math_ops::gemm<F>(false, true, batch, static_cast<std::int64_t>(cols), hidden, F{1}, in, hidden,
                              r + first * H, hidden, F{1}, out, static_cast<std::int64_t>(ld_out));
          };
          // R h + Rb for the first `cols` gate rows of R, the whole batch at once.
          auto recur = [&](std::size_t cols) {
            for (std::size_t b = 0; b < NB; ++b)
              for (std::size_t j = 0; j < cols; ++j) rhs[b * GH + j] = rb ? rb[j] : F{0};
            times_rt(h.data(), 0, cols, rhs.data(), GH);
          };
          for (std::int64_t step = 0; step < L; ++step) {
            const std::int64_t t = reverse ? L - 1 - step : step;
            auto xg_row = [&](std::size_t b) {
              const auto row = batch_major ? b * static_cast<std::size_t>(seq) + static_cast<std::size_t>(t)
                                           : static_cast<std::size_t>(t) * NB + b;
              return xg.data() + row * GH;
            };
            if constexpr (Cell == rnn_cell::rnn) {
              recur(H);
              math_ops::run_on(isa, [&] {
                for (std::size_t b = 0; b < NB; ++b) {
                  F* out = hn.data() + b * H;
                  for (std::size_t j = 0; j < H; ++j) out[j] = clipped(xg_row(b)[j] + rhs[b * GH + j]);
                  act[0].apply(out, H);
                }
              });
            } else if constexpr (Cell == rnn_cell::gru) {
              recur(lbr ? GH : 2 * H);
              math_ops::run_on(isa, [&] {
                for (std::size_t b = 0; b < NB; ++b) {
                  F* g = xg_row(b);
                  for (std::size_t j = 0; j < 2 * H; ++j) g[j] = clipped(g[j] + rhs[b * GH + j]);
                  act[0].apply(g, 2 * H);
                  for (std::size_t k = 0; k < H; ++k) reset_h[b * H + k] = g[H + k] * h[b * H + k];
                }
              });
              if (!lbr) {  // the candidate's R (r . h), after the reset gate
                std::fill(cand.begin(), cand.end(), F{0});
                times_rt(reset_h.data(), 2 * H, H, cand.data(), H);
              }
              math_ops::run_on(isa, [&] {
                for (std::size_t b = 0; b < NB; ++b) {
                  const F* g = xg_row(b);
                  F* candidate = cand.data() + b * H;  // the candidate's R (r . h) when not lbr, read first
                  for (std::size_t j = 0; j < H; ++j) {
                    const F s = lbr ? g[H + j] * rhs[b * GH + 2 * H + j] : candidate[j] + (rb ? rb[2 * H + j] : F{0});
                    candidate[j] = clipped(g[2 * H + j] + s);
                  }
                  act[1].apply(candidate, H);
                  for (std::size_t j = 0; j < H; ++j) hn[b * H + j] = (F{1} - g[j]) * candidate[j] + g[j] * h[b * H + j];
                }
              });
            } else {
              recur(GH);
              // Gate by gate over the hidden units (i, o, f, c as ONNX orders them), each activation
              // a loop of its own so that it vectorises, in the host's widest copy (vector_isa.hpp:
              // every copy gives the same bits); the cell's arithmetic is the entry-by-entry path's
              // below, in the same order.
              math_ops::run_on(isa, [&] {
                for (std::size_t b = 0; b < NB; ++b) {
                  const F* g = xg_row(b);
                  F* rr = rhs.data() + b * GH;  // becomes the gates
                  F* gi = rr;
                  F* go = rr + H;
                  F* gf = rr + 2 * H;
                  F* gc = rr + 3 * H;
                  F* cb = c.data() + b * H;
                  F* out = hn.data() + b * H;
                  for (std::size_t j = 0; j < GH; ++j) rr[j] = g[j] + rr[j];
                  if (p)
                    for (std::size_t j = 0; j < H; ++j) gi[j] += p[j] * cb[j], gf[j] += p[2 * H + j] * cb[j];
                  for (std::size_t j = 0; j < H; ++j) gi[j] = clipped(gi[j]), gf[j] = clipped(gf[j]), gc[j] = clipped(gc[j]);
                  act[0].apply(gi, H);
                  if (input_forget)
                    for (std::size_t j = 0; j < H; ++j) gf[j] = F{1} - gi[j];
                  else
                    act[0].apply(gf, H);
                  act[1].apply(gc, H);
                  for (std::size_t j = 0; j < H; ++j) cb[j] = gf[j] * cb[j] + gi[j] * gc[j];
                  if (p)
                    for (std::size_t j = 0; j < H; ++j) go[j] += p[H + j] * cb[j];
                  for (std::size_t j = 0; j < H; ++j) go[j] = clipped(go[j]), out[j] = cb[j];
                  act[0].apply(go, H);
                  act[2].apply(out, H);
                  for (std::size_t j = 0; j < H; ++j) out[j] = go[j] * out[j];
                }
              });
            }
            std::swap(h, hn);
            if (y)
              for (std::size_t b = 0; b < NB; ++b) {
                const auto bi = static_cast<std::int64_t>(b);
                const auto at = static_cast<std::size_t>(batch_major ? ((bi * seq + t) * D + d) * hidden
                                                                     : ((t * D + d) * batch + bi) * hidden);
                for (std::size_t k = 0; k < H; ++k) y[at + k] = convert<T>(h[b * H + k]);
              }
          }
          for (std::size_t b = 0; b < NB; ++b) {
            const auto si = static_cast<std::size_t>(state_index(d, static_cast<std::int64_t>(b)));
            for (std::size_t k = 0; k < H; ++k) {
              if (yh) yh[si + k] = convert<T>(h[b * H + k]);
              if (yc) yc[si + k] = convert<T>(c[b * H + k]);
            }
          }
        }
      });
      return;
    }

    ctx.parallel_for(dirs * static_cast<std::size_t>(batch), [&](std::size_t begin, std::size_t end) {
      std::vector<F> h(H), c(H), g(GH), rh(GH), hr(H);
      for (std::size_t job = begin; job < end; ++job) {
        const auto d = static_cast<std::int64_t>(job) / batch, b = static_cast<std::int64_t>(job) % batch;
        const bool reverse = direction == "reverse" || d == 1;
        const F* w = W.data() + static_cast<std::size_t>(d) * GH * static_cast<std::size_t>(in_size);
        const F* r = R.data() + static_cast<std::size_t>(d) * GH * H;
        const F* wb = B.empty() ? nullptr : B.data() + static_cast<std::size_t>(d) * 2 * GH;
        const F* rb = B.empty() ? nullptr : wb + GH;
        const F* p = P.empty() ? nullptr : P.data() + static_cast<std::size_t>(d) * 3 * H;
        const rnn_activation* act = acts.data() + static_cast<std::size_t>(d) * acts_per_dir;
        const auto si = static_cast<std::size_t>(state_index(d, b));
        for (std::size_t k = 0; k < H; ++k) {
          h[k] = H0.empty() ? F{0} : H0[si + k];
          c[k] = C0.empty() ? F{0} : C0[si + k];
        }
        const std::int64_t len = lens[static_cast<std::size_t>(b)];
        for (std::int64_t step = 0; step < len; ++step) {
          const std::int64_t t = reverse ? len - 1 - step : step;
          const F* xt = X.data() + static_cast<std::size_t>(batch_major ? (b * seq + t) * in_size : (t * batch + b) * in_size);
          // g = W x + Wb; rh = R h + Rb (kept apart: GRU's linear_before_reset needs R h alone).
          for (std::size_t j = 0; j < GH; ++j) {
            F sx = wb ? wb[j] : F{0}, sh = rb ? rb[j] : F{0};
            const F* wj = w + j * static_cast<std::size_t>(in_size);
            for (std::int64_t i = 0; i < in_size; ++i) sx += wj[i] * xt[i];
            g[j] = sx;
            rh[j] = sh;
          }
          if constexpr (Cell == rnn_cell::rnn) {
            for (std::size_t j = 0; j < H; ++j) {
              F s = g[j] + rh[j];
              for (std::size_t i = 0; i < H; ++i) s += r[j * H + i] * h[i];
              hr[j] = act[0](clipped(s));
            }
            h = hr;
          } else if constexpr (Cell == rnn_cell::gru) {
            // z and r gates use R h; the candidate uses R (r . h) or r . (R h).
            for (std::size_t j = 0; j < 2 * H; ++j) {
              F s = rh[j];
              for (std::size_t i = 0; i < H; ++i) s += r[j * H + i] * h[i];
              g[j] = act[0](clipped(g[j] + s));
            }
            const F* z = g.data();
            const F* rt = g.data() + H;
            for (std::size_t j = 0; j < H; ++j) {
              const F* rj = r + (2 * H + j) * H;
              F s = 0;
              if (lbr) {
                for (std::size_t i = 0; i < H; ++i) s += rj[i] * h[i];
                s = rt[j] * (s + rh[2 * H + j]);
              } else {
                for (std::size_t i = 0; i < H; ++i) s += rj[i] * (rt[i] * h[i]);
                s += rh[2 * H + j];
              }
              hr[j] = act[1](clipped(g[2 * H + j] + s));
            }
            for (std::size_t j = 0; j < H; ++j) h[j] = (F{1} - z[j]) * hr[j] + z[j] * h[j];
          } else {
            // Gate order i, o, f, c; peepholes P = [Pi, Po, Pf].
            for (std::size_t j = 0; j < GH; ++j) {
              F s = rh[j];
              for (std::size_t i = 0; i < H; ++i) s += r[j * H + i] * h[i];
              g[j] += s;
            }
            for (std::size_t j = 0; j < H; ++j) {
              F gi = g[j], go = g[H + j], gf = g[2 * H + j], gc = g[3 * H + j];
              if (p) gi += p[j] * c[j], gf += p[2 * H + j] * c[j];
              const F it = act[0](clipped(gi));
              const F ft = input_forget ? F{1} - it : act[0](clipped(gf));
              const F ct = act[1](clipped(gc));
              c[j] = ft * c[j] + it * ct;
              if (p) go += p[H + j] * c[j];
              const F ot = act[0](clipped(go));
              hr[j] = ot * act[2](c[j]);
            }
            h = hr;
          }
          if (y) {
            const auto at = static_cast<std::size_t>(batch_major ? ((b * seq + t) * D + d) * hidden : ((t * D + d) * batch + b) * hidden);
            for (std::size_t k = 0; k < H; ++k) y[at + k] = convert<T>(h[k]);
          }
        }
        for (std::size_t k = 0; k < H; ++k) {
          if (yh) yh[si + k] = convert<T>(h[k]);
          if (yc) yc[si + k] = convert<T>(c[k]);
        }
      }
    });
  });
}

inline void register_recurrent(op_registry& r) {
  r.add({"", "RNN", recurrent_kernel<rnn_cell::rnn>});
  r.add({"", "GRU", recurrent_kernel<rnn_cell::gru>});
  r.add({"", "LSTM", recurrent_kernel<rnn_cell::lstm>});
}

}  // namespace ipu::detail::tensor_ops
