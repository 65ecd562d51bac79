#pragma once
// Model Runtime's ModelRunner: serve a compiled model to many client threads.
//
//   ipu::runtime::model_runner runner("lenet5.popef");
//   auto out = runner.execute({{"input", x.view()}});              // blocks; out["output"]
//   auto futures = runner.execute_async({{"input", x.view()}});    // keep x alive until they resolve
//   ipu::host_tensor y = futures.at("output").get();
//
// A request is one micro-batch (one value per graph input). Clients put POINTERS to their input
// memory and to freshly allocated output tensors on the queue manager's rings (zero copy), all of
// a request's entries at once under one client lock, so position k of every queue belongs to the
// same request. One session worker takes a step's worth of requests (batches per step x
// replicas), gathers them into the step arrays ipu::host_engine reads, runs the executable's
// schedule (sharded, pipelined, phased, replicated) and scatters each micro-batch's anchors into
// its request's output memory before completing it. When fewer requests arrive within the input
// timeout, the step runs padded and the padding's results are dropped.
#include <chrono>
#include <cstring>
#include <exception>
#include <filesystem>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ipu/runtime/device_manager.hpp"
#include "ipu/runtime/device_wait.hpp"
#include "ipu/error.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "ipu/runtime/queue_manager.hpp"
#include "ipu/exec/data_flow.hpp"
#include "ipu/exec/engine.hpp"
#include "ipu/sched/executable.hpp"
#include "ipu/exec/step_io.hpp"
#include "ipu/exec/timeline.hpp"
#include "ipu/tensor.hpp"

namespace ipu::runtime {

struct model_runner_config {
  /// Reserve the executable's IPUs from the device manager (IPU_SYSTEM) for the runner's life,
  /// waiting as `device_wait` says. CPU executables reserve nothing.
  bool acquire_device = true;
  device_wait_config device_wait{};
  /// How long a partly filled step waits for more requests before it runs padded.
  std::chrono::nanoseconds input_timeout = std::chrono::milliseconds(2);
  /// How long a client waits for room in the queues before a recoverable error.
  std::chrono::nanoseconds enqueue_timeout = std::chrono::seconds(60);
  /// Queue depth = multiplier x requests per step (at most the rings' capacity, 64).
  std::size_t ring_buffer_size_multiplier = 2;
  /// Check every request's tensors (names, types, shapes) before queueing; the queues always
  /// check byte sizes.
  bool validate_io = true;
  /// Kernel threads of each engine worker.
  std::size_t threads_per_worker = 1;
  /// Keep a copy of each step's host timeline for last_timeline() (one copy per step; off: empty).
  bool keep_timeline = false;
};

/// Named tensors of one request (inputs) or one response (outputs).
using input_map = std::map<std::string, const_tensor_view, std::less<>>;
using output_map = std::map<std::string, host_tensor, std::less<>>;
using future_map = std::map<std::string, std::future<host_tensor>, std::less<>>;

class model_runner {
 public:
  /// Loads the PopEF file (weights memory-mapped) and starts the session worker.
  explicit model_runner(const std::filesystem::path& popef_file, model_runner_config config = {})
      : model_runner(popef::load(popef_file), std::move(config)) {}
  /// The file's random seed (popef::random_seed) seeds the model's random ops.
  explicit model_runner(const popef::compiled_model& model, model_runner_config config = {})
      : model_runner(model.plan, std::move(config),
                     popef::random_seed(model.metadata, "model runner").value_or(random_source::default_seed)) {}
  explicit model_runner(popef::compiled_model&& model, model_runner_config config = {})
      : model_runner(std::move(model.plan), std::move(config),
                     popef::random_seed(model.metadata, "model runner").value_or(random_source::default_seed)) {}
  /// Runs an executable planned in this process (see popef::compile or a strategy's plan()); its
  /// random ops draw from `random_seed`.
  explicit model_runner(executable exe, model_runner_config config = {},
                        std::uint64_t random_seed = random_source::default_seed)
      : config_(std::move(config)),
        engine_(make_engine(std::move(exe), config_, random_seed)),
        queues_(depth(*engine_, config_)) {
    const auto& l = engine_->layout();
    if (l.inputs.empty())
      throw error(error_category::usage, "the model has no inputs", where(), "a runner streams requests into inputs");
    slices_ = l.inputs.front().slices;
    for (const auto& a : l.anchors)
      if (a.slices != slices_)
        throw error(error_category::internal, "anchor '" + a.name + "' returns " + std::to_string(a.slices) +
                                                  " values per step for " + std::to_string(slices_) + " requests",
                    where());
    if (config_.acquire_device && engine_->plan().device.kind != device_kind::cpu) acquire();
    for (const auto& s : l.inputs) {
      queues_.add_input(s.name, s.info.num_bytes());
      staged_in_.emplace_back(l.input_info(s.name));
    }
    for (const auto& a : l.anchors) {
      queues_.add_output(a.name, a.info.num_bytes());
      staged_out_.emplace_back(l.anchor_info(a.name));
    }
    for (const auto& s : l.inputs) in_queues_.push_back(&queues_.input(s.name));
    for (const auto& a : l.anchors) out_queues_.push_back(&queues_.output(a.name));
    worker_ = std::thread([this] { serve(); });
  }

