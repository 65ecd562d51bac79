#pragma once
// The host engine: runs a checked run_plan on host threads, with the step loop of a schedule type.
//
//   exec::engine<Schedule>  the engine for one schedule, instantiated at compile time (what
//                           ipu::executor<Strategy, Device> holds for Strategy::schedule);
//   exec::engine_base       its schedule-independent part, and the API a schedule's step loop
//                           uses (schedule.hpp says how to write one);
//   host_engine             an executable whose schedule is known at run time (the runtime's
//                           sessions and model runners): the engine of its schedule, chosen once.
//
// - Each stage is a standalone graph (stage_graph.hpp) run by its own ipu::cpu::device, per
//   replica: the CPU device's plan, kernels and chunking, hence its exact results.
// - sequential_schedule: one thread per replica runs the items of each micro-batch in order.
// - pipelined_schedule: one worker (timeline lane) per stage per replica; a micro-batch's tensors
//   travel from stage to stage as a packet through SPSC ring buffers, so stages work on different
//   micro-batches at once. Used packets go back to the first stage through another ring. The
//   stages run on a pool of min(stages, cores) threads: a thread claims a stage that can run (its
//   input ring has a packet, its output ring has room), the most downstream first, and runs one
//   micro-batch of it. One claimant at a time keeps each ring single-producer single-consumer, and
//   the claim's acquire / release hands a ring side's state from thread to thread. With more
//   stages than cores, a thread per stage would time-slice compute-bound threads and lose their
//   caches; downstream-first lets a thread carry its packet on through the next stages while the
//   data is in its cache. A thread with nothing to claim spins briefly, then sleeps on an event
//   count that every finished micro-batch signals.
// - phased_schedule: one thread per IPU per replica; the rounds of each micro-batch run one after
//   another with a barrier between them, the items of a round concurrently on their IPUs'
//   threads. Streamed tensors live in per-IPU stores and a per-replica Streaming Memory store;
//   transfers copy between them.
// A failure on any thread stops every thread of the step; the error of the first failing worker
// (by replica, then worker) is rethrown.
#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/error.hpp"
#include "ipu/event_count.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/bfloat16.hpp"
#include "ipu/float8.hpp"
#include "ipu/half.hpp"
#include "ipu/ring_buffer.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/exec/run_plan.hpp"
#include "ipu/sched/schedule.hpp"
#include "ipu/exec/stage_graph.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/exec/timeline.hpp"
#include "ipu/tensor.hpp"

namespace ipu {

struct executor_options {
  /// Kernel threads of each worker (each stage's cpu::device), the worker included. Results equal
  /// ipu::cpu::device's with the same thread count.
  std::size_t threads_per_worker = 1;
  const op_registry* registry = nullptr;  // nullptr: ipu::default_op_registry()
  cpu::plan_options memory{};             // each stage's host memory plan
  timeline_detail timeline = timeline_detail::ops;
  /// Host threads that run a pipelined step's stages (all replicas'); 0: one per core, at most
  /// one per stage. Each runs whichever stage can run, so any count from 1 up gives the same
  /// results.
  std::size_t pipeline_threads = 0;
  /// Seed of the model's random ops on every stage's and replica's device (PopTorch's randomSeed;
  /// cpu::device_options::random_seed): the same seed draws what the CPU device draws.
  std::uint64_t random_seed = random_source::default_seed;
  /// Polls of a pipeline thread finding no stage to run before it sleeps. Polling answers a
  /// neighbour about to finish sooner; sleeping gives the core back.
  unsigned spins_before_sleep = 64;
};

namespace detail::exec {

using clock = std::chrono::steady_clock;

/// A worker's share of the timeline, merged after the step.
struct recorder {
  std::vector<timeline_event> events;
  std::uint64_t cycles = 0;  // this worker's simulated clock
  std::uint32_t replica = 0;
  std::uint32_t worker = 0;
  clock::time_point t0{};
  timeline_detail detail = timeline_detail::ops;

  [[nodiscard]] std::int64_t ns(clock::time_point t) const noexcept {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(t - t0).count();
  }
  /// An event of `cycles` simulated cycles starting now on this worker's clock.
  void add(timeline_event e, std::uint64_t sim_cycles, clock::time_point begin, clock::time_point end) {
    e.replica = replica;
    e.worker = worker;
    e.sim_begin = cycles;
    e.sim_cycles = sim_cycles;
    cycles += sim_cycles;
    if (detail == timeline_detail::none) return;
    e.host_begin_ns = ns(begin);
    e.host_end_ns = ns(end);
    events.push_back(e);
  }
};

/// One stage of one replica: the CPU device running its graph.
struct stage_runner {
  std::unique_ptr<cpu::device> device;
  // Set by the worker before each run, read by the per-op observer (same thread).
  recorder* rec = nullptr;
  std::uint64_t micro_batch = 0;
};

struct replica_state {
  std::vector<std::unique_ptr<stage_runner>> stages;
  // sequential / phased
  std::vector<const std::byte*> values;                            // by tensor: this micro-batch's values
  std::vector<std::vector<host_tensor>> stage_outputs;             // by stage: the last run's outputs
  std::vector<std::vector<std::unique_ptr<host_tensor>>> chip;     // [ipu][tensor]: streamed tensors on chip
  std::vector<std::unique_ptr<host_tensor>> remote;                // by tensor: Streaming Memory
  bool loaded = false;
};

/// Where the step's host arrays are.
struct step_arrays {
  std::vector<const std::byte*> input;  // by tensor id: the input array's data (graph inputs)
  std::vector<std::byte*> anchor;       // by layout anchor index
};

template <class T>
void add_elements(std::byte* dst, const std::byte* src, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    T a, b;
    std::memcpy(&a, dst + i * sizeof(T), sizeof(T));
    std::memcpy(&b, src + i * sizeof(T), sizeof(T));
    T r;
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;  // wraps like the device's integer adds, without UB
      r = static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
    } else if constexpr (std::is_floating_point_v<T>) {
      r = a + b;
    } else {
      r = T(static_cast<float>(a) + static_cast<float>(b));  // half, float8, bf16: add in float, round once
    }
    std::memcpy(dst + i * sizeof(T), &r, sizeof(T));
  }
}

