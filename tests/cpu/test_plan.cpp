#include "ipu/cpu/plan.hpp"

#include <doctest/doctest.h>

#include <random>
#include <set>

#include "test_kernels.hpp"

namespace test_plan {

using namespace test_kernels;
using ipu::cpu::storage;

namespace {
// x -> Relu -> Neg -> Relu -> Neg -> Relu -> Neg (graph output): five arena intermediates of 1 KiB.
ipu::graph chain(int length = 6) {
  ipu::graph g("chain");
  auto t = g.add_tensor("x", f32({256}), ipu::tensor_kind::input);
  for (int i = 0; i < length; ++i)
    t = op(g, i % 2 ? "Neg" : "Relu", {t}, ("t" + std::to_string(i)).c_str(), f32({256}));
  g.mark_output(t);
  return g;
}

bool live_together(const ipu::cpu::tensor_placement& a, const ipu::cpu::tensor_placement& b) {
  return a.first_step <= b.last_step && b.first_step <= a.last_step;
}
bool overlap_in_memory(const ipu::cpu::tensor_placement& a, const ipu::cpu::tensor_placement& b) {
  return a.bytes && b.bytes && a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes;
}
}  // namespace

TEST_CASE("plan: a chain reuses dead buffers, so the arena is smaller than the sum of intermediates") {
  const auto g = chain();
  const auto p = ipu::cpu::make_plan(g, registry(), {.in_place = false});
  CHECK(p.intermediate_bytes == 5 * 1024);  // t0..t4; t5 is the graph output
  CHECK(p.arena_bytes == 2 * 1024);         // two buffers ping-pong
  CHECK(p.num_in_place() == 0);
  CHECK(p.tensors[g.tensor_id_of("t5")].where == storage::output);
  CHECK(p.tensors[g.tensor_id_of("x")].where == storage::graph_input);

  const auto no_reuse = ipu::cpu::make_plan(g, registry(), {.reuse_memory = false, .in_place = false});
  CHECK(no_reuse.arena_bytes == 5 * 1024);
}

TEST_CASE("plan: element-wise ops of a chain write in place over their dying input") {
  const auto g = chain();
  const auto p = ipu::cpu::make_plan(g, registry());
  // t0 reads the graph input, which is never written; t1..t4 each write over their predecessor.
  CHECK(p.tensors[g.tensor_id_of("t0")].alias_of == ipu::no_tensor);
  for (int i = 1; i <= 4; ++i)
    CHECK(p.tensors[g.tensor_id_of("t" + std::to_string(i))].alias_of == g.tensor_id_of("t" + std::to_string(i - 1)));
  CHECK(p.tensors[g.tensor_id_of("t5")].alias_of == ipu::no_tensor);  // a graph output has its own tensor
  CHECK(p.num_in_place() == 4);
  CHECK(p.arena_bytes == 1024);
  for (int i = 1; i <= 4; ++i) CHECK(p.tensors[g.tensor_id_of("t" + std::to_string(i))].offset == p.tensors[g.tensor_id_of("t0")].offset);
}

TEST_CASE("plan: no in-place write over a tensor that is still needed, or of another size") {
  ipu::graph g("branch");
  auto x = g.add_tensor("x", f32({64}), ipu::tensor_kind::input);
  auto a = op(g, "Relu", {x}, "a", f32({64}));
  auto b = op(g, "Neg", {a}, "b", f32({64}));       // a is read again below: not in place
  auto c = op(g, "Add", {a, b}, "c", f32({64}));    // a and b both die here: writes over a
  auto s = op(g, "Relu", {x}, "s", f32({1}));       // (shape changes are the kernel's business)
  auto d = op(g, "Add", {s, c}, "d", f32({64}));    // s has 1 element: writes over c instead
  auto r = op(g, "Reshape", {d}, "r", f32({8, 8})); // view of a dying input: no kernel runs
  auto r2 = op(g, "Reshape", {x}, "r2", f32({8, 8}));  // a graph input is never aliased
  g.mark_output(op(g, "Add", {r, r2}, "out", f32({8, 8})));
  const auto p = ipu::cpu::make_plan(g, registry());
  CHECK(p.tensors[b].alias_of == ipu::no_tensor);
  CHECK(p.tensors[c].alias_of == a);
  CHECK(p.tensors[d].alias_of == c);
  CHECK(p.tensors[r].alias_of == d);
  CHECK(p.tensors[r2].alias_of == ipu::no_tensor);
  for (const auto& step : p.steps) {
    const auto& name = g.op(step.op).name;
    CHECK(step.view_only == (name == "r"));
    CHECK(static_cast<bool>(step.kernel));
  }
}

TEST_CASE("plan: variadic ops write in place over input 0 or 1 only") {
  ipu::graph g("variadic");
  auto x = g.add_tensor("x", f32({8}), ipu::tensor_kind::input);
  auto a = op(g, "Relu", {x}, "a", f32({8}));
  auto b = op(g, "Neg", {x}, "b", f32({8}));
  auto c = op(g, "Relu", {b}, "c", f32({8}));
  auto s1 = op(g, "Sum", {a, b, c}, "s1", f32({8}));    // only c dies here: no in-place write
  auto s2 = op(g, "Sum", {s1, a, b}, "s2", f32({8}));   // s1 dies: written over
  g.mark_output(op(g, "Add", {s2, x}, "out", f32({8})));
  const auto p = ipu::cpu::make_plan(g, registry());
  CHECK(p.tensors[s1].alias_of == ipu::no_tensor);
  CHECK(p.tensors[s2].alias_of == s1);
}

TEST_CASE("plan: tensors live at the same time never share bytes (random DAGs)") {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    ipu::graph g("random");
    std::vector<ipu::tensor_id> pool{g.add_tensor("x", f32({16}), ipu::tensor_kind::input)};
    const int n = 5 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      const auto a = pool[rng() % pool.size()];
      const auto b = pool[rng() % pool.size()];
      const std::int64_t len = (rng() % 2) ? 16 : 16 + static_cast<std::int64_t>(rng() % 100);
      const auto name = "t" + std::to_string(i);
      pool.push_back(rng() % 2 ? op(g, "Add", {a, b}, name.c_str(), f32({len})) : op(g, "Relu", {a}, name.c_str(), f32({len})));
    }
    std::set<ipu::tensor_id> outs;
    for (int k = 0; k < 3; ++k) outs.insert(pool[1 + rng() % (pool.size() - 1)]);
    for (auto t : outs) g.mark_output(t);
    for (bool in_place : {false, true}) {
      const auto p = ipu::cpu::make_plan(g, registry(), {.in_place = in_place});
      CHECK(p.arena_bytes <= ((p.intermediate_bytes + 63 * g.num_tensors()) / 64 + 1) * 64);
      for (std::size_t i = 0; i < p.tensors.size(); ++i)
        for (std::size_t j = i + 1; j < p.tensors.size(); ++j) {
          const auto &a = p.tensors[i], &b = p.tensors[j];
          if (a.where != storage::arena || b.where != storage::arena) continue;
          if (a.alias_of == j || b.alias_of == i) continue;  // in place: shares on purpose
          // An in-place chain shares one buffer: members never live together beyond the handover step.
          if (live_together(a, b)) {
            INFO("round " << round << ": " << g.tensor(static_cast<ipu::tensor_id>(i)).name << " and "
                          << g.tensor(static_cast<ipu::tensor_id>(j)).name);
            CHECK_FALSE(overlap_in_memory(a, b));
          }
          CHECK(a.offset + a.bytes <= p.arena_bytes);
        }
    }
  }
}

