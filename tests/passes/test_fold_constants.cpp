// Constant folding: ops whose inputs are known run once, with their own kernels, so the folded
// graph computes exactly what the unfolded one does; what must run at run time is left alone.
#include "ipu/passes/fold_constants.hpp"

#include <doctest/doctest.h>

#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_fold_constants {

namespace {

using ipu::data_type;

std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

std::vector<float> values(const ipu::host_tensor& t) {
  const auto v = t.as<float>();
  return {v.begin(), v.end()};
}

std::vector<float> run(const ipu::graph& g, const ipu::host_tensor& x) { return values(ipu::cpu::device(g).run({x})[0]); }

ipu::host_tensor sample(ipu::shape s) {
  std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.25f * static_cast<float>(i % 7) - 0.5f;
  return ipu::host_tensor::from<float>(s, v);
}

}  // namespace

TEST_CASE("x @ Transpose(W), as PyTorch exports a Linear layer unfolded: the transpose is done once") {
  ipu::builder b("linear", 17);
  const auto x = b.add_input_tensor({data_type::F32, {2, 3}}, "x");
  const auto w = b.add_initialized_input(ipu::make_constant<float>({4, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}), "w");
  const auto wt = b.op("Transpose", {w}, {{"perm", std::vector<std::int64_t>{1, 0}}}, {.name = "wt"})[0];
  b.add_output(b.op("MatMul", {x, wt})[0]);
  const auto before = std::move(b).build();
  const auto after = ipu::passes::fold_constants(before);
  CHECK_NOTHROW(ipu::validate(after));
  CHECK(count(after, "Transpose") == 0);
  CHECK(after.num_ops() == 1);
  CHECK_FALSE(after.find_tensor("w"));  // read only by the folded Transpose
  const auto folded = after.find_tensor(before.tensor(wt).name);
  REQUIRE(folded);
  CHECK(after.tensor(*folded).kind == ipu::tensor_kind::constant);
  CHECK(after.tensor(*folded).info == ipu::tensor_info{data_type::F32, {3, 4}});
  CHECK(after.tensor(*folded).data.load<float>(1) == 4.0f);  // W^T[0][1] = W[1][0]
  CHECK(run(after, sample({2, 3})) == run(before, sample({2, 3})));
}

TEST_CASE("a chain of constant ops folds whole; ops reading a graph input or giving a graph output stay") {
  ipu::builder b("chain", 17);
  const auto x = b.add_input_tensor({data_type::F32, {3}}, "x");
  const auto c1 = b.add_constant(ipu::make_constant<float>({3}, {1, 2, 3}));
  const auto c2 = b.add_constant(ipu::make_constant<float>({3}, {0.5f, 0.25f, 0.125f}));
  const auto k = b.op("Mul", {b.op("Add", {c1, c2})[0], c2})[0];  // folds
  b.add_output(b.op("Add", {x, k})[0]);                           // reads x: stays
  b.add_output(b.op("Neg", {c1})[0]);                             // a graph output: stays
  const auto before = std::move(b).build();
  const auto after = ipu::passes::fold_constants(before);
  CHECK_NOTHROW(ipu::validate(after));
  CHECK(count(after, "Mul") == 0);
  CHECK(count(after, "Add") == 1);
  CHECK(count(after, "Neg") == 1);
  const auto x_in = ipu::host_tensor::from<float>({3}, {1, -1, 2});
  const auto want = ipu::cpu::device(before).run({x_in}), got = ipu::cpu::device(after).run({x_in});
  REQUIRE(got.size() == 2);
  CHECK(values(got[0]) == values(want[0]));  // the same kernels: bit for bit
  CHECK(values(got[1]) == values(want[1]));
}

TEST_CASE("what is not folded: outputs that would bloat the model, Graphcore's Nop, a kernel that fails") {
  ipu::builder b("kept", 17);
  const auto x = b.add_input_tensor({data_type::F32, {64, 64}}, "x");
  const auto one = b.add_constant(ipu::make_scalar(1.0f));
  const auto big = b.op("Expand", {one, b.add_constant(ipu::make_constant<std::int64_t>({2}, {64, 64}))})[0];
  const auto nop = b.nop(b.add_constant(ipu::make_constant<float>({64, 64}, std::vector<float>(4096, 2.0f))));
  auto y = b.op("Add", {b.op("Add", {x, big})[0], nop})[0];
  // A constant index out of range: the error belongs to run time, as without the pass.
  const auto table = b.add_constant(ipu::make_constant<float>({2}, {1, 2}));
  const auto bad = b.op("Gather", {table, b.add_constant(ipu::make_constant<std::int64_t>({1}, {5}))})[0];
  b.add_output(y);
  b.add_output(bad);
  const auto before = std::move(b).build();
  const auto after = ipu::passes::fold_constants(before);
  CHECK(count(after, "Expand") == 1);  // 16 KiB from 4 bytes
  CHECK(count(after, "Nop") == 1);
  CHECK(count(after, "Gather") == 1);
  CHECK_THROWS_AS(ipu::cpu::device(after).run({sample({64, 64})}), ipu::error);
}

TEST_CASE("max_bytes bounds a folded output") {
  ipu::builder b("bounded", 17);
  const auto x = b.add_input_tensor({data_type::F32, {256}}, "x");
  const auto c = b.add_constant(ipu::make_constant<float>({256}, std::vector<float>(256, 3.0f)));
  b.add_output(b.op("Add", {x, b.op("Neg", {c})[0]})[0]);
  const auto g = std::move(b).build();
  CHECK(count(ipu::passes::fold_constants(g), "Neg") == 0);
  CHECK(count(ipu::passes::fold_constants(g, {.max_bytes = 1023}), "Neg") == 1);
  CHECK(count(ipu::passes::fold_constants(g, {.max_bytes = 1024}), "Neg") == 0);
}

TEST_CASE("random ops are not folded, however constant their inputs: each run draws afresh") {
  ipu::builder b("noise", 17);
  const auto x = b.add_input_tensor({data_type::F32, {256}}, "x");
  const auto c = b.add_constant(ipu::make_constant<float>({256}, std::vector<float>(256, 0.5f)));
  const auto noise = b.op("RandomUniformLike", {c}, {{"low", -1.0f}, {"high", 1.0f}})[0];
  const auto coin = b.op("Bernoulli", {c})[0];
  b.add_output(b.op("Add", {b.op("Add", {x, noise})[0], coin})[0]);
  const auto before = std::move(b).build();
  const auto after = ipu::passes::fold_constants(before);
  CHECK(count(after, "RandomUniformLike") == 1);
  CHECK(count(after, "Bernoulli") == 1);
  ipu::cpu::device dev(after);
  const auto first = values(dev.run({sample({256})})[0]);
  CHECK(values(dev.run({sample({256})})[0]) != first);
}

}  // namespace test_fold_constants