/// dst += src, element-wise in the tensor's own type (Sum anchors).
inline void accumulate(std::byte* dst, const std::byte* src, const tensor_info& info) {
  const auto n = static_cast<std::size_t>(info.num_elements());
  switch (info.type) {
    case data_type::U8: add_elements<std::uint8_t>(dst, src, n); break;
    case data_type::S8: add_elements<std::int8_t>(dst, src, n); break;
    case data_type::U16: add_elements<std::uint16_t>(dst, src, n); break;
    case data_type::S16: add_elements<std::int16_t>(dst, src, n); break;
    case data_type::S32: add_elements<std::int32_t>(dst, src, n); break;
    case data_type::U32: add_elements<std::uint32_t>(dst, src, n); break;
    case data_type::S64: add_elements<std::int64_t>(dst, src, n); break;
    case data_type::U64: add_elements<std::uint64_t>(dst, src, n); break;
    case data_type::F16: add_elements<half>(dst, src, n); break;
    case data_type::F32: add_elements<float>(dst, src, n); break;
    case data_type::F64: add_elements<double>(dst, src, n); break;
    case data_type::F8143: add_elements<float8_143>(dst, src, n); break;
    case data_type::F8152: add_elements<float8_152>(dst, src, n); break;
    case data_type::BF16: add_elements<bfloat16>(dst, src, n); break;
    case data_type::BOOL:
    case data_type::STRING:
      throw error(error_category::internal, "Sum of " + std::string(to_string(info.type)) + " tensors",
                  "executor");  // refused at construction
  }
}

}  // namespace detail::exec

namespace exec {

// The run plan and a worker's recorder, as schedules see them.
using detail::exec::clock;
using detail::exec::item_kind;
using detail::exec::recorder;
using detail::exec::run_item;
using detail::exec::run_plan;
using detail::exec::stage_run;

/// The schedule-independent part of the engine, and the API a schedule runs a step with.
///
/// Built once per executable: the run plan (checked), a cpu::device per stage and replica, the
/// replicas' stores. `engine<Schedule>` adds the step loop. During a step, a schedule's jobs call
/// the members under "for a schedule's jobs"; they may run concurrently for different replicas, or
/// different stages of one replica that do not share stores (the built-in schedules' rules).
class engine_base {
 public:
  engine_base(const engine_base&) = delete;
  engine_base& operator=(const engine_base&) = delete;

  [[nodiscard]] const executable& plan() const noexcept { return *exe_; }
  [[nodiscard]] const step_layout& layout() const noexcept { return layout_; }
  /// What the engine derived from the executable: stages, the chain, items, rounds (run_plan.hpp).
  [[nodiscard]] const run_plan& steps() const noexcept { return plan_; }
  [[nodiscard]] const executor_options& options() const noexcept { return options_; }
  /// The timeline of the last step.
  [[nodiscard]] const timeline& last_timeline() const noexcept { return timeline_; }
  [[nodiscard]] std::size_t replicas() const noexcept { return replicas_.size(); }
  /// Micro-batches of one step, per replica.
  [[nodiscard]] std::uint64_t micro_batches() const noexcept { return layout_.counts.micro_batches(); }
  /// Workers (timeline lanes) of one replica, as the schedule says.
  [[nodiscard]] std::size_t workers_per_replica() const noexcept { return workers_; }
  [[nodiscard]] std::size_t num_workers() const noexcept { return workers_ * replicas_.size(); }

  // --- for a schedule's jobs, during a step -----------------------------------------------------
  /// The recorder of worker w of replica r: its simulated clock and timeline events.
  [[nodiscard]] recorder& recorder_of(std::size_t r, std::size_t w) noexcept { return recorders_[r * workers_ + w]; }

  /// Streams the micro-batch's inputs (timeline only: stages read the host arrays in place) and
  /// writes the anchors nothing computes.
  void start_micro_batch(std::size_t r, std::uint64_t m, std::uint32_t ipu, recorder& rec) {
    for (const auto& in : layout_.inputs) {
      timeline_event e;
      e.kind = step_kind::host_to_device;
      e.ipu = ipu;
      e.micro_batch = m;
      e.tensor = in.tensor;
      const auto now = clock::now();
      rec.add(e, plan_.h2d_cycles[in.tensor], now, now);
    }
    const auto& g = exe_->model;
    for (auto a : plan_.host_anchors) {
      const auto t = layout_.anchors[a].tensor;
      const auto& node = g.tensor(t);
      const std::byte* src = node.kind == tensor_kind::input ? input_slice(t, r, m) : node.data.data();
      write_anchor(a, r, m, src, ipu, rec);
    }
  }

