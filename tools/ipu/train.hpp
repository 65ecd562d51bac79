#pragma once
// `ipu train MODEL.onnx --output NAME --loss mse|l1|nll|cross-entropy|bce --input NAME=FILE [--input ...]
//  --labels FILE [--optimizer sgd|adam|adamw|rmsprop|lamb|adagrad] [--lr X] [--momentum X] [--nesterov]
//  [--weight-decay X] [--loss-scaling X] [--gradient-accumulation N] [--steps N] [--batch N]
//  [--options FILE] [--device NAME] [--ipus N] [--strategy NAME] [--recompute none|standard|norm-only|all]
//  [--replicas N] [--mpi-timeout S] -o TRAINED.onnx|TRAINED.popef`
//
// Trains the model's weights with the loss applied to output NAME (mean reduction). A step is one
// weight update on `gradient accumulation` times --replicas micro-batches of --batch rows each
// (default: the model's leading input dimension), taken in order from every input file and from the
// labels: micro-batch j of step k starts at row (k * accumulation * replicas + j) * batch, wrapping
// around at the end, and runs on replica j % replicas; the update uses the mean of their gradients.
// The replicas run at once, on host threads, and their gradients are added in the order of j, so
// --replicas R trains the weights --replicas 1 with R times the accumulation trains, bit for bit
// (each replica keeps its own BatchNormalization running statistics; the file takes replica 0's). FILE is a NumPy .npy or an ONNX TensorProto .pb; float64 data is
// converted to the model's float32. The trained model is written with its weights under their
// original names, as ONNX, or compiled into a PopEF file (for --device/--ipus/--strategy; default
// one Mk2 IPU).
//
// --options FILE is a PopTorch options file; training applies Training.gradientAccumulation,
// Training.accumulationAndReplicationReductionType, randomSeed (Dropout masks),
// Training.setAutomaticLossScaling, replicationFactor and _Popart.set("autoRecomputation", ...). Anything else it
// sets is refused, naming it, as is a flag that says otherwise than the file.
//
// --recompute (PopART's autoRecomputation; also its names None, Standard, NormOnly, RecomputeAll,
// Pipeline) makes a pipelined step's backward stages rerun forward ops instead of stashing their
// results; the weights do not change. It applies to --strategy pipelined only, and is refused
// otherwise. A placed run prints what it recomputes and the stash it plans.
//
// --device/--ipus/--strategy plan the training step for that device as `ipu compile` plans an
// inference graph and print the predicted IPU throughput. --strategy pipelined or serial-/parallel-
// phased also runs the step so on host threads (ipu/exec/training_executor.hpp): the automatic
// planner cuts the model into one stage per IPU (or into phases), the backward pass gets its own
// stages, and micro-batches overlap; the trained weights are bit for bit those of a plain run.
// Sharded and pipelined steps on mk1/mk2/bow are predicted by sched::predict_training, and print
// what `ipu plan --train` prints for the same flags (its default batches per step). --replicas R
// runs each step's micro-batches on R replicas at once; it combines with --device/--ipus/--strategy
// for sharded and pipelined steps (the prediction includes the gradients' all-reduce), not phased.
//
// Under `mpirun -np P` (OpenMPI's OMPI_COMM_WORLD_SIZE set; the tool built with the ipu::mpi
// component) the P processes share the R replicas, R / P each, as PopRun's instances do
// (ipu/dist/session.hpp): every process is given only its replicas' rows of each step (micro-batch
// a * R + r to the process running replica r) and, with P > 1, reads only those rows of a .npy file
// (its header at the start, then the rows each step; train_data.hpp), though a .pb file whole
// (protobuf parses the whole message); --json's "mpi" says what rank 0 read. The weights are those of one process
// running the R replicas, bit for bit, and only rank 0 prints the steps and writes -o. Each step's
// exchange waits at most --mpi-timeout seconds (default 60) for the other ranks, then fails naming
// the step and the ranks that did not arrive; a rank that fails ends the job (MPI_Abort) so that no
// other waits for it.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "ipu/compile/compile.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/error.hpp"
#include "ipu/onnx/export.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/poptorch/options_file.hpp"
#include "ipu/sched/auto_planner.hpp"
#include "ipu/exec/training_executor.hpp"
#include "ipu/train/session.hpp"
#ifdef IPU_WITH_MPI
#include "ipu/dist/session.hpp"
#endif
#include "compile.hpp"
#include "plan.hpp"
#include "run.hpp"
#include "json_output.hpp"
#include "train_data.hpp"

