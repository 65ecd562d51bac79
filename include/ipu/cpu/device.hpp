#pragma once
// A device that runs an `ipu::graph` exactly on the host: the reference every simulated IPU result
// is compared with.
//
//   ipu::cpu::device dev(std::move(g), {.threads = 4});
//   std::vector<ipu::host_tensor> out = dev.run({{"x", x.view()}});
//
// The plan (plan.hpp) is made once in the constructor, for the graph and every If/Loop body in
// it; `run` binds inputs, runs each op's kernel from the registry and returns the graph outputs.
// Results are deterministic for a given thread count. `run` calls on one device take turns.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <tuple>
#include <utility>
#include <vector>

#include "ipu/cpu/plan.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/ops/kernel.hpp"
#include "ipu/tensor.hpp"
#include "ipu/cpu/thread_pool.hpp"

namespace ipu::cpu {

/// Told when each op of the top-level graph ran (view-only ops report an empty interval; ops
/// inside If/Loop bodies are part of their owner's interval). For timelines such as the
/// executor's; an empty function costs nothing.
using op_observer = std::function<void(op_id, std::chrono::steady_clock::time_point begin,
                                       std::chrono::steady_clock::time_point end)>;

struct device_options {
  std::size_t threads = 0;                 // kernel threads, caller included; 0: every hardware thread
  const op_registry* registry = nullptr;   // nullptr: ipu::default_op_registry()
  plan_options plan{};
  op_observer on_op{};
  /// The seed of the random ops without a `seed` attribute (RandomNormal, Bernoulli...). Each run
  /// draws afresh, and devices with the same seed draw the same values run for run
  /// (ops/kernels/random.hpp); reseed() starts over.
  std::uint64_t random_seed = random_source::default_seed;
};

/// Inputs given by graph input name.
using named_tensors = std::vector<std::pair<std::string, const_tensor_view>>;

class device final : public subgraph_runner {
 public:
  explicit device(graph model, device_options options = {})
      : model_(std::move(model)),
        options_(options),
        registry_(options.registry ? options.registry : &default_op_registry()),
        pool_(thread_pool_options{options.threads}),
        parallel_for_(pool_.as_parallel_for()),
        random_(options.random_seed) {
    main_ = compile(model_, false);
  }
  device(const device&) = delete;
  device& operator=(const device&) = delete;

  [[nodiscard]] const graph& model() const noexcept { return model_; }
  [[nodiscard]] const execution_plan& plan() const noexcept { return main_->plan; }
  [[nodiscard]] std::size_t threads() const noexcept { return pool_.size(); }
  [[nodiscard]] std::uint64_t random_seed() const { return random_.seed(); }
  /// Random ops start over from `seed`: the next run draws what a new device's first run would.
  void reseed(std::uint64_t seed) {
    std::lock_guard lock(run_mutex_);
    random_.reseed(seed);
  }

  /// Runs with inputs given in the order of the graph's inputs.
  std::vector<host_tensor> run(std::span<const const_tensor_view> inputs) {
    std::lock_guard lock(run_mutex_);
    const auto& names = model_.inputs();
    if (inputs.size() != names.size())
      throw error(error_category::usage,
                  "the graph has " + std::to_string(names.size()) + " input" + (names.size() == 1 ? "" : "s") + " (" +
                      input_list(model_) + ") but " + std::to_string(inputs.size()) + " were given",
                  where(model_), "pass one tensor per graph input, in order");
    return execute(*main_, inputs, nullptr);
  }
  std::vector<host_tensor> run(std::span<const host_tensor> inputs) {
    std::vector<const_tensor_view> views;
    views.reserve(inputs.size());
    for (const auto& t : inputs) views.push_back(t.view());
    return run(std::span<const const_tensor_view>(views));
  }
  std::vector<host_tensor> run(const std::vector<host_tensor>& inputs) { return run(std::span<const host_tensor>(inputs)); }
  std::vector<host_tensor> run(const std::vector<const_tensor_view>& inputs) {
    return run(std::span<const const_tensor_view>(inputs));
  }

  /// Takes back a tensor a run returned, once its holder is done with it: a later run's output of the
  /// same type and shape reuses its storage (zeroed, as a fresh output is) instead of a fresh
  /// allocation, whose first touch costs a page fault per 4 KiB (a training step's updated weights
  /// and optimizer state: ~100 MB for ResNet-18). At most one tensor per graph output is kept.
  void recycle(host_tensor&& t) {
    std::lock_guard lock(run_mutex_);
    if (t.data() != nullptr && spare_.size() < model_.outputs().size()) spare_.push_back(std::move(t));
  }

