#pragma once
// The plan of an ipu::executable (everything but its graph) <-> the pb::Plan message, and the
// checks that make a decoded plan safe to run: every op, tensor, stage, program and IPU number it
// holds must exist in the graph it is decoded with. A plan that passed a checksum can still have
// been crafted; the executor indexes with these numbers, so they are checked here, not trusted.
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "ipu/device/architecture.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/sched/executable.hpp"

namespace ipu::popef {

namespace detail {

/// Architecture names read from files, interned: architecture_description holds string_views.
inline std::string_view intern(const std::string& s) {
  static std::mutex mutex;
  static std::set<std::string, std::less<>> strings;
  const std::lock_guard lock(mutex);
  return *strings.insert(s).first;
}

inline void to_proto(const device_description& d, pb::Device& out) {
  out.set_kind(d.kind == device_kind::cpu ? pb::DEVICE_CPU : pb::DEVICE_IPU);
  out.set_num_ipus(d.num_ipus);
  auto& a = *out.mutable_arch();
  const auto& x = d.arch;
  a.set_name(std::string(x.name));
  a.set_chip(std::string(x.chip));
  a.set_ipu_version(std::string(x.ipu_version));
  a.set_tiles_per_ipu(x.tiles_per_ipu);
  a.set_worker_threads_per_tile(x.worker_threads_per_tile);
  a.set_sram_bytes_per_tile(x.sram_bytes_per_tile);
  a.set_clock_hz(x.clock_hz);
  a.set_macs_per_cycle_fp32(x.macs_per_cycle_fp32);
  a.set_macs_per_cycle_fp16_16(x.macs_per_cycle_fp16_16);
  a.set_macs_per_cycle_fp16_32(x.macs_per_cycle_fp16_32);
  a.set_memory_latency_cycles(x.memory_latency_cycles);
  a.set_local_read_bytes_per_cycle(x.local_read_bytes_per_cycle);
  a.set_local_write_bytes_per_cycle(x.local_write_bytes_per_cycle);
  a.set_exchange_bytes_per_cycle(x.exchange_bytes_per_cycle);
  a.set_exchange_setup_cycles(x.exchange_setup_cycles);
  a.set_ipu_links(x.ipu_links);
  a.set_link_bits_per_second(x.link_bits_per_second);
  a.set_link_efficiency(x.link_efficiency);
  a.set_topology(x.topology == link_topology::fully_connected ? pb::LINK_FULLY_CONNECTED : pb::LINK_LADDER);
  a.set_ladder_rung_links(x.ladder_rung_links);
  a.set_ladder_cross_links(x.ladder_cross_links);
  a.set_ladder_up_links(x.ladder_up_links);
  a.set_ladder_down_links(x.ladder_down_links);
  a.set_host_bytes_per_second(x.host_bytes_per_second);
  a.set_host_read_bytes_per_second(x.host_read_bytes_per_second);
  a.set_streaming_memory_bytes(x.streaming_memory_bytes);
  a.set_streaming_memory_bytes_per_second(x.streaming_memory_bytes_per_second);
  a.set_sync_picoseconds_per_hop(x.sync_picoseconds_per_hop);
  a.set_ipus_per_sync_hop(x.ipus_per_sync_hop);
}

inline device_description device_from_proto(const pb::Device& p, const std::string& where) {
  device_description d;
  switch (p.kind()) {
    case pb::DEVICE_IPU: d.kind = device_kind::ipu; break;
    case pb::DEVICE_CPU: d.kind = device_kind::cpu; break;
    default:
      throw error(error_category::popef, "unknown device kind " + std::to_string(p.kind()), where,
                  "the file was written by a newer ipu, or is damaged");
  }
  d.num_ipus = p.num_ipus();
  const auto& a = p.arch();
  auto& x = d.arch;
  // Built-in architectures keep their own names; others are interned for the process's lifetime.
  auto view = [](const std::string& s) -> std::string_view {
    for (const auto& b : builtin_architectures)
      for (auto v : {b.name, b.chip, b.ipu_version})
        if (v == s) return v;
    if (s == "cpu" || s == "host" || s.empty()) return s == "cpu" ? "cpu" : s == "host" ? "host" : "";
    return intern(s);
  };
  x.name = view(a.name());
  x.chip = view(a.chip());
  x.ipu_version = view(a.ipu_version());
  x.tiles_per_ipu = a.tiles_per_ipu();
  x.worker_threads_per_tile = a.worker_threads_per_tile();
  x.sram_bytes_per_tile = a.sram_bytes_per_tile();
  x.clock_hz = a.clock_hz();
  x.macs_per_cycle_fp32 = a.macs_per_cycle_fp32();
  x.macs_per_cycle_fp16_16 = a.macs_per_cycle_fp16_16();
  x.macs_per_cycle_fp16_32 = a.macs_per_cycle_fp16_32();
  x.memory_latency_cycles = a.memory_latency_cycles();
  x.local_read_bytes_per_cycle = a.local_read_bytes_per_cycle();
  x.local_write_bytes_per_cycle = a.local_write_bytes_per_cycle();
  x.exchange_bytes_per_cycle = a.exchange_bytes_per_cycle();
  x.exchange_setup_cycles = a.exchange_setup_cycles();
  x.ipu_links = a.ipu_links();
  x.link_bits_per_second = a.link_bits_per_second();
  x.link_efficiency = a.link_efficiency();
  switch (a.topology()) {
    case pb::LINK_LADDER: x.topology = link_topology::ladder; break;
    case pb::LINK_FULLY_CONNECTED: x.topology = link_topology::fully_connected; break;
    default:
      throw error(error_category::popef, "unknown IPU-Link topology " + std::to_string(a.topology()), where,
                  "the file was written by a newer ipu, or is damaged");
  }
  x.ladder_rung_links = a.ladder_rung_links();
  x.ladder_cross_links = a.ladder_cross_links();
  x.ladder_up_links = a.ladder_up_links();
  x.ladder_down_links = a.ladder_down_links();
  x.host_bytes_per_second = a.host_bytes_per_second();
  x.host_read_bytes_per_second = a.host_read_bytes_per_second();
  x.streaming_memory_bytes = a.streaming_memory_bytes();
  x.streaming_memory_bytes_per_second = a.streaming_memory_bytes_per_second();
  x.sync_picoseconds_per_hop = a.sync_picoseconds_per_hop();
  x.ipus_per_sync_hop = a.ipus_per_sync_hop();
  return d;
}

}  // namespace detail

/// The plan fields of `e` (not its graph).
inline pb::Plan plan_to_proto(const executable& e) {
  pb::Plan p;
  p.set_strategy(e.strategy);
  p.set_schedule(static_cast<pb::ScheduleKind>(static_cast<int>(e.schedule)));
  detail::to_proto(e.device, *p.mutable_device());
  p.set_replication_factor(e.replication_factor);
  p.set_ipus_per_replica(e.ipus_per_replica);
  p.set_ipus_reserved(e.ipus_reserved);
  p.set_input_group_size(e.input_group_size);
  p.set_batches_per_step(e.batches_per_step);
  p.set_gradient_accumulation(e.gradient_accumulation);
  p.set_micro_batch_size(e.micro_batch_size);
  p.set_is_inference(e.is_inference);
  for (auto v : e.op_ipu) p.add_op_ipu(v);
  for (auto v : e.op_stage) p.add_op_stage(v);
  for (const auto& s : e.stages) {
    auto* ps = p.add_stages();
    ps->set_id(s.id);
    ps->set_ipu(s.ipu);
    ps->set_phase(s.phase);
    for (auto v : s.ops) ps->add_ops(v);
    for (auto v : s.inputs) ps->add_inputs(v);
    for (auto v : s.outputs) ps->add_outputs(v);
    ps->set_cycles(s.cycles);
  }
  for (const auto& prog : e.programs) {
    auto* pp = p.add_programs();
    pp->set_name(prog.name);
    for (const auto& st : prog.steps) {
      auto* ps = pp->add_steps();
      ps->set_kind(static_cast<pb::StepKind>(static_cast<int>(st.kind)));
      ps->set_op(st.op);
      ps->set_tensor(st.tensor);
      ps->set_ipu(st.ipu);
      ps->set_peer(st.peer);
      ps->set_bytes(st.bytes);
      ps->set_cycles(st.cycles);
      ps->set_stage(st.stage);
    }
  }
  detail::to_proto(e.flow, *p.mutable_flow());
  for (const auto& s : e.streams) {
    auto* ps = p.add_streams();
    ps->set_handle(s.handle);
    ps->set_tensor(s.tensor);
    ps->set_direction(s.direction == stream_direction::to_host ? pb::TO_HOST : pb::TO_DEVICE);
    ps->set_ipu(s.ipu);
  }
  for (const auto& t : e.placement) {
    auto* pt = p.add_placement();
    pt->set_tensor(t.tensor);
    pt->set_ipu(t.ipu);
    pt->set_first_tile(t.first_tile);
    pt->set_num_tiles(t.num_tiles);
    pt->set_in_streaming_memory(t.in_streaming_memory);
  }
  for (const auto& m : e.memory) {
    auto* pm = p.add_memory();
    pm->set_ipu(m.ipu);
    pm->set_total_bytes(m.total_bytes);
    pm->set_worst_tile_bytes(m.worst_tile_bytes);
    pm->set_worst_tile(m.worst_tile);
  }
  auto& pr = *p.mutable_predicted();
  const auto& x = e.predicted;
  pr.set_cycles_per_step(x.cycles_per_step);
  pr.set_latency_cycles(x.latency_cycles);
  pr.set_samples_per_second(x.samples_per_second);
  pr.set_pipeline_bubble(x.pipeline_bubble);
  pr.set_seconds_per_step(x.seconds_per_step);
  pr.set_latency_seconds(x.latency_seconds);
  pr.set_micro_batches_per_step(x.micro_batches_per_step);
  pr.set_slowest_stage(x.slowest_stage);
  pr.set_streaming_memory_bytes(x.streaming_memory_bytes);
  for (auto v : e.op_cycles) p.add_op_cycles(v);
  p.set_num_phases(e.num_phases);
  p.set_overlapped_phase_io(e.overlapped_phase_io);
  p.set_precision(e.precision ? detail::to_proto(*e.precision) : pb::DATA_TYPE_UNSPECIFIED);
  p.set_partials_type(detail::to_proto(e.partials_type));
  return p;
}

/// Fills every field of `e` but its graph from `p`. Enumerations are checked; indices are checked
/// by check_plan once the graph is known.
inline void plan_from_proto(const pb::Plan& p, executable& e, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, what, where, "the file was written by a newer ipu, or is damaged");
  };
  e.strategy = p.strategy();
  if (p.schedule() < pb::SCHEDULE_SEQUENTIAL || p.schedule() > pb::SCHEDULE_PHASED)
    fail("unknown schedule kind " + std::to_string(p.schedule()));
  e.schedule = static_cast<schedule_kind>(p.schedule());
  e.device = detail::device_from_proto(p.device(), where);
  e.replication_factor = p.replication_factor();
  e.ipus_per_replica = p.ipus_per_replica();
  e.ipus_reserved = p.ipus_reserved();
  e.input_group_size = p.input_group_size();
  e.batches_per_step = p.batches_per_step();
  e.gradient_accumulation = p.gradient_accumulation();
  e.micro_batch_size = p.micro_batch_size();
  e.is_inference = p.is_inference();
  e.op_ipu.assign(p.op_ipu().begin(), p.op_ipu().end());
  e.op_stage.assign(p.op_stage().begin(), p.op_stage().end());
  e.stages.clear();
  for (const auto& ps : p.stages()) {
    stage_plan s;
    s.id = ps.id();
    s.ipu = ps.ipu();
    s.phase = ps.phase();
    s.ops.assign(ps.ops().begin(), ps.ops().end());
    s.inputs.assign(ps.inputs().begin(), ps.inputs().end());
    s.outputs.assign(ps.outputs().begin(), ps.outputs().end());
    s.cycles = ps.cycles();
    e.stages.push_back(std::move(s));
  }
  e.programs.clear();
  for (const auto& pp : p.programs()) {
    program prog;
    prog.name = pp.name();
    prog.steps.reserve(static_cast<std::size_t>(pp.steps_size()));
    for (const auto& ps : pp.steps()) {
      if (ps.kind() < pb::STEP_COMPUTE || ps.kind() > pb::STEP_SYNC)
        fail("unknown step kind " + std::to_string(ps.kind()) + " in program '" + prog.name + "'");
      step st;
      st.kind = static_cast<step_kind>(ps.kind());
      st.op = ps.op();
      st.tensor = ps.tensor();
      st.ipu = ps.ipu();
      st.peer = ps.peer();
      st.bytes = ps.bytes();
      st.cycles = ps.cycles();
      st.stage = ps.stage();
      prog.steps.push_back(st);
    }
    e.programs.push_back(std::move(prog));
  }
  e.flow = detail::program_flow_from_proto(p.flow());
  e.streams.clear();
  for (const auto& ps : p.streams()) {
    if (ps.direction() != pb::TO_DEVICE && ps.direction() != pb::TO_HOST)
      fail("unknown stream direction " + std::to_string(ps.direction()));
    e.streams.push_back({ps.handle(), ps.tensor(),
                         ps.direction() == pb::TO_HOST ? stream_direction::to_host : stream_direction::to_device, ps.ipu()});
  }
  e.placement.clear();
  for (const auto& pt : p.placement())
    e.placement.push_back({pt.tensor(), pt.ipu(), pt.first_tile(), pt.num_tiles(), pt.in_streaming_memory()});
  e.memory.clear();
  for (const auto& pm : p.memory())
    e.memory.push_back({pm.ipu(), pm.total_bytes(), pm.worst_tile_bytes(), pm.worst_tile()});
  const auto& pr = p.predicted();
  auto& x = e.predicted;
  x.cycles_per_step = pr.cycles_per_step();
  x.latency_cycles = pr.latency_cycles();
  x.samples_per_second = pr.samples_per_second();
  x.pipeline_bubble = pr.pipeline_bubble();
  x.seconds_per_step = pr.seconds_per_step();
  x.latency_seconds = pr.latency_seconds();
  x.micro_batches_per_step = pr.micro_batches_per_step();
  x.slowest_stage = pr.slowest_stage();
  x.streaming_memory_bytes = pr.streaming_memory_bytes();
  e.op_cycles.assign(p.op_cycles().begin(), p.op_cycles().end());
  e.num_phases = p.num_phases();
  e.overlapped_phase_io = p.overlapped_phase_io();
  e.precision.reset();
  if (p.precision() != pb::DATA_TYPE_UNSPECIFIED) e.precision = detail::data_type_from_proto(p.precision(), "the plan's precision", where);
  e.partials_type = detail::data_type_from_proto(p.partials_type(), "the plan's partials type", where);
}

