#pragma once
// Test support for the executor: a hand-made strategy that splits a model's op order into equal
// chunks and lays them out as shards, pipeline stages or phases (with Streaming Memory traffic),
// and a reference that runs every micro-batch through ipu::cpu::device and checks the
// executor's anchors against it bit for bit.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/cpu/device.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/exec/executor.hpp"

namespace harness {

enum class layout : std::uint8_t { sharded, pipelined, serial_phased, parallel_phased };

/// Splits the topological op order into `num_stages` equal chunks.
///  sharded:          stage k on IPU k % ipus, run one after another
///  pipelined:        stage k on IPU k % ipus, one thread each
///  serial_phased:    phase k / 2, stage on IPU k % 2 (two stages per phase, on IPUs 0 and 1)
///  parallel_phased:  phase k on IPU k % 2 (even phases on IPU 0, odd on IPU 1)
/// With `stream`, every weight and every tensor crossing stages goes through Streaming Memory:
/// from_remote before the stage that reads it, to_remote after the stage that produced or used it.
/// Otherwise crossing tensors get ipu_copy steps. Op i costs 1000 + 10 i cycles, transfers 100,
/// host streams 50.
struct hand_split {
  using strategy_concept = ipu::execution_strategy_tag;
  using schedule = ipu::any_schedule;  // the layout picks it per plan
  static constexpr std::string_view name = "hand-split";

  layout kind = layout::pipelined;
  std::uint32_t num_stages = 2;
  bool stream = false;

  static constexpr std::uint64_t op_cycles(ipu::op_id o) { return 1000 + 10 * std::uint64_t{o}; }
  static constexpr std::uint64_t transfer_cycles = 100;
  static constexpr std::uint64_t stream_cycles = 50;

  [[nodiscard]] ipu::executable plan(const ipu::graph& g, const ipu::device_description& d,
                                     const ipu::plan_options& o) const {
    using namespace ipu;
    executable exe;
    exe.strategy = std::string(name);
    exe.device = d;
    exe.model = g;
    exe.replication_factor = o.replication_factor;
    exe.input_group_size = o.input_group_size;
    exe.batches_per_step = o.batches_per_step;
    exe.gradient_accumulation = o.gradient_accumulation;
    exe.is_inference = o.is_inference;
    exe.schedule = kind == layout::sharded     ? schedule_kind::sequential
                   : kind == layout::pipelined ? schedule_kind::pipelined
                                               : schedule_kind::phased;
    const auto order = topological_order(g);
    const auto n = std::max<std::size_t>(1, std::min<std::size_t>(num_stages, order.size()));
    exe.op_ipu.assign(g.num_ops(), 0);
    exe.op_stage.assign(g.num_ops(), 0);
    for (std::size_t k = 0; k < n; ++k) {
      stage_plan sp;
      sp.id = static_cast<std::uint32_t>(k);
      switch (kind) {
        case layout::sharded:
        case layout::pipelined: sp.ipu = static_cast<std::uint32_t>(k % d.num_ipus); break;
        case layout::serial_phased:
          sp.ipu = static_cast<std::uint32_t>(k % 2);
          sp.phase = static_cast<std::int64_t>(k / 2);
          break;
        case layout::parallel_phased:
          sp.ipu = static_cast<std::uint32_t>(k % 2);
          sp.phase = static_cast<std::int64_t>(k);
          break;
      }
      for (std::size_t i = k * order.size() / n; i < (k + 1) * order.size() / n; ++i) {
        sp.ops.push_back(order[i]);
        exe.op_ipu[order[i]] = sp.ipu;
        exe.op_stage[order[i]] = static_cast<std::uint32_t>(k);
        sp.cycles += op_cycles(order[i]);
      }
      exe.stages.push_back(sp);
    }
    exe.programs.resize(8);
    const char* names[] = {"WeightsFromHost", "OptimizerFromHost", "RandomSeedFromHost", "RandomSeedToHost",
                           "RngStateFromHost", "Program", "RngStateToHost", "WeightsToHost"};
    for (std::size_t i = 0; i < 8; ++i) exe.programs[i].name = names[i];
    exe.programs[5].steps = main_steps(exe);
    exe.flow.main = {5};
    if (stream)
      for (std::size_t t = 0; t < g.num_tensors(); ++t)
        if (g.tensor(static_cast<tensor_id>(t)).has_data())
          exe.placement.push_back(tensor_placement{static_cast<tensor_id>(t), 0, 0, 0, true});
    return exe;
  }

