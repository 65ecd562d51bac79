// The pipelined executor against oneTBB's parallel_pipeline on the same 4-stage pipeline, in the
// same run, and both against the ideal throughput for this machine's cores.
//
// Each stage is one "Spin" op: a fixed amount of arithmetic per micro-batch (every element of a
// 4096-float tensor goes through `kSteps` multiply-adds), run through the op registry by the
// stage's ipu::cpu::device — the executor's own stage runners. TBB's filters call the very same
// stage devices, so both pipelines do identical work; only the scheduling differs.
//
// ideal: one stage's time t is measured alone on one thread; with S equal stages and C cores, at
// most min(S, C) stages run at once, so the best possible throughput is min(S, C) / (S t)
// micro-batches per second. Each round measures the three back to back and the ratios are medians
// over rounds: on a shared machine the speed drifts between seconds, and ratios of figures taken
// seconds apart would measure the drift.
// Goal (issue 4): the executor at >= 90% of ideal.
#include <tbb/global_control.h>
#include <tbb/parallel_pipeline.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baseline_main.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/exec/executor.hpp"

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
    // Appended, not "t" + to_string: GCC 12 warns falsely (-Wrestrict) on the operator+ form.
    std::string name = "y";
    if (k + 1 != kStages) name = std::string("t").append(std::to_string(k));
    auto out = g.add_tensor(name, info);
    ipu::op_node op;
    op.type = "Spin";
    op.domain = "bench";
    op.name = std::string("spin").append(std::to_string(k));
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
  using schedule = ipu::pipelined_schedule;
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