  /// The bytes of graph input `t` for micro-batch m of replica r, or nullptr when `t` is not one.
  [[nodiscard]] const std::byte* input(tensor_id t, std::size_t r, std::uint64_t m) const {
    return arrays_->input[t] ? input_slice(t, r, m) : nullptr;
  }

  /// The tensors stage s outputs, in the order run_stage returns them.
  [[nodiscard]] const std::vector<tensor_id>& stage_outputs(std::uint32_t s) const noexcept { return stage_output_ids_[s]; }

  /// Runs stage `s` for micro-batch `m`; `find(tensor_id)` gives each input's bytes. Writes the
  /// stage's anchors and returns its outputs (in stage_outputs(s) order).
  template <class Find>
  std::vector<host_tensor> run_stage(std::size_t r, std::uint32_t s, std::uint64_t m, recorder& rec, Find&& find) {
    const auto& g = exe_->model;
    auto& runner = *replicas_[r]->stages[s];
    std::vector<const_tensor_view> views;
    views.reserve(stage_input_ids_[s].size());
    for (auto t : stage_input_ids_[s]) {
      const std::byte* p = find(t);
      if (!p && g.tensor(t).info.num_bytes() != 0)
        throw error(error_category::internal, "'" + g.tensor(t).name + "' has no value when " + detail::exec::stage_name(*exe_, s) + " runs",
                    "executor");
      views.emplace_back(g.tensor(t).info, p);
    }
    const auto start = rec.cycles;
    runner.rec = &rec;
    runner.micro_batch = m;
    const auto begin = clock::now();
    auto outs = runner.device->run(std::span<const const_tensor_view>(views));
    const auto end = clock::now();
    const auto& st = plan_.stages[s];
    // The stage's own prediction, which may include more than its ops (exchange, syncs).
    rec.cycles = start;
    if (options_.timeline != timeline_detail::ops) {
      timeline_event e;
      e.kind = step_kind::compute;
      e.ipu = st.ipu;
      e.stage = s;
      e.phase = st.phase;
      e.micro_batch = m;
      rec.add(e, st.cycles, begin, end);
    } else {
      rec.cycles = start + st.cycles;
    }
    for (auto a : st.anchors) {
      const auto t = layout_.anchors[a].tensor;
      const auto& outputs = stage_output_ids_[s];
      const auto i = static_cast<std::size_t>(std::find(outputs.begin(), outputs.end(), t) - outputs.begin());
      write_anchor(a, r, m, outs[i].data(), st.ipu, rec);
    }
    return outs;
  }

  /// Runs one item (a stage, a transfer or a timeline note) with replica r's stores: the values of
  /// the micro-batch, the IPUs' streamed tensors, Streaming Memory. Items of one replica that
  /// share a store must not run at the same time.
  void run_item(std::size_t r, const run_item& it, std::uint64_t m, recorder& rec) {
    auto& rs = *replicas_[r];
    if (it.kind == item_kind::transfer) return transfer(r, it.what, m, rec);
    if (it.kind == item_kind::note) return note(it.what, m, rec);
    const auto s = it.stage;
    const auto ipu = plan_.stages[s].ipu;
    auto outs = run_stage(r, s, m, rec, [&](tensor_id t) -> const std::byte* {
      if (plan_.streamed[t]) return rs.chip[ipu][t] ? rs.chip[ipu][t]->data() : nullptr;
      if (arrays_->input[t]) return input_slice(t, r, m);
      return rs.values[t];
    });
    const auto& outputs = stage_output_ids_[s];
    for (std::size_t i = 0; i < outputs.size(); ++i) {
      const auto t = outputs[i];
      if (plan_.streamed[t]) rs.chip[ipu][t] = std::make_unique<host_tensor>(std::move(outs[i]));
      else rs.values[t] = outs[i].data();
    }
    rs.stage_outputs[s] = std::move(outs);  // keeps `values` valid until the stage runs again
  }

  /// Records step `s` (a copy, a sync) on the timeline without moving data.
  void note(const step& s, std::uint64_t m, recorder& rec) {
    timeline_event e;
    e.kind = s.kind;
    e.ipu = s.ipu;
    e.peer = s.peer;
    e.micro_batch = m;
    e.tensor = s.tensor;
    const auto now = clock::now();
    rec.add(e, s.cycles, now, now);
  }

  /// From a job's catch block: keeps the exception of worker `index` (replica x workers + worker)
  /// and stops the step.
  void fail(std::size_t index) {
    errors_[index] = std::current_exception();
    abort_step();
  }
  /// Whether the step is being stopped; jobs return as soon as they see it.
  [[nodiscard]] bool aborted() const noexcept { return abort_.load(std::memory_order_acquire); }
  /// Wakes the jobs waiting in await_progress (call after anything they may wait for).
  void notify_progress() { progress_.notify_all(); }
  /// Sleeps until `ready()` holds, re-checked after every notify_progress and when the step aborts.
  template <class Ready>
  void await_progress(Ready&& ready) {
    progress_.await([&] { return aborted() || ready(); });
  }

