// Recurrent layers on one hidden unit, checked against the ONNX equations written out by hand.
#include "ipu/ops/kernels/recurrent.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "tensor_kernel_harness.hpp"

namespace test_recurrent {

using namespace tk;

namespace {
float sig(float x) { return 1.0f / (1.0f + std::exp(-x)); }
const attribute hidden1 = attr("hidden_size", 1);
}  // namespace

TEST_CASE("recurrent: RNN forward and reverse with biases") {
  auto x = f32({2, 1, 1}, {1, -2});
  auto w = f32({1, 1, 1}, {0.5f});
  auto r = f32({1, 1, 1}, {0.3f});
  auto b = f32({1, 2}, {0.1f, 0.2f});
  auto out = run("RNN", {x, w, r, b}, {f32_info({2, 1, 1, 1}), f32_info({1, 1, 1})}, {hidden1});
  const float h1 = std::tanh(0.5f + 0.3f), h2 = std::tanh(-1.0f + 0.3f * h1 + 0.3f);
  check_close(values<float>(out[0]), {h1, h2});
  check_close(values<float>(out[1]), {h2});

  out = run("RNN", {x, w, r, b}, {f32_info({2, 1, 1, 1}), f32_info({1, 1, 1})}, {hidden1, attr("direction", "reverse")});
  const float g1 = std::tanh(-1.0f + 0.3f), g2 = std::tanh(0.5f + 0.3f * g1 + 0.3f);
  check_close(values<float>(out[0]), {g2, g1});  // Y is indexed by time, not by step
  check_close(values<float>(out[1]), {g2});
}

TEST_CASE("recurrent: bidirectional RNN with sequence lengths, initial state and both layouts") {
  // seq 3, batch 2 (lengths 3 and 1), input 1, hidden 1.
  auto x = f32({3, 2, 1}, {1, 10, 2, 20, 3, 30});
  auto w = f32({2, 1, 1}, {0.5f, -1.0f});
  auto r = f32({2, 1, 1}, {0.3f, 0.2f});
  auto lens = i32({2}, {3, 1});
  auto h0 = f32({2, 2, 1}, {0.1f, 0.2f, 0.3f, 0.4f});  // [direction, batch, hidden]
  auto out = run("RNN", {x, w, r, std::nullopt, lens, h0}, {f32_info({3, 2, 2, 1}), f32_info({2, 2, 1})},
                 {hidden1, attr("direction", "bidirectional")});
  // Forward, batch 0: three steps; batch 1: one step.
  const float f0 = std::tanh(0.5f * 1 + 0.3f * 0.1f), f1 = std::tanh(0.5f * 2 + 0.3f * f0), f2 = std::tanh(0.5f * 3 + 0.3f * f1);
  const float fb = std::tanh(0.5f * 10 + 0.3f * 0.2f);
  // Reverse, batch 0: t = 2, 1, 0; batch 1: t = 0 only.
  const float r2 = std::tanh(-3 + 0.2f * 0.3f), r1 = std::tanh(-2 + 0.2f * r2), r0 = std::tanh(-1 + 0.2f * r1);
  const float rb = std::tanh(-10 + 0.2f * 0.4f);
  // Y[t][d][b]
  check_close(values<float>(out[0]), {f0, fb, r0, rb, f1, 0, r1, 0, f2, 0, r2, 0});
  check_close(values<float>(out[1]), {f2, fb, r0, rb});

  // layout = 1: X is [batch, seq, input], Y [batch, seq, dir, hidden], states [batch, dir, hidden].
  auto xb = f32({2, 3, 1}, {1, 2, 3, 10, 20, 30});
  auto h0b = f32({2, 2, 1}, {0.1f, 0.3f, 0.2f, 0.4f});
  auto outb = run("RNN", {xb, w, r, std::nullopt, lens, h0b}, {f32_info({2, 3, 2, 1}), f32_info({2, 2, 1})},
                  {hidden1, attr("direction", "bidirectional"), attr("layout", 1)});
  check_close(values<float>(outb[0]), {f0, r0, f1, r1, f2, r2, fb, rb, 0, 0, 0, 0});
  check_close(values<float>(outb[1]), {f2, r0, fb, rb});
}

TEST_CASE("recurrent: RNN activations with alpha values, and clipping") {
  auto x = f32({1, 1, 1}, {-4});
  auto w = f32({1, 1, 1}, {1});
  auto r = f32({1, 1, 1}, {0});
  auto y = run("RNN", {x, w, r}, {f32_info({1, 1, 1, 1})},
               {hidden1, attr("activations", std::vector<std::string>{"LeakyRelu"}),
                attr("activation_alpha", std::vector<float>{0.1f})});
  check_close(values<float>(y[0]), {-0.4f});
  y = run("RNN", {x, w, r}, {f32_info({1, 1, 1, 1})}, {hidden1, attr("clip", 2.0f)});
  check_close(values<float>(y[0]), {std::tanh(-2.0f)});
  CHECK_THROWS_AS(run("RNN", {x, w, r}, {f32_info({1, 1, 1, 1})},
                      {hidden1, attr("activations", std::vector<std::string>{"Swish"})}),
                  ipu::error);
}

TEST_CASE("recurrent: GRU with and without linear_before_reset") {
  const float wz = 0.5f, wr = -0.4f, wh = 0.3f, rz = 0.2f, rr = 0.6f, rh = -0.7f;
  const float bwz = 0.1f, bwr = 0.2f, bwh = 0.3f, brz = -0.1f, brr = 0.05f, brh = 0.4f;
  auto w = f32({1, 3, 1}, {wz, wr, wh});
  auto r = f32({1, 3, 1}, {rz, rr, rh});
  auto b = f32({1, 6}, {bwz, bwr, bwh, brz, brr, brh});
  auto x = f32({2, 1, 1}, {1.5f, -0.5f});
  auto h0 = f32({1, 1, 1}, {0.5f});
  for (int lbr : {0, 1}) {
    CAPTURE(lbr);
    float h = 0.5f;
    std::vector<float> ys;
    for (float xt : {1.5f, -0.5f}) {
      const float z = sig(wz * xt + rz * h + bwz + brz);
      const float rt = sig(wr * xt + rr * h + bwr + brr);
      const float hh = lbr ? std::tanh(wh * xt + rt * (rh * h + brh) + bwh) : std::tanh(wh * xt + rh * (rt * h) + brh + bwh);
      h = (1 - z) * hh + z * h;
      ys.push_back(h);
    }
    auto out = run("GRU", {x, w, r, b, std::nullopt, h0}, {f32_info({2, 1, 1, 1}), f32_info({1, 1, 1})},
                   {hidden1, attr("linear_before_reset", lbr)});
    check_close(values<float>(out[0]), ys);
    check_close(values<float>(out[1]), {ys.back()});
  }
}

TEST_CASE("recurrent: LSTM with peepholes, initial cell state and input_forget") {
  const float wi = 0.5f, wo = -0.3f, wf = 0.2f, wc = 0.8f, ri = 0.1f, ro = 0.4f, rf = -0.6f, rc = 0.3f;
  const float bi = 0.05f, bo = -0.1f, bf = 0.2f, bc = 0.1f;  // W biases; R biases are added on top
  const float pi = 0.3f, po = -0.2f, pf = 0.5f;
  auto w = f32({1, 4, 1}, {wi, wo, wf, wc});
  auto r = f32({1, 4, 1}, {ri, ro, rf, rc});
  auto b = f32({1, 8}, {bi, bo, bf, bc, 0.01f, 0.02f, 0.03f, 0.04f});
  auto p = f32({1, 3}, {pi, po, pf});
  auto x = f32({2, 1, 1}, {1.0f, -1.0f});
  auto h0 = f32({1, 1, 1}, {0.2f});
  auto c0 = f32({1, 1, 1}, {-0.3f});
  for (int couple : {0, 1}) {
    CAPTURE(couple);
    float h = 0.2f, c = -0.3f;
    std::vector<float> ys;
    for (float xt : {1.0f, -1.0f}) {
      const float it = sig(wi * xt + ri * h + pi * c + bi + 0.01f);
      const float ft = couple ? 1 - it : sig(wf * xt + rf * h + pf * c + bf + 0.03f);
      const float ct = std::tanh(wc * xt + rc * h + bc + 0.04f);
      c = ft * c + it * ct;
      const float ot = sig(wo * xt + ro * h + po * c + bo + 0.02f);
      h = ot * std::tanh(c);
      ys.push_back(h);
    }
    auto out = run("LSTM", {x, w, r, b, std::nullopt, h0, c0, p},
                   {f32_info({2, 1, 1, 1}), f32_info({1, 1, 1}), f32_info({1, 1, 1})},
                   {hidden1, attr("input_forget", couple)});
    check_close(values<float>(out[0]), ys);
    check_close(values<float>(out[1]), {h});
    check_close(values<float>(out[2]), {c});
  }
}

TEST_CASE("recurrent: equal lengths run as batched GEMMs, which give what entry-by-entry steps give") {
  // Layout 1 (batch first). B entries of length S take the batched path; the same entries plus one
  // of length 0 (so the lengths differ) take the entry-by-entry path. Y, Y_h and Y_c of the first B
  // entries agree to rounding (the GEMMs sum in another order).
  const std::int64_t S = 5, B = 3, I = 4, Hd = 6;
  auto numbers = [](std::int64_t n, float scale, int seed) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed));
    return v;
  };
  auto prefix = [](const std::vector<float>& v, std::int64_t n) { return std::vector<float>(v.begin(), v.begin() + n); };
  for (const std::string op : {"RNN", "GRU", "LSTM"})
    for (int lbr : {0, 1})
      for (const char* dir : {"forward", "reverse", "bidirectional"}) {
        if (op != "GRU" && lbr == 1) continue;
        CAPTURE(op);
        CAPTURE(lbr);
        CAPTURE(dir);
        const std::int64_t G = op == "RNN" ? 1 : op == "GRU" ? 3 : 4, D = std::string(dir) == "bidirectional" ? 2 : 1;
        const auto x = numbers((B + 1) * S * I, 1.0f, 1), h0 = numbers((B + 1) * D * Hd, 0.5f, 2),
                   c0 = numbers((B + 1) * D * Hd, 0.5f, 3);
        auto w = f32({D, G * Hd, I}, numbers(D * G * Hd * I, 0.4f, 4));
        auto r = f32({D, G * Hd, Hd}, numbers(D * G * Hd * Hd, 0.3f, 5));
        auto bias = f32({D, 2 * G * Hd}, numbers(D * 2 * G * Hd, 0.2f, 6));
        auto peep = f32({D, 3 * Hd}, numbers(D * 3 * Hd, 0.2f, 7));
        const std::vector<attribute> attrs{attr("hidden_size", Hd), attr("direction", dir), attr("layout", 1),
                                           attr("linear_before_reset", lbr)};
        auto outputs = [&](std::int64_t entries) {
          std::vector<tensor_info> o{f32_info({entries, S, D, Hd}), f32_info({entries, D, Hd})};
          if (op == "LSTM") o.push_back(f32_info({entries, D, Hd}));
          return o;
        };
        auto inputs = [&](std::int64_t entries, std::optional<host_tensor> lens) {
          std::vector<input> in{f32({entries, S, I}, prefix(x, entries * S * I)), w, r, bias, std::move(lens),
                                f32({entries, D, Hd}, prefix(h0, entries * D * Hd))};
          if (op == "LSTM") {
            in.push_back(f32({entries, D, Hd}, prefix(c0, entries * D * Hd)));
            in.push_back(peep);
          }
          return in;
        };
        std::vector<attribute> run_attrs = attrs;
        if (op != "GRU") run_attrs.pop_back();  // linear_before_reset is GRU's
        const auto batched = run(op, inputs(B, std::nullopt), outputs(B), run_attrs);
        const auto one_by_one = run(op, inputs(B + 1, i32({B + 1}, {S, S, S, 0})), outputs(B + 1), run_attrs);
        REQUIRE(batched.size() == one_by_one.size());
        for (std::size_t k = 0; k < batched.size(); ++k) {
          const auto want = values<float>(one_by_one[k]);
          check_close(values<float>(batched[k]), prefix(want, static_cast<std::int64_t>(values<float>(batched[k]).size())),
                      1e-5f, 1e-6f);
        }
        // The length-0 entry: zeros in Y, its initial state in Y_h (and Y_c).
        const auto y = values<float>(one_by_one[0]);
        for (std::int64_t i = B * S * D * Hd; i < (B + 1) * S * D * Hd; ++i) CHECK(y[static_cast<std::size_t>(i)] == 0.0f);
        const auto yh = values<float>(one_by_one[1]);
        for (std::int64_t i = B * D * Hd; i < (B + 1) * D * Hd; ++i)
          CHECK(yh[static_cast<std::size_t>(i)] == h0[static_cast<std::size_t>(i)]);
      }
}

TEST_CASE("recurrent: F16 inputs compute in F32 - bad weight shapes are errors") {
  auto x = make<half>({1, 1, 1}, {half(1.0f)});
  auto w = make<half>({1, 1, 1}, {half(0.5f)});
  auto r = make<half>({1, 1, 1}, {half(0.25f)});
  auto out = run("RNN", {x, w, r}, {info(data_type::F16, {1, 1, 1, 1})}, {hidden1});
  CHECK(static_cast<float>(values<half>(out[0])[0]) == static_cast<float>(half(std::tanh(0.5f))));
  CHECK_THROWS_AS(run("RNN", {f32({1, 1, 2}, {1, 2}), f32({1, 1, 1}, {1}), f32({1, 1, 1}, {1})}, {f32_info({1, 1, 1, 1})},
                      {hidden1}),
                  ipu::error);
}

}  // namespace test_recurrent