 private:
  [[nodiscard]] std::vector<ipu::step> main_steps(const ipu::executable& exe) const {
    using namespace ipu;
    const auto& g = exe.model;
    std::vector<step> steps;
    for (auto t : g.inputs()) steps.push_back({step_kind::host_to_device, no_op, t, 0, 0, 0, stream_cycles});
    std::vector<std::uint32_t> producer(g.num_tensors(), no_stage);
    for (std::uint32_t s = 0; s < exe.stages.size(); ++s)
      for (auto o : exe.stages[s].ops)
        for (auto t : g.op(o).outputs) producer[t] = s;
    auto reads_of = [&](std::uint32_t s) {
      std::vector<tensor_id> r;
      for (auto o : exe.stages[s].ops)
        for (auto t : g.op(o).inputs)
          if (t != no_tensor && producer[t] != s && std::find(r.begin(), r.end(), t) == r.end()) r.push_back(t);
      return r;
    };
    for (std::uint32_t s = 0; s < exe.stages.size(); ++s) {
      const auto ipu = exe.stages[s].ipu;
      const auto reads = reads_of(s);
      auto moved = [&](tensor_id t) { return g.tensor(t).has_data() || producer[t] != no_stage; };
      if (stream)
        for (auto t : reads)
          if (moved(t)) steps.push_back({step_kind::from_remote, no_op, t, ipu, 0, g.tensor(t).info.num_bytes(), transfer_cycles});
      for (auto o : exe.stages[s].ops) steps.push_back({step_kind::compute, o, no_tensor, ipu, 0, 0, op_cycles(o)});
      std::set<std::pair<tensor_id, std::uint32_t>> copies;
      for (auto o : exe.stages[s].ops)
        for (auto t : g.op(o).outputs)
          for (std::uint32_t later = s + 1; later < exe.stages.size(); ++later) {
            const auto r = reads_of(later);
            if (std::find(r.begin(), r.end(), t) == r.end()) continue;
            if (stream) copies.insert({t, ipu});
            else if (exe.stages[later].ipu != ipu) copies.insert({t, exe.stages[later].ipu});
          }
      for (auto [t, dst] : copies)
        steps.push_back({stream ? step_kind::to_remote : step_kind::ipu_copy, no_op, t, ipu, stream ? 0 : dst,
                         g.tensor(t).info.num_bytes(), transfer_cycles});
      if (stream)
        for (auto t : reads)
          if (g.tensor(t).has_data()) steps.push_back({step_kind::to_remote, no_op, t, ipu, 0, 0, transfer_cycles});
    }
    for (auto t : g.outputs())
      steps.push_back({step_kind::device_to_host, no_op, t, producer[t] == no_stage ? 0 : exe.stages[producer[t]].ipu, 0,
                       0, stream_cycles});
    return steps;
  }
};

/// Deterministic pseudo-random inputs for one slice.
inline ipu::host_tensor random_tensor(const ipu::tensor_info& info, std::uint32_t seed) {
  ipu::host_tensor t(info);
  std::mt19937 rng(seed);
  if (info.type == ipu::data_type::F32) {
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : t.as<float>()) v = u(rng);
  } else if (info.type == ipu::data_type::BOOL) {
    std::bernoulli_distribution u(0.5);
    for (auto& v : t.as<bool>()) v = u(rng);
  } else if (info.type == ipu::data_type::S64) {
    std::uniform_int_distribution<std::int64_t> u(0, 3);
    for (auto& v : t.as<std::int64_t>()) v = u(rng);
  } else {
    FAIL("random_tensor: add the element type ", ipu::to_string(info.type));
  }
  return t;
}

/// `slices` stacked into one array of type `info`.
inline ipu::host_tensor stack(const ipu::tensor_info& info, const std::vector<ipu::host_tensor>& slices) {
  ipu::host_tensor out(info);
  std::size_t off = 0;
  for (const auto& s : slices) {
    REQUIRE(off + s.bytes().size() <= out.bytes().size());
    std::memcpy(out.data() + off, s.data(), s.bytes().size());
    off += s.bytes().size();
  }
  REQUIRE(off == out.bytes().size());
  return out;
}

inline bool same_bytes(const std::byte* a, const std::byte* b, std::size_t n) { return std::memcmp(a, b, n) == 0; }

/// Where two F32 arrays first differ, for failure messages.
inline std::string first_difference(const std::byte* got, const std::byte* want, const ipu::tensor_info& info) {
  if (info.type != ipu::data_type::F32) return "";
  const auto n = static_cast<std::size_t>(info.num_elements());
  std::size_t count = 0, first = n;
  float max_diff = 0;
  for (std::size_t i = 0; i < n; ++i) {
    float a, b;
    std::memcpy(&a, got + 4 * i, 4);
    std::memcpy(&b, want + 4 * i, 4);
    if (std::memcmp(&a, &b, 4) != 0) {
      if (first == n) first = i;
      ++count;
      max_diff = std::max(max_diff, a > b ? a - b : b - a);
    }
  }
  if (first == n) return "equal";
  float a, b;
  std::memcpy(&a, got + 4 * first, 4);
  std::memcpy(&b, want + 4 * first, 4);
  return std::to_string(count) + " of " + std::to_string(n) + " elements differ, first at " + std::to_string(first) +
         ": " + std::to_string(a) + " vs " + std::to_string(b) + ", max difference " + std::to_string(max_diff);
}

