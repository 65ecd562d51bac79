#pragma once
// Kernel of ai.graphcore CtcBeamSearchDecoder (ops/families/ctc_decoder.hpp): CTC prefix beam
// search in double, one batch entry at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ipu/ops/families/ctc_decoder.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

namespace ctc {
inline constexpr double never = -std::numeric_limits<double>::infinity();

/// log(e^a + e^b), exact at -inf.
inline double log_add(double a, double b) {
  if (a == never) return b;
  if (b == never) return a;
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log1p(std::exp(lo - hi));
}

/// A prefix's log probabilities of ending in a blank and in its last label.
struct beam_probs {
  double blank = never, label = never;
  [[nodiscard]] double total() const { return log_add(blank, label); }
};
using prefix = std::vector<std::uint32_t>;

/// Best first; among equals, the lexicographically smaller prefix (shorter when one starts the other).
inline bool better(const std::pair<prefix, beam_probs>& a, const std::pair<prefix, beam_probs>& b) {
  const double ta = a.second.total(), tb = b.second.total();
  if (ta != tb) return ta > tb;
  return a.first < b.first;
}

/// The surviving beams after `steps` steps of `lp` (row t: the C log probabilities of step t).
inline std::vector<std::pair<prefix, beam_probs>> search(const std::vector<double>& lp, std::int64_t steps,
                                                          std::int64_t classes, std::uint32_t blank,
                                                          std::size_t beam_width) {
  std::vector<std::pair<prefix, beam_probs>> beams{{prefix{}, beam_probs{0.0, never}}};
  for (std::int64_t t = 0; t < steps; ++t) {
    const double* p = lp.data() + t * classes;
    std::map<prefix, beam_probs> next;
    for (const auto& [seq, pr] : beams) {
      const double total = pr.total();
      auto& stay = next[seq];
      stay.blank = log_add(stay.blank, total + p[blank]);
      if (!seq.empty()) stay.label = log_add(stay.label, pr.label + p[seq.back()]);  // a repeat merges
      for (std::int64_t k = 0; k < classes; ++k) {
        const auto label = static_cast<std::uint32_t>(k);
        if (label == blank) continue;
        prefix longer = seq;
        longer.push_back(label);
        // A repeat of the last label starts a new one only after a blank.
        const double from = !seq.empty() && seq.back() == label ? pr.blank : total;
        auto& ext = next[longer];
        ext.label = log_add(ext.label, from + p[k]);
      }
    }
    beams.assign(next.begin(), next.end());
    const auto keep = std::min(beam_width, beams.size());
    std::partial_sort(beams.begin(), beams.begin() + static_cast<std::ptrdiff_t>(keep), beams.end(), better);
    beams.resize(keep);
  }
  std::sort(beams.begin(), beams.end(), better);
  return beams;
}
}  // namespace ctc

inline void ctc_beam_search_decoder_kernel(const kernel_context& ctx) {
  const auto log_probs = ctx.input(0);
  const auto& s = log_probs.info().shape;
  if (s.rank() != 3) throw ctx.fail("log_probs is " + to_string(log_probs.info()) + ", not [T, N, C]");
  const auto steps = s[0], batch = s[1], classes = s[2];
  const auto lengths = read_ints(ctx, ctx.input(1), "lengths");
  if (static_cast<std::int64_t>(lengths.size()) != batch)
    throw ctx.fail("lengths has " + std::to_string(lengths.size()) + " values for a batch of " + std::to_string(batch));
  const auto blank = ctx.attr_int("blank", 0);
  const auto beam_width = ctx.attr_int("beam_width", 100);
  const auto top = ctx.attr_int("top_paths", 1);
  if (blank < 0 || blank >= classes || beam_width < 1 || beam_width > detail::ctc::max_beam_width || top < 1 ||
      top > beam_width)
    throw ctx.fail("blank, beam_width or top_paths is out of range", "see the op's shape rule");
  check_output_shape(ctx, 0, shape{batch, top});
  check_output_shape(ctx, 1, shape{batch, top});
  check_output_shape(ctx, 2, shape{batch, top, steps});
  const auto all = read_doubles(ctx, log_probs);
  auto* lengths_out = data_as<std::uint32_t>(ctx.outputs[1]);
  auto* labels_out = data_as<std::uint32_t>(ctx.outputs[2]);
  std::vector<double> probs(static_cast<std::size_t>(batch * top), ctc::never);
  std::fill(lengths_out, lengths_out + batch * top, 0u);
  std::fill(labels_out, labels_out + batch * top * steps, 0u);
  std::vector<double> lp(static_cast<std::size_t>(steps * classes));
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto len = lengths[static_cast<std::size_t>(b)];
    if (len < 0 || len > steps)
      throw ctx.fail("length " + std::to_string(len) + " of batch entry " + std::to_string(b) + " is outside [0, " +
                         std::to_string(steps) + "]",
                     "give each length between 0 and the time steps of log_probs");
    for (std::int64_t t = 0; t < len; ++t)
      for (std::int64_t k = 0; k < classes; ++k) {
        const double v = all[static_cast<std::size_t>((t * batch + b) * classes + k)];
        if (std::isnan(v))
          throw ctx.fail("log_probs holds NaN at step " + std::to_string(t) + " of batch entry " + std::to_string(b),
                         "give finite log probabilities (or -inf for impossible classes)");
        lp[static_cast<std::size_t>(t * classes + k)] = v;
      }
    const auto beams = ctc::search(lp, len, classes, static_cast<std::uint32_t>(blank), static_cast<std::size_t>(beam_width));
    for (std::int64_t j = 0; j < top && j < static_cast<std::int64_t>(beams.size()); ++j) {
      const auto& [seq, pr] = beams[static_cast<std::size_t>(j)];
      const auto row = b * top + j;
      probs[static_cast<std::size_t>(row)] = pr.total();
      lengths_out[row] = static_cast<std::uint32_t>(seq.size());
      std::copy(seq.begin(), seq.end(), labels_out + row * steps);
    }
  }
  visit_float(ctx.outputs[0].info().type, ctx, [&]<class T>() {
    T* out = data_as<T>(ctx.outputs[0]);
    for (std::size_t i = 0; i < probs.size(); ++i) out[i] = convert<T>(probs[i]);
  });
}

inline void register_ctc_decoder_kernels(op_registry& r) {
  r.add({"ai.graphcore", "CtcBeamSearchDecoder", &ctc_beam_search_decoder_kernel, true});
}

}  // namespace ipu::detail::tensor_ops