  /// Runs with inputs given by name; every graph input must be given exactly once.
  std::vector<host_tensor> run(const named_tensors& inputs) {
    const auto& ids = model_.inputs();
    std::vector<const_tensor_view> ordered(ids.size());
    std::vector<bool> given(ids.size(), false);
    for (const auto& [name, view] : inputs) {
      std::size_t i = 0;
      while (i < ids.size() && model_.tensor(ids[i]).name != name) ++i;
      if (i == ids.size()) {
        const auto t = model_.find_tensor(name);
        throw error(error_category::usage,
                    t ? "'" + name + "' is " + (model_.tensor(*t).kind == tensor_kind::intermediate ? "an " : "a ") +
                            std::string(to_string(model_.tensor(*t).kind)) + ", not a graph input"
                      : "no graph input named '" + name + "'",
                    where(model_), "the graph inputs are: " + input_list(model_));
      }
      if (given[i])
        throw error(error_category::usage, "input '" + name + "' is given twice", where(model_), "give it once");
      given[i] = true;
      ordered[i] = view;
    }
    for (std::size_t i = 0; i < ids.size(); ++i)
      if (!given[i])
        throw error(error_category::usage, "input '" + model_.tensor(ids[i]).name + "' is not given", where(model_),
                    "give every graph input: " + input_list(model_));
    return run(std::span<const const_tensor_view>(ordered));
  }

  /// Runs an If/Loop body on this device (subgraph_runner). Call it from the kernel's own thread;
  /// the body's reads of enclosing tensors resolve to the values of the running op's graph.
  std::vector<host_tensor> run(const graph& body, std::span<const const_tensor_view> inputs) override {
    auto it = subgraphs_.find(&body);
    compiled& c = it != subgraphs_.end() ? *it->second : *compile(body, true);
    if (inputs.size() > body.inputs().size())
      throw error(error_category::runtime,
                  std::to_string(inputs.size()) + " values given for a subgraph with " +
                      std::to_string(body.inputs().size()) + " inputs",
                  where(body), "check the op's subgraph against the ONNX specification");
    return execute(c, inputs, current_);
  }

 private:
  // A planned graph with what its runs share: views of its weights and reusable arenas.
  struct compiled {
    const graph* g = nullptr;
    execution_plan plan;
    std::vector<const std::byte*> data;              // graph_data tensors, by id
    std::vector<host_tensor> realigned;              // weights copied only because misaligned
    std::unordered_map<std::string_view, tensor_id> by_name;
    std::vector<host_tensor> free_arenas;            // one per nesting level in use
    std::vector<op_cache> caches;                    // by step: what kernels prepared from constants
    std::vector<std::uint64_t> constant_inputs;      // by step: kernel_context::constant_inputs
  };
  // A graph being run: where each of its tensors is right now.
  struct frame {
    const compiled* c = nullptr;
    std::vector<const std::byte*> at;        // by tensor id; null until available
    std::vector<const tensor_info*> info;    // by tensor id; enclosing tensors keep their own
    const frame* parent = nullptr;
  };

  static std::string where(const graph& g) { return "cpu device, graph '" + g.name() + "'"; }
  static std::string input_list(const graph& g) {
    std::string s;
    for (auto t : g.inputs()) s += (s.empty() ? "" : ", ") + g.tensor(t).name + " " + to_string(g.tensor(t).info);
    return s.empty() ? "none" : s;
  }
  static bool aligned(const std::byte* p, data_type t) {
    return reinterpret_cast<std::uintptr_t>(p) % size_of(t) == 0;
  }
  // A non-null address for zero-byte tensors: an empty view means "omitted" to kernels.
  static const std::byte* nonnull(const std::byte* p) {
    static const std::byte dummy[64] = {};
    return p ? p : dummy;
  }