struct run_result {
  std::map<std::string, ipu::host_tensor> anchors;
  ipu::timeline timeline;
  std::size_t workers = 0;
};

/// Runs `ex` for `steps` steps on fresh random inputs (or `given` slices, input name -> one per
/// micro-batch x replica) and checks every anchor against ipu::cpu::device on the same slices,
/// bit for bit (Sum: the reference's F32 values added in micro-batch order).
template <class Executor>
run_result check_against_cpu(Executor& ex, std::size_t threads = 1, int steps = 1,
                             const std::map<std::string, std::vector<ipu::host_tensor>>& given = {}) {
  using namespace ipu;
  const auto& layout = ex.layout();
  const auto& g = ex.plan().model;
  const auto slices = layout.counts.micro_batches() * layout.input_replicas();

  graph ref_graph = g;  // anchors that are not outputs become outputs of the reference
  std::vector<std::size_t> out_index;
  for (const auto& a : layout.anchors) {
    auto it = std::find(ref_graph.outputs().begin(), ref_graph.outputs().end(), a.tensor);
    if (it == ref_graph.outputs().end()) {
      ref_graph.mark_output(a.tensor);
      out_index.push_back(ref_graph.outputs().size() - 1);
    } else {
      out_index.push_back(static_cast<std::size_t>(it - ref_graph.outputs().begin()));
    }
  }
  cpu::device ref(ref_graph, {.threads = threads});

  run_result result;
  for (int step_no = 0; step_no < steps; ++step_no) {
    std::map<std::string, std::vector<host_tensor>> in_slices;
    std::vector<host_tensor> arrays;
    arrays.reserve(layout.inputs.size());
    step_io io;
    for (const auto& in : layout.inputs) {
      auto& v = in_slices[in.name];
      if (auto it = given.find(in.name); it != given.end()) {
        REQUIRE(it->second.size() == slices);
        v = it->second;
      } else {
        for (std::uint64_t i = 0; i < slices; ++i)
          v.push_back(random_tensor(in.info, static_cast<std::uint32_t>(1000 * step_no + 17 * i + in.tensor)));
      }
      arrays.push_back(stack(ex.input_array_info(in.name), v));
      io.set_input(in.name, arrays.back().view());
    }
    result.anchors = ex.make_anchor_arrays();
    for (auto& [name, a] : result.anchors) io.set_output(name, a.view());
    ex.run(io);

    // The reference: every slice through the CPU device.
    const auto R = layout.counts.replicas;
    for (std::uint64_t r = 0; r < R; ++r) {
      std::vector<std::vector<host_tensor>> outs;  // by micro-batch
      for (std::uint64_t m = 0; m < layout.counts.micro_batches(); ++m) {
        std::vector<const_tensor_view> views;
        for (const auto& in : layout.inputs)
          views.push_back(in_slices[in.name][m * layout.input_replicas() + r / layout.input_group_size].view());
        outs.push_back(ref.run(views));
      }
      for (std::size_t a = 0; a < layout.anchors.size(); ++a) {
        const auto& an = layout.anchors[a];
        const auto bytes = an.info.num_bytes();
        const auto& array = result.anchors.at(an.name);
        auto at = [&](std::uint64_t f) { return array.data() + (f * R + r) * bytes; };
        if (an.type.id() == anchor_return_type_id::sum) {
          REQUIRE(an.info.type == data_type::F32);
          host_tensor acc = outs[0][out_index[a]];
          for (std::uint64_t m = 1; m < outs.size(); ++m) {
            auto dst = acc.as<float>();
            auto src = outs[m][out_index[a]].as<float>();
            for (std::size_t i = 0; i < dst.size(); ++i) dst[i] += src[i];
          }
          CHECK_MESSAGE(same_bytes(at(0), acc.data(), bytes), "Sum anchor ", an.name, " replica ", r);
          continue;
        }
        std::uint64_t fetched = 0;
        for (std::uint64_t m = 0; m < outs.size(); ++m) {
          const auto f = an.type.fetch_of(m, layout.counts);
          if (!f) continue;
          ++fetched;
          const auto* want = outs[m][out_index[a]].data();
          CHECK_MESSAGE(same_bytes(at(*f), want, bytes), "anchor ", an.name, " (", to_string(an.type), ") micro-batch ",
                        m, " replica ", r, " step ", step_no, ": ", first_difference(at(*f), want, an.info));
        }
        CHECK(fetched == an.type.fetches(layout.counts));
      }
    }
  }
  result.timeline = ex.last_timeline();
  result.workers = ex.num_workers();
  return result;
}

}  // namespace harness