 protected:
  engine_base(std::shared_ptr<const executable> exe, const data_flow& flow, const executor_options& options)
      : exe_(std::move(exe)),
        options_(options),
        layout_(step_layout::of(exe_->model, flow,
                                step_counts{exe_->batches_per_step, exe_->gradient_accumulation, exe_->replication_factor},
                                exe_->input_group_size)),
        plan_(detail::exec::analyse(*exe_, layout_)) {
    check_no_strings(exe_->model, "the executor");
    for (const auto& a : layout_.anchors)
      if (a.type.id() == anchor_return_type_id::sum && a.info.type == data_type::BOOL)
        throw error(error_category::usage, "anchor '" + a.name + "' is BOOL and cannot be returned as a Sum",
                    "data flow", "return it with All, Final or EveryN");
    if (options_.threads_per_worker == 0)
      throw error(error_category::usage, "threads_per_worker is 0", "executor options", "use at least 1");
    build();
  }
  ~engine_base() = default;

  /// Runs one step: sets up the arrays and the workers' recorders, has `add_jobs(jobs)` add the
  /// schedule's jobs, runs each on its own thread (a single job on the caller's), then merges the
  /// timeline and rethrows the first worker's error.
  template <class AddJobs>
  void run_step(const step_io& io, AddJobs&& add_jobs) {
    std::lock_guard lock(run_mutex_);
    layout_.check(io);
    step_arrays arrays;
    const auto& g = exe_->model;
    arrays.input.assign(g.num_tensors(), nullptr);
    for (const auto& s : layout_.inputs)
      if (const auto* v = io.input(s.name)) arrays.input[s.tensor] = v->data();  // present: checked above
    for (const auto& a : layout_.anchors) {
      const auto* v = io.output(a.name);
      arrays.anchor.push_back(v ? v->data() : nullptr);
    }
    arrays_ = &arrays;

    const auto workers = workers_;
    const auto replicas = replicas_.size();
    recorders_.assign(workers * replicas, recorder{});
    const auto t0 = clock::now();
    for (std::size_t r = 0; r < replicas; ++r)
      for (std::size_t w = 0; w < workers; ++w) {
        auto& rec = recorders_[r * workers + w];
        rec.replica = static_cast<std::uint32_t>(r);
        rec.worker = static_cast<std::uint32_t>(w);
        rec.t0 = t0;
        rec.detail = options_.timeline;
      }
    for (std::size_t r = 0; r < replicas; ++r) load(r);

    errors_.assign(workers * replicas, nullptr);
    abort_.store(false);
    exec::job_list jobs;  // holds the step's shared state (pipeline lanes, barriers) until it ends
    add_jobs(jobs);
    if (jobs.size() == 1) {
      jobs[0]();
    } else {
      std::vector<std::thread> threads;
      threads.reserve(jobs.size());
      try {
        for (auto& j : jobs) threads.emplace_back(j);
      } catch (...) {
        abort_step();
        for (auto& t : threads) t.join();
        arrays_ = nullptr;
        throw error(error_category::runtime, "could not start " + std::to_string(jobs.size()) + " worker threads",
                    "executor", "use fewer replicas or stages, or set executor_options::pipeline_threads");
      }
      for (auto& t : threads) t.join();
    }
    arrays_ = nullptr;
    jobs.clear();
    timeline_ = timeline(exe_->device.arch.clock_hz);
    for (const auto& rec : recorders_) timeline_.append(rec.events);
    timeline_.sort();
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

  std::size_t workers_ = 1;  // set by engine<Schedule> from its schedule

 private:
  using replica_state = detail::exec::replica_state;
  using stage_runner = detail::exec::stage_runner;
  using step_arrays = detail::exec::step_arrays;

  void build() {
    const auto& exe = *exe_;
    const auto& g = exe.model;
    const auto nt = g.num_tensors();
    const std::shared_ptr<const void> owner = exe_;
    std::vector<stage_graph> graphs;
    for (std::uint32_t s = 0; s < exe.stages.size(); ++s)
      graphs.push_back(extract_stage(g, exe.stages[s].ops, plan_.stages[s].outputs, plan_.stages[s].weights_as_inputs,
                                     owner, g.name() + "/stage" + std::to_string(exe.stages[s].id)));
    stage_input_ids_.clear();
    stage_output_ids_.clear();
    stage_ops_.clear();
    for (auto& sg : graphs) {
      stage_input_ids_.push_back(sg.inputs);
      stage_output_ids_.push_back(sg.outputs);
      stage_ops_.push_back(sg.ops);
    }
    const bool any_streamed = std::find(plan_.streamed.begin(), plan_.streamed.end(), true) != plan_.streamed.end();
    for (std::uint32_t r = 0; r < exe.replication_factor; ++r) {
      auto rs = std::make_unique<replica_state>();
      for (std::uint32_t s = 0; s < exe.stages.size(); ++s) {
        auto runner = std::make_unique<stage_runner>();
        cpu::device_options o;
        o.threads = options_.threads_per_worker;
        o.registry = options_.registry;
        o.plan = options_.memory;
        o.random_seed = options_.random_seed;
        if (options_.timeline == timeline_detail::ops) o.on_op = observer(*runner, s);
        runner->device = std::make_unique<cpu::device>(graphs[s].model, std::move(o));
        rs->stages.push_back(std::move(runner));
      }
      rs->values.assign(nt, nullptr);
      rs->stage_outputs.resize(exe.stages.size());
      if (any_streamed) {
        rs->chip.resize(std::max<std::uint32_t>(exe.device.num_ipus, 1));
        for (auto& c : rs->chip) c.resize(nt);
        rs->remote.resize(nt);
      }
      replicas_.push_back(std::move(rs));
    }
  }

  cpu::op_observer observer(stage_runner& runner, std::uint32_t s) {
    const auto* ops = &stage_ops_[s];
    return [this, &runner, s, ops](op_id local, clock::time_point begin, clock::time_point end) {
      const auto op = (*ops)[local];
      timeline_event e;
      e.kind = step_kind::compute;
      e.ipu = exe_->stages[s].ipu;
      e.stage = s;
      e.phase = exe_->stages[s].phase;
      e.micro_batch = runner.micro_batch;
      e.op = op;
      runner.rec->add(e, plan_.op_cycles[op], begin, end);
    };
  }

  [[nodiscard]] const std::byte* input_slice(tensor_id t, std::size_t r, std::uint64_t m) const {
    const auto& info = exe_->model.tensor(t).info;
    // Replicas of an input group (consecutive replicas) read the same slice.
    const auto index = m * layout_.input_replicas() + r / layout_.input_group_size;
    return arrays_->input[t] + index * info.num_bytes();
  }

  void write_anchor(std::size_t a, std::size_t r, std::uint64_t m, const std::byte* src, std::uint32_t ipu,
                    recorder& rec) {
    const auto& s = layout_.anchors[a];
    const auto& counts = layout_.counts;
    const auto f = s.type.fetch_of(m, counts);
    if (!f) return;
    const auto begin = clock::now();
    const auto bytes = s.info.num_bytes();
    std::byte* dst = arrays_->anchor[a] + (*f * replicas_.size() + r) * bytes;
    const bool sum = s.type.id() == anchor_return_type_id::sum;
    if (sum && m > 0) detail::exec::accumulate(dst, src, s.info);
    else if (bytes) std::memcpy(dst, src, bytes);
    if (sum && m + 1 != counts.micro_batches()) return;  // a Sum is streamed once, at the end
    timeline_event e;
    e.kind = step_kind::device_to_host;
    e.ipu = ipu;
    e.micro_batch = m;
    e.tensor = s.tensor;
    rec.add(e, plan_.d2h_cycles[s.tensor], begin, clock::now());
  }


  void transfer(std::size_t r, const step& s, std::uint64_t m, recorder& rec) {
    auto& rs = *replicas_[r];
    const auto& g = exe_->model;
    const auto begin = clock::now();
    // Copies into the destination's buffer when it has one (a weight loaded every micro-batch
    // reuses its on-chip buffer), else into a new one.
    auto copy_into = [](std::unique_ptr<host_tensor>& dst, const std::byte* src, const tensor_info& info) {
      if (!dst || dst->info() != info) dst = std::make_unique<host_tensor>(info);
      if (info.num_bytes()) std::memcpy(dst->data(), src, info.num_bytes());
    };
    const auto& info = g.tensor(s.tensor).info;
    switch (s.kind) {
      case step_kind::from_remote:
        // A weight never stored back is still as loaded: the model's bytes.
        copy_into(rs.chip[s.ipu][s.tensor], rs.remote[s.tensor] ? rs.remote[s.tensor]->data() : g.tensor(s.tensor).data.data(),
                  info);
        break;
      case step_kind::to_remote:
        rs.remote[s.tensor] = std::move(rs.chip[s.ipu][s.tensor]);  // off chip: the IPU's copy is gone
        break;
      case step_kind::ipu_copy:
        if (s.peer != s.ipu) copy_into(rs.chip[s.peer][s.tensor], rs.chip[s.ipu][s.tensor]->data(), info);
        break;
      default: break;
    }
    timeline_event e;
    e.kind = s.kind;
    e.ipu = s.ipu;
    e.peer = s.peer;
    e.micro_batch = m;
    e.tensor = s.tensor;
    rec.add(e, s.cycles, begin, clock::now());
  }

  void load(std::size_t r) {
    auto& rs = *replicas_[r];
    if (rs.loaded) return;
    recorder scratch;
    scratch.detail = timeline_detail::none;
    for (const auto& it : plan_.load_items) transfer(r, it.what, 0, scratch);
    rs.loaded = true;
  }

  /// Stops every worker of the step, waking the jobs that sleep in await_progress (the event count
  /// orders this store before their re-check).
  void abort_step() {
    abort_.store(true, std::memory_order_seq_cst);
    progress_.notify_all();
  }

  std::shared_ptr<const executable> exe_;
  executor_options options_;
  step_layout layout_;
  run_plan plan_;
  std::vector<std::vector<tensor_id>> stage_input_ids_, stage_output_ids_;
  std::vector<std::vector<op_id>> stage_ops_;
  std::vector<std::unique_ptr<replica_state>> replicas_;
  std::vector<recorder> recorders_;
  std::vector<std::exception_ptr> errors_;
  std::atomic<bool> abort_{false};
  event_count progress_;  // signalled by notify_progress and abort_step
  const step_arrays* arrays_ = nullptr;
  timeline timeline_;
  std::mutex run_mutex_;
};

/// The engine for one schedule type: the schedule's step loop, instantiated at compile time.
/// Throws ipu::error (usage) for an executable of another schedule kind, and what engine_base
/// throws for a plan that cannot run.
template <class Schedule>
class engine final : public engine_base {
  static_assert(ipu::detail::check_schedule<Schedule>(), "ipu: engine<Schedule> needs an ipu::schedule");

