// The pipelined executor against oneTBB's parallel_pipeline on the same 4-stage pipeline, in the
// same run, and both against the ideal throughput for this machine's cores.
//
// Each stage is one "Spin" op: a fixed amount of arithmetic per micro-batch (every element of a
// 4096-float tensor goes through `kSteps` multiply-adds), run through the op registry by the
// stage's ipu::cpu::device — the executor's own stage runners. TBB's filters call the very same
// stage devices, so both pipelines do identical work; only the scheduling differs.
//
// ideal: one stage's time t is measured alone on one thread (pipeline/stage_alone); with S equal
// stages and C cores, at most min(S, C) stages run at once, so the best possible throughput is
// min(S, C) / (S t) micro-batches per second. Reported as counters and as ratios.
// Goal (issue 4): the executor at >= 90% of ideal.
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baseline_main.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/sched/executor.hpp"

namespace {

constexpr std::int64_t kElements = 4096;
constexpr int kSteps = 256;
constexpr std::uint32_t kStages = 4;
constexpr std::uint64_t kMicroBatches = 128;  // per step

unsigned cores() { return std::max(1u, std::thread::hardware_concurrency()); }

// out[i] = in[i] after kSteps multiply-adds: compute-bound, vectorisable, deterministic.
void spin_kernel(const ipu::kernel_context& ctx) {
  auto in = ctx.input(0).as<float>();
  auto out = ctx.outputs[0].as<float>();
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i];
  for (int s = 0; s < kSteps; ++s)
    for (auto& v : out) v = v * 0.999f + 0.001f;
}

const ipu::op_registry& registry() {
  static const ipu::op_registry r = [] {
    ipu::op_registry reg = ipu::default_op_registry();
    reg.add({"bench", "Spin", &spin_kernel});
    return reg;
  }();
  return r;
}

ipu::graph chain() {
  ipu::graph g("spin_chain");
  const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
  auto t = g.add_tensor("x", info, ipu::tensor_kind::input);
  for (std::uint32_t k = 0; k < kStages; ++k) {
    const auto name = k + 1 == kStages ? std::string("y") : "t" + std::to_string(k);
    auto out = g.add_tensor(name, info);
    ipu::op_node op;
    op.type = "Spin";
    op.domain = "bench";
    op.name = "spin" + std::to_string(k);
    op.inputs = {t};
    op.outputs = {out};
    g.add_op(std::move(op));
    t = out;
  }
  g.mark_output(t);
  return g;
}

/// One op per stage, stage k on IPU k, pipelined.
struct one_op_per_stage {
  using strategy_concept = ipu::execution_strategy_tag;
  static constexpr std::string_view name = "one-op-per-stage";
  ipu::executable plan(const ipu::graph& g, const ipu::device_description& d, const ipu::plan_options& o) const {
    ipu::executable exe;
    exe.strategy = std::string(name);
    exe.schedule = ipu::schedule_kind::pipelined;
    exe.device = d;
    exe.model = g;
    exe.batches_per_step = o.batches_per_step;
    for (std::uint32_t k = 0; k < g.num_ops(); ++k) {
      exe.stages.push_back(ipu::stage_plan{k, k % d.num_ipus, -1, {k}, {}, {}, 0});
      exe.op_ipu.push_back(k % d.num_ipus);
      exe.op_stage.push_back(k);
    }
    return exe;
  }
};

using pipeline_executor = ipu::executor<one_op_per_stage, ipu::ipu_model<ipu::mk2, kStages>>;

ipu::executor_options run_options() {
  ipu::executor_options o;
  o.registry = &registry();
  o.timeline = ipu::timeline_detail::none;  // measure the schedule, not the bookkeeping
  return o;
}

ipu::host_tensor inputs() {
  ipu::host_tensor x({ipu::data_type::F32, {static_cast<std::int64_t>(kMicroBatches), kElements}});
  auto v = x.as<float>();
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 97) * 0.01f;
  return x;
}