TEST_CASE("plan: every missing kernel is listed in one error at plan time") {
  ipu::graph g("missing");
  auto x = g.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  auto a = op(g, "Frobnicate", {x}, "a", f32({4}));
  auto b = op(g, "Relu", {a}, "b", f32({4}));
  auto c = op(g, "Frobnicate", {b}, "c", f32({4}));
  ipu::op_node custom;
  custom.type = "Twiddle";
  custom.domain = "com.example";
  custom.inputs = {c};
  custom.outputs = {g.add_tensor("d", f32({4}))};
  g.add_op(custom);
  g.mark_output(g.tensor_id_of("d"));
  try {
    (void)ipu::cpu::make_plan(g, registry());
    FAIL("no error");
  } catch (const ipu::error& e) {
    CHECK(e.message() == "2 op types without a host kernel: Frobnicate (x2), com.example::Twiddle");
  }
}

TEST_CASE("plan: a tensor an If body reads from the enclosing graph stays alive until the If") {
  ipu::graph then_body("then");
  auto outer_ref = then_body.add_tensor("a", f32({4}));  // produced outside the body
  then_body.mark_output(op(then_body, "Relu", {outer_ref}, "then_out", f32({4})));
  ipu::graph else_body("else");
  else_body.mark_output(op(else_body, "Neg", {else_body.add_tensor("a", f32({4}))}, "else_out", f32({4})));

  ipu::graph g("if");
  auto x = g.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  auto cond = g.add_tensor("cond", {ipu::data_type::BOOL, {}}, ipu::tensor_kind::input);
  auto a = op(g, "Relu", {x}, "a", f32({4}));
  auto b = op(g, "Neg", {a}, "b", f32({4}));  // a's last explicit reader...
  auto c = op(g, "If", {cond}, "c", f32({4}),
              {{"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_body)}},
               {"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_body)}}});
  g.mark_output(op(g, "Add", {b, c}, "out", f32({4})));
  const auto p = ipu::cpu::make_plan(g, registry());
  CHECK(p.tensors[b].alias_of == ipu::no_tensor);  // ...but the If still reads a
  CHECK(p.tensors[a].last_step == 2);
  CHECK_FALSE(overlap_in_memory(p.tensors[a], p.tensors[c]));

  // The If is ordered after the producer of what its bodies read, even when added before it.
  ipu::graph h("if_first");
  auto hx = h.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  auto hcond = h.add_tensor("cond", {ipu::data_type::BOOL, {}}, ipu::tensor_kind::input);
  auto hc = op(h, "If", {hcond}, "c", f32({4}),
               {{"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_body)}},
                {"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_body)}}});
  auto ha = op(h, "Relu", {hx}, "a", f32({4}));
  h.mark_output(op(h, "Add", {ha, hc}, "out", f32({4})));
  const auto ph = ipu::cpu::make_plan(h, registry());
  CHECK(h.op(ph.steps[0].op).type == "Relu");
  CHECK(h.op(ph.steps[1].op).type == "If");

  // Plans of the bodies themselves mark "a" as coming from outside.
  const auto pb = ipu::cpu::make_plan(then_body, registry(), {}, true);
  CHECK(pb.tensors[outer_ref].where == storage::outer);
}

TEST_CASE("plan: a tensor read but never produced is an error in a top-level graph") {
  ipu::graph g("dangling");
  auto ghost = g.add_tensor("ghost", f32({2}));
  g.mark_output(op(g, "Relu", {ghost}, "y", f32({2})));
  CHECK_THROWS_WITH_AS((void)ipu::cpu::make_plan(g, registry()), doctest::Contains("ghost"), ipu::error);
}

TEST_CASE("plan: Dropout in inference is a view (no kernel runs); in training, or with its mask, it runs in place") {
  // The same rule as the IPU's memory plan (ipu::is_view, ipu/ops/flags.hpp).
  auto dropout_graph = [](int mode) {  // 0: no training_mode, 1: constant false, 2: constant true, 3: mask
    ipu::graph g("dropout");
    auto x = g.add_tensor("x", f32({64}), ipu::tensor_kind::input);
    auto r = op(g, "Relu", {x}, "r", f32({64}));
    std::vector<ipu::tensor_id> in{r};
    if (mode == 1 || mode == 2) {
      const bool v = mode == 2;
      in.push_back(ipu::no_tensor);
      in.push_back(g.add_tensor("training", {ipu::data_type::BOOL, ipu::shape{}}, ipu::tensor_kind::constant,
                                ipu::byte_buffer::from_values(std::span<const bool>(&v, 1))));
    }
    ipu::op_node n;
    n.type = "Dropout";
    n.name = "d";
    n.inputs = in;
    const auto d = g.add_tensor("d", f32({64}));
    n.outputs = {d};
    if (mode == 3) n.outputs.push_back(g.add_tensor("mask", {ipu::data_type::BOOL, ipu::shape{64}}));
    g.add_op(std::move(n));
    g.mark_output(op(g, "Neg", {d}, "y", f32({64})));
    return g;
  };
  for (int mode = 0; mode < 4; ++mode) {
    CAPTURE(mode);
    const auto g = dropout_graph(mode);
    const auto p = ipu::cpu::make_plan(g, registry());
    const bool inference = mode < 2;
    CHECK(ipu::is_view(g, g.op(1)) == inference);
    CHECK(p.steps[1].view_only == inference);
    // A view shares r's bytes; in training the kernel may still write over r, which dies here
    // (Dropout reads x[i] before writing y[i]), so both alias r.
    CHECK(p.tensors[g.tensor_id_of("d")].alias_of == g.tensor_id_of("r"));
  }
}

}  // namespace test_plan
