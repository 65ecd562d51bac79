#include "ipu/exec/executor.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "executor_harness.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/onnx/import.hpp"
#include "ipu/ops/all.hpp"
#include "ipu/sched/phased_execution.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "ipu/sched/replicated_execution.hpp"
#include "ipu/sched/sharded_execution.hpp"

namespace test_executor {

using harness::hand_split;
using harness::layout;
using mk2x4 = ipu::ipu_model<ipu::mk2, 4>;
using hand_executor = ipu::executor<hand_split, mk2x4>;

namespace {

ipu::tensor_info f32(std::initializer_list<std::int64_t> dims) { return {ipu::data_type::F32, ipu::shape(dims)}; }

ipu::tensor_id add_op(ipu::graph& g, const char* type, std::vector<ipu::tensor_id> inputs, const char* out,
                      ipu::tensor_info info, std::vector<ipu::attribute> attrs = {}) {
  const auto t = g.add_tensor(out, std::move(info));
  ipu::op_node n;
  n.type = type;
  n.name = out;
  n.inputs = std::move(inputs);
  n.outputs = {t};
  n.attributes = std::move(attrs);
  g.add_op(std::move(n));
  return t;
}

ipu::tensor_id weight(ipu::graph& g, const char* name, ipu::tensor_info info, std::uint32_t seed) {
  auto values = harness::random_tensor(info, seed);
  return g.add_tensor(name, info, ipu::tensor_kind::variable, ipu::byte_buffer::copy(values.bytes()));
}

// A small MLP with a skip connection:
//   r1 = Relu(x W1 + b1); r2 = Relu(r1 W2 + b2); s = r2 + r1; y = Sigmoid(s W3)
ipu::graph mlp() {
  ipu::graph g("mlp");
  auto x = g.add_tensor("x", f32({2, 8}), ipu::tensor_kind::input);
  auto w1 = weight(g, "W1", f32({8, 16}), 1);
  auto b1 = weight(g, "b1", f32({16}), 2);
  auto w2 = weight(g, "W2", f32({16, 16}), 3);
  auto b2 = weight(g, "b2", f32({16}), 4);
  auto w3 = weight(g, "W3", f32({16, 4}), 5);
  auto h1 = add_op(g, "MatMul", {x, w1}, "h1", f32({2, 16}));
  auto a1 = add_op(g, "Add", {h1, b1}, "a1", f32({2, 16}));
  auto r1 = add_op(g, "Relu", {a1}, "r1", f32({2, 16}));
  auto h2 = add_op(g, "MatMul", {r1, w2}, "h2", f32({2, 16}));
  auto a2 = add_op(g, "Add", {h2, b2}, "a2", f32({2, 16}));
  auto r2 = add_op(g, "Relu", {a2}, "r2", f32({2, 16}));
  auto s = add_op(g, "Add", {r2, r1}, "s", f32({2, 16}));
  auto h3 = add_op(g, "MatMul", {s, w3}, "h3", f32({2, 4}));
  g.mark_output(add_op(g, "Sigmoid", {h3}, "y", f32({2, 4})));
  return g;
}

ipu::data_flow flow_all(std::uint64_t bps, std::vector<std::string> names = {"y", "r1"}) {
  return ipu::data_flow(bps, names, ipu::anchor_return_type::all());
}

std::string message_of(auto&& fn) {
  try {
    fn();
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::uint64_t main_program_cycles(const ipu::executable& exe) {
  std::uint64_t c = 0;
  for (const auto& s : exe.programs[5].steps) c += s.cycles;
  return c;
}

}  // namespace

TEST_CASE("executor: sharded stages run one after another and equal the CPU device") {
  hand_executor ex(mlp(), flow_all(3), {}, {}, hand_split{layout::sharded, 2});
  CHECK(ex.plan().schedule == ipu::schedule_kind::sequential);
  const auto r = harness::check_against_cpu(ex);
  CHECK(r.workers == 1);
  // One worker: the simulated step is every step of the main program, once per micro-batch.
  CHECK(r.timeline.simulated_cycles() == 3 * main_program_cycles(ex.plan()));
  std::size_t computes = 0, copies = 0;
  for (const auto& e : r.timeline.events()) {
    CHECK(e.worker == 0);
    if (e.kind == ipu::step_kind::compute) ++computes;
    if (e.kind == ipu::step_kind::ipu_copy) ++copies;
  }
  CHECK(computes == 3 * ex.plan().model.num_ops());  // one event per op and micro-batch
  CHECK(copies > 0);
}

TEST_CASE("executor: a 4-stage pipeline overlaps micro-batches in simulated time and equals the CPU device") {
  const std::uint64_t M = 8;
  hand_executor ex(mlp(), flow_all(M), {}, {}, hand_split{layout::pipelined, 4});
  const auto& exe = ex.plan();
  REQUIRE(exe.stages.size() == 4);
  const auto r = harness::check_against_cpu(ex);
  CHECK(r.workers == 4);

  // The pipeline recurrence: stage k starts micro-batch m when it is free and stage k-1 has
  // finished m. Stage 0 first streams the input; the stage producing an anchor streams it back;
  // a stage copies what later stages on other IPUs read.
  const auto& g = exe.model;
  std::vector<std::uint64_t> busy(4, 0);
  std::vector<std::uint64_t> extra(4, 0);
  for (const auto& s : exe.programs[5].steps) {
    if (s.kind == ipu::step_kind::ipu_copy) extra[exe.op_stage[g.tensor(s.tensor).producer]] += s.cycles;
    if (s.kind == ipu::step_kind::device_to_host) extra[exe.op_stage[g.tensor(s.tensor).producer]] += s.cycles;
  }
  std::uint64_t end = 0;
  for (std::uint64_t m = 0; m < M; ++m) {
    std::uint64_t ready = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      if (k == 0) busy[0] += hand_split::stream_cycles;  // host_to_device of x
      const auto start = std::max(busy[k], ready);
      busy[k] = start + exe.stages[k].cycles + extra[k];
      ready = busy[k];
    }
    end = ready;
  }
  CHECK(r.timeline.simulated_cycles() == end);
  CHECK(r.timeline.simulated_cycles() < M * main_program_cycles(exe));  // overlap

  // Each stage's worker ran micro-batches 0..M-1 in order, each op once.
  for (std::uint32_t k = 0; k < 4; ++k) {
    std::vector<std::uint64_t> seen;
    for (const auto& e : r.timeline.events())
      if (e.kind == ipu::step_kind::compute && e.stage == k) {
        CHECK(e.worker == k);
        CHECK(e.ipu == exe.stages[k].ipu);
        if (seen.empty() || seen.back() != e.micro_batch) seen.push_back(e.micro_batch);
      }
    CHECK(seen == std::vector<std::uint64_t>{0, 1, 2, 3, 4, 5, 6, 7});
  }
}

TEST_CASE("executor: serial phased execution streams weights and activations through Streaming Memory") {
  hand_executor ex(mlp(), flow_all(2), {}, {}, hand_split{layout::serial_phased, 4, true});
  CHECK(ex.plan().schedule == ipu::schedule_kind::phased);
  const auto r = harness::check_against_cpu(ex, 1, 2);  // two steps: the stores carry over correctly
  CHECK(r.workers == 2);
  std::size_t to = 0, from = 0;
  for (const auto& e : r.timeline.events()) {
    if (e.kind == ipu::step_kind::to_remote) ++to;
    if (e.kind == ipu::step_kind::from_remote) ++from;
  }
  CHECK(to > 0);
  CHECK(from > 0);
}

TEST_CASE("executor: parallel phased execution alternates IPUs, with and without Streaming Memory") {
  for (bool stream : {false, true}) {
    CAPTURE(stream);
    hand_executor ex(mlp(), flow_all(3), {}, {}, hand_split{layout::parallel_phased, 4, stream});
    const auto r = harness::check_against_cpu(ex);
    CHECK(r.workers == 2);
    for (const auto& e : r.timeline.events())
      if (e.kind == ipu::step_kind::compute) CHECK(e.ipu == static_cast<std::uint32_t>(e.phase % 2));
  }
}

TEST_CASE("executor: replicas run concurrently, each on its own slice of the inputs") {
  ipu::plan_options po;
  po.replication_factor = 2;
  hand_executor pipelined(mlp(), flow_all(4), po, {}, hand_split{layout::pipelined, 2});
  CHECK(pipelined.input_array_info("x") == ipu::tensor_info{ipu::data_type::F32, {4, 2, 2, 8}});
  auto r = harness::check_against_cpu(pipelined);
  CHECK(r.workers == 4);
  CHECK(r.anchors.at("y").info() == ipu::tensor_info{ipu::data_type::F32, {4, 2, 2, 4}});
  std::set<std::uint32_t> replicas;
  for (const auto& e : r.timeline.events()) replicas.insert(e.replica);
  CHECK(replicas == std::set<std::uint32_t>{0, 1});

  hand_executor sharded(mlp(), flow_all(2), po, {}, hand_split{layout::sharded, 3});
  CHECK(harness::check_against_cpu(sharded).workers == 2);
  hand_executor phased(mlp(), flow_all(2), po, {}, hand_split{layout::serial_phased, 4, true});
  CHECK(harness::check_against_cpu(phased).workers == 4);

  // Input replica groups: replicas 0-1 and 2-3 read the same slices, so they return the same.
  po.replication_factor = 4;
  po.input_group_size = 2;
  hand_executor grouped(mlp(), flow_all(3), po, {}, hand_split{layout::pipelined, 2});
  CHECK(grouped.input_array_info("x") == ipu::tensor_info{ipu::data_type::F32, {3, 2, 2, 8}});
  const auto g = harness::check_against_cpu(grouped);
  const auto& y = g.anchors.at("y");
  CHECK(y.info() == ipu::tensor_info{ipu::data_type::F32, {3, 4, 2, 4}});
  const std::size_t slice = 2 * 4 * sizeof(float);
  for (std::size_t m = 0; m < 3; ++m) {
    CHECK(harness::same_bytes(y.data() + (4 * m + 0) * slice, y.data() + (4 * m + 1) * slice, slice));
    CHECK(harness::same_bytes(y.data() + (4 * m + 2) * slice, y.data() + (4 * m + 3) * slice, slice));
    CHECK_FALSE(harness::same_bytes(y.data() + (4 * m + 1) * slice, y.data() + (4 * m + 2) * slice, slice));
  }
}

TEST_CASE("executor: kernels with more threads still match the CPU device with as many threads") {
  ipu::executor_options eo;
  eo.threads_per_worker = 2;
  hand_executor ex(mlp(), flow_all(3), {}, eo, hand_split{layout::pipelined, 3});
  harness::check_against_cpu(ex, 2);
}

TEST_CASE("executor: anchor return types All, Final, EveryN and Sum, with replicas and accumulation") {
  ipu::plan_options po;
  po.replication_factor = 2;
  const ipu::data_flow flow(4, {{"y", ipu::anchor_return_type::final()},
                                {"r1", ipu::anchor_return_type::every_n(2)},
                                {"s", ipu::anchor_return_type::sum()},
                                {"h3", ipu::anchor_return_type::all()}});
  for (auto kind : {layout::sharded, layout::pipelined, layout::parallel_phased}) {
    hand_executor ex(mlp(), flow, po, {}, hand_split{kind, 3, kind == layout::parallel_phased});
    const auto r = harness::check_against_cpu(ex);
    CHECK(r.anchors.at("y").info().shape == ipu::shape{2, 2, 4});       // [replicas, ...]
    CHECK(r.anchors.at("r1").info().shape == ipu::shape{2, 2, 2, 16});  // [bps / 2, replicas, ...]
    CHECK(r.anchors.at("s").info().shape == ipu::shape{2, 2, 16});      // [replicas, ...]
    CHECK(r.anchors.at("h3").info().shape == ipu::shape{4, 2, 2, 4});   // [bps, replicas, ...]
  }

  // Gradient accumulation (training counts): every accumulated micro-batch runs and All / EveryN
  // return each of them.
  ipu::plan_options train;
  train.gradient_accumulation = 3;
  train.is_inference = false;
  hand_executor acc(mlp(), ipu::data_flow(2, {{"y", ipu::anchor_return_type::all()},
                                              {"r1", ipu::anchor_return_type::every_n(2)},
                                              {"s", ipu::anchor_return_type::sum()}}),
                    train, {}, hand_split{layout::pipelined, 2});
  CHECK(acc.input_array_info("x").shape == ipu::shape{2, 3, 2, 8});
  const auto r = harness::check_against_cpu(acc);
  CHECK(r.anchors.at("y").info().shape == ipu::shape{2, 3, 2, 4});
  CHECK(r.anchors.at("r1").info().shape == ipu::shape{3, 2, 16});
}

TEST_CASE("executor: anchors on inputs and weights are returned as given") {
  hand_executor ex(mlp(), flow_all(3, {"y", "x", "W2"}), {}, {}, hand_split{layout::pipelined, 2});
  const auto r = harness::check_against_cpu(ex);
  const auto w2 = r.anchors.at("W2").as<float>();
  const auto& data = ex.plan().model.tensor(ex.plan().model.tensor_id_of("W2")).data;
  const auto n = data.size() / sizeof(float);
  REQUIRE(w2.size() == 3 * n);
  for (std::size_t i = 0; i < w2.size(); ++i) CHECK(w2[i] == data.load<float>(i % n));
}

TEST_CASE("executor: an If body reading a tensor of an earlier stage gets it across stages") {
  ipu::graph then_body("then");
  then_body.mark_output(add_op(then_body, "Relu", {then_body.add_tensor("a", f32({3}))}, "then_out", f32({3})));
  ipu::graph else_body("else");
  else_body.mark_output(add_op(else_body, "Neg", {else_body.add_tensor("a", f32({3}))}, "else_out", f32({3})));
  ipu::graph g("if");
  auto x = g.add_tensor("x", f32({3}), ipu::tensor_kind::input);
  auto cond = g.add_tensor("cond", {ipu::data_type::BOOL, {}}, ipu::tensor_kind::input);
  auto a = add_op(g, "Add", {x, x}, "a", f32({3}));
  auto b = add_op(g, "Neg", {a}, "b", f32({3}));
  auto c = add_op(g, "If", {cond}, "c", f32({3}),
                  {{"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_body)}},
                   {"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_body)}}});
  g.mark_output(add_op(g, "Add", {b, c}, "out", f32({3})));
  for (auto kind : {layout::pipelined, layout::sharded, layout::parallel_phased}) {
    hand_executor ex(g, ipu::data_flow::for_outputs(g, 8), {}, {}, hand_split{kind, 4});
    REQUIRE(ex.plan().stages.size() == 4);
    harness::check_against_cpu(ex);
  }
}

TEST_CASE("executor: the timeline exports as Chrome-trace JSON") {
  hand_executor ex(mlp(), flow_all(2), {}, {}, hand_split{layout::pipelined, 2});
  const auto r = harness::check_against_cpu(ex);
  std::ostringstream os;
  ipu::write_chrome_trace(os, r.timeline, ex.plan().model);
  const auto j = nlohmann::json::parse(os.str());
  std::size_t complete = 0, names = 0;
  bool saw_matmul = false;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "X") {
      ++complete;
      CHECK(e.at("dur").get<double>() >= 0);
      if (e.at("name").get<std::string>().rfind("MatMul", 0) == 0) saw_matmul = true;
    }
    if (e.at("ph") == "M") ++names;
  }
  CHECK(complete == 2 * r.timeline.events().size());  // simulated and host
  CHECK(names == 2);
  CHECK(saw_matmul);
  CHECK(r.timeline.simulated_seconds() > 0);

  ipu::executor_options stages_only;
  stages_only.timeline = ipu::timeline_detail::stages;
  hand_executor coarse(mlp(), flow_all(2), {}, stages_only, hand_split{layout::pipelined, 2});
  const auto rc = harness::check_against_cpu(coarse);
  std::size_t stage_events = 0;
  for (const auto& e : rc.timeline.events())
    if (e.kind == ipu::step_kind::compute) {
      ++stage_events;
      CHECK(e.op == ipu::no_op);
    }
  CHECK(stage_events == 2 * 2);
  CHECK(rc.timeline.simulated_cycles() == r.timeline.simulated_cycles());
}

TEST_CASE("executor: plans that cannot run are refused with the stage and tensor at fault") {
  const auto g = mlp();
  const auto flow = flow_all(2);
  const auto desc = mk2x4::description();
  ipu::plan_options po;
  po.batches_per_step = 2;

  auto pipe = hand_split{layout::pipelined, 3}.plan(g, desc, po);
  std::swap(pipe.stages[0], pipe.stages[1]);
  for (std::uint32_t s = 0; s < pipe.stages.size(); ++s)
    for (auto o : pipe.stages[s].ops) pipe.op_stage[o] = s;
  const auto later = message_of([&] { hand_executor ex(pipe, flow); });
  CHECK(contains(later, "from the later stage"));
  CHECK(contains(later, "a pipeline's stages must form a chain"));

  auto phased = hand_split{layout::serial_phased, 4, true}.plan(g, desc, po);
  auto& steps = phased.programs[5].steps;
  steps.erase(std::find_if(steps.begin(), steps.end(), [](const ipu::step& s) { return s.kind == ipu::step_kind::from_remote; }));
  const auto missing = message_of([&] { hand_executor ex(phased, flow); });
  CHECK(contains(missing, "reads 'W1', which is in Streaming Memory"));
  CHECK(contains(missing, "from_remote"));

  auto orphan = hand_split{layout::sharded, 2}.plan(g, desc, po);
  orphan.stages[1].ops.pop_back();
  orphan.op_stage.clear();
  CHECK(contains(message_of([&] { hand_executor ex(orphan, flow); }), "op Sigmoid 'y' is in no stage"));

  // Identity is the schedule the executable records, not its strategy's name.
  auto other = hand_split{layout::sharded, 2}.plan(g, desc, po);
  other.strategy = "pipelined";
  using pipelined_executor = ipu::executor<ipu::pipelined_execution, mk2x4>;
  CHECK(contains(message_of([&] { pipelined_executor ex(other, flow); }),
                 "the executable runs a sequential schedule, not the pipelined schedule of strategy 'pipelined'"));
  other.schedule = ipu::schedule_kind::pipelined;
  CHECK_NOTHROW(pipelined_executor(other, flow));
  auto small = hand_split{layout::sharded, 2}.plan(g, ipu::ipu_model<ipu::mk2, 2>::description(), po);
  CHECK(contains(message_of([&] { hand_executor ex(small, flow); }), "planned for 2 x mk2 (GC200), not 4 x mk2 (GC200)"));
  CHECK(contains(message_of([&] { hand_executor ex(hand_split{layout::sharded, 2}.plan(g, desc, po), flow_all(4)); }),
                 "runs 2 batches per step but the data flow 4"));
  po.batches_per_step = 3;
  CHECK(contains(message_of([&] { hand_executor ex(g, flow, po); }), "ask for 3 batches per step"));
  CHECK(contains(message_of([&] { hand_executor ex(g, ipu::data_flow(2, {{"nope", {}}})); }), "anchor 'nope' is not a tensor"));
}

TEST_CASE("executor: run checks the step's arrays like PopART's StepIO") {
  hand_executor ex(mlp(), flow_all(4), {}, {}, hand_split{layout::pipelined, 2});
  auto anchors = ex.make_anchor_arrays();
  ipu::host_tensor x({ipu::data_type::F32, {2, 2, 8}});  // 2 micro-batches instead of 4
  ipu::step_io io({{"x", x.view()}}, anchors);
  const auto msg = message_of([&] { ex.run(io); });
  CHECK(contains(msg, "tensor 'x': expected 64 but received 32"));
}

TEST_CASE("executor: the CPU device model runs a multi-IPU executable without simulated time") {
  // The same hand-made plan for the host device (no tiles): one IPU per annotated stage.
  using cpu_executor = ipu::executor<hand_split, ipu::cpu_device_model>;
  ipu::plan_options po;
  po.batches_per_step = 2;
  auto exe = hand_split{layout::pipelined, 2}.plan(mlp(), ipu::cpu_device_description(2), po);
  cpu_executor ex(exe, flow_all(2));
  const auto r = harness::check_against_cpu(ex);
  CHECK(r.timeline.clock_hz() == 0);
  CHECK(r.timeline.simulated_seconds() == 0);
}

TEST_SUITE("concurrent") {
  TEST_CASE("executor: pipelined replicas over many micro-batches and repeated steps stay exact") {
    ipu::plan_options po;
    po.replication_factor = 2;
    hand_executor ex(mlp(), flow_all(64), po, {}, hand_split{layout::pipelined, 4});
    harness::check_against_cpu(ex, 1, 3);
  }

  TEST_CASE("executor: pipeline stages give the same outputs and timeline on any number of threads") {
    // Sum adds micro-batches in order, so it also checks that a stage never runs out of order
    // when threads take turns running it.
    ipu::plan_options po;
    po.replication_factor = 2;
    const ipu::data_flow flow(24, {{"y", ipu::anchor_return_type::all()},
                                   {"r1", ipu::anchor_return_type::every_n(3)},
                                   {"s", ipu::anchor_return_type::sum()}});
    std::optional<double> seconds;
    for (std::size_t threads : {1, 2, 3, 8, 16}) {
      CAPTURE(threads);
      ipu::executor_options eo;
      eo.pipeline_threads = threads;
      eo.spins_before_sleep = threads == 3 ? 0 : 64;  // 0: every wait sleeps
      hand_executor ex(mlp(), flow, po, eo, hand_split{layout::pipelined, 4});
      CHECK(ex.num_workers() == 8);
      CHECK(ex.num_threads() == std::min<std::size_t>(threads, 8));
      const auto r = harness::check_against_cpu(ex, 1, 2);
      if (!seconds) seconds = r.timeline.simulated_seconds();
      CHECK(r.timeline.simulated_seconds() == *seconds);
    }
  }

  TEST_CASE("executor: phased replicas with Streaming Memory stay exact") {
    ipu::plan_options po;
    po.replication_factor = 2;
    hand_executor ex(mlp(), flow_all(16), po, {}, hand_split{layout::parallel_phased, 4, true});
    harness::check_against_cpu(ex, 1, 2);
  }

  TEST_CASE("executor: a failing kernel stops every worker and its error reaches the caller") {
    ipu::op_registry reg = ipu::default_op_registry();
    reg.add({"", "Explode", [](const ipu::kernel_context&) { throw std::runtime_error("kernel exploded"); }});
    ipu::graph g = mlp();
    // Replace the final Sigmoid's consumer side: y2 = Explode(y) in the last stage.
    auto y2 = add_op(g, "Explode", {g.tensor_id_of("y")}, "boom", f32({2, 4}));
    g.mark_output(y2);
    ipu::executor_options eo;
    eo.registry = &reg;
    for (auto kind : {layout::pipelined, layout::parallel_phased, layout::sharded}) {
      CAPTURE(static_cast<int>(kind));
      ipu::plan_options po;
      po.replication_factor = 2;
      hand_executor ex(g, ipu::data_flow::for_outputs(g, 32), po, eo, hand_split{kind, 4});
      auto anchors = ex.make_anchor_arrays();
      ipu::host_tensor x(ex.input_array_info("x"));
      ipu::step_io io({{"x", x.view()}}, anchors);
      for (int i = 0; i < 2; ++i) {  // and the executor is usable again afterwards
        const auto msg = message_of([&] { ex.run(io); });
        CHECK(contains(msg, "kernel exploded"));
        CHECK(contains(msg, "Explode 'boom'"));
      }
    }
  }
}

// --- PyTorch-exported models, planned by the library's strategies -------------------------------

namespace {
struct model_case {
  const char* name;
  std::uint64_t bps;
};

/// The model with its topological op order cut into `n` blocks "b0" .. "b<n-1>" (PopTorch's
/// Block annotations), for the strategies' explicit stages and phases.
ipu::graph in_blocks(ipu::graph g, std::size_t n) {
  const auto order = ipu::topological_order(g);
  for (std::size_t k = 0; k < n; ++k)
    for (std::size_t i = k * order.size() / n; i < (k + 1) * order.size() / n; ++i)
      g.op(order[i]).where.block = "b" + std::to_string(k);
  return g;
}

ipu::stage stage_of(std::size_t block, std::int64_t ipu) { return ipu::stage{{"b" + std::to_string(block)}, ipu}; }

template <class Strategy>
void check_planned(const ipu::graph& g, const Strategy& strategy, std::uint64_t bps, const std::string& in_name,
                   const std::vector<ipu::host_tensor>& slices, std::uint32_t replicas = 1) {
  ipu::plan_options po;
  po.check_memory = false;  // this checks execution; the memory model has its own tests
  po.replication_factor = replicas;
  ipu::executor<Strategy, mk2x4> ex(g, ipu::data_flow::for_outputs(g, bps), po, {}, strategy);
  INFO("strategy ", ex.plan().strategy, ": ", ex.plan().stages.size(), " stages");
  const auto r = harness::check_against_cpu(ex, 1, 1, {{in_name, slices}});
  CHECK(r.timeline.simulated_cycles() > 0);
}

void check_model(const model_case& mc) {
  const std::filesystem::path dir = IPU_TEST_MODELS;
  const auto g = in_blocks(ipu::onnx::load_model(dir / (std::string(mc.name) + ".onnx")), 4);
  const auto x = ipu::io::read_npy(dir / (std::string(mc.name) + ".input.npy"));
  REQUIRE(g.inputs().size() == 1);
  const auto& in_name = g.tensor(g.inputs()[0]).name;
  // Micro-batches: the exported input, then scaled and shifted copies of it.
  auto slices = [&](std::size_t n) {
    std::vector<ipu::host_tensor> v;
    for (std::size_t i = 0; i < n; ++i) {
      ipu::host_tensor t = x;
      for (auto& e : t.as<float>()) e = e * (1.0f - 0.25f * static_cast<float>(i)) + 0.01f * static_cast<float>(i);
      v.push_back(std::move(t));
    }
    return v;
  };
  const auto bps = mc.bps;
  SUBCASE("pipelined over 4 IPUs") {
    ipu::pipelined_execution s;
    for (std::size_t k = 0; k < 4; ++k) s.stages.push_back(stage_of(k, static_cast<std::int64_t>(k)));
    check_planned(g, s, bps, in_name, slices(bps));
  }
  SUBCASE("sharded over 4 IPUs") {
    ipu::sharded_execution s;
    for (std::size_t k = 0; k < 4; ++k) s.stages.push_back(stage_of(k, static_cast<std::int64_t>(k)));
    check_planned(g, s, bps, in_name, slices(bps));
  }
  SUBCASE("serial phased, weights and activations off chip after each phase") {
    ipu::serial_phased_execution s;
    s.phases = {ipu::phase{{stage_of(0, 0), stage_of(1, 1)}}, ipu::phase{{stage_of(2, 0), stage_of(3, 1)}}};
    s.tensors_liveness = ipu::liveness::off_chip_after_each_phase;
    check_planned(g, s, bps, in_name, slices(bps));
  }
  SUBCASE("parallel phased, even phases on even IPUs, weights off chip") {
    ipu::parallel_phased_execution s;
    for (std::size_t k = 0; k < 4; ++k) s.phases.push_back(ipu::phase{{stage_of(k, static_cast<std::int64_t>(k % 2))}});
    s.tensors_liveness = ipu::liveness::off_chip_after_fwd;
    check_planned(g, s, bps, in_name, slices(bps));
  }
  SUBCASE("2 replicas of a 2-stage pipeline") {
    ipu::replicated_execution<ipu::pipelined_execution> s;
    s.inner.stages = {ipu::stage{{"b0", "b1"}, 0}, ipu::stage{{"b2", "b3"}, 1}};
    s.replicas = 2;
    check_planned(g, s, bps, in_name, slices(2 * bps), 2);
  }
}
}  // namespace

TEST_CASE("executor models: AlexNet") { check_model({"alexnet", 4}); }
TEST_CASE("executor models: MobileNetV2") { check_model({"mobilenet_v2", 4}); }
TEST_CASE("executor models: transformer encoder") { check_model({"transformer_encoder", 4}); }

// --- schedules as types ---------------------------------------------------------------------------
namespace {

/// A user's own schedule: the sequential layout, but every replica's micro-batches on one thread,
/// interleaved (replica 0's m, replica 1's m, ...), so replicas cost no extra threads.
struct interleaved_schedule {
  using schedule_concept = ipu::schedule_tag;
  static constexpr std::string_view name = "interleaved";
  static constexpr ipu::schedule_kind kind = ipu::schedule_kind::sequential;
  [[nodiscard]] std::size_t workers_per_replica(const ipu::exec::engine_base&) const { return 1; }
  [[nodiscard]] std::size_t num_threads(const ipu::exec::engine_base&) const { return 1; }
  void add_jobs(ipu::exec::engine_base& e, ipu::exec::job_list& jobs) {
    jobs.emplace_back([&e] {
      std::size_t r = 0;
      try {
        for (std::uint64_t m = 0; m < e.micro_batches(); ++m)
          for (r = 0; r < e.replicas(); ++r) {
            auto& rec = e.recorder_of(r, 0);
            e.start_micro_batch(r, m, 0, rec);
            for (const auto& it : e.steps().items) e.run_item(r, it, m, rec);
          }
      } catch (...) {
        e.fail(r);
      }
    });
  }
};
static_assert(ipu::schedule<interleaved_schedule>);

/// The test's sharded split, run with the user's schedule.
struct interleaved_sharding {
  using strategy_concept = ipu::execution_strategy_tag;
  using schedule = interleaved_schedule;
  static constexpr std::string_view name = "interleaved-sharding";
  [[nodiscard]] ipu::executable plan(const ipu::graph& g, const ipu::device_description& d, const ipu::plan_options& o) const {
    return hand_split{layout::sharded, 3}.plan(g, d, o);
  }
};

// Each strategy's schedule picks its engine at compile time.
static_assert(std::is_same_v<ipu::executor<ipu::pipelined_execution, mk2x4>::engine_type, ipu::exec::engine<ipu::pipelined_schedule>>);
static_assert(std::is_same_v<ipu::executor<ipu::sharded_execution, mk2x4>::engine_type, ipu::exec::engine<ipu::sequential_schedule>>);
static_assert(std::is_same_v<ipu::executor<ipu::serial_phased_execution, mk2x4>::engine_type, ipu::exec::engine<ipu::phased_schedule>>);
static_assert(std::is_same_v<ipu::replicated_execution<ipu::pipelined_execution>::schedule, ipu::replicated<ipu::pipelined_schedule>>);
static_assert(std::is_same_v<ipu::executor<ipu::replicated_execution<ipu::pipelined_execution>, mk2x4>::engine_type,
                             ipu::exec::engine<ipu::replicated<ipu::pipelined_schedule>>>);
static_assert(std::is_same_v<hand_executor::engine_type, ipu::host_engine>);  // any_schedule: chosen per plan
static_assert(std::is_same_v<ipu::executor<interleaved_sharding, mk2x4>::engine_type, ipu::exec::engine<interleaved_schedule>>);

}  // namespace

TEST_CASE("executor: a user's own schedule runs the step loop, matching the CPU device") {
  ipu::plan_options po;
  po.replication_factor = 2;
  ipu::executor<interleaved_sharding, mk2x4> ex(mlp(), flow_all(3), po);
  CHECK(ex.num_workers() == 2);
  CHECK(ex.num_threads() == 1);  // the schedule says so
  const auto r = harness::check_against_cpu(ex, 1, 2);
  // One thread ran both replicas: the timeline's host times interleave replica 0 and 1 per
  // micro-batch, each replica still on its own lane and simulated clock.
  std::vector<std::pair<std::int64_t, std::uint32_t>> host;  // (host start, replica) of op 0's runs
  for (const auto& e : r.timeline.events())
    if (e.kind == ipu::step_kind::compute && e.op == 0) host.emplace_back(e.host_begin_ns, e.replica);
  CHECK(host.size() == 3 * 2);
  std::stable_sort(host.begin(), host.end());
  for (std::size_t i = 0; i < host.size(); ++i) CHECK(host[i].second == i % 2);

  // A plan of another schedule kind is refused by the engine of a schedule type.
  auto piped = hand_split{layout::pipelined, 2}.plan(mlp(), mk2x4::description(), {});
  piped.batches_per_step = 3;
  CHECK(contains(message_of([&] { ipu::executor<interleaved_sharding, mk2x4> bad(piped, flow_all(3)); }),
                 "the executable runs a pipelined schedule, not the sequential schedule of strategy 'interleaved-sharding'"));
  CHECK(contains(message_of([&] { ipu::exec::engine<ipu::phased_schedule> bad(std::make_shared<const ipu::executable>(piped), flow_all(3)); }),
                 "the executable's schedule is pipelined, not phased"));
}

TEST_CASE("host_engine: a plan's schedule is picked once from the executable's kind") {
  ipu::plan_options po;
  po.batches_per_step = 3;
  for (auto [kind, want] : {std::pair{layout::sharded, ipu::schedule_kind::sequential},
                            std::pair{layout::pipelined, ipu::schedule_kind::pipelined},
                            std::pair{layout::parallel_phased, ipu::schedule_kind::phased}}) {
    auto exe = std::make_shared<const ipu::executable>(hand_split{kind, 3, kind == layout::parallel_phased}.plan(mlp(), mk2x4::description(), po));
    ipu::host_engine e(exe, flow_all(3));
    CHECK(e.kind() == want);
    CHECK(&e.plan() == exe.get());
    CHECK(e.base().workers_per_replica() == (want == ipu::schedule_kind::sequential ? 1u : want == ipu::schedule_kind::pipelined ? 3u : 2u));
  }
  // A schedule that does not count its threads (sequential) runs one per worker: one per replica.
  po.replication_factor = 2;
  ipu::host_engine sharded(std::make_shared<const ipu::executable>(hand_split{layout::sharded, 3}.plan(mlp(), mk2x4::description(), po)),
                           flow_all(3));
  CHECK(sharded.num_workers() == 2);
  CHECK(sharded.num_threads() == 2);
  po.replication_factor = 1;

  // A damaged or newer plan: a schedule kind this build does not know.
  auto exe = hand_split{layout::sharded, 2}.plan(mlp(), mk2x4::description(), po);
  exe.schedule = static_cast<ipu::schedule_kind>(7);
  const auto msg = message_of([&] { ipu::host_engine e(std::make_shared<const ipu::executable>(exe), flow_all(3)); });
  CHECK(contains(msg, "unknown schedule kind 7"));
  CHECK_THROWS_AS(ipu::schedule_for(static_cast<ipu::schedule_kind>(3)), ipu::error);
  CHECK(ipu::schedule_for(ipu::schedule_kind::phased).index() == 2);
}

}  // namespace test_executor