ipu::executor_options run_options(unsigned spins) {
  ipu::executor_options o;
  o.spins_before_sleep = spins;
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

using clock_type = std::chrono::steady_clock;
using ipu::bench::median;
double seconds_since(clock_type::time_point t0) { return std::chrono::duration<double>(clock_type::now() - t0).count(); }

/// One stage alone on one thread over a step's micro-batches: the ideal pipeline's throughput
/// follows from it (micro-batches per second).
class stage_alone {
 public:
  stage_alone() : dev_(one_stage(), {.threads = 1, .registry = &registry()}), in_(inputs()) {}
  double ideal_rate() {
    const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
    const auto t0 = clock_type::now();
    for (std::uint64_t m = 0; m < kMicroBatches; ++m) {
      const ipu::const_tensor_view v(info, in_.data() + m * info.num_bytes());
      benchmark::DoNotOptimize(dev_.run(std::span<const ipu::const_tensor_view>(&v, 1)));
    }
    const double per_stage = seconds_since(t0) / kMicroBatches;
    // S equal stages on C cores: at most min(S, C) stages run at once.
    return std::min<double>(kStages, cores()) / (kStages * per_stage);
  }

 private:
  static ipu::graph one_stage() {
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
    return one;
  }
  ipu::cpu::device dev_;
  ipu::host_tensor in_;
};

/// The executor running the chain, one step of kMicroBatches per call.
class executor_pipeline {
 public:
  explicit executor_pipeline(unsigned spins)
      : ex_(chain(), ipu::data_flow(kMicroBatches, {{"y", ipu::anchor_return_type::all()}}), {}, run_options(spins)),
        x_(inputs()),
        anchors_(ex_.make_anchor_arrays()),
        io_({{"x", x_.view()}}, anchors_) {}
  double rate() {
    const auto t0 = clock_type::now();
    ex_.run(io_);
    return kMicroBatches / seconds_since(t0);
  }
  [[nodiscard]] std::size_t threads() const { return ex_.num_threads(); }
  [[nodiscard]] const ipu::host_tensor& output() const { return anchors_.at("y"); }

 private:
  pipeline_executor ex_;
  ipu::host_tensor x_;
  std::map<std::string, ipu::host_tensor> anchors_;
  ipu::step_io io_;
};

/// The same stage graphs, each run by its own cpu::device, as TBB filters.
class tbb_pipeline {
 public:
  tbb_pipeline() : limit_(tbb::global_control::max_allowed_parallelism, cores()), x_(inputs()), y_(outputs()) {
    const auto g = chain();
    auto owner = std::make_shared<int>(0);
    for (std::uint32_t k = 0; k < kStages; ++k) {
      const ipu::op_id op = k;
      const ipu::tensor_id out = g.op(op).outputs[0];
      auto sg = ipu::extract_stage(g, std::span<const ipu::op_id>(&op, 1), std::span<const ipu::tensor_id>(&out, 1), {},
                                   owner, "stage" + std::to_string(k));
      stages_.push_back(std::make_unique<ipu::cpu::device>(std::move(sg.model),
                                                           ipu::cpu::device_options{.threads = 1, .registry = &registry()}));
    }
  }
  double rate() {
    const auto t0 = clock_type::now();
    run();
    return kMicroBatches / seconds_since(t0);
  }
  [[nodiscard]] const ipu::host_tensor& output() const { return y_; }

 private:
  static ipu::host_tensor outputs() {
    return ipu::host_tensor({ipu::data_type::F32, {static_cast<std::int64_t>(kMicroBatches), kElements}});
  }
  struct token {
    std::uint64_t m;
    ipu::host_tensor value;
  };
  void run() {
    const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
    std::uint64_t next = 0;
    auto chain_of = tbb::make_filter<void, token*>(tbb::filter_mode::serial_in_order, [&](tbb::flow_control& fc) -> token* {
      if (next == kMicroBatches) {
        fc.stop();
        return nullptr;
      }
      const auto m = next++;
      const ipu::const_tensor_view v(info, x_.data() + m * info.num_bytes());
      auto out = stages_[0]->run(std::span<const ipu::const_tensor_view>(&v, 1));
      return new token{m, std::move(out[0])};
    });
    for (std::uint32_t k = 1; k < kStages; ++k)
      chain_of = chain_of & tbb::make_filter<token*, token*>(tbb::filter_mode::serial_in_order, [&, k](token* t) {
                   const ipu::const_tensor_view v = t->value.view();
                   auto out = stages_[k]->run(std::span<const ipu::const_tensor_view>(&v, 1));
                   t->value = std::move(out[0]);
                   return t;
                 });
    auto sink = tbb::make_filter<token*, void>(tbb::filter_mode::serial_in_order, [&](token* t) {
      std::memcpy(y_.data() + t->m * info.num_bytes(), t->value.data(), info.num_bytes());
      delete t;
    });
    tbb::parallel_pipeline(2 * kStages, chain_of & sink);
  }
  tbb::global_control limit_;
  std::vector<std::unique_ptr<ipu::cpu::device>> stages_;
  ipu::host_tensor x_, y_;
};

// One round per iteration: the ideal (one stage alone), the executor and TBB, back to back in a
// rotating order, so that a change in the machine's speed between rounds cancels in the ratios.
void pipelines(benchmark::State& state) {
  stage_alone alone;
  executor_pipeline executor(static_cast<unsigned>(state.range(0)));
  tbb_pipeline tbb;
  std::vector<double> ideal, ours, theirs, ours_vs_ideal, theirs_vs_ideal, ours_vs_theirs;
  int turn = 0;
  for (auto _ : state) {
    double rates[3] = {};
    for (int i = 0; i < 3; ++i) {
      switch ((turn + i) % 3) {
        case 0: rates[0] = alone.ideal_rate(); break;
        case 1: rates[1] = executor.rate(); break;
        default: rates[2] = tbb.rate(); break;
      }
    }
    ++turn;
    ideal.push_back(rates[0]);
    ours.push_back(rates[1]);
    theirs.push_back(rates[2]);
    ours_vs_ideal.push_back(rates[1] / rates[0]);
    theirs_vs_ideal.push_back(rates[2] / rates[0]);
    ours_vs_theirs.push_back(rates[1] / rates[2]);
  }
  state.counters["ideal_mb_per_s"] = median(ideal);
  state.counters["executor_mb_per_s"] = median(ours);
  state.counters["tbb_mb_per_s"] = median(theirs);
  state.counters["executor_vs_ideal"] = median(ours_vs_ideal);
  state.counters["tbb_vs_ideal"] = median(theirs_vs_ideal);
  state.counters["executor_vs_tbb"] = median(ours_vs_theirs);
  state.counters["threads"] = static_cast<double>(executor.threads());
  state.counters["cores"] = cores();
  state.SetLabel("ratios: medians over rounds (goal: executor_vs_ideal >= 0.9)");
}

// Both pipelines must compute what the CPU device computes; checked once before timing.
void check_same_results() {
  executor_pipeline executor(ipu::executor_options{}.spins_before_sleep);
  tbb_pipeline tbb;
  executor.rate();
  tbb.rate();
  ipu::cpu::device ref(chain(), {.threads = 1, .registry = &registry()});
  const auto x = inputs();
  const ipu::tensor_info info{ipu::data_type::F32, {kElements}};
  for (std::uint64_t m = 0; m < kMicroBatches; ++m) {
    const ipu::const_tensor_view v(info, x.data() + m * info.num_bytes());
    auto out = ref.run(std::span<const ipu::const_tensor_view>(&v, 1));
    const auto offset = m * info.num_bytes();
    if (std::memcmp(out[0].data(), executor.output().data() + offset, info.num_bytes()) != 0)
      throw std::runtime_error("the pipelined executor's output differs from the CPU device's");
    if (std::memcmp(out[0].data(), tbb.output().data() + offset, info.num_bytes()) != 0)
      throw std::runtime_error("the TBB pipeline's output differs from the CPU device's");
  }
}

BENCHMARK(pipelines)->Name("pipeline/executor_tbb_ideal")->ArgName("spins")->Arg(64)->Arg(0)->Arg(1024)->Iterations(21)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  ipu::tune_openblas_for_host_device();  // before the first GEMM of check_same_results
  check_same_results();
  return ipu::bench::run_main(argc, argv);
}