  compiled* compile(const graph& g, bool is_subgraph) {
    auto c = std::make_unique<compiled>();
    c->g = &g;
    c->plan = make_plan(g, *registry_, options_.plan, is_subgraph);
    c->data.assign(g.num_tensors(), nullptr);
    for (std::size_t t = 0; t < g.num_tensors(); ++t) {
      const auto& node = g.tensor(static_cast<tensor_id>(t));
      c->by_name.emplace(node.name, static_cast<tensor_id>(t));
      if (c->plan.tensors[t].where != storage::graph_data) continue;
      const std::byte* p = node.data.data();
      if (p && !aligned(p, node.info.type)) {  // kernels read elements through typed pointers
        c->realigned.push_back(host_tensor::copy_of(const_tensor_view(node.info, p)));
        p = c->realigned.back().data();
      }
      c->data[t] = nonnull(p);
    }
    c->caches.resize(c->plan.steps.size());
    c->constant_inputs.assign(c->plan.steps.size(), 0);
    for (std::size_t i = 0; i < c->plan.steps.size(); ++i) {
      const auto& inputs = g.op(c->plan.steps[i].op).inputs;
      for (std::size_t k = 0; k < inputs.size() && k < 64; ++k)
        if (inputs[k] != no_tensor && c->plan.tensors[inputs[k]].where == storage::graph_data)
          c->constant_inputs[i] |= std::uint64_t{1} << k;
    }
    compiled* raw = c.get();
    subgraphs_[&g] = std::move(c);
    for (const auto& op : g.ops())
      ipu::for_each_subgraph(op, [&](const graph& body) {
        if (!subgraphs_.contains(&body)) compile(body, true);
      });
    return raw;
  }

  // A tensor of an enclosing graph, looked up by name from the innermost frame out.
  static std::pair<const tensor_info*, const std::byte*> resolve_outer(const graph& g, tensor_id t,
                                                                        const frame* parent) {
    const auto& name = g.tensor(t).name;
    for (const frame* f = parent; f; f = f->parent) {
      auto it = f->c->by_name.find(name);
      if (it != f->c->by_name.end() && f->at[it->second]) return {f->info[it->second], f->at[it->second]};
    }
    throw error(error_category::runtime,
                "subgraph tensor '" + name + "' is not produced in the subgraph or any enclosing graph", where(g),
                "check the model's If/Loop bodies");
  }