  model_runner(const model_runner&) = delete;
  model_runner& operator=(const model_runner&) = delete;

  /// Stops the worker; requests still queued fail with an ipu::error (runtime).
  ~model_runner() {
    stop_.store(true, std::memory_order_release);
    queues_.disconnect_all();
    worker_.join();
  }

  /// Runs one request and waits for its outputs.
  output_map execute(const input_map& inputs) {
    auto futures = execute_async(inputs);
    output_map out;
    for (auto& [name, f] : futures) out.emplace(name, f.get());
    return out;
  }

  /// Queues one request; a future per output. `inputs` must stay alive until every future is
  /// ready. Throws ipu::error for bad inputs (when validating: unknown, missing, wrong type or
  /// shape), ipu::recoverable_error when the queues stay full for the enqueue timeout (nothing was
  /// queued; retry), and ipu::error (runtime) once the runner is shutting down.
  future_map execute_async(const input_map& inputs) {
    const auto& l = engine_->layout();
    if (config_.validate_io) validate(inputs);
    std::vector<const_tensor_view> ordered;
    for (const auto& s : l.inputs) {
      auto it = inputs.find(s.name);
      if (it == inputs.end())
        throw error(error_category::usage, "no tensor for input '" + s.name + "'", where(), input_names());
      ordered.push_back(it->second);
    }
    future_map futures;
    std::vector<std::pair<std::shared_ptr<host_tensor>, std::shared_ptr<std::promise<host_tensor>>>> outs;
    for (const auto& a : l.anchors) {
      auto t = std::make_shared<host_tensor>(a.info);
      auto p = std::make_shared<std::promise<host_tensor>>();
      futures.emplace(a.name, p->get_future());
      outs.emplace_back(std::move(t), std::move(p));
    }
    for (std::size_t i = 0; i < ordered.size(); ++i) in_queues_[i]->check(ordered[i].data(), ordered[i].bytes().size());

    std::lock_guard lock(clients_);
    wait_for_room();
    // Every queue has room and this thread is the only producer: none of these pushes can fail.
    for (std::size_t i = 0; i < ordered.size(); ++i)
      push(*in_queues_[i], const_cast<std::byte*>(ordered[i].data()), ordered[i].bytes().size(), {});
    for (std::size_t k = 0; k < outs.size(); ++k) {
      auto [t, p] = outs[k];
      const std::string name = out_queues_[k]->name();
      push(*out_queues_[k], t->data(), t->bytes().size(), [t, p, name](entry_status s) {
        if (s == entry_status::done) {
          p->set_value(std::move(*t));
        } else if (s == entry_status::flushed) {
          p->set_exception(std::make_exception_ptr(error(error_category::runtime, "the request was flushed",
                                                         "output '" + name + "'", "submit it again")));
        } else if (s == entry_status::disconnected) {
          p->set_exception(std::make_exception_ptr(error(error_category::runtime,
                                                         "the runner shut down before the request ran",
                                                         "output '" + name + "'", "keep the runner alive")));
        } else {
          p->set_exception(failure_);
        }
      });
    }
    return futures;
  }

  /// Drops every queued request; their futures fail with an ipu::error (runtime).
  std::size_t flush() {
    std::lock_guard lock(clients_);
    return queues_.flush_all();
  }

  [[nodiscard]] const executable& plan() const noexcept { return engine_->plan(); }
  [[nodiscard]] const step_layout& layout() const noexcept { return engine_->layout(); }
  /// Requests per step: batches per step x replicas.
  [[nodiscard]] std::uint64_t requests_per_step() const noexcept { return slices_; }
  /// Steps run so far, and requests answered (padding excluded).
  [[nodiscard]] std::uint64_t steps_run() const noexcept { return steps_.load(std::memory_order_acquire); }
  [[nodiscard]] std::uint64_t requests_served() const noexcept { return served_.load(std::memory_order_acquire); }
  [[nodiscard]] const model_runner_config& config() const noexcept { return config_; }
  /// What the last step did on the host's threads (one lane per stage, phased IPU or replica), when
  /// the config keeps timelines; empty otherwise or before the first step. A copy: steps go on.
  [[nodiscard]] timeline last_timeline() const {
    std::lock_guard lock(timeline_mutex_);
    return timeline_;
  }
  /// The reserved device (invalid for CPU executables or without acquire_device).
  [[nodiscard]] const device_handle& device() const noexcept { return device_; }

