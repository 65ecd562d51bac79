#pragma once
// `executor<Strategy, Device>`: runs a model on the host with the schedule an execution strategy
// planned for a device, and returns exactly what the CPU device returns.
//
//   ipu::data_flow flow(8, {{"output", ipu::anchor_return_type::all()}});
//   ipu::executor<ipu::pipelined_execution, ipu::ipu_model<ipu::mk2, 4>> ex(model, flow);
//   auto anchors = ex.make_anchor_arrays();
//   ipu::step_io io({{"input", x.view()}}, anchors);  // x: F32[8, ...], 8 micro-batches
//   ex.run(io);                                       // anchors["output"]: F32[8, ...]
//   ipu::write_chrome_trace(file, ex.last_timeline(), ex.plan().model);
//
// The step loop is the strategy's schedule (Strategy::schedule, see schedule.hpp), instantiated at
// compile time: sharded stages one after another, pipeline stages on a pool of threads with
// micro-batches overlapping, phases one after another with their Streaming Memory transfers,
// replicas concurrently. A strategy whose schedule is ipu::any_schedule gets the executable's
// schedule, chosen once at construction (ipu::host_engine). Every stage runs through
// ipu::cpu::device with `threads_per_worker` kernel threads, so the anchors are bitwise what
// ipu::cpu::device with that thread count computes. `run` calls take turns.
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/engine.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/sched/execution_strategy.hpp"
#include "ipu/sched/schedule.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/exec/timeline.hpp"
#include "ipu/tensor.hpp"

namespace ipu {

template <class Strategy, device_model Device>
class executor {
  static_assert(detail::check_execution_strategy<Strategy>(),
                "ipu: executor<Strategy, Device> needs an execution strategy; see ipu/sched/execution_strategy.hpp");

 public:
  using strategy_type = Strategy;
  using device_type = Device;
  using schedule_type = typename Strategy::schedule;
  /// The engine the step loop runs in: exec::engine<schedule_type>, or host_engine when the
  /// strategy's schedule is chosen per plan.
  using engine_type =
      std::conditional_t<std::is_same_v<schedule_type, any_schedule>, host_engine, exec::engine<schedule_type>>;

  /// Plans `model` for Device with `strategy`; the data flow sets the batches per step. Throws
  /// what the strategy throws (schedule, memory errors), and ipu::error (usage) when `options`
  /// asks for other batches per step than the data flow.
  executor(const graph& model, const data_flow& flow, plan_options options = {}, executor_options run_options = {},
           const Strategy& strategy = Strategy{})
      : engine_(make_engine(make_plan(model, flow, options, strategy), flow, run_options)) {}

  /// Runs an executable planned earlier (or loaded). Throws ipu::error when its schedule is not
  /// the strategy's, it was planned for another device, or its batches per step differ from the
  /// data flow's.
  executor(executable exe, const data_flow& flow, executor_options run_options = {})
      : engine_((check_schedule(exe), make_engine(std::move(exe), flow, run_options))) {}

  /// Runs one step: batches_per_step x accumulation micro-batches per replica, reading the input
  /// arrays of `io` and filling its anchor arrays. Throws ipu::error for arrays of the wrong type
  /// or element count (naming the tensor and both counts) and for failing kernels.
  void run(step_io& io) { engine_->run(io); }

  /// One zeroed host array per anchor, shaped by its return type (PopART's initAnchorArrays).
  [[nodiscard]] std::map<std::string, host_tensor> make_anchor_arrays() const {
    return engine_->layout().make_anchor_arrays();
  }
  /// The array shape `run` expects for input `name`.
  [[nodiscard]] tensor_info input_array_info(std::string_view name) const { return engine_->layout().input_info(name); }

  [[nodiscard]] const executable& plan() const noexcept { return engine_->plan(); }
  [[nodiscard]] const step_layout& layout() const noexcept { return engine_->layout(); }
  /// The timeline of the last step.
  [[nodiscard]] const timeline& last_timeline() const noexcept { return engine_->last_timeline(); }
  /// Workers of a step, each with its own timeline lane: a pipeline stage or phased IPU per
  /// replica, or one per replica when sharded.
  [[nodiscard]] std::size_t num_workers() const noexcept { return engine_->num_workers(); }
  /// Host threads a step runs on: one per worker, except pipelines (executor_options::pipeline_threads).
  [[nodiscard]] std::size_t num_threads() const noexcept { return engine_->num_threads(); }

 private:
  static executable make_plan(const graph& model, const data_flow& flow, plan_options options, const Strategy& strategy) {
    if (options.batches_per_step != 1 && options.batches_per_step != flow.batches_per_step())
      throw error(error_category::usage,
                  "plan options ask for " + std::to_string(options.batches_per_step) +
                      " batches per step but the data flow runs " + std::to_string(flow.batches_per_step()),
                  "executor for graph '" + model.name() + "'", "set batches per step in the data flow only");
    options.batches_per_step = flow.batches_per_step();
    return strategy.plan(model, Device::description(), options);
  }

  static std::unique_ptr<engine_type> make_engine(executable exe, const data_flow& flow, const executor_options& run_options) {
    check(exe, flow);
    return std::make_unique<engine_type>(std::make_shared<const executable>(std::move(exe)), flow, run_options);
  }

  /// A plan is the strategy's when it runs the strategy's schedule (the kind the executable
  /// records, typed: no names compared).
  static void check_schedule(const executable& exe) {
    if constexpr (!std::is_same_v<schedule_type, any_schedule>) {
      if (exe.schedule == schedule_type::kind) return;
      throw error(error_category::usage,
                  "the executable runs a " + std::string(to_string(exe.schedule)) + " schedule, not the " +
                      std::string(to_string(schedule_type::kind)) + " schedule of strategy '" +
                      std::string(Strategy::name) + "'",
                  "executor for graph '" + exe.model.name() + "'",
                  "run it with an executor of a strategy with a " + std::string(to_string(exe.schedule)) +
                      " schedule, or with ipu::host_engine");
    }
  }

  static void check(const executable& exe, const data_flow& flow) {
    const std::string where = "executor for graph '" + exe.model.name() + "'";
    const auto want = Device::description();
    const bool same_device = exe.device.kind == want.kind &&
                             (want.kind == device_kind::cpu || exe.device == want);
    if (!same_device)
      throw error(error_category::usage,
                  "the executable was planned for " + to_string(exe.device) + ", not " + to_string(want), where,
                  "plan it for the executor's device");
    if (exe.batches_per_step != flow.batches_per_step())
      throw error(error_category::usage,
                  "the executable runs " + std::to_string(exe.batches_per_step) + " batches per step but the data flow " +
                      std::to_string(flow.batches_per_step()),
                  where, "plan with the data flow's batches per step");
  }

  std::unique_ptr<engine_type> engine_;
};

}  // namespace ipu
