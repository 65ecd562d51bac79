#pragma once
// PopART's sessions take their batches per step from the data flow. The options may repeat that
// number as device iterations, but not contradict it.
#include <cstdint>
#include <string>

#include "ipu/error.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/poptorch/options.hpp"

namespace ipu::runtime {

/// Sets the options' device iterations to the data flow's batches per step. Throws ipu::error
/// (usage) when the options ask for another number already.
inline void take_batches_per_step(ipu::options& options, const data_flow& flow, const std::string& where) {
  const auto bps = static_cast<std::int64_t>(flow.batches_per_step());
  if (options.device_iterations() != 1 && options.device_iterations() != bps)
    throw error(error_category::usage,
                "the options ask for " + std::to_string(options.device_iterations()) +
                    " device iterations but the data flow runs " + std::to_string(bps) + " batches per step",
                where, "set batches per step in the data flow only");
  options.device_iterations(bps);
}

}  // namespace ipu::runtime