 private:
  using queue_type = queue_manager::queue_type;

  static std::unique_ptr<host_engine> make_engine(executable exe, const model_runner_config& c, std::uint64_t seed) {
    std::vector<std::string> names;
    for (auto t : exe.model.outputs()) names.push_back(exe.model.tensor(t).name);
    const data_flow flow(exe.batches_per_step, names, anchor_return_type::all());
    executor_options o;
    o.threads_per_worker = c.threads_per_worker;
    o.random_seed = seed;
    return std::make_unique<host_engine>(std::make_shared<const executable>(std::move(exe)), flow, o);
  }
  static std::size_t depth(const host_engine& e, const model_runner_config& c) {
    if (c.ring_buffer_size_multiplier == 0)
      throw error(error_category::usage, "ring_buffer_size_multiplier is 0", "model runner config", "use at least 1");
    const auto per_step = e.layout().inputs.empty() ? 1 : e.layout().inputs.front().slices;
    if (per_step > queue_manager::queue_type::depth_limit)
      throw error(error_category::usage,
                  "a step takes " + std::to_string(per_step) + " requests, more than the queues' " +
                      std::to_string(queue_manager::queue_type::depth_limit) + " slots",
                  "model runner", "compile with fewer batches per step or replicas");
    return static_cast<std::size_t>(per_step) * c.ring_buffer_size_multiplier;
  }

  [[nodiscard]] std::string where() const {
    return "model runner for '" + (engine_ ? engine_->plan().model.name() : std::string()) + "'";
  }
  [[nodiscard]] std::string input_names() const {
    std::string s;
    for (const auto& i : engine_->layout().inputs) s += (s.empty() ? "" : ", ") + i.name + " " + to_string(i.info);
    return "the inputs are: " + s;
  }

  void acquire() {
    const auto& d = engine_->plan().device;
    device_manager manager;
    acquire_options o;
    o.wait = config_.device_wait;
    device_ = manager.acquire(d.num_ipus, o);
    if (device_.arch().ipu_version != d.arch.ipu_version)
      throw error(error_category::device,
                  "the executable is for " + std::string(d.arch.ipu_version) + " but the acquired device is " +
                      std::string(device_.arch().ipu_version),
                  where(), "run it on a system of that IPU version (IPU_SYSTEM) or compile it for this one");
  }

  void validate(const input_map& inputs) const {
    const auto& l = engine_->layout();
    for (const auto& [name, v] : inputs) {
      const auto* s = l.find_input(name);
      if (!s) throw error(error_category::usage, "'" + name + "' is not an input of the model", where(), input_names());
      if (v.info() != s->info)
        throw error(error_category::shape,
                    "input '" + name + "' is " + to_string(v.info()) + " but the model takes " + to_string(s->info),
                    where(), "pass one micro-batch of the input's type and shape");
      if (!v.data()) throw error(error_category::usage, "input '" + name + "' has no data", where());
    }
  }

  void wait_for_room() {
    const auto deadline = std::chrono::steady_clock::now() + config_.enqueue_timeout;
    detail::waiter w;
    auto full = [](const queue_type* q) { return q->size() >= q->depth(); };
    for (;;) {
      bool room = true;
      for (auto* q : in_queues_) room = room && !full(q);
      for (auto* q : out_queues_) room = room && !full(q);
      if (stop_.load(std::memory_order_acquire) || in_queues_.front()->disconnected())
        throw error(error_category::runtime, "the runner is shutting down", where(), "do not submit requests now");
      if (room) return;
      if (std::chrono::steady_clock::now() >= deadline)
        throw recoverable_error(recovery_action::ipu_reset, error_category::runtime,
                                "the request queues stayed full for the enqueue timeout", where(),
                                "the device is not keeping up or is stuck: retry later, or recreate the runner");
      w.pause();
    }
  }

  static void push(queue_type& q, void* data, std::size_t bytes, std::function<void(entry_status)> done) {
    if (!q.try_enqueue(data, bytes, std::move(done)))
      throw error(error_category::internal, "a queue checked to have room was full", "queue '" + q.name() + "'");
  }

