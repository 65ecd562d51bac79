#pragma once
// `ipu plan MODEL --device mk1|mk2|bow --ipus N --strategy sharded|pipelined|serial-phased|parallel-phased
//            [--replicas R] [--batch N] [--precision fp32|fp16] [--trace FILE] ...`
//
// Plans an ONNX model with an execution strategy on a simulated IPU system and prints what the cost
// model predicts, before anything runs: per-IPU memory (total and worst tile), per-stage cycles,
// the pipeline bubble, throughput and latency. Stage cycles split into compute, in (host streams,
// IPU-Link copies, Streaming Memory loads), out (streams to the host, stores) and sync. `--ipus` is
// the IPUs of one replica; the device has ipus x replicas IPUs. A model without annotations on
// more than one IPU is cut by the automatic planner (contiguous stages balancing predicted time, or
// phases that fit). `--batch` sets the leading dimension of every graph input. `--trace FILE`
// writes the predicted timeline of one step as Chrome-trace JSON (chrome://tracing, Perfetto), with
// flow arrows for the copies between stages and the predicted memory as counters. `--report FILE`
// writes the plan as one self-contained HTML page (exec/plan_report.hpp): the pipeline's Gantt
// chart, a tile-memory map per IPU and each stage's cycles.
//
// `--train [--optimizer sgd|adam|adamw|rmsprop|lamb|adagrad] [--momentum M] [--loss KIND] [--output
// NAME] [--recompute none|standard|norm-only|all] --gradient-accumulation G` plans the training step
// instead (sched/training_plan.hpp; --recompute, pipelined only: the forward ops each backward stage
// reruns, by the host executor's rule, train/recomputation.hpp): the model's loss, backward and
// optimizer ops costed through the op table on the forward plan's stages, the gradient all-reduce
// across replicas, and the memory training adds (gradients or accumulators, optimizer state, the
// activations the backward reads, pipeline stashes). Replicas whose IPUs exceed one 64-IPU pod
// spread over whole pods joined by gateway links. `--trace` then draws forward, backward,
// all-reduce and update per IPU.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "common_options.hpp"
#include "input_shapes.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/onnx/proto.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/sched/predict.hpp"
#include "ipu/sched/training_plan.hpp"
#include "ipu/train/training_graph.hpp"
#include "ipu/exec/plan_report.hpp"
#include "ipu/file.hpp"
#include "ipu/compile/strategies.hpp"
#include "json_output.hpp"

