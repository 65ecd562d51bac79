// ai.graphcore CtcBeamSearchDecoder against an independent reference: every alignment of a short
// sequence enumerated, collapsed (repeats merged, blanks dropped) and summed per labelling, which
// is what a beam wide enough to keep every prefix must return; plus hand-computed cases, lengths,
// F16, and what the shape rule and the kernel refuse.
#include "ipu/ops/kernels/ctc_decoder.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_ctc_decoder {

using namespace tk;

namespace {

struct decoded {
  std::vector<float> log_probs;
  std::vector<std::uint32_t> lengths, labels;
};

decoded decode(const host_tensor& lp, const host_tensor& lengths, std::int64_t blank, std::int64_t beam,
               std::int64_t top) {
  const auto& s = lp.info().shape;
  auto out = run_in("ai.graphcore", "CtcBeamSearchDecoder", {lp, lengths},
                    {info(lp.info().type, {s[1], top}), info(data_type::U32, {s[1], top}),
                     info(data_type::U32, {s[1], top, s[0]})},
                    {attr("blank", blank), attr("beam_width", beam), attr("top_paths", top)});
  decoded d;
  if (lp.info().type == data_type::F16)
    for (auto h : out[0].as<ipu::half>()) d.log_probs.push_back(static_cast<float>(h));
  else
    d.log_probs = values<float>(out[0]);
  d.lengths = values<std::uint32_t>(out[1]);
  d.labels = values<std::uint32_t>(out[2]);
  return d;
}

/// Every labelling's probability: all classes^steps alignments collapsed and summed.
std::map<std::vector<std::uint32_t>, double> brute_force(const std::vector<double>& p, int steps, int classes,
                                                         std::uint32_t blank) {
  std::map<std::vector<std::uint32_t>, double> sum;
  std::vector<int> path(static_cast<std::size_t>(steps), 0);
  for (;;) {
    double prob = 1;
    std::vector<std::uint32_t> label;
    int last = -1;
    for (int t = 0; t < steps; ++t) {
      const int k = path[static_cast<std::size_t>(t)];
      prob *= p[static_cast<std::size_t>(t * classes + k)];
      if (k != static_cast<int>(blank) && k != last) label.push_back(static_cast<std::uint32_t>(k));
      last = k;
    }
    sum[label] += prob;
    int t = steps - 1;
    while (t >= 0 && ++path[static_cast<std::size_t>(t)] == classes) path[static_cast<std::size_t>(t--)] = 0;
    if (t < 0) break;
  }
  return sum;
}

/// Softmax rows of deterministic pseudo-random logits.
std::vector<double> random_probs(int steps, int classes, unsigned seed) {
  std::vector<double> p(static_cast<std::size_t>(steps * classes));
  std::uint64_t s = seed * 2654435761u + 1;
  for (int t = 0; t < steps; ++t) {
    double total = 0;
    for (int k = 0; k < classes; ++k) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      const double v = std::exp(3.0 * static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53));
      p[static_cast<std::size_t>(t * classes + k)] = v;
      total += v;
    }
    for (int k = 0; k < classes; ++k) p[static_cast<std::size_t>(t * classes + k)] /= total;
  }
  return p;
}

}  // namespace

