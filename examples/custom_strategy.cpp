// A user-written execution strategy and schedule, plugged in through the `ipu::execution_strategy`
// and `ipu::schedule` concepts.
//
// `balanced_pipeline` pipelines a model that carries no annotations: it asks the automatic planner
// for one balanced stage per IPU of the device, then plans those stages with the library's
// pipelined strategy. Because it satisfies the concept, everything written against the concept
// takes it: the replication adaptor composes with it, and ipu::executor runs it on host threads
// with the step loop of its schedule, instantiated at compile time, giving exactly the CPU
// device's outputs.
//
// `serial_pipeline` is a schedule of our own: the pipeline's stages run one after another on a
// single host thread (say, to debug a stage without threads), while each stage keeps its own
// simulated clock, so the simulated timeline is the pipelined one. `balanced_pipeline<Schedule>`
// names the schedule its plans run with, so the same strategy runs under either.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/cpu/blas_tuning.hpp"
#include "ipu/builder/builder.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/exec/executor.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"

/// A pipeline's stages in chain order on one thread, micro-batch by micro-batch.
struct serial_pipeline {
  using schedule_concept = ipu::schedule_tag;
  static constexpr std::string_view name = "serial-pipeline";
  static constexpr ipu::schedule_kind kind = ipu::schedule_kind::pipelined;  // runs pipelined plans

  /// One worker (timeline lane, simulated clock) per stage, as the library's pipeline has.
  [[nodiscard]] std::size_t workers_per_replica(const ipu::exec::engine_base& e) const {
    return std::max<std::size_t>(e.steps().pipeline.size(), 1);
  }

  [[nodiscard]] std::size_t num_threads(const ipu::exec::engine_base&) const { return 1; }

  /// One job: every replica's micro-batches through the chain.
  void add_jobs(ipu::exec::engine_base& e, ipu::exec::job_list& jobs) {
    jobs.emplace_back([&e] {
      const auto& chain = e.steps().pipeline;
      std::size_t worker = 0;
      try {
        for (std::size_t r = 0; r < e.replicas(); ++r)
          for (std::uint64_t m = 0; m < e.micro_batches(); ++m) {
            if (chain.empty()) e.start_micro_batch(r, m, 0, e.recorder_of(r, 0));  // anchors on inputs only
            std::vector<const std::byte*> at(e.plan().model.num_tensors(), nullptr);  // by tensor
            std::vector<std::vector<ipu::host_tensor>> held;  // the stage outputs `at` points into
            std::uint64_t ready = 0;                          // simulated cycle the data is ready
            for (std::size_t k = 0; k < chain.size(); ++k) {
              worker = r * chain.size() + k;
              auto& rec = e.recorder_of(r, k);
              const auto s = chain[k];
              if (k == 0) e.start_micro_batch(r, m, e.steps().stages[s].ipu, rec);
              rec.cycles = std::max(rec.cycles, ready);
              auto outs = e.run_stage(r, s, m, rec, [&](ipu::tensor_id t) {
                const std::byte* in = e.input(t, r, m);
                return in ? in : at[t];
              });
              for (std::size_t i = 0; i < outs.size(); ++i) at[e.stage_outputs(s)[i]] = outs[i].data();
              held.push_back(std::move(outs));
              for (const auto& c : e.steps().stages[s].copies) e.note(c, m, rec);  // IPU-Link copies, on the timeline
              ready = rec.cycles;
            }
          }
      } catch (...) {
        e.fail(worker);
      }
    });
  }
};

template <class Schedule = ipu::pipelined_schedule>
struct balanced_pipeline {
  using strategy_concept = ipu::execution_strategy_tag;
  using schedule = Schedule;
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
    e.strategy = std::string(name);  // for display: the executor knows its plans by their schedule kind
    return e;
  }
};

static_assert(ipu::schedule<serial_pipeline>);
static_assert(ipu::execution_strategy<balanced_pipeline<>>);
static_assert(ipu::execution_strategy<balanced_pipeline<serial_pipeline>>);
static_assert(ipu::execution_strategy<ipu::replicated_execution<balanced_pipeline<>>>);

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

/// Runs one step of 8 micro-batches of [2, 32] with `Strategy` and checks every output against the
/// same micro-batch on the CPU device, bit for bit; returns the step's simulated cycles, or 0 when
/// an output differs.
template <class Strategy, class Device>
std::uint64_t run_and_check(const ipu::graph& g, const std::vector<float>& input) {
  ipu::executor<Strategy, Device> ex(g, ipu::data_flow::for_outputs(g, 8));
  const auto x = ipu::host_tensor::from<float>(ipu::shape{8, 2, 32}, input);
  auto anchors = ex.make_anchor_arrays();
  ipu::step_io io({{"x", x.view()}}, anchors);
  ex.run(io);

  ipu::cpu::device cpu(g);
  const auto& out = anchors.begin()->second;
  bool same = true;
  for (std::size_t m = 0; m < 8; ++m) {
    const auto xm = ipu::host_tensor::from<float>(ipu::shape{2, 32}, std::span<const float>(input).subspan(m * 64, 64));
    const auto ref = cpu.run(std::vector<ipu::host_tensor>{xm});
    same = same && std::memcmp(ref[0].data(), out.data() + m * ref[0].bytes().size(), ref[0].bytes().size()) == 0;
  }
  const auto cycles = ex.last_timeline().simulated_cycles();
  std::printf("%-16s schedule, %zu workers on %zu threads: outputs %s the CPU device's, %llu simulated cycles\n",
              std::string(Strategy::schedule::name).c_str(), ex.num_workers(), ex.num_threads(),
              same ? "equal" : "DIFFER from", static_cast<unsigned long long>(cycles));
  return same ? cycles : 0;
}

int main() {
  ipu::tune_openblas_for_host_device();  // this program owns its process
  const auto g = model();
  using mk2x4 = ipu::ipu_model<ipu::mk2, 4>;
  ipu::plan_options o;
  o.batches_per_step = 8;
  report(balanced_pipeline<>{}, g, mk2x4::description(), o);
  report(ipu::replicated_execution<balanced_pipeline<>>{{}, 2}, g, mk2x4::description(), o);

  // Run it: 8 micro-batches through 4 pipeline stages, with the library's pipelined schedule (a
  // pool of threads) and with ours (one thread). Same outputs, same simulated timeline.
  std::vector<float> input(8 * 2 * 32);
  for (std::size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>(i % 17) / 17.0f - 0.5f;
  const auto pooled = run_and_check<balanced_pipeline<>, mk2x4>(g, input);
  const auto serial = run_and_check<balanced_pipeline<serial_pipeline>, mk2x4>(g, input);
  return pooled != 0 && pooled == serial ? 0 : 1;
}