void set_rate(benchmark::State& state) {
  state.counters["mb_per_s"] =
      benchmark::Counter(static_cast<double>(kMicroBatches) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// One stage alone on one thread: t, from which the ideal throughput follows.
void stage_alone(benchmark::State& state) {
  ipu::graph one("one_stage");
  const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
  auto x = one.add_tensor("x", info, ipu::tensor_kind::input);
  auto y = one.add_tensor("y", info);
  ipu::op_node op;
  op.type = "Spin";
  op.domain = "bench";
  op.inputs = {x};
  op.outputs = {y};
  one.add_op(std::move(op));
  one.mark_output(y);
  ipu::cpu::device dev(std::move(one), {.threads = 1, .registry = &registry()});
  const auto in = inputs();
  for (auto _ : state) {
    for (std::uint64_t m = 0; m < kMicroBatches; ++m) {
      const ipu::const_tensor_view v(info, in.data() + m * info.num_bytes());
      benchmark::DoNotOptimize(dev.run(std::span<const ipu::const_tensor_view>(&v, 1)));
    }
  }
  // Time per micro-batch per stage is iteration time / kMicroBatches; the ideal pipeline runs
  // min(S, C) of them at once.
  const double parallel = std::min<double>(kStages, cores());
  state.counters["mb_per_s"] =
      benchmark::Counter(static_cast<double>(kMicroBatches) * static_cast<double>(state.iterations()) * parallel / kStages,
                         benchmark::Counter::kIsRate);
  state.counters["cores"] = cores();
  state.SetLabel("counter mb_per_s = ideal pipeline throughput");
}

void executor_pipeline(benchmark::State& state) {
  pipeline_executor ex(chain(), ipu::data_flow(kMicroBatches, {{"y", ipu::anchor_return_type::all()}}), {},
                       run_options());
  const auto x = inputs();
  auto anchors = ex.make_anchor_arrays();
  ipu::step_io io({{"x", x.view()}}, anchors);
  for (auto _ : state) ex.run(io);
  set_rate(state);
  state.counters["threads"] = static_cast<double>(ex.num_workers());
}

// The same stage graphs, each run by its own cpu::device, as TBB filters.
void tbb_pipeline(benchmark::State& state) {
  tbb::global_control limit(tbb::global_control::max_allowed_parallelism, cores());
  const auto g = chain();
  const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
  std::vector<std::unique_ptr<ipu::cpu::device>> stages;
  auto owner = std::make_shared<int>(0);
  for (std::uint32_t k = 0; k < kStages; ++k) {
    const ipu::op_id op = k;
    const ipu::tensor_id out = g.op(op).outputs[0];
    auto sg = ipu::extract_stage(g, std::span<const ipu::op_id>(&op, 1), std::span<const ipu::tensor_id>(&out, 1), {},
                                 owner, "stage" + std::to_string(k));
    stages.push_back(std::make_unique<ipu::cpu::device>(std::move(sg.model),
                                                        ipu::cpu::device_options{.threads = 1, .registry = &registry()}));
  }
  const auto x = inputs();
  ipu::host_tensor y({ipu::data_type::F32, {static_cast<std::int64_t>(kMicroBatches), kElements}});
  struct token {
    std::uint64_t m;
    ipu::host_tensor value;
  };
  for (auto _ : state) {
    std::uint64_t next = 0;
    auto chain_of = tbb::make_filter<void, token*>(tbb::filter_mode::serial_in_order, [&](tbb::flow_control& fc) -> token* {
      if (next == kMicroBatches) {
        fc.stop();
        return nullptr;
      }
      const auto m = next++;
      const ipu::const_tensor_view v(info, x.data() + m * info.num_bytes());
      auto out = stages[0]->run(std::span<const ipu::const_tensor_view>(&v, 1));
      return new token{m, std::move(out[0])};
    });
    for (std::uint32_t k = 1; k < kStages; ++k)
      chain_of = chain_of & tbb::make_filter<token*, token*>(tbb::filter_mode::serial_in_order, [&, k](token* t) {
                   const ipu::const_tensor_view v = t->value.view();
                   auto out = stages[k]->run(std::span<const ipu::const_tensor_view>(&v, 1));
                   t->value = std::move(out[0]);
                   return t;
                 });
    auto sink = tbb::make_filter<token*, void>(tbb::filter_mode::serial_in_order, [&](token* t) {
      std::memcpy(y.data() + t->m * info.num_bytes(), t->value.data(), info.num_bytes());
      delete t;
    });
    tbb::parallel_pipeline(2 * kStages, chain_of & sink);
  }
  set_rate(state);
}

// Both pipelines must compute the same thing; checked once before timing.
void check_same_results() {
  pipeline_executor ex(chain(), ipu::data_flow(kMicroBatches, {{"y", ipu::anchor_return_type::all()}}), {},
                       run_options());
  const auto x = inputs();
  auto anchors = ex.make_anchor_arrays();
  ipu::step_io io({{"x", x.view()}}, anchors);
  ex.run(io);
  ipu::cpu::device ref(chain(), {.threads = 1, .registry = &registry()});
  const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
  for (std::uint64_t m = 0; m < kMicroBatches; ++m) {
    const ipu::const_tensor_view v(info, x.data() + m * info.num_bytes());
    auto out = ref.run(std::span<const ipu::const_tensor_view>(&v, 1));
    if (std::memcmp(out[0].data(), anchors.at("y").data() + m * info.num_bytes(), info.num_bytes()) != 0)
      throw std::runtime_error("the pipelined executor's output differs from the CPU device's");
  }
}

BENCHMARK(stage_alone)->Name("pipeline/stage_alone")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(executor_pipeline)->Name("pipeline/executor")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(tbb_pipeline)->Name("pipeline/tbb")->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  check_same_results();
  // Fractions of the ideal (stage_alone's counter is the ideal throughput), and executor vs TBB.
  ipu::bench::compare("pipeline/executor", "pipeline/stage_alone", "mb_per_s");
  ipu::bench::compare("pipeline/tbb", "pipeline/stage_alone", "mb_per_s");
  ipu::bench::compare("pipeline/executor", "pipeline/tbb", "mb_per_s");
  return ipu::bench::run_main(argc, argv);
}