TEST_CASE("CtcBeamSearchDecoder: a wide beam returns the exact labelling probabilities, best first") {
  for (const auto& [steps, classes, blank] : {std::tuple{3, 3, 0u}, std::tuple{4, 3, 2u}, std::tuple{5, 2, 0u},
                                              std::tuple{4, 4, 1u}}) {
    CAPTURE(steps);
    CAPTURE(classes);
    CAPTURE(blank);
    // Two batch entries with different probabilities, decoded together.
    const auto pa = random_probs(steps, classes, 7), pb = random_probs(steps, classes, 8);
    std::vector<float> lp(static_cast<std::size_t>(steps * 2 * classes));
    for (int t = 0; t < steps; ++t)
      for (int k = 0; k < classes; ++k) {
        lp[static_cast<std::size_t>((t * 2 + 0) * classes + k)] = static_cast<float>(std::log(pa[static_cast<std::size_t>(t * classes + k)]));
        lp[static_cast<std::size_t>((t * 2 + 1) * classes + k)] = static_cast<float>(std::log(pb[static_cast<std::size_t>(t * classes + k)]));
      }
    const int top = 4;
    const auto d = decode(f32({steps, 2, classes}, lp), i32({2}, {steps, steps}), blank, 1000, top);
    for (int b = 0; b < 2; ++b) {
      // The reference from the F32 log probabilities the decoder saw.
      std::vector<double> p(static_cast<std::size_t>(steps * classes));
      for (int t = 0; t < steps; ++t)
        for (int k = 0; k < classes; ++k)
          p[static_cast<std::size_t>(t * classes + k)] = std::exp(static_cast<double>(lp[static_cast<std::size_t>((t * 2 + b) * classes + k)]));
      const auto all = brute_force(p, steps, static_cast<int>(classes), blank);
      std::vector<std::pair<std::vector<std::uint32_t>, double>> ranked(all.begin(), all.end());
      std::stable_sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) { return x.second > y.second; });
      for (int j = 0; j < top; ++j) {
        CAPTURE(b);
        CAPTURE(j);
        const auto row = static_cast<std::size_t>(b * top + j);
        const auto& [label, prob] = ranked[static_cast<std::size_t>(j)];
        CHECK(d.log_probs[row] == doctest::Approx(std::log(prob)).epsilon(1e-6));
        REQUIRE(d.lengths[row] == label.size());
        const auto* got = d.labels.data() + row * static_cast<std::size_t>(steps);
        CHECK(std::vector<std::uint32_t>(got, got + label.size()) == label);
        for (auto k = label.size(); k < static_cast<std::size_t>(steps); ++k) CHECK(got[k] == 0u);
      }
    }
  }
}

TEST_CASE("CtcBeamSearchDecoder: hand-computed cases") {
  // Blank 0, one label 1, p(blank) = 0.6 at both steps. The best path is blank-blank (0.36), but
  // the labelling "1" sums three paths: 0.4 * 0.4 + 0.6 * 0.4 + 0.4 * 0.6 = 0.64.
  const float l6 = std::log(0.6f), l4 = std::log(0.4f);
  auto d = decode(f32({2, 1, 2}, {l6, l4, l6, l4}), i64({1}, {2}), 0, 10, 2);
  CHECK(d.lengths == std::vector<std::uint32_t>{1, 0});
  CHECK(d.labels == std::vector<std::uint32_t>{1, 0, 0, 0});
  CHECK(d.log_probs[0] == doctest::Approx(std::log(0.64)).epsilon(1e-6));
  CHECK(d.log_probs[1] == doctest::Approx(std::log(0.36)).epsilon(1e-6));
  // A repeat needs a blank between: labels 1, 1 with certainty at 3 steps (1, blank, 1) give "1 1";
  // without the blank (1, 1) they merge into "1".
  const float no = -std::numeric_limits<float>::infinity();
  d = decode(f32({3, 2, 2}, {no, 0, no, 0, 0, no, no, 0, no, 0, no, 0}), i64({2}, {3, 2}), 0, 4, 1);
  CHECK(d.lengths == std::vector<std::uint32_t>{2, 1});
  CHECK(d.labels == std::vector<std::uint32_t>{1, 1, 0, 1, 0, 0});
  CHECK(d.log_probs == std::vector<float>{0, 0});
  // Length 0: only the empty labelling, probability 1; the second path does not exist.
  d = decode(f32({2, 1, 3}, {l6, l4, l4, l6, l4, l4}), i64({1}, {0}), 0, 4, 2);
  CHECK(d.lengths == std::vector<std::uint32_t>{0, 0});
  CHECK(d.log_probs[0] == 0.0f);
  CHECK(d.log_probs[1] == -std::numeric_limits<float>::infinity());
}