 public:
  using schedule_type = Schedule;

  engine(std::shared_ptr<const executable> exe, const data_flow& flow, const executor_options& options = {})
      : engine_base(checked(std::move(exe)), flow, options) {
    workers_ = std::max<std::size_t>(schedule_.workers_per_replica(*this), 1);
  }

  /// Runs one step: every micro-batch of every replica through the schedule. Throws ipu::error
  /// for arrays of the wrong type or element count, and what a failing kernel throws.
  void run(const step_io& io) {
    run_step(io, [this](job_list& jobs) { schedule_.add_jobs(*this, jobs); });
  }

  /// Host threads one step runs on: the schedule's count, or one per worker.
  [[nodiscard]] std::size_t num_threads() const {
    if constexpr (requires(const Schedule& s, const engine_base& e) { { s.num_threads(e) } -> std::convertible_to<std::size_t>; })
      return schedule_.num_threads(*this);
    else
      return num_workers();
  }

 private:
  static std::shared_ptr<const executable> checked(std::shared_ptr<const executable> exe) {
    if (!exe) throw error(error_category::usage, "no executable", "engine", "pass a planned or loaded executable");
    if (exe->schedule != Schedule::kind)
      throw error(error_category::usage,
                  "the executable's schedule is " + std::string(to_string(exe->schedule)) + ", not " +
                      std::string(to_string(Schedule::kind)) + " as schedule '" + std::string(Schedule::name) + "' runs",
                  "engine for graph '" + exe->model.name() + "'",
                  "run it with an engine of a " + std::string(to_string(exe->schedule)) +
                      " schedule, or with ipu::host_engine, which picks the schedule from the executable");
    return exe;
  }

