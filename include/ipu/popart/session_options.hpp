#pragma once
// PopART's SessionOptions, the part that shapes a training step: replicated graphs and gradient
// accumulation, each a switch and a count as PopART has them, and how the two reduce.
//
//   ipu::runtime::session_options so;
//   so.enable_replicated_graphs = true;  so.replicated_graph_count = 2;        // replicatedGraphCount
//   so.enable_gradient_accumulation = true;  so.accumulation_factor = 3;      // accumulationFactor
//   ipu::runtime::training_session s(model, flow, loss, opt, device, so.to_options());
//
// to_options() gives the ipu::options the sessions take (replicationFactor,
// Training.gradientAccumulation, Training.accumulationAndReplicationReductionType). A count above 1
// whose switch is off would be silently unused, so it is refused, as is a count below 1.
#include <cstdint>
#include <string>

#include "ipu/error.hpp"
#include "ipu/poptorch/options.hpp"

namespace ipu::runtime {

struct session_options {
  bool enable_replicated_graphs = false;       // enableReplicatedGraphs
  std::int64_t replicated_graph_count = 1;     // replicatedGraphCount
  bool enable_gradient_accumulation = false;   // enableGradientAccumulation
  std::int64_t accumulation_factor = 1;        // accumulationFactor
  /// accumulationAndReplicationReductionType: how the G x R micro-batches' gradients combine.
  reduction_type accumulation_and_replication_reduction_type = reduction_type::mean;

  /// The same settings as the sessions' options. Throws ipu::error (options) for a count below 1
  /// and for a count above 1 whose switch is off.
  [[nodiscard]] ipu::options to_options() const {
    check(enable_replicated_graphs, replicated_graph_count, "replicatedGraphCount", "enableReplicatedGraphs");
    check(enable_gradient_accumulation, accumulation_factor, "accumulationFactor", "enableGradientAccumulation");
    ipu::options o;
    if (enable_replicated_graphs) o.replication_factor(replicated_graph_count);
    if (enable_gradient_accumulation) o.gradient_accumulation(accumulation_factor);
    o.accumulation_and_replication_reduction_type(accumulation_and_replication_reduction_type);
    return o;
  }

 private:
  static void check(bool enabled, std::int64_t count, const char* name, const char* flag) {
    if (count < 1)
      throw error(error_category::options, std::string(name) + " is " + std::to_string(count), "PopART session options",
                  "give a count of at least 1");
    if (!enabled && count != 1)
      throw error(error_category::options, std::string(name) + " is " + std::to_string(count) + " but " + flag + " is off",
                  "PopART session options", std::string("set ") + flag + " to use it, or leave the count at 1");
  }
};

}  // namespace ipu::runtime