  /// The session worker: one step at a time until shutdown.
  void serve() {
    std::vector<std::vector<queue_entry>> in(in_queues_.size()), out(out_queues_.size());
    try {
      while (!stop_.load(std::memory_order_acquire)) {
        for (auto& v : in) v.clear();
        for (auto& v : out) v.clear();
        if (!gather(in, out)) continue;
        run_step(in, out);
      }
    } catch (const error&) {
      // Disconnected while waiting: fail whatever this worker holds.
      for (auto& v : in)
        for (auto& e : v) e.complete(entry_status::disconnected);
      for (auto& v : out)
        for (auto& e : v) e.complete(entry_status::disconnected);
    }
  }

  /// Takes up to a step's worth of requests; false when none came.
  bool gather(std::vector<std::vector<queue_entry>>& in, std::vector<std::vector<queue_entry>>& out) {
    constexpr auto forever = std::chrono::hours(24);
    for (std::uint64_t n = 0; n < slices_; ++n) {
      auto first = in_queues_.front()->dequeue(n == 0 ? std::chrono::nanoseconds(std::chrono::milliseconds(20))
                                                      : config_.input_timeout);
      if (!first) return n > 0;
      in.front().push_back(std::move(*first));
      // The rest of the request was queued with it (one client lock); it is there or arriving.
      for (std::size_t i = 1; i < in_queues_.size(); ++i) in[i].push_back(take(*in_queues_[i], forever));
      for (std::size_t k = 0; k < out_queues_.size(); ++k) out[k].push_back(take(*out_queues_[k], forever));
    }
    return true;
  }
  static queue_entry take(queue_type& q, std::chrono::nanoseconds timeout) {
    auto e = q.dequeue(timeout);
    if (!e) throw error(error_category::internal, "a request's entry never arrived", "queue '" + q.name() + "'");
    return std::move(*e);
  }

  void run_step(std::vector<std::vector<queue_entry>>& in, std::vector<std::vector<queue_entry>>& out) {
    const auto& l = engine_->layout();
    const auto n = in.front().size();
    step_io io;
    for (std::size_t i = 0; i < in.size(); ++i) {
      const auto slice = l.inputs[i].info.num_bytes();
      auto* base = staged_in_[i].data();
      for (std::size_t r = 0; r < n; ++r) {
        std::memcpy(base + r * slice, in[i][r].data, slice);
        in[i][r].complete(entry_status::done);
      }
      // Padding repeats the last request so the padded micro-batches compute on valid data.
      for (std::size_t r = n; r < slices_; ++r) std::memcpy(base + r * slice, base + (n - 1) * slice, slice);
      io.set_input(l.inputs[i].name, staged_in_[i].view());
    }
    for (std::size_t k = 0; k < out.size(); ++k) io.set_output(l.anchors[k].name, staged_out_[k].view());
    try {
      engine_->run(io);
    } catch (...) {
      const auto e = std::current_exception();
      for (auto& v : out)
        for (auto& entry : v) fail(entry, e);
      return;
    }
    if (config_.keep_timeline) {
      std::lock_guard lock(timeline_mutex_);
      timeline_ = engine_->last_timeline();
    }
    // Counted before any request completes: a client holding its result sees it counted.
    steps_.fetch_add(1, std::memory_order_acq_rel);
    served_.fetch_add(n, std::memory_order_acq_rel);
    for (std::size_t k = 0; k < out.size(); ++k) {
      const auto slice = l.anchors[k].info.num_bytes();
      for (std::size_t r = 0; r < n; ++r) {
        std::memcpy(out[k][r].data, staged_out_[k].data() + r * slice, slice);
        out[k][r].complete(entry_status::done);
      }
    }
  }

  /// Hands a failed step's error to the request: its callback is replaced by one that sets it.
  static void fail(queue_entry& entry, const std::exception_ptr& e) {
    failure_ = e;
    entry.complete(entry_status::failed);
    failure_ = nullptr;
  }

  model_runner_config config_;
  std::unique_ptr<host_engine> engine_;
  queue_manager queues_;
  std::vector<queue_type*> in_queues_, out_queues_;
  std::vector<host_tensor> staged_in_, staged_out_;
  std::uint64_t slices_ = 1;
  device_handle device_;
  std::mutex clients_;
  mutable std::mutex timeline_mutex_;
  timeline timeline_;
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> steps_{0}, served_{0};
  std::thread worker_;
  static inline thread_local std::exception_ptr failure_;
};

}  // namespace ipu::runtime