  Schedule schedule_{};
};

}  // namespace exec

// --- the built-in schedules' step loops ------------------------------------------------------------

/// One job per replica: each micro-batch's items in order.
inline void sequential_schedule::add_jobs(exec::engine_base& e, exec::job_list& jobs) {
  for (std::size_t r = 0; r < e.replicas(); ++r)
    jobs.emplace_back([&e, r] {
      auto& rec = e.recorder_of(r, 0);
      try {
        for (std::uint64_t m = 0; m < e.micro_batches(); ++m) {
          if (e.aborted()) return;
          e.start_micro_batch(r, m, 0, rec);
          for (const auto& it : e.steps().items) e.run_item(r, it, m, rec);
        }
      } catch (...) {
        e.fail(r);
      }
    });
}

namespace detail::exec {

/// A micro-batch travelling down a pipeline.
struct packet {
  std::uint64_t micro_batch = 0;
  std::uint64_t ready = 0;                      // simulated cycle its data is ready
  std::vector<const std::byte*> at;             // by tensor id
  std::vector<std::vector<host_tensor>> owned;  // the stage outputs `at` points into
};
inline constexpr std::size_t ring_capacity = 16;
using packet_ring = ring_buffer<std::unique_ptr<packet>, ring_capacity>;

/// One stage of one replica in a pipelined step. Only the thread holding `claimed` runs the stage,
/// pops its input ring (the previous lane's `out`) and pushes `out`.
struct pipeline_lane {
  alignas(ipu::detail::false_sharing_range) std::atomic<bool> claimed{false};
  std::atomic<std::uint64_t> done{0};  // micro-batches finished; stored by the claimant, read by all
  packet_ring out;                     // to the next stage; the last stage's: used packets to the first
};

/// One pipelined step: its lanes by replica then stage, built before any thread starts and
/// dropped after all have joined, so threads read the vectors without a lock.
struct pipeline_step {
  ipu::exec::engine_base& e;
  std::vector<std::vector<std::unique_ptr<pipeline_lane>>> lanes;
  std::atomic<std::uint64_t> remaining{0};  // micro-batches of stages still to run

  explicit pipeline_step(ipu::exec::engine_base& engine) : e(engine) {
    const auto stages = e.workers_per_replica();
    for (std::size_t r = 0; r < e.replicas(); ++r) {
      lanes.emplace_back();
      for (std::size_t k = 0; k < stages; ++k) lanes[r].push_back(std::make_unique<pipeline_lane>());
    }
    remaining.store(e.num_workers() * e.micro_batches());
  }

  [[nodiscard]] bool step_over() const noexcept { return remaining.load(std::memory_order_acquire) == 0 || e.aborted(); }

  /// Whether stage k of replica r looks runnable: unclaimed, not done, a packet in, room out. A
  /// hint (the claimant checks again), but never false while the stage can run and nobody holds
  /// it: a ring with a packet never looks empty, and a ring whose consumer has unpublished pops
  /// still holds packets, so the most downstream stage with input looks runnable.
  [[nodiscard]] bool looks_runnable(std::size_t r, std::size_t k) const noexcept {
    const auto& lr = lanes[r];
    const auto& lane = *lr[k];
    if (lane.claimed.load(std::memory_order_relaxed)) return false;
    if (lane.done.load(std::memory_order_relaxed) == e.micro_batches()) return false;
    if (k > 0 && lr[k - 1]->out.empty()) return false;
    return k + 1 == lr.size() || lane.out.size() < ring_capacity;
  }
  [[nodiscard]] bool any_runnable() const noexcept {
    for (std::size_t r = 0; r < lanes.size(); ++r)
      for (std::size_t k = 0; k < lanes[r].size(); ++k)
        if (looks_runnable(r, k)) return true;
    return false;
  }

