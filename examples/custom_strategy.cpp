// A user-written execution strategy, plugged in through the `ipu::execution_strategy` concept.
//
// `balanced_pipeline` pipelines a model that carries no annotations: it asks the automatic planner
// for one balanced stage per IPU of the device, then plans those stages with the library's
// pipelined strategy. Because it satisfies the concept, everything written against the concept
// takes it: the replication adaptor composes with it, and ipu::executor runs it on host threads
// with its schedule, giving exactly the CPU device's outputs.
#include <cstdio>
#include <cstring>
#include <string_view>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/exec/executor.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"

struct balanced_pipeline {
  using strategy_concept = ipu::execution_strategy_tag;
  static constexpr std::string_view name = "balanced_pipeline";

  /// Stages to cut the model into; 0: one per IPU of the device (per replica).
  std::uint32_t stages = 0;

  [[nodiscard]] ipu::executable plan(const ipu::graph& g, const ipu::device_description& d, const ipu::plan_options& o) const {
    const std::uint32_t per_replica = d.num_ipus / o.replication_factor;
    const std::uint32_t n = stages ? stages : per_replica;
    auto replica = d;
    replica.num_ipus = per_replica;
    const auto proposal = ipu::propose_stages(g, replica, n, o);
    ipu::executable e = ipu::pipelined_execution{}.plan(proposal.annotated, d, o);
    e.strategy = std::string(name);  // the executor checks who planned it
    return e;
  }
};

static_assert(ipu::execution_strategy<balanced_pipeline>);
static_assert(ipu::execution_strategy<ipu::replicated_execution<balanced_pipeline>>);

namespace {

/// A 6-layer MLP without annotations.
ipu::graph model() {
  ipu::builder b("mlp6");
  auto x = b.add_input_tensor({ipu::data_type::F32, {2, 32}}, "x");
  for (int i = 0; i < 6; ++i) {
    std::vector<float> w(32 * 32);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = static_cast<float>((k * 7 + static_cast<std::size_t>(i)) % 13) / 13.0f - 0.45f;
    x = b.tanh(b.matmul(x, b.add_initialized_input(ipu::make_constant<float>({32, 32}, w))));
  }
  b.add_output(x);
  return std::move(b).build();
}

template <ipu::execution_strategy S>
void report(const S& strategy, const ipu::graph& g, const ipu::device_description& d, const ipu::plan_options& o) {
  const auto e = strategy.plan(g, d, o);
  std::printf("%-32s %zu stages on %u IPUs x %u replicas: %.0f samples/s, bubble %.1f%%\n", e.strategy.c_str(),
              e.stages.size(), e.ipus_per_replica, e.replication_factor, e.predicted.samples_per_second,
              100 * e.predicted.pipeline_bubble);
}

}  // namespace

int main() {
  const auto g = model();
  using mk2x4 = ipu::ipu_model<ipu::mk2, 4>;
  ipu::plan_options o;
  o.batches_per_step = 8;
  report(balanced_pipeline{}, g, mk2x4::description(), o);
  report(ipu::replicated_execution<balanced_pipeline>{{}, 2}, g, mk2x4::description(), o);

  // Run it: 8 micro-batches of [2, 32] through 4 pipeline stages on host threads.
  ipu::executor<balanced_pipeline, mk2x4> ex(g, ipu::data_flow::for_outputs(g, 8));
  std::vector<float> input(8 * 2 * 32);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  const auto x = ipu::host_tensor::from<float>(ipu::shape{8, 2, 32}, input);
  auto anchors = ex.make_anchor_arrays();
  ipu::step_io io({{"x", x.view()}}, anchors);
  ex.run(io);

  // The same micro-batches one by one on the CPU device.
  ipu::cpu::device cpu(g);
  const auto& out = anchors.begin()->second;
  bool same = true;
  for (std::size_t m = 0; m < 8; ++m) {
    const auto xm = ipu::host_tensor::from<float>(ipu::shape{2, 32}, std::span<const float>(input).subspan(m * 64, 64));
    const auto ref = cpu.run(std::vector<ipu::host_tensor>{xm});
    same = same && std::memcmp(ref[0].data(), out.data() + m * ref[0].bytes().size(), ref[0].bytes().size()) == 0;
  }
  std::printf("executor on %zu workers: outputs %s the CPU device's\n", ex.num_workers(), same ? "equal" : "DIFFER from");
  return same ? 0 : 1;
}