namespace ipu_cli {

struct plan_args {
  std::string model;
  std::string device = "mk2";
  std::uint32_t ipus = 1;
  std::string strategy = default_strategy;
  std::uint32_t replicas = 1;
  std::int64_t batch = 0;  // 0: as the model declares
  std::vector<std::string> input_shapes;  // NAME=D0,D1,...
  std::string precision;   // "": as the model declares
  std::string partials = "fp32";
  std::string liveness = "always-live";
  std::uint64_t device_iterations = default_batches_per_step;
  double available_memory_proportion = 0.6;
  bool auto_round = false;
  std::string trace;
  std::string report;  // --report FILE: the plan as one HTML page
  // Training (--train); the others are refused without it.
  bool train = false;
  std::optional<std::string> optimizer, loss, output;
  std::optional<double> momentum;
  std::optional<std::uint64_t> gradient_accumulation;
  bool shard_optimizer_state = false;
  std::optional<std::string> recompute;  // --train, pipelined: PopART's autoRecomputation
  std::string options_file;
  bool device_iterations_given = false, replicas_given = false;
  json_option json;
};

namespace detail {


inline ipu::liveness parse_liveness(const std::string& s) {
  const auto l = lower_case(s);
  if (l == "always-live") return ipu::liveness::always_live;
  if (l == "off-chip-after-fwd") return ipu::liveness::off_chip_after_fwd;
  if (l == "off-chip-after-fwd-no-overlap") return ipu::liveness::off_chip_after_fwd_no_overlap;
  if (l == "off-chip-after-each-phase") return ipu::liveness::off_chip_after_each_phase;
  throw ipu::error(ipu::error_category::usage, "unknown liveness '" + s + "'", "--liveness",
                   "use always-live, off-chip-after-fwd, off-chip-after-fwd-no-overlap or off-chip-after-each-phase");
}

inline ipu::data_type parse_float_type(const std::string& s, const char* flag) {
  const auto l = lower_case(s);
  if (l == "fp32" || l == "float32" || l == "f32") return ipu::data_type::F32;
  if (l == "fp16" || l == "float16" || l == "f16" || l == "half") return ipu::data_type::F16;
  throw ipu::error(ipu::error_category::usage, "unknown precision '" + s + "'", flag, "use fp32 or fp16");
}

inline bool annotated(const ipu::graph& g) {
  for (const auto& op : g.ops())
    if (op.where.ipu || op.where.stage || op.where.phase || !op.where.block.empty()) return true;
  return false;
}

inline std::string mib(std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

inline std::string kib(std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(bytes) / 1024.0);
  return buf;
}

inline void print_plan(report& rep, const ipu::executable& e, bool auto_planned) {
  const auto& g = e.model;
  const auto& a = e.device.arch;
  std::uint64_t params = 0;
  for (const auto& t : g.tensors())
    if (t.kind == ipu::tensor_kind::variable || t.kind == ipu::tensor_kind::constant)
      params += static_cast<std::uint64_t>(std::max<std::int64_t>(t.info.num_elements(), 0));
  const auto precision = e.precision ? std::string(ipu::to_string(*e.precision)) : std::string("as the model declares");
  rep.printf("model: '%s', %zu ops, %.2f M parameters, micro-batch %llu, precision %s (partials %s)\n", g.name().c_str(),
              g.num_ops(), static_cast<double>(params) / 1e6, static_cast<unsigned long long>(e.micro_batch_size),
              precision.c_str(), std::string(ipu::to_string(e.partials_type)).c_str());
  rep.printf("device: %s; strategy: %s, %u IPU%s per replica x %u replica%s (%u reserved)%s\n",
              ipu::to_string(e.device).c_str(), e.strategy.c_str(), e.ipus_per_replica, e.ipus_per_replica == 1 ? "" : "s",
              e.replication_factor, e.replication_factor == 1 ? "" : "s", e.ipus_reserved,
              auto_planned ? "; placement by the automatic planner" : "");
  rep.printf("device iterations: %llu micro-batches per step\n\n",
              static_cast<unsigned long long>(e.predicted.micro_batches_per_step));

  auto& j = rep.json;
  j["model"] = {{"name", g.name()}, {"ops", g.num_ops()}, {"parameters", params}, {"micro_batch", e.micro_batch_size},
                {"precision", e.precision ? nlohmann::json(std::string(ipu::to_string(*e.precision))) : nlohmann::json(nullptr)},
                {"partials", std::string(ipu::to_string(e.partials_type))}};
  j["device"] = ipu::to_string(e.device);
  j["strategy"] = e.strategy;
  j["ipus_per_replica"] = e.ipus_per_replica;
  j["replicas"] = e.replication_factor;
  j["ipus_reserved"] = e.ipus_reserved;
  j["auto_planned"] = auto_planned;
  j["device_iterations"] = e.predicted.micro_batches_per_step;

  const auto per_ipu = a.sram_bytes_per_ipu();
  j["memory"] = nlohmann::json::array();
  for (const auto& m : e.memory)
    j["memory"].push_back({{"ipu", m.ipu}, {"total_bytes", m.total_bytes}, {"ipu_bytes", per_ipu},
                           {"worst_tile_bytes", m.worst_tile_bytes}, {"tile_bytes", a.sram_bytes_per_tile},
                           {"worst_tile", m.worst_tile}});
  rep.printf("%-4s %-24s %s\n", "IPU", "memory total", "worst tile");
  for (const auto& m : e.memory)
    rep.printf("%-4u %-12s (%5.1f%%)   %s (%5.1f%% of %s) on tile %u\n", m.ipu, mib(m.total_bytes).c_str(),
                100.0 * static_cast<double>(m.total_bytes) / static_cast<double>(per_ipu), kib(m.worst_tile_bytes).c_str(),
                100.0 * static_cast<double>(m.worst_tile_bytes) / static_cast<double>(a.sram_bytes_per_tile),
                kib(a.sram_bytes_per_tile).c_str(), m.worst_tile);

  const auto times = ipu::detail::sched::stage_times(e.programs[static_cast<std::size_t>(ipu::program_index::main)],
                                                     e.stages.size());
  const double us_per_cycle = 1e6 / static_cast<double>(a.clock_hz);
  rep.printf("\n%-6s %-4s %-6s %-5s %-12s %-10s %-12s %-12s %-8s %s\n", "stage", "IPU", "phase", "ops", "cycles", "us",
              "compute", "in", "out", "sync");
  j["clock_hz"] = a.clock_hz;
  j["stages"] = nlohmann::json::array();
  for (const auto& st : e.stages) {
    const auto& t = times[st.id];
    j["stages"].push_back({{"stage", st.id}, {"ipu", st.ipu},
                           {"phase", st.phase >= 0 ? nlohmann::json(st.phase) : nlohmann::json(nullptr)},
                           {"ops", st.ops.size()}, {"cycles", st.cycles},
                           {"seconds", static_cast<double>(st.cycles) / static_cast<double>(a.clock_hz)},
                           {"compute", t.compute}, {"in", t.in}, {"out", t.to_host + t.store}, {"sync", t.sync},
                           {"slowest", st.id == e.predicted.slowest_stage && e.stages.size() > 1}});
    rep.printf("%-6u %-4u %-6s %-5zu %-12llu %-10.2f %-12llu %-12llu %-8llu %llu%s\n", st.id, st.ipu,
                st.phase >= 0 ? std::to_string(st.phase).c_str() : "-", st.ops.size(),
                static_cast<unsigned long long>(st.cycles), static_cast<double>(st.cycles) * us_per_cycle,
                static_cast<unsigned long long>(t.compute), static_cast<unsigned long long>(t.in),
                static_cast<unsigned long long>(t.to_host + t.store), static_cast<unsigned long long>(t.sync),
                st.id == e.predicted.slowest_stage && e.stages.size() > 1 ? "  <- slowest" : "");
  }
  const auto& p = e.predicted;
  j["pipeline_bubble"] = p.pipeline_bubble;
  j["streaming_memory_bytes"] = p.streaming_memory_bytes;
  j["predicted"] = {{"cycles_per_step", p.cycles_per_step}, {"seconds_per_step", p.seconds_per_step},
                    {"latency_cycles", p.latency_cycles}, {"latency_seconds", p.latency_seconds},
                    {"samples_per_second", p.samples_per_second}};
  rep.printf("\npipeline bubble: %.1f%%\n", 100.0 * p.pipeline_bubble);
  if (p.streaming_memory_bytes > 0)
    rep.printf("Streaming Memory traffic: %s per step (busiest IPU)\n", mib(p.streaming_memory_bytes).c_str());
  rep.printf("predicted: %llu cycles per step = %.3f ms; latency %llu cycles = %.3f ms; throughput %.1f samples/s\n",
              static_cast<unsigned long long>(p.cycles_per_step), p.seconds_per_step * 1e3,
              static_cast<unsigned long long>(p.latency_cycles), p.latency_seconds * 1e3, p.samples_per_second);
}

/// --recompute: the command line's names, or PopART's (recomputation_from).
inline ipu::recomputation parse_recompute(const std::string& name) {
  if (name == "none") return ipu::recomputation::none;
  if (name == "standard") return ipu::recomputation::standard;
  if (name == "norm-only") return ipu::recomputation::norm_only;
  if (name == "all") return ipu::recomputation::all;
  try {
    return ipu::recomputation_from(name);
  } catch (const ipu::error&) {
    throw ipu::error(ipu::error_category::usage, "unknown recomputation '" + name + "'", "--recompute",
                     "use none, standard, norm-only or all (or PopART's None, Standard, NormOnly, RecomputeAll, Pipeline)");
  }
}

inline ipu::train::optimizer make_optimizer(const plan_args& a) {
  const auto kind = lower_case(a.optimizer.value_or("sgd"));
  if (a.momentum && kind != "sgd" && kind != "rmsprop")
    throw ipu::error(ipu::error_category::usage, "--momentum applies to sgd and rmsprop, not " + kind, "--momentum",
                     "leave it out, or use --optimizer sgd");
  auto with_momentum = [&](auto o) {
    if (a.momentum) o.momentum = *a.momentum;
    return o;
  };
  if (kind == "sgd") return with_momentum(ipu::train::sgd{});
  if (kind == "adam" || kind == "adamw") {
    ipu::train::adam o;
    o.decoupled_weight_decay = kind == "adamw";
    return o;
  }
  if (kind == "rmsprop") return with_momentum(ipu::train::rmsprop{});
  if (kind == "lamb") return ipu::train::lamb{};
  if (kind == "adagrad") return ipu::train::adagrad{};
  throw ipu::error(ipu::error_category::usage, "unknown optimizer '" + *a.optimizer + "'", "--optimizer",
                   "use sgd, adam, adamw, rmsprop, lamb or adagrad");
}

inline void print_training_plan(report& rep, const ipu::executable& e, const ipu::training_prediction& p, const plan_args& args,
                                std::uint32_t plan_replicas, bool auto_planned) {
  const auto& g = e.model;
  const auto& a = e.device.arch;
  std::uint64_t params = 0;
  for (const auto& t : g.tensors())
    if (t.kind == ipu::tensor_kind::variable) params += static_cast<std::uint64_t>(std::max<std::int64_t>(t.info.num_elements(), 0));
  const auto precision = e.precision ? std::string(ipu::to_string(*e.precision)) : std::string("as the model declares");
  rep.printf("training: '%s', %.2f M weights, optimizer %s, loss %s, precision %s (partials %s)\n", g.name().c_str(),
              static_cast<double>(params) / 1e6, lower_case(args.optimizer.value_or("sgd")).c_str(), args.loss.value_or("mse").c_str(),
              precision.c_str(), std::string(ipu::to_string(e.partials_type)).c_str());
  const std::uint64_t global = p.micro_batch_size * p.gradient_accumulation * p.replicas;
  rep.printf("device: %s; strategy: %s, %u IPU%s per replica x %u replica%s", ipu::to_string(e.device).c_str(),
              e.strategy.c_str(), e.ipus_per_replica, e.ipus_per_replica == 1 ? "" : "s", p.replicas, p.replicas == 1 ? "" : "s");
  if (p.all_reduce.pods > 1) rep.printf(" over %u pods (%u replicas per pod)", p.all_reduce.pods, plan_replicas);
  rep.printf("%s\n", auto_planned ? "; placement by the automatic planner" : "");
  rep.printf("batch: micro-batch %llu x gradient accumulation %llu x %u replicas = global batch %llu; %llu weight update%s per step\n",
              static_cast<unsigned long long>(p.micro_batch_size), static_cast<unsigned long long>(p.gradient_accumulation),
              p.replicas, static_cast<unsigned long long>(global), static_cast<unsigned long long>(p.weight_updates_per_step),
              p.weight_updates_per_step == 1 ? "" : "s");
  if (p.pipelined && p.stages.size() > 1)
    rep.printf("pipeline: %llu stages (%zu forward, their backward, the last combined), %zu cycles per weight update\n",
                static_cast<unsigned long long>(p.pipeline_stages), p.stages.size(), p.cycles.size());
  if (!p.uncosted_ops.empty()) {
    std::string names;
    for (const auto& n : p.uncosted_ops) names += (names.empty() ? "" : ", ") + n;
    rep.printf("cost rules: missing for %s (costed by the generic rule)\n", names.c_str());
  } else {
    rep.printf("cost rules: every op of the step has one in the op table\n");
  }

  auto& j = rep.json;
  j["training"] = {{"name", g.name()}, {"weights", params}, {"optimizer", lower_case(args.optimizer.value_or("sgd"))},
                   {"loss", args.loss.value_or("mse")},
                   {"precision", e.precision ? nlohmann::json(std::string(ipu::to_string(*e.precision))) : nlohmann::json(nullptr)},
                   {"partials", std::string(ipu::to_string(e.partials_type))}};
  j["device"] = ipu::to_string(e.device);
  j["strategy"] = e.strategy;
  j["ipus_per_replica"] = e.ipus_per_replica;
  j["replicas"] = p.replicas;
  j["pods"] = p.all_reduce.pods;
  j["replicas_per_pod"] = plan_replicas;
  j["auto_planned"] = auto_planned;
  j["batch"] = {{"micro_batch", p.micro_batch_size}, {"gradient_accumulation", p.gradient_accumulation},
                {"replicas", p.replicas}, {"global_batch", global}, {"weight_updates_per_step", p.weight_updates_per_step}};
  if (p.pipelined && p.stages.size() > 1)
    j["pipeline"] = {{"stages", p.pipeline_stages}, {"forward_stages", p.stages.size()}, {"cycles_per_weight_update", p.cycles.size()}};
  j["uncosted_ops"] = p.uncosted_ops;
  j["clock_hz"] = a.clock_hz;

  const auto per_ipu = a.sram_bytes_per_ipu();
  j["memory"] = nlohmann::json::array();
  for (const auto& m : p.memory)
    j["memory"].push_back({{"ipu", m.ipu}, {"plan_bytes", m.plan_bytes}, {"activation_bytes", m.activation_bytes},
                           {"stash_bytes", m.stash_bytes}, {"gradient_bytes", m.gradient_bytes}, {"optimizer_bytes", m.optimizer_bytes},
                           {"total_bytes", m.total()}, {"ipu_bytes", per_ipu}});
  j["gradients"] = p.gradient_accumulation > 1 ? "accumulators" : "one per weight";
  j["optimizer_state_sharded"] = args.shard_optimizer_state;
  j["stages"] = nlohmann::json::array();
  for (const auto& s : p.stages)
    j["stages"].push_back({{"stage", s.stage}, {"ipu", s.ipu}, {"forward_ops", s.forward_ops}, {"backward_ops", s.backward_ops},
                           {"update_ops", s.update_ops}, {"forward", s.forward + s.forward_io},
                           {"backward", s.backward + s.backward_io}, {"recompute", s.recompute}, {"update", s.update}});
  rep.printf("\n%-4s %-12s %-12s %-12s %-12s %-12s %-12s %s\n", "IPU", "plan", "activations", "stash", "gradients", "optimizer",
             "total", "of the IPU");
  for (const auto& m : p.memory)
    rep.printf("%-4u %-12s %-12s %-12s %-12s %-12s %-12s %5.1f%%\n", m.ipu, mib(m.plan_bytes).c_str(), mib(m.activation_bytes).c_str(),
                mib(m.stash_bytes).c_str(), mib(m.gradient_bytes).c_str(), mib(m.optimizer_bytes).c_str(), mib(m.total()).c_str(),
                100.0 * static_cast<double>(m.total()) / static_cast<double>(per_ipu));
  rep.printf("(plan: weights, live activations, stage-input stashes, temporaries and vertex state of the forward plan; "
              "activations: what the backward reads; stash: what a pipeline's backward reads and does not recompute, for "
              "the other micro-batches in flight; gradients: %s%s)\n",
              p.gradient_accumulation > 1 ? "accumulators" : "one per weight",
              args.shard_optimizer_state ? "; optimizer state sharded over the replicas" : "");

  const double us = 1e6 / static_cast<double>(a.clock_hz);
  rep.printf("\n%-6s %-4s %-14s %-12s %-12s %-12s %-12s %s\n", "stage", "IPU", "ops f/b/u", "forward", "backward",
              "recompute", "update", "(cycles per micro-batch; update per weight update)");
  for (const auto& s : p.stages) {
    char ops[48];
    std::snprintf(ops, sizeof ops, "%u/%u/%u", s.forward_ops, s.backward_ops, s.update_ops);
    rep.printf("%-6u %-4u %-14s %-12llu %-12llu %-12llu %-12llu\n", s.stage, s.ipu, ops,
                static_cast<unsigned long long>(s.forward + s.forward_io),
                static_cast<unsigned long long>(s.backward + s.backward_io), static_cast<unsigned long long>(s.recompute),
                static_cast<unsigned long long>(s.update));
  }
  const auto& ar = p.all_reduce;
  std::uint64_t grad_bytes = 0;
  for (const auto& m : p.memory) grad_bytes = std::max(grad_bytes, m.weight_bytes);
  if (p.replicas > 1)
    j["all_reduce"] = {{"gradient_bytes", grad_bytes}, {"replicas", p.replicas}, {"cycles", ar.cycles},
                       {"seconds", static_cast<double>(ar.cycles) / static_cast<double>(a.clock_hz)},
                       {"link_seconds", ar.link_seconds}, {"ring_links", ar.ring_links}, {"link_sharing", ar.link_sharing},
                       {"gateway_seconds", ar.gateway_seconds}, {"sync_cycles", ar.sync_cycles}};
  else
    j["all_reduce"] = nullptr;
  j["weight_update"] = {{"accumulation_cycles", p.accumulation_cycles}, {"pipeline_bubble", p.pipeline_bubble},
                        {"all_reduce_cycles", ar.cycles}, {"optimizer_cycles", p.update_cycles},
                        {"output_cycles", p.output_cycles}, {"cycles", p.cycles_per_update},
                        {"seconds", static_cast<double>(p.cycles_per_update) / static_cast<double>(a.clock_hz)}};
  j["predicted"] = {{"cycles_per_step", p.cycles_per_step}, {"seconds_per_step", p.seconds_per_step},
                    {"samples_per_second", p.samples_per_second}};
  if (p.replicas > 1)
    rep.printf("\nall-reduce: %s of gradients per IPU over %u replicas: %llu cycles = %.3f ms (IPU-Links %.3f ms, ring of %u "
                "link%s%s; gateway %.3f ms; syncs %llu cycles)\n",
                mib(grad_bytes).c_str(), p.replicas, static_cast<unsigned long long>(ar.cycles),
                static_cast<double>(ar.cycles) * us / 1e3, ar.link_seconds * 1e3, ar.ring_links, ar.ring_links == 1 ? "" : "s",
                ar.link_sharing > 1 ? (" shared by " + std::to_string(ar.link_sharing) + " rings").c_str() : "",
                ar.gateway_seconds * 1e3, static_cast<unsigned long long>(ar.sync_cycles));
  else
    rep.printf("\nall-reduce: none (one replica)\n");
  rep.printf("weight update: micro-batches %llu cycles (bubble %.1f%%) + all-reduce %llu + optimizer %llu + outputs %llu = %llu "
              "cycles = %.3f ms\n",
              static_cast<unsigned long long>(p.accumulation_cycles), 100.0 * p.pipeline_bubble,
              static_cast<unsigned long long>(ar.cycles), static_cast<unsigned long long>(p.update_cycles),
              static_cast<unsigned long long>(p.output_cycles),
              static_cast<unsigned long long>(p.cycles_per_update), static_cast<double>(p.cycles_per_update) * us / 1e3);
  rep.printf("predicted: %llu cycles per step = %.3f ms; throughput %.1f samples/s\n",
              static_cast<unsigned long long>(p.cycles_per_step), p.seconds_per_step * 1e3, p.samples_per_second);
}

}  // namespace detail

/// Plans as plan_command() does, writing the text and JSON into `rep` (ipu train shares its own).
inline void plan_into(report& rep, const plan_args& args) {
  using namespace ipu;
  plan_args a = args;  // with the options file's settings
  for (const auto& [out, flag] : {std::pair{a.trace, "--trace"}, std::pair{a.report, "--report"}})
    if (!out.empty()) refuse_overwriting_inputs(out, {a.model, a.options_file}, flag);
  if (!a.options_file.empty()) {
    static constexpr std::string_view applied[] = {"deviceIterations(", "replicationFactor(", "autoRoundNumIPUs("};
    options base;
    base.device_iterations(static_cast<std::int64_t>(a.device_iterations))
        .replication_factor(static_cast<std::int64_t>(a.replicas))
        .auto_round_num_ipus(a.auto_round);
    const auto f = read_options_file(a.options_file, base, applied, "ipu plan");
    auto iterations = static_cast<std::int64_t>(a.device_iterations), replicas = static_cast<std::int64_t>(a.replicas);
    take_from_file(iterations, f.device_iterations(), a.device_iterations_given, "--batches-per-step", "deviceIterations",
                   a.options_file);
    take_from_file(replicas, f.replication_factor(), a.replicas_given, "--replicas", "replicationFactor", a.options_file);
    if (replicas > (1 << 20))
      throw error(error_category::usage, "replicationFactor(" + std::to_string(replicas) + ") is too large",
                  "--options '" + a.options_file + "'", "use at most 2^20 replicas");
    a.device_iterations = static_cast<std::uint64_t>(iterations);
    a.replicas = static_cast<std::uint32_t>(replicas);
    if (args.auto_round && !f.auto_round_num_ipus())
      throw error(error_category::usage, "--auto-round and the options file's autoRoundNumIPUs(False) disagree",
                  "--options '" + a.options_file + "'", "set it in one place");
    a.auto_round = f.auto_round_num_ipus();
  }
  const auto mode = parse_strategy(a.strategy);
  const bool phased = mode == execution_mode::serial_phased || mode == execution_mode::parallel_phased;
  if (a.ipus == 0 || a.replicas == 0)
    throw error(error_category::usage, "--ipus and --replicas must be at least 1", "ipu plan", "pass positive counts");
  if (!a.train) {
    const char* flag = a.optimizer ? "--optimizer" : a.loss ? "--loss" : a.output ? "--output" : a.momentum ? "--momentum"
                     : a.gradient_accumulation ? "--gradient-accumulation"
                     : a.shard_optimizer_state ? "--replicated-tensor-sharding" : a.recompute ? "--recompute" : nullptr;
    if (flag)
      throw error(error_category::usage, std::string(flag) + " applies to training", flag, "add --train, or leave it out");
  } else if (phased) {
    throw error(error_category::usage, "--train plans sharded or pipelined training; phased training is not in the cost model yet",
                "--strategy " + a.strategy, "use --strategy sharded or pipelined");
  }
  const auto recompute = a.recompute ? detail::parse_recompute(*a.recompute) : recomputation::none;
  if (recompute != recomputation::none && mode != execution_mode::pipelined)
    throw error(error_category::usage,
                "recomputation " + std::string(to_string(recompute)) + " was asked of a step that is not pipelined",
                "--recompute", "use --strategy pipelined, or --recompute none (only a pipeline's backward stages recompute)");
  if (a.train && !a.report.empty())
    throw error(error_category::usage, "--report draws an inference plan; the training step has --trace", "--report",
                "leave out --train, or use --trace");
  // A missing output directory fails now, not after planning a large model.
  for (const auto& [path, flag] : {std::pair{&a.trace, "--trace"}, std::pair{&a.report, "--report"}}) {
    if (path->empty()) continue;
    auto dir = std::filesystem::path(*path).parent_path();
    if (dir.empty()) dir = ".";
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec))
      throw error(error_category::io, "the directory '" + dir.string() + "' does not exist", std::string(flag) + " '" + *path + "'",
                  "create it, or give a path in an existing directory");
  }
  if (a.train && a.gradient_accumulation && *a.gradient_accumulation == 0)
    throw error(error_category::usage, "--gradient-accumulation 0", "--gradient-accumulation", "accumulate at least 1 micro-batch");
  // Training replicas beyond one 64-IPU pod: whole pods joined by gateway links; the plan is one pod's.
  std::uint32_t plan_replicas = a.replicas;
  if (a.train && std::uint64_t{a.ipus} * a.replicas > max_ipus && !a.auto_round) {
    const std::uint64_t all = std::uint64_t{a.ipus} * a.replicas;
    if (a.ipus > max_ipus || all % max_ipus != 0)
      throw error(error_category::usage,
                  std::to_string(a.ipus) + " IPUs x " + std::to_string(a.replicas) + " replicas = " + std::to_string(all) +
                      " IPUs exceed a 64-IPU pod without filling whole pods",
                  "ipu plan --train", "use replicas whose IPUs are a multiple of 64 (whole pods) or at most 64 IPUs");
    plan_replicas = max_ipus / a.ipus;
  }
  std::uint64_t total = std::uint64_t{a.ipus} * plan_replicas;
  if (a.auto_round) {
    std::uint64_t r = 1;
    while (r < total) r *= 2;
    total = r;
  }
  if (total > max_ipus)
    throw error(error_category::usage, std::to_string(a.ipus) + " IPUs x " + std::to_string(a.replicas) +
                                           " replicas need more than the 64 IPUs a device can have",
                "ipu plan", "use fewer IPUs or replicas");
  const auto device = device_from_name(a.device, static_cast<std::uint32_t>(total));
  if (device.kind != device_kind::ipu)
    throw error(error_category::usage, "the cost model needs an IPU device, not '" + a.device + "'", "--device",
                "use mk1, mk2 or bow");

  plan_options o;
  o.batches_per_step = a.device_iterations;
  o.replication_factor = plan_replicas;
  o.is_inference = !a.train;
  o.gradient_accumulation = a.train ? a.gradient_accumulation.value_or(1) : 1;
  o.auto_round_num_ipus = a.auto_round;
  o.available_memory_proportion = a.available_memory_proportion;
  if (!a.precision.empty()) o.precision = detail::parse_float_type(a.precision, "--precision");
  o.partials_type = detail::parse_float_type(a.partials, "--partials");

  graph model = load_model_with_batch(a.model, a.batch, parse_input_shapes(a.input_shapes));
  check_no_strings(model, "an IPU plan");
  if (a.train)
    // The cost model reads shapes, never weight values: dropping them lets a large model (BERT-Large's
    // 1.3 GB) be planned and its training step built without copies of its weights.
    for (tensor_id t = 0; t < model.num_tensors(); ++t)
      if (auto& n = model.tensor(t); n.kind == tensor_kind::variable && n.data.size() > 4096) n.data = {};
  const graph forward = model;  // unannotated: the training step is built from it
  std::optional<train::training_graph> tg;
  auto_plan_options ao;
  if (a.train) {
    if (detail::annotated(forward))
      throw error(error_category::usage, "the model carries IPU, stage or phase annotations", "ipu plan --train",
                  "plan an unannotated model: the automatic planner places its stages");
    train::training_options to;
    to.output = a.output.value_or("");
    to.loss.kind = train::parse_loss_kind(lower_case(a.loss.value_or("mse")));
    to.opt = detail::make_optimizer(a);
    to.gradient_accumulation = static_cast<std::int64_t>(o.gradient_accumulation);
    tg = train::make_training_graph(forward, to);
    // The planner's memory estimate counts each weight with its gradient (or accumulator) and state.
    std::uint64_t weights = 0, extra = 0;
    for (const auto& w : tg->weights) weights += w.info.num_bytes();
    for (const auto& s : tg->state) extra += s.info.num_bytes() / (a.shard_optimizer_state ? a.replicas : 1);
    for (const auto& acc : tg->accumulators) extra += acc.info.num_bytes();
    if (tg->accumulators.empty()) extra += weights;
    if (weights > 0) ao.variable_copies = 1.0 + static_cast<double>(extra) / static_cast<double>(weights);
    ao.kept_output_copies = 1;
    // What the estimate leaves out (stashes, the plan's own activations, the backward's temporaries)
    // needs room too.
    ao.memory_fill = 0.7;
  }
  bool auto_planned = false;
  if (!detail::annotated(model) && (a.ipus > 1 || phased)) {
    // Per-replica view of the device for the planner.
    const auto replica = make_device_description(device.arch, [&] {
      std::uint32_t n = 1;
      while (n < a.ipus) n *= 2;
      return n;
    }());
    if (!phased) model = propose_stages(model, replica, a.ipus, o, ao).annotated;
    else model = propose_phases(model, replica, a.ipus, mode == execution_mode::parallel_phased, o).annotated;
    auto_planned = true;
  }
  strategy_settings s;
  s.mode = mode;
  s.tensors_liveness = detail::parse_liveness(a.liveness);
  const auto e = plan_with(s, model, device, o);
  std::optional<ipu::training_prediction> tp;
  if (tg) {
    tp = predict_training(e, *tg, training_plan_options{&o, a.replicas, a.shard_optimizer_state, recompute});
    detail::print_training_plan(rep, e, *tp, a, plan_replicas, auto_planned);
  } else {
    detail::print_plan(rep, e, auto_planned);
  }
  auto write = [](const std::string& path, const std::string& text, const char* what) {
    write_file_atomically(path, std::as_bytes(std::span(text.data(), text.size())), what);
  };
  if (!a.trace.empty()) {
    std::ostringstream out;
    if (tp) write_predicted_training_chrome_trace(out, e, *tp);
    else write_predicted_chrome_trace(out, e);
    write(a.trace, out.str(), "trace file");
    rep.printf("wrote the predicted timeline to %s\n", a.trace.c_str());
    rep.json["trace"] = a.trace;
  }
  if (!a.report.empty()) {
    write(a.report, plan_report_html(e), "plan report");
    rep.printf("wrote the plan report to %s\n", a.report.c_str());
    rep.json["report"] = a.report;
  }
}

