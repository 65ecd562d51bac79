// If / Loop / Scan with bodies run by a minimal interpreter (ops in insertion order, tensor-group
// kernels only), so the kernels are tested apart from the CPU device.
#include "ipu/ops/kernels/control_flow.hpp"

#include <doctest/doctest.h>

#include <map>

#include "tensor_kernel_harness.hpp"

namespace test_control_flow {

using namespace tk;

namespace {

struct mini_runner final : ipu::subgraph_runner {
  std::map<std::string, host_tensor> outer;  // enclosing-scope values, by name
  int calls = 0;

  std::vector<host_tensor> run(const ipu::graph& body, std::span<const ipu::const_tensor_view> inputs) override {
    ++calls;
    std::map<ipu::tensor_id, host_tensor> v;
    REQUIRE(inputs.size() <= body.inputs().size());
    for (std::size_t i = 0; i < inputs.size(); ++i) v.emplace(body.inputs()[i], host_tensor::copy_of(inputs[i]));
    for (std::size_t t = 0; t < body.num_tensors(); ++t) {
      const auto& node = body.tensor(static_cast<ipu::tensor_id>(t));
      if (node.has_data()) v.emplace(t, host_tensor::copy_of(ipu::const_tensor_view(node.info, node.data.data())));
      else if (node.producer == ipu::no_op && !v.contains(static_cast<ipu::tensor_id>(t)) && outer.contains(node.name))
        v.emplace(t, outer.at(node.name));
    }
    for (const auto& op : body.ops()) {
      std::vector<ipu::const_tensor_view> in;
      for (auto t : op.inputs) in.push_back(t == ipu::no_tensor ? ipu::const_tensor_view{} : v.at(t).view());
      std::vector<host_tensor> out;
      for (auto t : op.outputs) out.emplace_back(body.tensor(t).info);
      std::vector<ipu::tensor_view> ov;
      for (auto& o : out) ov.push_back(o.view());
      ipu::kernel_context ctx{op, in, ov, chunked_for, this};
      registry().find("", op.type)->kernel(ctx);
      for (std::size_t i = 0; i < op.outputs.size(); ++i) v.insert_or_assign(op.outputs[i], std::move(out[i]));
    }
    std::vector<host_tensor> result;
    for (auto t : body.outputs()) result.push_back(v.at(t));
    return result;
  }
};

ipu::tensor_id add(ipu::graph& g, const char* type, std::vector<ipu::tensor_id> in, const char* out, tensor_info info,
                   std::vector<attribute> attrs = {}) {
  const auto t = g.add_tensor(out, std::move(info));
  ipu::op_node n;
  n.type = type;
  n.inputs = std::move(in);
  n.outputs = {t};
  n.attributes = std::move(attrs);
  g.add_op(std::move(n));
  return t;
}

ipu::tensor_id constant(ipu::graph& g, const char* name, const host_tensor& value) {
  return g.add_tensor(name, value.info(), ipu::tensor_kind::constant, ipu::byte_buffer::copy(value.bytes()));
}

attribute body(const char* name, ipu::graph g) { return {name, ipu::subgraph{ipu::detail::box<ipu::graph>(std::move(g))}}; }

}  // namespace

TEST_CASE("control flow: If runs the chosen branch, which may read enclosing tensors") {
  ipu::graph then_g("then");
  then_g.mark_output(add(then_g, "Identity", {then_g.add_tensor("outer_x", f32_info({2}))}, "t", f32_info({2})));
  ipu::graph else_g("else");
  else_g.mark_output(constant(else_g, "c", f32({2}, {7, 8})));
  mini_runner runner;
  runner.outer.emplace("outer_x", f32({2}, {1, 2}));
  const std::vector<attribute> branches{body("then_branch", then_g), body("else_branch", else_g)};
  auto t = run("If", {boolean({}, {1})}, {f32_info({2})}, branches, &runner);
  CHECK(values<float>(t[0]) == std::vector<float>{1, 2});
  auto e = run("If", {boolean({1}, {0})}, {f32_info({2})}, branches, &runner);
  CHECK(values<float>(e[0]) == std::vector<float>{7, 8});
  // A branch result that does not match the IR's output shape is an error.
  CHECK_THROWS_AS(run("If", {boolean({}, {0})}, {f32_info({3})}, branches, &runner), ipu::error);
  // Without a subgraph runner the op cannot run.
  CHECK_THROWS_AS(run("If", {boolean({}, {0})}, {f32_info({2})}, branches), ipu::error);
}

namespace {
/// Loop body: x' = Concat(x[1:], float(i)); scan = float(i); cond' = table[i] (as BOOL).
ipu::graph shift_body() {
  ipu::graph g("body");
  const auto i = g.add_tensor("i", info(data_type::S64, {}), ipu::tensor_kind::input);
  g.add_tensor("cond", info(data_type::BOOL, {}), ipu::tensor_kind::input);
  const auto x = g.add_tensor("x", f32_info({3}), ipu::tensor_kind::input);
  const auto tail = add(g, "Slice", {x, constant(g, "one", i64({1}, {1})), constant(g, "three", i64({1}, {3}))}, "tail",
                        f32_info({2}));
  const auto fi = add(g, "Cast", {i}, "fi", f32_info({}));
  const auto fi1 = add(g, "Reshape", {fi, constant(g, "shape1", i64({1}, {1}))}, "fi1", f32_info({1}));
  const auto next = add(g, "Concat", {tail, fi1}, "next", f32_info({3}), {attr("axis", 0)});
  const auto go = add(g, "Gather", {constant(g, "table", i64({4}, {1, 1, 0, 1})), i}, "go", info(data_type::S64, {}));
  const auto cond_out = add(g, "Cast", {go}, "cond_out", info(data_type::BOOL, {}));
  const auto scan = add(g, "Identity", {fi}, "scan", f32_info({}));
  g.mark_output(cond_out);
  g.mark_output(next);
  g.mark_output(scan);
  return g;
}
}  // namespace

TEST_CASE("control flow: Loop with a trip count, loop-carried values and a scan output") {
  mini_runner runner;
  const std::vector<attribute> a{body("body", shift_body())};
  auto x0 = f32({3}, {10, 20, 30});
  // M = 2: the body's condition stays true for iterations 0 and 1.
  auto out = run("Loop", {i64({}, {2}), boolean({}, {1}), x0}, {f32_info({3}), f32_info({2})}, a, &runner);
  CHECK(values<float>(out[0]) == std::vector<float>{30, 0, 1});
  CHECK(values<float>(out[1]) == std::vector<float>{0, 1});
  // No trip count: runs until the body returns false (after iteration 2).
  out = run("Loop", {std::nullopt, boolean({}, {1}), x0}, {f32_info({3}), f32_info({3})}, a, &runner);
  CHECK(values<float>(out[0]) == std::vector<float>{0, 1, 2});
  CHECK(values<float>(out[1]) == std::vector<float>{0, 1, 2});
  // cond false on entry: no iterations, the initial value passes through, the scan output is empty.
  runner.calls = 0;
  out = run("Loop", {i64({}, {5}), boolean({}, {0}), x0}, {f32_info({3}), f32_info({0})}, a, &runner);
  CHECK(runner.calls == 0);
  CHECK(values<float>(out[0]) == std::vector<float>{10, 20, 30});
  // The scan output's length must match the IR.
  CHECK_THROWS_AS(run("Loop", {i64({}, {2}), boolean({}, {1}), x0}, {f32_info({3}), f32_info({5})}, a, &runner),
                  ipu::error);
  // A loop that would run past the IR's scan length stops before the iteration that overflows it.
  runner.calls = 0;
  CHECK_THROWS_WITH_AS(run("Loop", {std::nullopt, boolean({}, {1}), x0}, {f32_info({3}), f32_info({1})}, a, &runner),
                       doctest::Contains("more than the 1 iterations its scan outputs hold"), ipu::error);
  CHECK(runner.calls == 1);
}

TEST_CASE("control flow: a Loop whose condition never ends stops at the context's trip limit") {
  ipu::graph g("forever");
  g.add_tensor("i", info(data_type::S64, {}), ipu::tensor_kind::input);
  const auto c = g.add_tensor("cond", info(data_type::BOOL, {}), ipu::tensor_kind::input);
  g.mark_output(add(g, "Identity", {c}, "cond_out", info(data_type::BOOL, {})));
  ipu::op_node op;
  op.type = "Loop";
  op.attributes = {body("body", std::move(g))};
  const auto go = boolean({}, {1});
  const std::vector<ipu::const_tensor_view> in{ipu::const_tensor_view{}, go.view()};
  mini_runner runner;
  ipu::kernel_context ctx{op, in, {}, chunked_for, &runner};
  ctx.max_loop_trips = 50;
  CHECK_THROWS_WITH_AS(registry().find("", "Loop")->kernel(ctx), doctest::Contains("more than 50 iterations"), ipu::error);
  CHECK(runner.calls == 50);
}

TEST_CASE("control flow: Scan accumulates a state and stacks outputs, in either direction") {
  // body(state [2], x [2]) -> (state + x as a running concat-free sum via ReduceSum, state copy)
  ipu::graph g("scan_body");
  const auto s = g.add_tensor("s", f32_info({2}), ipu::tensor_kind::input);
  const auto x = g.add_tensor("x", f32_info({2}), ipu::tensor_kind::input);
  const auto both = add(g, "Concat", {add(g, "Unsqueeze", {s, constant(g, "ax0", i64({1}, {0}))}, "s1", f32_info({1, 2})),
                                      add(g, "Unsqueeze", {x, constant(g, "ax1", i64({1}, {0}))}, "x1", f32_info({1, 2}))},
                        "both", f32_info({2, 2}), {attr("axis", 0)});
  const auto sum = add(g, "ReduceSum", {both, constant(g, "ax2", i64({1}, {0}))}, "sum", f32_info({2}), {attr("keepdims", 0)});
  g.mark_output(sum);
  g.mark_output(add(g, "Identity", {sum}, "y", f32_info({2})));
  mini_runner runner;
  auto seq = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  auto out = run("Scan", {f32({2}, {0, 0}), seq}, {f32_info({2}), f32_info({3, 2})},
                 {body("body", g), attr("num_scan_inputs", 1)}, &runner);
  CHECK(values<float>(out[0]) == std::vector<float>{9, 12});
  CHECK(values<float>(out[1]) == std::vector<float>{1, 2, 4, 6, 9, 12});
  // Reverse input direction, output stacked along axis 1.
  out = run("Scan", {f32({2}, {0, 0}), seq}, {f32_info({2}), f32_info({2, 3})},
            {body("body", g), attr("num_scan_inputs", 1), attr("scan_input_directions", std::vector<std::int64_t>{1}),
             attr("scan_output_axes", std::vector<std::int64_t>{1})},
            &runner);
  CHECK(values<float>(out[1]) == std::vector<float>{5, 8, 9, 6, 10, 12});
}

}  // namespace test_control_flow