TEST_CASE("CtcBeamSearchDecoder: a narrow beam prunes; F16 log probabilities; lengths shorter than T") {
  // Beam 1 keeps one prefix per step: with the case above it keeps "" after step 1 (0.6 > 0.4)...
  const float l6 = std::log(0.6f), l4 = std::log(0.4f);
  auto d = decode(f32({2, 1, 2}, {l6, l4, l6, l4}), i64({1}, {2}), 0, 1, 1);
  // ...then "" (0.36) against "1" (0.6 * 0.4 = 0.24): the pruned search misses the 0.64 labelling.
  CHECK(d.lengths == std::vector<std::uint32_t>{0});
  CHECK(d.log_probs[0] == doctest::Approx(std::log(0.36)).epsilon(1e-6));
  // F16 in, F16 out; decoding only the first step of three.
  std::vector<float> lp{l4, l6, l4, l6, l4, l6, l4, l6, l4};
  d = decode(f32({3, 1, 3}, lp), i32({1}, {1}), 2, 8, 1);
  std::vector<ipu::half> h;
  for (float v : lp) h.emplace_back(v);
  const auto dh = decode(make<ipu::half>({3, 1, 3}, h), i32({1}, {1}), 2, 8, 1);
  CHECK(d.lengths == std::vector<std::uint32_t>{1});
  CHECK(d.labels == std::vector<std::uint32_t>{1, 0, 0});
  CHECK(dh.labels == d.labels);
  CHECK(dh.log_probs[0] == doctest::Approx(d.log_probs[0]).epsilon(1e-3));
}

TEST_CASE("CtcBeamSearchDecoder: bad lengths, NaN and attributes are refused with what to fix") {
  using doctest::Contains;
  const auto lp = f32({2, 1, 2}, {0, 0, 0, 0});
  CHECK_THROWS_WITH_AS(decode(lp, i64({1}, {3}), 0, 4, 1), Contains("length 3 of batch entry 0 is outside [0, 2]"), ipu::error);
  CHECK_THROWS_WITH_AS(decode(lp, i64({1}, {-1}), 0, 4, 1), Contains("is outside"), ipu::error);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK_THROWS_WITH_AS(decode(f32({2, 1, 2}, {0, nan, 0, 0}), i64({1}, {2}), 0, 4, 1), Contains("NaN at step 0"), ipu::error);

  ipu::builder b("ctc");
  const auto x = b.add_input_tensor({data_type::F32, {5, 3, 4}}, "x");
  const auto len = b.add_input_tensor({data_type::S32, {3}}, "len");
  const auto out = b.ctc_beam_search_decoder(x, len, 0, 16, 3);
  REQUIRE(out.size() == 3);
  CHECK(b.info(out[0]) == tensor_info{data_type::F32, {3, 3}});
  CHECK(b.info(out[1]) == tensor_info{data_type::U32, {3, 3}});
  CHECK(b.info(out[2]) == tensor_info{data_type::U32, {3, 3, 5}});
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(x, len, 4), Contains("blank 4 is not one of the 4 classes"), ipu::error);
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(x, len, 0, 2, 3), Contains("top_paths 3 is outside [1, beam_width 2]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(x, len, 0, 100000), Contains("beam_width 100000 is outside"), ipu::error);
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(x, x), Contains("not an integer tensor"), ipu::error);
  const auto len2 = b.add_input_tensor({data_type::S32, {2}}, "len2");
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(x, len2), Contains("for a batch of 3"), ipu::error);
  const auto flat = b.add_input_tensor({data_type::F32, {5, 4}}, "flat");
  CHECK_THROWS_WITH_AS(b.ctc_beam_search_decoder(flat, len), Contains("not [T, N, C]"), ipu::error);
}

}  // namespace test_ctc_decoder