namespace ipu_cli {

struct train_args {
  json_option json;
  std::string model;
  std::string output;  // the model output the loss applies to
  std::string loss;
  std::vector<std::string> inputs;
  std::string labels;
  std::string optimizer = "sgd";
  double lr = 0.01;
  std::optional<double> momentum;
  bool nesterov = false;
  std::optional<double> weight_decay;
  std::optional<double> loss_scaling;
  std::optional<std::int64_t> gradient_accumulation;  // unset: the options file's, else 1
  std::int64_t steps = 1;
  std::int64_t batch = 0;  // 0: the model's leading input dimension
  std::string options_file;
  // The strategy flags, as `ipu compile` has them; any of the first three plans the step.
  std::optional<std::string> device;
  std::optional<std::uint32_t> ipus;
  std::optional<std::string> strategy;
  std::optional<std::string> recompute;  // unset: the options file's, else none
  std::optional<std::int64_t> replicas;  // unset: the options file's, else 1
  std::optional<double> mpi_timeout;     // seconds; only under mpirun
  std::string trained;  // -o
};

namespace train_detail {

inline ipu::error usage(const std::string& what, const std::string& where, const std::string& fix = {}) {
  return ipu::error(ipu::error_category::usage, what, where, fix);
}

inline ipu::train::optimizer make_optimizer(const train_args& a) {
  const std::string& kind = a.optimizer;
  if (a.momentum && kind != "sgd" && kind != "rmsprop")
    throw usage("--momentum applies to sgd and rmsprop", "--momentum", kind == "adagrad" ? "" : "Adam's and LAMB's moments are their betas");
  if (a.nesterov && kind != "sgd") throw usage("--nesterov applies to sgd", "--nesterov");
  // A value given on the command line is a variable attribute, one left out keeps its default, as
  // poptorch.optim treats its constructor's arguments.
  auto fill = [&](auto o) {
    o.lr = a.lr;
    // The command line's weight decay is 0 unless given, for every optimizer (LAMB's own default is 0.01).
    o.weight_decay = a.weight_decay ? ipu::train::hyperparameter(*a.weight_decay) : ipu::train::hyperparameter::by_default(0);
    if (a.loss_scaling) o.loss_scaling = *a.loss_scaling;
    if constexpr (requires { o.momentum; })
      if (a.momentum) o.momentum = *a.momentum;
    return o;
  };
  if (kind == "sgd") {
    auto s = fill(ipu::train::sgd{});
    s.nesterov = a.nesterov;
    return s;
  }
  if (kind == "adam" || kind == "adamw") {
    auto o = fill(ipu::train::adam{});
    o.decoupled_weight_decay = kind == "adamw";
    return o;
  }
  if (kind == "rmsprop") return fill(ipu::train::rmsprop{});
  if (kind == "lamb") return fill(ipu::train::lamb{});
  if (kind == "adagrad") return fill(ipu::train::adagrad{});
  throw usage("unknown optimizer '" + kind + "'", "--optimizer", "use sgd, adam, adamw, rmsprop, lamb or adagrad");
}

/// The model with every input's leading dimension set to `batch`, its shapes inferred again.
inline ipu::graph with_batch(const ipu::graph& m, std::int64_t batch) {
  for (const auto& op : m.ops())
    if (!ipu::has_shape_inference(op.domain, op.type))
      throw usage("op " + ipu::graph::describe(op) + " has no shape rule, so the model's batch size cannot change",
                  "--batch " + std::to_string(batch), "export the model with the batch size you train with");
  ipu::graph g(m.name());
  for (ipu::tensor_id t = 0; t < m.num_tensors(); ++t) {
    const auto& n = m.tensor(t);
    auto info = n.info;
    if (n.kind == ipu::tensor_kind::input && info.shape.rank() > 0) {
      auto d = info.shape.dims();
      d[0] = batch;
      info.shape = ipu::shape(d);
    }
    g.add_tensor(n.name, info, n.kind, n.data);
  }
  for (const auto& op : m.ops()) g.add_op(op);
  for (auto t : m.outputs()) g.mark_output(t);
  g.set_opset_imports(m.opset_imports());
  ipu::infer_shapes(g);
  return g;
}


/// What an options file sets for training. Options training does not apply are refused, each by
/// the line to_config() writes for it, so none is accepted and ignored.
struct file_options {
  std::int64_t gradient_accumulation = 1;
  ipu::train::accumulation_reduction reduction = ipu::train::accumulation_reduction::mean;
  std::optional<std::uint64_t> seed;
  bool auto_loss_scaling = false;
  std::int64_t replicas = 1;
  std::optional<ipu::recomputation> recompute;  // set by the file, even to None
};

inline file_options read_options_file(const std::string& file) {
  ipu::options o;
  o.load_from_file(file);
  static constexpr std::string_view applied[] = {"Training.gradientAccumulation(",
                                                 "Training.accumulationAndReplicationReductionType(", "randomSeed(",
                                                 "Training.setAutomaticLossScaling(", "replicationFactor(",
                                                 "_Popart.set(\"autoRecomputation\""};
  for (const auto& line : ipu::settings_not_applied(o, applied)) {
    const auto name = line.substr(0, line.find('('));
    if (name == "deviceIterations")
      throw usage("the options file sets " + line + ": ipu train runs one weight update per host call", file,
                  "leave deviceIterations out; --steps counts the weight updates");
    throw usage("the options file sets " + line + ", which ipu train does not apply", file,
                "ipu train applies Training.gradientAccumulation, Training.accumulationAndReplicationReductionType, "
                "randomSeed, Training.setAutomaticLossScaling, replicationFactor and _Popart.set(\"autoRecomputation\", ...); "
                "the strategy is --device, --ipus and --strategy");
  }
  file_options f;
  f.gradient_accumulation = o.gradient_accumulation();
  f.reduction = o.accumulation_and_replication_reduction_type() == ipu::reduction_type::sum
                    ? ipu::train::accumulation_reduction::sum
                    : ipu::train::accumulation_reduction::mean;
  f.seed = o.random_seed();
  f.auto_loss_scaling = o.automatic_loss_scaling();
  f.replicas = o.replication_factor();
  f.recompute = o.auto_recomputation_set();
  return f;
}

/// --recompute: the command line's names, or PopART's (recomputation_from).
inline ipu::recomputation parse_recompute(const std::string& name) { return detail::parse_recompute(name); }

/// `g` as it runs on the device step after step: what the host does not stream (weights, optimizer
/// state, statistics, accumulators) is a variable that stays on the device, and only `streamed_out`
/// goes back to the host. The ops that update the variables stay: they are the step's work.
inline ipu::graph resident(const ipu::graph& g, const std::vector<std::string>& streamed_in,
                           const std::vector<std::string>& streamed_out) {
  auto listed = [](const std::vector<std::string>& names, const std::string& n) {
    return std::find(names.begin(), names.end(), n) != names.end();
  };
  ipu::graph r(g.name());
  for (ipu::tensor_id t = 0; t < g.num_tensors(); ++t) {
    const auto& n = g.tensor(t);
    const bool on_device = n.kind == ipu::tensor_kind::input && !listed(streamed_in, n.name);
    r.add_tensor(n.name, n.info, on_device ? ipu::tensor_kind::variable : n.kind, n.data);
  }
  for (const auto& op : g.ops()) r.add_op(op);
  for (const auto& n : streamed_out) r.mark_output(*r.find_tensor(n));
  r.set_opset_imports(g.opset_imports());
  return r;
}

/// Plans `g` for the device and strategy, as `ipu compile` does for an unannotated model.
/// Phased strategies split it into at least 4 phases (`ipu compile`'s default), more when one would
/// not fit.
inline ipu::popef::compiled_model plan(const ipu::graph& g, const ipu::device_description& device, ipu::execution_mode mode,
                                       std::int64_t batches_per_step) {
  ipu::options opts;
  opts.device_iterations(batches_per_step);
  ipu::popef::compile_options co;
  if (mode == ipu::execution_mode::serial_phased || mode == ipu::execution_mode::parallel_phased) {
    if (device.kind != ipu::device_kind::ipu)
      throw usage("cannot split a model into phases for the host device", "--strategy",
                  "the automatic planner needs an IPU's figures: use mk1, mk2 or bow");
    ipu::auto_plan_options ao;
    ao.min_phases = 4;
    co.from_annotations = mode;
    const auto annotated = ipu::propose_phases(g, ipu::make_device_description(device.arch, device.num_ipus), device.num_ipus,
                                               mode == ipu::execution_mode::parallel_phased,
                                               ipu::plan_options_from(opts, false), ao)
                               .annotated;
    return ipu::popef::compile(annotated, opts, device, co);
  }
  opts.execution_strategy(mode == ipu::execution_mode::pipelined ? ipu::strategy_settings::pipelined()
                                                                 : ipu::strategy_settings::sharded());
  return ipu::popef::compile(g, opts, device, co);
}

/// The model placed for a pipelined or phased run of its training step: cut by the automatic
/// planner into one stage per IPU, or into phases over the IPUs.
inline ipu::graph placed_model(const ipu::graph& g, const ipu::device_description& device, ipu::execution_mode mode) {
  if (device.kind != ipu::device_kind::ipu)
    throw usage("cannot place the training step on the host device", "--strategy",
                "the automatic planner needs an IPU's figures: use mk1, mk2 or bow");
  const auto d = ipu::make_device_description(device.arch, device.num_ipus);
  if (mode == ipu::execution_mode::pipelined) return ipu::propose_stages(g, d, device.num_ipus).annotated;
  return ipu::propose_phases(g, d, device.num_ipus, mode == ipu::execution_mode::parallel_phased).annotated;
}
inline ipu::placed_training_options placed_options(ipu::execution_mode mode, ipu::recomputation recompute) {
  ipu::placed_training_options p;
  p.recompute = recompute;
  p.placement.schedule = mode == ipu::execution_mode::pipelined       ? ipu::train::training_schedule::pipelined
                         : mode == ipu::execution_mode::serial_phased ? ipu::train::training_schedule::serial_phased
                                                                      : ipu::train::training_schedule::parallel_phased;
  return p;
}

/// The training step planned for the device: its graph once per micro-batch (a pipeline streams
/// the weight update's micro-batches through its stages), then, with gradient accumulation, the
/// update graph once. Prints the plan and the predicted samples per second.
inline void plan_step(report& rep, const ipu::train::training_graph& tg, const ipu::device_description& device, ipu::execution_mode mode,
                      std::int64_t batch, const std::string& where) {
  std::vector<std::string> streamed = tg.model_inputs;
  streamed.push_back(tg.labels);
  streamed.emplace_back(ipu::train::dropout_seed_input);
  const bool pipelined = mode == ipu::execution_mode::pipelined;
  const auto micro = tg.micro_batches;
  ipu::popef::compiled_model step;
  try {
    step = plan(resident(tg.step, streamed, {tg.loss}), device, mode, pipelined ? micro : 1);
  } catch (const ipu::error& e) {
    // The pipeline's depth is the weight update's micro-batches: say so in training's terms.
    if (pipelined && e.message().find("device iterations") != std::string::npos)
      throw usage("the training step does not pipeline: a weight update of " + std::to_string(micro) +
                      " micro-batches is shallower than the pipeline (" + e.message() + ")",
                  where, "give --gradient-accumulation at least the number of stages, " + std::to_string(device.num_ipus));
    throw ipu::error(e.category(), "the training step cannot be planned for the device: " + e.message(), where, e.hint());
  }
  const auto& p = step.plan;
  double seconds = pipelined ? p.predicted.seconds_per_step : static_cast<double>(micro) * p.predicted.seconds_per_step;
  if (micro > 1) {
    try {
      seconds += plan(resident(tg.update, {}, {}), device, ipu::execution_mode::sharded, 1).plan.predicted.seconds_per_step;
    } catch (const ipu::error& e) {
      throw ipu::error(e.category(), "the weight update cannot be planned for the device: " + e.message(), where, e.hint());
    }
  }
  rep.json["plan"] = {{"strategy", p.strategy}, {"device", ipu::to_string(p.device)}, {"stages", p.stages.size()},
                     {"ipus", p.ipus_per_replica}, {"micro_batches", micro}, {"batch", batch}};
  if (p.device.kind == ipu::device_kind::ipu && seconds > 0)
    rep.json["predicted"] = {{"samples_per_second", static_cast<double>(micro) * static_cast<double>(batch) / seconds},
                             {"seconds_per_weight_update", seconds}};
  rep.printf("plan: training step %s on %s, %zu stages on %u IPUs, %lld micro-batches of %lld samples per weight update\n",
              p.strategy.c_str(), ipu::to_string(p.device).c_str(), p.stages.size(), p.ipus_per_replica,
              static_cast<long long>(micro), static_cast<long long>(batch));
  if (p.device.kind == ipu::device_kind::ipu && seconds > 0)
    rep.printf("predicted: %.1f samples/s, %.3f ms per weight update\n",
                static_cast<double>(micro) * static_cast<double>(batch) / seconds, seconds * 1e3);
}

}  // namespace train_detail

namespace train_detail {
#ifdef IPU_WITH_MPI
using communicator = ipu::dist::communicator;
#else
struct communicator {  // one process: MPI is not built in
  [[nodiscard]] int rank() const noexcept { return 0; }
  [[nodiscard]] int size() const noexcept { return 1; }
};
#endif
}  // namespace train_detail

/// Trains, alone (`comm` null) or as one of the ranks of `comm`.
inline void run_train_on(const train_args& a, train_detail::communicator* comm) {
  namespace fs = std::filesystem;
  using train_detail::usage;
  const bool leader = comm == nullptr || comm->rank() == 0;  // prints and writes
  // Only the leader prints; the others' reports stay silent (no --json there).
  report rep(leader ? a.json : json_option{}, {fs::path(a.model), fs::path(a.labels)});
  auto& j = rep.json;
  if (a.replicas && *a.replicas < 1) throw usage("--replicas must be at least 1", "--replicas");
  if (a.steps < 1) throw usage("--steps must be at least 1", "--steps");
  if (!(a.lr >= 0) || !std::isfinite(a.lr)) throw usage("--lr must be a finite value >= 0", "--lr");
  const auto ext = fs::path(a.trained).extension().string();
  if (ext != ".onnx" && ext != ".popef")
    throw usage("-o '" + a.trained + "' is neither .onnx nor .popef", "-o", "write TRAINED.onnx or TRAINED.popef");
  refuse_overwriting_inputs(a.trained, {fs::path(a.model), fs::path(a.labels)}, "-o");
  // Checked before training, which can be long.
  const bool planned = a.device || a.ipus || a.strategy;
  const auto mode = parse_strategy(a.strategy.value_or("sharded"));
  const auto device = ipu::device_from_name(a.device.value_or("mk2"), a.ipus.value_or(1));
  std::int64_t replicas = a.replicas.value_or(1);
  ipu::recomputation recompute = ipu::recomputation::none;
  ipu::train::training_options o;
  o.output = a.output;
  o.loss.kind = ipu::train::parse_loss_kind(a.loss);
  o.opt = train_detail::make_optimizer(a);
  if (a.gradient_accumulation && *a.gradient_accumulation < 1)
    throw usage("--gradient-accumulation must be at least 1", "--gradient-accumulation");
  o.gradient_accumulation = a.gradient_accumulation.value_or(1);
  if (!a.options_file.empty()) {
    const auto f = train_detail::read_options_file(a.options_file);
    if (a.gradient_accumulation && f.gradient_accumulation != 1 && f.gradient_accumulation != *a.gradient_accumulation)
      throw usage("--gradient-accumulation " + std::to_string(*a.gradient_accumulation) + " but the options file says Training.gradientAccumulation(" +
                      std::to_string(f.gradient_accumulation) + ")",
                  "--gradient-accumulation", "give it in one place");
    if (f.gradient_accumulation != 1) o.gradient_accumulation = f.gradient_accumulation;
    if (a.replicas && f.replicas != 1 && f.replicas != *a.replicas)
      throw usage("--replicas " + std::to_string(*a.replicas) + " but the options file says replicationFactor(" +
                      std::to_string(f.replicas) + ")",
                  "--replicas", "give it in one place");
    if (f.replicas != 1) replicas = f.replicas;
    o.reduction = f.reduction;
    if (f.seed) o.seed = *f.seed;
    o.auto_loss_scaling.enabled = f.auto_loss_scaling;
    // The file's value counts when it was written, its default None too.
    if (a.recompute && f.recompute && *f.recompute != train_detail::parse_recompute(*a.recompute))
      throw usage("--recompute " + *a.recompute + " but the options file says _Popart.set(\"autoRecomputation\", " +
                      std::to_string(ipu::popart_value(*f.recompute)) + ")",
                  "--recompute", "give it in one place");
    recompute = f.recompute.value_or(ipu::recomputation::none);
  }
  if (a.recompute) recompute = train_detail::parse_recompute(*a.recompute);
  if (recompute != ipu::recomputation::none && !(planned && mode == ipu::execution_mode::pipelined))
    throw usage("recomputation " + std::string(ipu::to_string(recompute)) + " was asked of a step that is not pipelined",
                a.recompute ? "--recompute" : a.options_file,
                "recomputation applies to a pipeline's backward stages: add --strategy pipelined, or drop it");
  if (o.gradient_accumulation > std::numeric_limits<std::int64_t>::max() / replicas)
    throw usage("--gradient-accumulation " + std::to_string(o.gradient_accumulation) + " times --replicas " +
                    std::to_string(replicas) + " is more micro-batches than can be counted",
                "--replicas", "use fewer micro-batches");
  const auto micro = o.gradient_accumulation * replicas;  // a step's micro-batches, over every replica

  auto model = ipu::onnx::load_model(a.model, limited_import_options());
  if (model.inputs().empty()) throw usage("the model has no inputs", a.model);
  const auto model_batch = model.tensor(model.inputs().front()).info.shape.rank() > 0
                               ? model.tensor(model.inputs().front()).info.shape[0]
                               : 0;
  const auto batch = a.batch == 0 ? model_batch : a.batch;
  if (batch < 1) throw usage("--batch must be at least 1", "--batch", "give the rows per micro-batch");
  if (batch != model_batch) model = train_detail::with_batch(model, batch);
  if (micro > std::numeric_limits<std::int64_t>::max() / batch)
    throw usage("--gradient-accumulation " + std::to_string(micro) + " of " + std::to_string(batch) +
                    " rows each is more rows than can be counted",
                "--gradient-accumulation", "use fewer micro-batches");
  const auto rows_per_step = micro * batch;

  // The data: every model input bound once, all with the labels' number of rows. A process that
  // runs only a share of the replicas (one of several under mpirun: they share them evenly, checked
  // below) uses only its micro-batches' rows, and reads .npy files by rows (train_data.hpp).
  const bool by_rows = comm != nullptr && comm->size() > 1;
  std::vector<std::pair<std::string, train_detail::train_source>> data;
  for (const auto& spec : a.inputs) {
    const auto eq = spec.rfind('=');
    if (eq == std::string::npos || eq == 0) throw usage("'" + spec + "' is not NAME=FILE", "--input", "write --input x=x.npy");
    const auto name = spec.substr(0, eq);
    const auto t = model.find_tensor(name);
    if (!t || model.tensor(*t).kind != ipu::tensor_kind::input) throw usage("the model has no input named '" + name + "'", "--input");
    for (const auto& [n, v] : data)
      if (n == name) throw usage("input '" + name + "' is given twice", "--input");
    data.emplace_back(std::piecewise_construct, std::forward_as_tuple(name),
                      std::forward_as_tuple(spec.substr(eq + 1), model.tensor(*t).info.type, "--input " + name, by_rows));
  }
  if (comm != nullptr && planned)
    throw usage("--device, --ipus or --strategy under mpirun: planning a step spread over processes is not built",
                "mpirun", "plan with one process, or train under mpirun without the plan flags");
  std::optional<ipu::train::training_session> alone;
  // Under mpirun each process is given only its replicas' rows of a step (local inputs): micro-batch
  // a * R + r of the step goes to the process running replica r.
  std::int64_t local_first = 0, local_count = replicas;
#ifdef IPU_WITH_MPI
  std::optional<ipu::dist::distributed_training_session> spread;
  if (comm != nullptr) {
    spread.emplace(*comm, model, o, ipu::cpu::device_options{}, ipu::train::output_mode::final,
                   ipu::train::replication_options{.replicas = replicas},
                   ipu::dist::distributed_options{.steps = static_cast<std::uint64_t>(a.steps), .local_inputs = true});
    local_first = spread->replica_offset();
    local_count = spread->local_replicas();
    if (by_rows != (local_count < replicas))
      throw ipu::error(ipu::error_category::internal, std::string("the data files were opened for ") + (by_rows ? "a share of" : "all of") +
                           " the replicas, but this process runs " + std::to_string(local_count) + " of " +
                           std::to_string(replicas),
                       "ipu train under mpirun");
    if (leader)
      j["mpi"] = {{"processes", comm->size()}, {"replicas", replicas}, {"replicas_per_process", spread->local_replicas()}};
    if (leader)
      rep.printf("mpi: %d processes share %lld replicas, %lld each\n", comm->size(), static_cast<long long>(replicas),
                  static_cast<long long>(spread->local_replicas()));
  }
#endif
  if (comm == nullptr) alone.emplace(model, o, ipu::cpu::device_options{}, ipu::train::output_mode::final,
                                     ipu::train::replication_options{.replicas = replicas});
#ifdef IPU_WITH_MPI
  ipu::train::training_session& s = spread ? spread->session() : *alone;
#else
  ipu::train::training_session& s = *alone;
#endif
  const auto& tg = s.graph_of_step();
  // The PopEF file runs the trained model for inference on the device; a pipeline streams as many
  // batches per step as it has stages (at most one per IPU). Planned before training (the plan does
  // not depend on the weights' values) so that a model that cannot be planned fails at once.
  const std::int64_t popef_batches = mode == ipu::execution_mode::pipelined ? device.num_ipus : 1;
  if (ext == ".popef") {
    try {
      (void)train_detail::plan(model, device, mode, popef_batches);
    } catch (const ipu::error& e) {
      throw ipu::error(e.category(), "the trained model cannot be planned for its PopEF file: " + e.message(),
                       "-o " + a.trained, e.hint().empty() ? "write TRAINED.onnx, or choose another --strategy or --ipus" : e.hint());
    }
  }
  // Sharded and pipelined steps on an IPU are predicted by the training planner, as `ipu plan --train`
  // predicts them for the same flags (replicas and their all-reduce included); phased ones and the
  // host device keep the per-graph estimate below.
  const bool by_planner = planned && device.kind == ipu::device_kind::ipu &&
                          (mode == ipu::execution_mode::sharded || mode == ipu::execution_mode::pipelined);
  if (by_planner) {
    plan_args pa;
    pa.model = a.model;
    pa.device = a.device.value_or("mk2");
    pa.ipus = a.ipus.value_or(1);
    pa.strategy = a.strategy.value_or("sharded");
    if (replicas > (1 << 20)) throw usage("--replicas " + std::to_string(replicas) + " is too large to plan", "--replicas", "use at most 2^20 replicas");
    pa.replicas = static_cast<std::uint32_t>(replicas);
    pa.batch = batch;
    pa.train = true;
    pa.optimizer = a.optimizer;
    pa.momentum = a.momentum;
    pa.loss = a.loss;
    pa.output = a.output;
    pa.gradient_accumulation = static_cast<std::uint64_t>(o.gradient_accumulation);
    if (recompute != ipu::recomputation::none) pa.recompute = std::string(ipu::to_string(recompute));  // PopART's name
    // Before training: a step that does not fit is an error at once. The planner's text goes with
    // this command's, its JSON under "planner".
    report planner(rep.text_on() ? json_option{} : json_option{std::string()});
    plan_into(planner, pa);
    rep.json["planner"] = std::move(planner.json);
  }
  if (planned && !by_planner && replicas > 1)
    throw usage("--replicas " + std::to_string(replicas) + " with a phased strategy or the host device: planning that "
                    "replicated training step is not built yet",
                "--replicas", "use --strategy sharded or pipelined on mk1, mk2 or bow, or --replicas 1");
  if (planned && !by_planner)  // before training: a step that does not fit is an error at once
    train_detail::plan_step(rep, tg, device, mode, batch,
                            "--device " + a.device.value_or("mk2") + " --ipus " + std::to_string(a.ipus.value_or(1)) +
                                " --strategy " + a.strategy.value_or("sharded"));
  // Pipelined and phased strategies also run the step so, on host threads (same results).
  std::optional<ipu::placed_training_session> placed;
  if (planned && mode != ipu::execution_mode::sharded) {
    const auto po = train_detail::placed_options(mode, recompute);
    placed.emplace(train_detail::placed_model(model, device, mode), o, po);
    const std::string schedule(ipu::train::to_string(po.placement.schedule));
    if (leader) rep.printf("run: the training step %s over %zu stages on host threads\n", schedule.c_str(), placed->stages());
    // What recomputation trades: forward ops rerun by the backward stages against the stash they plan.
    std::size_t rerun = 0, stash = 0;
    for (std::size_t k = 0; k < placed->stages(); ++k) {
      rerun += placed->recomputed_ops(k).size();
      stash += placed->memory_plan(k).stash_bytes;
    }
    const std::string recomputation(ipu::to_string(recompute));
    if (leader)
      rep.printf("recomputation: %s, %zu forward ops rerun, %zu bytes of stash planned\n", recomputation.c_str(), rerun, stash);
    j["run"] = {{"schedule", schedule}, {"stages", placed->stages()}, {"recomputation", recomputation},
                {"recomputed_ops", rerun}, {"stash_bytes", stash}};
  }
  for (const auto& n : tg.model_inputs) {
    bool given = false;
    for (const auto& [d, v] : data) given = given || d == n;
    if (!given) throw usage("model input '" + n + "' is not given", "--input", "give --input " + n + "=FILE");
  }
  const auto& labels_info = tg.step.tensor(*tg.step.find_tensor(tg.labels)).info;
  train_detail::train_source labels(a.labels, labels_info.type, "--labels", by_rows);
  const auto total = labels.info().shape.rank() > 0 ? labels.info().shape[0] : 0;
  // The files' shapes (from their headers, when read by rows) against the model's micro-batch.
  auto check_rows = [&](const train_detail::train_source& t, const std::string& what, const ipu::tensor_info& want) {
    const auto& got = t.info().shape;
    if (got.rank() != want.shape.rank() || got.rank() == 0)
      throw usage(what + " is " + ipu::to_string(t.info()) + "; each micro-batch must be " + ipu::to_string(want), what,
                  "give rows of the model's shape, stacked along the first axis");
    for (std::size_t i = 1; i < got.rank(); ++i)
      if (got[i] != want.shape[i])
        throw usage(what + " is " + ipu::to_string(t.info()) + "; each micro-batch must be " + ipu::to_string(want), what);
    if (got[0] != total)
      throw usage(what + " has " + std::to_string(got[0]) + " rows but the labels have " + std::to_string(total), what,
                  "give every input and the labels the same samples");
  };
  check_rows(labels, "--labels", labels_info);
  if (total < 1) throw usage("the labels hold no rows", "--labels");
  for (const auto& [n, t] : data) check_rows(t, "--input " + n, tg.step.tensor(*tg.step.find_tensor(n)).info);
  if (o.loss.kind == ipu::train::loss_kind::nll || o.loss.kind == ipu::train::loss_kind::cross_entropy) {
    const auto& pred = tg.step.tensor(*tg.step.find_tensor(tg.prediction)).info;
    labels.check_classes(pred.shape[1]);  // every label read: at once when the file is read whole
  }

  const double initial_loss_scale = s.loss_scaling();
  j["steps"] = nlohmann::json::array();
  j["total_steps"] = a.steps;
  double first = 0, last = 0;
  std::int64_t step_row = 0;  // the step's first row, kept below the number of rows (k * rows could overflow)
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t every = std::max<std::int64_t>(1, a.steps / 20);
  for (std::int64_t k = 0; k < a.steps; ++k) {
    std::vector<ipu::host_tensor> batches;
    batches.reserve(data.size());
    std::vector<std::pair<std::string, ipu::const_tensor_view>> in;
    // This process's rows of the step: for each accumulation index a, micro-batches
    // a * R + local_first .. + local_count (every row when it runs every replica).
    auto rows_of = [&](train_detail::train_source& t) {
      if (local_count == replicas) return t.take(step_row, rows_per_step);
      const auto per_index = local_count * batch;
      auto dims = t.info().shape.dims();
      dims[0] = o.gradient_accumulation * per_index;
      ipu::host_tensor mine(ipu::tensor_info{t.info().type, ipu::shape(dims)});
      const auto chunk = mine.bytes().size() / static_cast<std::size_t>(o.gradient_accumulation);
      for (std::int64_t acc = 0; acc < o.gradient_accumulation; ++acc) {
        const auto from = (step_row + ((acc * replicas + local_first) * batch) % total) % total;
        const auto part = t.take(from, per_index);
        std::memcpy(mine.bytes().data() + static_cast<std::size_t>(acc) * chunk, part.bytes().data(), chunk);
      }
      return mine;
    };
    for (auto& [n, t] : data) {
      batches.push_back(rows_of(t));
      in.emplace_back(n, batches.back().view());
    }
    const auto lb = rows_of(labels);
    step_row = (step_row + rows_per_step % total) % total;
    const auto r = placed ? placed->run(in, lb.view()) : s.run(in, lb.view());
    if (k == 0) first = r.loss;
    last = r.loss;
    if (!std::isfinite(r.loss))
      throw ipu::error(ipu::error_category::runtime, "the loss is " + std::to_string(r.loss) + " at step " + std::to_string(k + 1),
                       "ipu train", "lower --lr");
    if (leader && ((k + 1) % every == 0 || k + 1 == a.steps)) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const double per_s = static_cast<double>(k + 1) * static_cast<double>(rows_per_step) / std::max(secs, 1e-9);
      rep.printf("step %lld/%lld  loss %.6g  %.1f samples/s\n", static_cast<long long>(k + 1),
                 static_cast<long long>(a.steps), r.loss, per_s);
      rep.flush();
      j["steps"].push_back({{"step", k + 1}, {"loss", r.loss}, {"samples_per_second", per_s}});
    }
  }

#ifdef IPU_WITH_MPI
  if (spread && leader) {  // what this rank read of the files: its share of the rows when by_rows
    std::uint64_t bytes = labels.bytes_read();
    std::int64_t rows = labels.rows_read();
    for (const auto& [n, t] : data) {
      bytes += t.bytes_read();
      rows += t.rows_read();
    }
    j["mpi"]["input_bytes_read"] = bytes;
    j["mpi"]["input_rows_read"] = rows;
    rep.printf("mpi: rank 0 read %llu bytes of the input and label files, %lld rows\n",
               static_cast<unsigned long long>(bytes), static_cast<long long>(rows));
  }
#endif
  if (!leader) return;  // the same weights as rank 0's: one file, one report
  if (o.auto_loss_scaling.enabled)
  {
    rep.printf("automatic loss scaling: loss scale %.6g -> %.6g\n", initial_loss_scale, s.loss_scaling());
    j["loss_scale"] = {{"initial", initial_loss_scale}, {"final", s.loss_scaling()}};
  }
  if (placed) {  // the session writes the model out
    for (const auto& n : placed->weight_names()) s.set_weight(n, placed->weight(n).view());
    for (const auto& n : placed->buffer_names()) s.set_buffer(n, placed->buffer(n).view());
  }
  const auto trained = s.trained_model();
  if (ext == ".onnx") {
    ipu::onnx::save_model(trained, a.trained);
  } else {
    ipu::popef::export_model(train_detail::plan(trained, device, mode, popef_batches), a.trained, true);
  }
  rep.printf("wrote %s\n", a.trained.c_str());
  rep.printf("loss %.6g -> %.6g\n", first, last);
  j["output"] = a.trained;
  j["loss"] = {{"first", first}, {"last", last}};
  rep.finish();
}

