#pragma once
// Pipeline arithmetic (GPipe, 1F1B / PipeDream-Flush and Graphcore's pipelining share it).
//
//   bubble fraction  = (S - 1) / (M + S - 1)    for S stages and M micro-batches
//   pipeline cycles  = (M + S - 1) * slowest stage cycles   (efficiency is bounded by the slowest stage)
//   training stages  = 2N - 1 for N IPUs (forward stages, backward stages, the last one combined)
//
// Source: ipu-spec, "Pipeline arithmetic (public papers)".
#include <cstdint>
#include <string>
#include <string_view>

#include "ipu/format.hpp"
#include "ipu/constexpr_math.hpp"
#include "ipu/error.hpp"

namespace ipu {

namespace detail::device {
constexpr void require_pipeline(std::uint64_t stages, std::uint64_t micro_batches, std::string_view what) {
  if (stages == 0 || micro_batches == 0)
    throw error(error_category::usage,
                "a pipeline needs at least one stage and one micro-batch (got " + format_uint(stages) +
                    " stages, " + format_uint(micro_batches) + " micro-batches)",
                std::string(what), "pass positive stage and micro-batch counts");
}
}  // namespace detail::device

/// Fraction of the time an S-stage pipeline's stages sit idle while M micro-batches pass through.
constexpr double pipeline_bubble_fraction(std::uint64_t stages, std::uint64_t micro_batches) {
  detail::device::require_pipeline(stages, micro_batches, "pipeline_bubble_fraction");
  return static_cast<double>(stages - 1) / static_cast<double>(micro_batches + stages - 1);
}

/// Cycles for M micro-batches through S stages when every step waits for the slowest stage.
constexpr std::uint64_t pipeline_cycles(std::uint64_t slowest_stage_cycles, std::uint64_t stages,
                                        std::uint64_t micro_batches) {
  detail::device::require_pipeline(stages, micro_batches, "pipeline_cycles");
  return ipu::mul_sat(micro_batches + stages - 1, slowest_stage_cycles);
}

/// Pipeline stages of a training pipeline over `num_ipus` IPUs: 2N - 1.
constexpr std::uint64_t training_pipeline_stages(std::uint64_t num_ipus) noexcept {
  return num_ipus == 0 ? 0 : 2 * num_ipus - 1;
}

}  // namespace ipu