  /// One pool thread: runs micro-batches of whichever stages can run until the step is over.
  void thread(std::size_t t) {
    while (!step_over()) {
      if (run_one(t)) continue;
      bool found = false;
      for (unsigned i = 0; i < e.options().spins_before_sleep && !found; ++i) {
        ipu::detail::cpu_relax();
        found = any_runnable() || step_over();
      }
      if (!found) e.await_progress([this] { return any_runnable() || step_over(); });
    }
  }

  /// Claims and runs one micro-batch of a runnable stage, the most downstream first (thread t
  /// starts with replica t); false when none could run.
  bool run_one(std::size_t t) {
    const auto replicas = lanes.size();
    for (std::size_t i = 0; i < replicas; ++i) {
      const auto r = (t + i) % replicas;
      for (std::size_t k = lanes[r].size(); k-- > 0;) {
        if (e.aborted()) return false;
        if (!looks_runnable(r, k)) continue;
        auto& lane = *lanes[r][k];
        if (lane.claimed.exchange(true, std::memory_order_acquire)) continue;
        bool ran = false;
        try {
          ran = run_claimed(r, k);
        } catch (...) {
          e.fail(r * lanes[r].size() + k);  // wakes every thread; the step is over
          lane.claimed.store(false, std::memory_order_release);
          return false;
        }
        lane.claimed.store(false, std::memory_order_release);
        if (ran && remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
          e.notify_progress();  // the step is over
          return true;
        }
        // Also after a claim that ran nothing: a thread that saw the stage claimed may have gone
        // to sleep since, and the stage may have become runnable meanwhile.
        e.notify_progress();
        if (ran) return true;
      }
    }
    return false;
  }