inline void plan_command(const plan_args& args) {
  report rep(args.json, {args.model});
  plan_into(rep, args);
  rep.finish();
}

/// Adds the `plan` subcommand to the tool.
inline void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<plan_args>();
  auto* cmd = app.add_subcommand("plan", "plan an ONNX model on simulated IPUs and print the cost model's predictions");
  cmd->add_option("model", args->model, "the ONNX model")->required();
  cmd->add_option("--device", args->device, "mk1, mk2 or bow")->capture_default_str();
  cmd->add_option("--ipus", args->ipus, "IPUs per replica")->capture_default_str()->check(CLI::Range(1u, 1024u));
  cmd->add_option("--strategy", args->strategy, "sharded, pipelined, serial-phased or parallel-phased")->capture_default_str();
  auto* replicas = cmd->add_option("--replicas", args->replicas, "replication factor")->capture_default_str()->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--batch", args->batch, "samples per micro-batch: the leading dimension of every graph input --input-shape does not name")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 31));
  cmd->add_option("--input-shape", args->input_shapes, "fix an input's dynamic dimensions: NAME=D0,D1,... (repeatable)");
  cmd->add_option("--precision", args->precision, "fp32 or fp16: cost and store float tensors as this type");
  cmd->add_option("--partials", args->partials, "fp32 or fp16: matmul / convolution partial sums")->capture_default_str();
  cmd->add_option("--liveness", args->liveness,
                  "phased: always-live, off-chip-after-fwd, off-chip-after-fwd-no-overlap, off-chip-after-each-phase")
      ->capture_default_str();
  auto* iterations = cmd->add_option("--batches-per-step,--device-iterations", args->device_iterations, "micro-batches per step (device iterations)")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 31));
  cmd->add_option("--available-memory-proportion", args->available_memory_proportion,
                  "share of tile memory an op's temporaries may use")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_flag("--auto-round", args->auto_round, "reserve the next power of two of IPUs (autoRoundNumIPUs)");
  cmd->add_option("--trace", args->trace, "write the predicted timeline as Chrome-trace JSON");
  cmd->add_option("--report", args->report,
                  "write the plan as one self-contained HTML page: pipeline chart, tile-memory maps, cycles per stage");
  cmd->add_flag("--train", args->train, "plan a training step: forward, backward, gradient all-reduce and optimizer");
  cmd->add_option("--optimizer", args->optimizer, "--train: sgd (default), adam, adamw, rmsprop, lamb or adagrad");
  cmd->add_option("--momentum", args->momentum, "--train: SGD or RMSprop momentum (a momentum buffer per weight)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--loss", args->loss, "--train: mse (default), l1, nll, cross-entropy or bce");
  cmd->add_option("--output", args->output, "--train: the model output the loss applies to (default: the only one)");
  cmd->add_option("--gradient-accumulation", args->gradient_accumulation,
                  "--train: micro-batches per weight update (pipelines: at least 2 x stages - 1; default 1)")
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 31));
  cmd->add_flag("--replicated-tensor-sharding", args->shard_optimizer_state,
                "--train: shard the optimizer state over the replicas (each keeps and updates 1/R of it)");
  cmd->add_option("--recompute", args->recompute,
                  "--train, pipelined: none (default), standard, norm-only or all (PopART's autoRecomputation): the "
                  "forward ops each backward stage reruns");
  cmd->add_option("--options", args->options_file,
                  "a PopTorch options file: deviceIterations, replicationFactor and autoRoundNumIPUs (others are refused)");
  add_json_option(*cmd, args->json);
  cmd->callback([args, iterations, replicas] {
    args->device_iterations_given = iterations->count() > 0;
    args->replicas_given = replicas->count() > 0;
    plan_command(*args);
  });
}

}  // namespace ipu_cli
