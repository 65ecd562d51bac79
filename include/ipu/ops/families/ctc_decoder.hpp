#pragma once
// ai.graphcore CtcBeamSearchDecoder: PopTorch's poptorch.ctc_beam_search_decoder (PopART's
// aiGraphcore.ctcbeamsearchdecoder, PopLibs' popnn::ctc_infer).
//
//   CtcBeamSearchDecoder(log_probs [T, N, C], lengths [N]) -> label_probs [N, top_paths],
//                                                              label_lengths [N, top_paths] UINT32,
//                                                              decoded_labels [N, top_paths, T] UINT32
// log_probs are per-step log probabilities of C classes (F32 or F16), time-major as PyTorch's CTC
// loss takes them; lengths (any integer type) the steps of each batch entry to decode, each in [0, T].
// Attributes: blank (default 0), beam_width (default 100, at most 65,536), top_paths (default 1, at
// most beam_width). The decoder is CTC prefix beam search: a prefix's probability sums over every
// alignment that collapses to it (repeats merged, blanks dropped), kept as the probabilities of
// ending in a blank and not, and the beam_width most probable prefixes survive each step.
// label_probs are the natural-log probabilities of the top_paths best prefixes, best first;
// decoded_labels hold each prefix then zeros. Where fewer prefixes exist than top_paths (a length
// of 0 has only the empty one), the rest have probability -inf and length 0.
// Kernel: ipu/ops/kernels/ctc_decoder.hpp (sums in double; ties go to the lexicographically smaller prefix).
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/cost_rules.hpp"
#include "ipu/ops/shape_rules.hpp"

namespace ipu {
namespace detail::ctc {
inline constexpr std::int64_t max_beam_width = 65536;  // a hostile beam width cannot exhaust memory
}  // namespace detail::ctc

namespace detail::infer {

constexpr std::vector<tensor_info> ctc_beam_search_decoder(const infer_context& c) {
  only_attributes(c, {"blank", "beam_width", "top_paths"});
  need_float(c, 0);
  const auto& lp = c.input(0);
  if (lp.shape.rank() != 3)
    throw c.fail("log_probs is " + to_string(lp) + ", not [T, N, C]", "give time-major log probabilities [T, N, C]");
  const auto t = lp.shape[0], n = lp.shape[1], classes = lp.shape[2];
  const auto& len = c.input(1);
  if (!is_signed_integer(len.type) && !is_unsigned_integer(len.type))
    throw c.fail("lengths is " + to_string(len) + ", not an integer tensor", "give the lengths as INT32 or INT64");
  if (len.shape != shape{n})
    throw c.fail("lengths is " + to_string(len) + " for a batch of " + std::to_string(n),
                 "give one length per batch entry: [N]");
  const auto blank = c.attr_int("blank", 0);
  if (blank < 0 || blank >= classes)
    throw c.fail("blank " + std::to_string(blank) + " is not one of the " + std::to_string(classes) + " classes",
                 "give a class index in [0, C)");
  const auto beam = c.attr_int("beam_width", 100);
  if (beam < 1 || beam > detail::ctc::max_beam_width)
    throw c.fail("beam_width " + std::to_string(beam) + " is outside [1, " + std::to_string(detail::ctc::max_beam_width) + "]",
                 "give a beam width of at least 1");
  const auto top = c.attr_int("top_paths", 1);
  if (top < 1 || top > beam)
    throw c.fail("top_paths " + std::to_string(top) + " is outside [1, beam_width " + std::to_string(beam) + "]",
                 "ask for at most beam_width paths");
  return {tensor_info{lp.type, shape{n, top}}, tensor_info{data_type::U32, shape{n, top}},
          tensor_info{data_type::U32, shape{n, top, t}}};
}

}  // namespace detail::infer

namespace detail::cost_rules {
/// Each step extends every beam by every class (a log-add and a compare each, on the vector units),
/// then the beams are ranked and exchanged: one superstep per time step.
constexpr op_cost ctc_beam_search_decoder(const op_cost_context& c) {
  const auto& lp = c.input(0);
  const auto steps = dim(lp, 0);
  const auto beam = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("beam_width", 100), 1));
  const auto work = mul_sat(mul_sat(mul_sat(steps, dim(lp, 1)), dim(lp, 2)), beam);
  op_cost r = vector_pass(c, c.type(lp), work, 1, 8);
  r.sync_cycles = mul_sat(sync(c), std::max<std::uint64_t>(steps, 1));
  return r;
}
}  // namespace detail::cost_rules
}  // namespace ipu