/// Trains, alone or, under mpirun, as one of its processes.
inline void run_train(const train_args& a) {
  using train_detail::usage;
  const char* world = std::getenv("OMPI_COMM_WORLD_SIZE");  // set by OpenMPI's mpirun
  if (a.mpi_timeout && world == nullptr)
    throw usage("--mpi-timeout without mpirun: it bounds the wait for the other processes", "--mpi-timeout",
                "run under mpirun -np P, or leave --mpi-timeout out");
#ifdef IPU_WITH_MPI
  if (world != nullptr) {
    const double seconds = a.mpi_timeout.value_or(60.0);
    if (!(seconds > 0) || !(seconds <= 1e6))
      throw usage("--mpi-timeout " + std::to_string(seconds) + " is not in (0, 1e6] seconds", "--mpi-timeout");
    ipu::dist::mpi_environment env(nullptr, nullptr);
    train_detail::communicator comm(std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000 + 0.5)));
    try {
      run_train_on(a, &comm);
    } catch (const std::exception& e) {
      if (comm.size() > 1) {  // the others would wait for this rank: end the job
        std::fprintf(stderr, "%s (rank %d of %d)\n", e.what(), comm.rank(), comm.size());
        std::fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      throw;
    }
    return;
  }
#else
  if (world != nullptr && std::strcmp(world, "1") != 0)
    throw usage(std::string("under mpirun with ") + world + " processes, but this ipu was built without MPI: each would train alone",
                "mpirun", "build with libopenmpi-dev installed (the ipu::mpi component), or run one process");