/// Checks that every number in the plan of `e` refers to something that exists in `e.model` and
/// on its IPUs; throws ipu::error (popef) naming the first that does not.
inline void check_plan(const executable& e, const std::string& where) {
  auto fail = [&](const std::string& what) -> void {
    throw error(error_category::popef, "the plan is inconsistent with its graph: " + what, where,
                "the file is damaged; export it again");
  };
  const auto& g = e.model;
  const auto ops = g.num_ops();
  const auto tensors = g.num_tensors();
  if (e.replication_factor == 0 || e.ipus_per_replica == 0 || e.ipus_reserved == 0)
    fail("a replication factor or IPU count of 0");
  if (e.batches_per_step == 0 || e.gradient_accumulation == 0 || e.input_group_size == 0)
    fail("batches per step, gradient accumulation or input group size of 0");
  if (std::uint64_t{e.ipus_per_replica} * e.replication_factor > e.ipus_reserved)
    fail(std::to_string(e.ipus_per_replica) + " IPUs x " + std::to_string(e.replication_factor) + " replicas exceed the " +
         std::to_string(e.ipus_reserved) + " IPUs reserved");
  if (e.device.num_ipus == 0 || e.ipus_reserved > e.device.num_ipus)
    fail(std::to_string(e.ipus_reserved) + " IPUs reserved on a device of " + std::to_string(e.device.num_ipus));
  const auto ipus = e.ipus_per_replica;
  const auto stages = e.stages.size();
  auto op_ok = [&](op_id o) { return o < ops; };
  auto tensor_ok = [&](tensor_id t) { return t < tensors; };
  if (e.op_ipu.size() != ops || e.op_stage.size() != ops)
    fail("per-op IPUs and stages for " + std::to_string(e.op_ipu.size()) + " ops, the graph has " + std::to_string(ops));
  if (!e.op_cycles.empty() && e.op_cycles.size() != ops)
    fail("per-op cycles for " + std::to_string(e.op_cycles.size()) + " ops, the graph has " + std::to_string(ops));
  for (std::size_t i = 0; i < ops; ++i) {
    if (e.op_ipu[i] >= ipus) fail("op " + std::to_string(i) + " on IPU " + std::to_string(e.op_ipu[i]));
    if (e.op_stage[i] >= stages) fail("op " + std::to_string(i) + " in stage " + std::to_string(e.op_stage[i]));
  }
  for (std::size_t s = 0; s < stages; ++s) {
    const auto& st = e.stages[s];
    const auto name = "stage " + std::to_string(s);
    if (st.ipu >= ipus) fail(name + " on IPU " + std::to_string(st.ipu));
    for (auto o : st.ops)
      if (!op_ok(o)) fail(name + " runs op " + std::to_string(o));
    for (auto t : st.inputs)
      if (!tensor_ok(t)) fail(name + " reads tensor " + std::to_string(t));
    for (auto t : st.outputs)
      if (!tensor_ok(t)) fail(name + " writes tensor " + std::to_string(t));
  }
  for (std::size_t pi = 0; pi < e.programs.size(); ++pi)
    for (std::size_t si = 0; si < e.programs[pi].steps.size(); ++si) {
      const auto& st = e.programs[pi].steps[si];
      const auto name = "program " + std::to_string(pi) + " step " + std::to_string(si);
      if (st.ipu >= ipus || st.peer >= ipus) fail(name + " on IPU " + std::to_string(std::max(st.ipu, st.peer)));
      if (stages && st.stage >= stages) fail(name + " in stage " + std::to_string(st.stage));
      if (st.kind == step_kind::compute && !op_ok(st.op)) fail(name + " computes op " + std::to_string(st.op));
      if (st.kind != step_kind::compute && st.kind != step_kind::sync && !tensor_ok(st.tensor))
        fail(name + " moves tensor " + std::to_string(st.tensor));
      if (st.op != no_op && !op_ok(st.op)) fail(name + " names op " + std::to_string(st.op));
      if (st.tensor != no_tensor && !tensor_ok(st.tensor)) fail(name + " names tensor " + std::to_string(st.tensor));
    }
  for (const auto* list : {&e.flow.load, &e.flow.main, &e.flow.save})
    for (auto p : *list)
      if (p >= e.programs.size()) fail("the program flow runs program " + std::to_string(p));
  for (const auto& s : e.streams)
    if (!tensor_ok(s.tensor) || s.ipu >= ipus) fail("stream '" + s.handle + "' names tensor " + std::to_string(s.tensor));
  for (const auto& p : e.placement)
    if (!tensor_ok(p.tensor) || p.ipu >= ipus) fail("a placement names tensor " + std::to_string(p.tensor));
  if (stages && e.predicted.slowest_stage >= stages)
    fail("the slowest stage is " + std::to_string(e.predicted.slowest_stage));
}

}  // namespace ipu::popef