  /// Runs the next micro-batch of stage k of replica r, whose lane this thread has claimed; false
  /// when it cannot run now (no packet in, no room out, or done).
  bool run_claimed(std::size_t r, std::size_t k) {
    auto& lr = lanes[r];
    auto& lane = *lr[k];
    const auto m = lane.done.load(std::memory_order_relaxed);
    if (m == e.micro_batches()) return false;
    const bool last = k + 1 == lr.size();
    if (!last && !lane.out.has_room()) return false;  // room only grows until we push
    const auto& plan = e.steps();
    const auto s = plan.pipeline[k];
    const auto& st = plan.stages[s];
    auto& rec = e.recorder_of(r, k);
    std::unique_ptr<packet> p;
    if (k == 0) {
      if (auto used = lr.back()->out.try_pop()) p = std::move(*used);
      else p = std::make_unique<packet>();
      p->micro_batch = m;
      p->ready = 0;
      p->owned.clear();
      p->at.assign(e.plan().model.num_tensors(), nullptr);
      e.start_micro_batch(r, m, st.ipu, rec);
    } else {
      if (!lr[k - 1]->out.try_pop(p)) return false;
      rec.cycles = std::max(rec.cycles, p->ready);  // wait for the data
    }
    auto outs = e.run_stage(r, s, m, rec, [&](tensor_id t) -> const std::byte* {
      const std::byte* in = e.input(t, r, m);
      return in ? in : p->at[t];
    });
    const auto& outputs = e.stage_outputs(s);
    for (std::size_t i = 0; i < outputs.size(); ++i) p->at[outputs[i]] = outs[i].data();
    p->owned.push_back(std::move(outs));
    for (const auto& c : st.copies) e.note(c, m, rec);
    p->ready = rec.cycles;
    // Cannot fail unless last: the room checked above. The last stage's ring recycles packets to
    // the first; when it is full the packet is dropped.
    (void)lane.out.try_push(std::move(p));
    lane.done.store(m + 1, std::memory_order_relaxed);
    return true;
  }
};

/// Ends each phased round: IPUs sync, so every worker's simulated clock moves to the latest.
struct clock_sync {
  ipu::exec::engine_base* e;
  std::size_t replica;
  void operator()() noexcept {
    const auto workers = e->workers_per_replica();
    std::uint64_t latest = 0;
    for (std::size_t w = 0; w < workers; ++w) latest = std::max(latest, e->recorder_of(replica, w).cycles);
    for (std::size_t w = 0; w < workers; ++w) e->recorder_of(replica, w).cycles = latest;
  }
};
struct phase_sync {
  phase_sync(ipu::exec::engine_base& e, std::size_t replica)
      : barrier(static_cast<std::ptrdiff_t>(e.workers_per_replica()), clock_sync{&e, replica}) {}
  std::barrier<clock_sync> barrier;
};

}  // namespace detail::exec

inline std::size_t pipelined_schedule::workers_per_replica(const exec::engine_base& e) const {
  return std::max<std::size_t>(e.steps().pipeline.size(), 1);
}

inline std::size_t pipelined_schedule::num_threads(const exec::engine_base& e) const {
  if (e.steps().pipeline.empty()) return e.num_workers();
  const auto& o = e.options();
  if (o.pipeline_threads) return std::min(o.pipeline_threads, e.num_workers());
  const std::size_t cores = std::max(1u, std::thread::hardware_concurrency());
  return std::clamp<std::size_t>(cores / o.threads_per_worker, 1, e.num_workers());
}

/// A pool of num_threads() jobs sharing the step's lanes; a model without ops has no chain, so one
/// job per replica writes the anchors on inputs and weights.
inline void pipelined_schedule::add_jobs(exec::engine_base& e, exec::job_list& jobs) {
  if (e.steps().pipeline.empty()) {
    for (std::size_t r = 0; r < e.replicas(); ++r)
      jobs.emplace_back([&e, r] {
        try {
          for (std::uint64_t m = 0; m < e.micro_batches(); ++m) e.start_micro_batch(r, m, 0, e.recorder_of(r, 0));
        } catch (...) {
          e.fail(r);
        }
      });
    return;
  }
  auto step = std::make_shared<detail::exec::pipeline_step>(e);
  const auto threads = num_threads(e);
  for (std::size_t t = 0; t < threads; ++t) jobs.emplace_back([step, t] { step->thread(t); });
}

inline std::size_t phased_schedule::workers_per_replica(const exec::engine_base& e) const {
  return std::max<std::size_t>(e.steps().workers.size(), 1);
}

/// One job per IPU of the phases per replica; each round's items, then a barrier.
inline void phased_schedule::add_jobs(exec::engine_base& e, exec::job_list& jobs) {
  const auto workers = e.workers_per_replica();
  for (std::size_t r = 0; r < e.replicas(); ++r) {
    auto sync = std::make_shared<detail::exec::phase_sync>(e, r);
    for (std::size_t w = 0; w < workers; ++w)
      jobs.emplace_back([&e, r, w, workers, sync] {
        const auto index = r * workers + w;
        auto& rec = e.recorder_of(r, w);
        const auto& plan = e.steps();
        const auto ipu = plan.workers.empty() ? 0u : plan.workers[w];
        try {
          for (std::uint64_t m = 0; m < e.micro_batches(); ++m) {
            if (w == 0) e.start_micro_batch(r, m, ipu, rec);
            for (const auto& round : plan.rounds) {
              for (auto i : round[w]) e.run_item(r, plan.items[i], m, rec);
              sync->barrier.arrive_and_wait();
              if (e.aborted()) {
                sync->barrier.arrive_and_drop();
                return;
              }
            }
          }
        } catch (...) {
          e.fail(index);
          sync->barrier.arrive_and_drop();  // the others finish their round and stop
        }
      });
  }
}

// --- a plan loaded at run time ---------------------------------------------------------------------
namespace detail::exec {
template <class Schedules>
struct engines_for;
template <class... S>
struct engines_for<std::variant<S...>> {
  using type = std::variant<std::unique_ptr<ipu::exec::engine<S>>...>;
};
}  // namespace detail::exec

/// The host engine for an executable whose schedule is known only at run time (loaded from a
/// PopEF file, planned from options): picks the engine of the executable's schedule once, when
/// built (any_schedule), and dispatches to it once per run.
///
///   ipu::host_engine e(std::make_shared<const ipu::executable>(exe), flow);
///   auto anchors = e.layout().make_anchor_arrays();
///   ipu::step_io io({{"x", x.view()}}, anchors);
///   e.run(io);  // anchors: what ipu::cpu::device computes, micro-batch by micro-batch
///
/// Throws ipu::error (schedule) for a schedule kind this build does not know, and what
/// exec::engine_base throws for a plan that cannot run (naming the stage and tensor at fault).
class host_engine {
 public:
  using engines = detail::exec::engines_for<any_schedule>::type;

  host_engine(std::shared_ptr<const executable> exe, const data_flow& flow, const executor_options& options = {})
      : engine_(make(std::move(exe), flow, options)),
        base_(std::visit([](auto& e) -> exec::engine_base* { return e.get(); }, engine_)) {}

  /// Runs one step (see exec::engine::run).
  void run(const step_io& io) {
    std::visit([&](auto& e) { e->run(io); }, engine_);
  }

  [[nodiscard]] const executable& plan() const noexcept { return base_->plan(); }
  [[nodiscard]] const step_layout& layout() const noexcept { return base_->layout(); }
  [[nodiscard]] const timeline& last_timeline() const noexcept { return base_->last_timeline(); }
  [[nodiscard]] std::size_t num_workers() const noexcept { return base_->num_workers(); }
  [[nodiscard]] std::size_t num_threads() const {
    return std::visit([](const auto& e) { return e->num_threads(); }, engine_);
  }
  /// The schedule the executable runs with (the variant index is its schedule_kind).
  [[nodiscard]] schedule_kind kind() const noexcept { return static_cast<schedule_kind>(engine_.index()); }
  /// The engine, for code that needs more than running a step (timelines, the run plan).
  [[nodiscard]] const exec::engine_base& base() const noexcept { return *base_; }

 private:
  static engines make(std::shared_ptr<const executable> exe, const data_flow& flow, const executor_options& options) {
    if (!exe) throw error(error_category::usage, "no executable", "host engine", "pass a planned or loaded executable");
    return std::visit(
        [&](auto s) -> engines { return std::make_unique<exec::engine<decltype(s)>>(std::move(exe), flow, options); },
        schedule_for(exe->schedule));
  }

  engines engine_;
  exec::engine_base* base_;
};

}  // namespace ipu