#endif
  run_train_on(a, nullptr);
}

/// Adds the `train` subcommand to the tool.
inline void add_train_command(CLI::App& app) {
  auto a = std::make_shared<train_args>();
  auto* cmd = app.add_subcommand("train", "train an ONNX model's weights on the host and write the trained model");
  cmd->add_option("model", a->model, "the ONNX model")->required();
  cmd->add_option("--output", a->output, "the model output the loss applies to")->required();
  cmd->add_option("--loss", a->loss, "mse, l1, nll (on log-probabilities), cross-entropy (on scores) or bce (on probabilities)")->required();
  cmd->add_option("--input", a->inputs, "NAME=FILE: a model input's samples, stacked (.npy or .pb; repeatable). Under mpirun each "
                  "process reads only its rows of a .npy file, a .pb file whole")->required();
  cmd->add_option("--labels", a->labels, "the labels, one row per sample (.npy or .pb, read as the inputs are)")->required();
  cmd->add_option("--optimizer", a->optimizer, "sgd, adam, adamw, rmsprop, lamb or adagrad")
      ->capture_default_str()
      ->check(CLI::IsMember({"sgd", "adam", "adamw", "rmsprop", "lamb", "adagrad"}));
  cmd->add_option("--lr", a->lr, "learning rate")->capture_default_str()->check(CLI::NonNegativeNumber);
  cmd->add_option("--momentum", a->momentum, "SGD or RMSprop momentum (default 0)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--nesterov", a->nesterov, "SGD with Nesterov momentum");
  cmd->add_option("--weight-decay", a->weight_decay, "weight decay (default 0; AdamW: decoupled)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--loss-scaling", a->loss_scaling, "multiply the loss by this before the backward pass (default 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gradient-accumulation", a->gradient_accumulation,
                  "micro-batches per weight update (default: the options file's, else 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--steps", a->steps, "weight updates")->capture_default_str()->check(CLI::PositiveNumber);
  cmd->add_option("--batch", a->batch, "rows per micro-batch (default: the model's leading input dimension)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--options", a->options_file,
                  "a PopTorch options file: Training.gradientAccumulation, "
                  "Training.accumulationAndReplicationReductionType, randomSeed, Training.setAutomaticLossScaling");
  cmd->add_option("--device", a->device, "plan the step for mk1, mk2, bow or cpu and print its predicted throughput (default mk2)");
  cmd->add_option("--ipus", a->ipus, "IPUs of the device (a power of two; default 1)")->check(CLI::Range(1u, 1024u));
  cmd->add_option("--strategy", a->strategy,
                  "sharded, pipelined, serial-phased or parallel-phased (default sharded); pipelined and phased also "
                  "run the step so on host threads");
  cmd->add_option("--recompute", a->recompute,
                  "pipelined steps: none, standard, norm-only or all (PopART's autoRecomputation; default none)");
  cmd->add_option("--replicas", a->replicas,
                  "replicas running each step's micro-batches at once (default: the options file's, else 1)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mpi-timeout", a->mpi_timeout,
                  "under mpirun: the longest a step waits for the other processes, in seconds (default 60)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("-o", a->trained, "the trained model: TRAINED.onnx or TRAINED.popef")->required();
  add_json_option(*cmd, a->json);
  cmd->callback([a] { run_train(*a); });
}

}  // namespace ipu_cli