  std::vector<host_tensor> execute(compiled& c, std::span<const const_tensor_view> inputs, const frame* parent) {
    const graph& g = *c.g;
    const auto& plan = c.plan;
    const auto nt = g.num_tensors();

    host_tensor arena;
    if (!c.free_arenas.empty()) {
      arena = std::move(c.free_arenas.back());
      c.free_arenas.pop_back();
    } else {
      arena = host_tensor(tensor_info{data_type::U8, shape{static_cast<std::int64_t>(plan.arena_bytes)}});
    }
    struct arena_return {
      std::vector<host_tensor>& pool;
      host_tensor& arena;
      ~arena_return() { pool.push_back(std::move(arena)); }
    } give_back{c.free_arenas, arena};

    std::vector<host_tensor> outputs(g.outputs().size());
    std::vector<host_tensor> staged;  // misaligned caller inputs, copied
    staged.reserve(inputs.size());
    frame f{&c, std::vector<const std::byte*>(nt, nullptr), std::vector<const tensor_info*>(nt), parent};
    for (std::size_t t = 0; t < nt; ++t) f.info[t] = &g.tensor(static_cast<tensor_id>(t)).info;
    auto bind_outer = [&](tensor_id t) { std::tie(f.info[t], f.at[t]) = resolve_outer(g, t, parent); };

    for (std::size_t t = 0; t < nt; ++t) {
      const auto id = static_cast<tensor_id>(t);
      const auto& pl = plan.tensors[t];
      switch (pl.where) {
        case storage::graph_input:
          if (pl.index < inputs.size()) f.at[t] = bind_input(g, id, inputs[pl.index], staged);
          else bind_outer(id);
          break;
        case storage::graph_data: f.at[t] = c.data[t]; break;
        case storage::outer: bind_outer(id); break;
        case storage::output: outputs[pl.index] = &c == main_ ? take_spare(g.tensor(id).info) : host_tensor(g.tensor(id).info); break;
        case storage::arena:
        case storage::none: break;
      }
    }
    auto writable = [&](tensor_id t) -> std::byte* {
      const auto& pl = plan.tensors[t];
      return pl.where == storage::output ? outputs[pl.index].data() : arena.data() + pl.offset;
    };

    const frame* saved = current_;
    current_ = &f;
    struct restore {
      const frame*& cur;
      const frame* saved;
      ~restore() { cur = saved; }
    } restore_current{current_, saved};

    string_heap strings;  // this run's STRING elements; outputs copy theirs out below
    std::vector<const_tensor_view> in_views;
    std::vector<tensor_view> out_views;
    const bool observed = parent == nullptr && options_.on_op;
    for (std::size_t step_index = 0; step_index < plan.steps.size(); ++step_index) {
      const auto& step = plan.steps[step_index];
      const auto begin = observed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      const op_node& op = g.op(step.op);
      in_views.clear();
      out_views.clear();
      for (auto t : op.inputs) {
        if (t == no_tensor) in_views.emplace_back();
        else in_views.emplace_back(*f.info[t], f.at[t]);
      }
      for (auto t : op.outputs) {
        std::byte* p = writable(t);
        if (plan.tensors[t].where == storage::arena && plan.tensors[t].alias_of == no_tensor) {
          if (!step.writes_all)
            std::memset(p, 0, plan.tensors[t].bytes);  // kernels may accumulate; stale arena bytes must not leak in
#ifndef NDEBUG
          else
            std::memset(p, 0xff, plan.tensors[t].bytes);  // NaNs: a kernel that skips an element fails its tests
#endif
        }
        out_views.emplace_back(g.tensor(t).info, p);
        f.at[t] = p;
      }
      if (step.view_only) {  // the output already holds the input's bytes
        if (observed) options_.on_op(step.op, begin, begin);
        continue;
      }
      kernel_context ctx{op, in_views, out_views, parallel_for_, this};
      ctx.random = &random_;
      ctx.cache = &c.caches[step_index];
      ctx.constant_inputs = c.constant_inputs[step_index];
      ctx.strings = &strings;
      try {
        step.kernel(ctx);
      } catch (const error&) {
        throw;
      } catch (const std::exception& e) {
        throw error(error_category::runtime, e.what(), "op " + graph::describe(op) + " in " + where(g),
                    "the kernel failed; check the op's inputs");
      }
      if (observed) options_.on_op(step.op, begin, std::chrono::steady_clock::now());
    }

    // Every copy is made before any is stored: a copy may read another output's buffer (a graph
    // output that is also stored as an earlier one), which storing would free.
    std::vector<std::pair<std::size_t, host_tensor>> copies;
    for (std::size_t i = 0; i < g.outputs().size(); ++i) {
      const auto t = g.outputs()[i];
      const auto& pl = plan.tensors[t];
      // A STRING output written in place points into `strings`, which ends with this run: copying
      // gives the tensor characters of its own.
      if (pl.where == storage::output && pl.index == i && f.info[t]->type != data_type::STRING) continue;
      copies.emplace_back(i, host_tensor::copy_of(const_tensor_view(*f.info[t], f.at[t])));
    }
    for (auto& [i, copy] : copies) outputs[i] = std::move(copy);
    return outputs;
  }

  // A recycled tensor of exactly `info`, zeroed, or a fresh one.
  host_tensor take_spare(const tensor_info& info) {
    for (std::size_t i = spare_.size(); i-- > 0;) {
      if (spare_[i].info() != info) continue;
      host_tensor t = std::move(spare_[i]);
      if (i + 1 != spare_.size()) spare_[i] = std::move(spare_.back());
      spare_.pop_back();
      std::memset(t.data(), 0, info.num_bytes());
      return t;
    }
    return host_tensor(info);
  }

  const std::byte* bind_input(const graph& g, tensor_id t, const const_tensor_view& v, std::vector<host_tensor>& staged) {
    const auto& want = g.tensor(t).info;
    const auto& name = g.tensor(t).name;
    if (v.info() != want)
      throw error(error_category::shape,
                  "input '" + name + "' expects " + to_string(want) + " but received " + to_string(v.info()), where(g),
                  "pass a tensor of the input's type and shape");
    if (v.empty() && want.num_bytes() != 0)
      throw error(error_category::usage, "input '" + name + "' is an empty view", where(g), "pass a tensor with data");
    if (v.data() && !aligned(v.data(), want.type)) {
      staged.push_back(host_tensor::copy_of(v));
      return staged.back().data();
    }
    return nonnull(v.data());
  }

  graph model_;
  device_options options_;
  const op_registry* registry_;
  std::unordered_map<const graph*, std::unique_ptr<compiled>> subgraphs_;
  compiled* main_ = nullptr;
  thread_pool pool_;
  parallel_for_fn parallel_for_;
  random_source random_;
  std::mutex run_mutex_;
  const frame* current_ = nullptr;
  std::vector<host_tensor> spare_;  // see recycle
};

}  // namespace ipu::cpu
