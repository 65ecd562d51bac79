// SiLU written out as Sigmoid and Mul (PyTorch's export of nn.SiLU) fused into ai.graphcore Swish:
// what matches, what must not, and that the fused graph computes the same bits.
#include "ipu/passes/fuse_swish.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_fuse_swish {

namespace {

using ipu::data_type;
using ipu::tensor_id;

/// How the pattern is spelt; each bool but sigmoid_first breaks one condition of a match.
struct silu_spelling {
  data_type type = data_type::F32;
  bool sigmoid_first = false;    // Mul(s, x) rather than Mul(x, s)
  bool sigmoid_output = false;   // s is also a graph output
  bool sigmoid_reused = false;   // s is also read by a Relu
  bool other_operand = false;    // Mul(z, s): not the Sigmoid's input
};

/// x [2, 3, 5] -> Sigmoid -> Mul -> Relu; a second input z.
constexpr ipu::graph written_out(const silu_spelling& s = {}) {
  ipu::builder b("silu", 13);
  const auto x = b.add_input_tensor({s.type, {2, 3, 5}}, "x");
  const auto z = b.add_input_tensor({s.type, {2, 3, 5}}, "z");
  const auto sg = b.sigmoid(x, "act/Sigmoid");
  const auto other = s.other_operand ? z : x;
  const auto y = s.sigmoid_first ? b.mul(sg, other, "act/Mul") : b.mul(other, sg, "act/Mul");
  b.add_output(b.relu(y));
  if (s.sigmoid_output) b.add_output(sg);
  if (s.sigmoid_reused) b.add_output(b.relu(sg));
  return std::move(b).build();
}

constexpr std::size_t count(const ipu::graph& g, std::string_view type) {
  std::size_t n = 0;
  for (const auto& op : g.ops()) n += op.type == type ? 1 : 0;
  return n;
}

std::vector<ipu::host_tensor> run(const ipu::graph& g, data_type type) {
  std::vector<float> v;
  for (int i = 0; i < 30; ++i) v.push_back(static_cast<float>(std::sin(0.9 * i) * 6));
  ipu::host_tensor x({type, {2, 3, 5}}), z({type, {2, 3, 5}});
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (type == data_type::F32) x.as<float>()[i] = v[i], z.as<float>()[i] = -v[i];
    else if (type == data_type::F64) x.as<double>()[i] = v[i], z.as<double>()[i] = -v[i];
    else x.as<ipu::half>()[i] = ipu::half(v[i]), z.as<ipu::half>()[i] = ipu::half(-v[i]);
  }
  ipu::cpu::device dev(g);
  return dev.run(std::vector<ipu::host_tensor>{x, z});
}

bool same_bits(const ipu::host_tensor& a, const ipu::host_tensor& b) {
  return a.info() == b.info() && std::memcmp(a.data(), b.data(), a.info().num_bytes()) == 0;
}

}  // namespace

static_assert(
    [] {
      const auto g = ipu::passes::fuse_swish(written_out());
      return g.num_ops() == 2 && count(g, "Swish") == 1 && count(g, "Sigmoid") == 0 && count(g, "Mul") == 0 &&
             g.num_tensors() == 4;  // x, z, Swish's output, Relu's
    }(),
    "ipu: Sigmoid times its input fuses into one Swish in a constant expression");

TEST_CASE("Sigmoid(x) * x becomes ai.graphcore Swish, with the same bits in every float type") {
  for (const auto type : {data_type::F32, data_type::F16, data_type::F64})
    for (const bool sigmoid_first : {false, true}) {
      CAPTURE(type);
      CAPTURE(sigmoid_first);
      const auto before = written_out({.type = type, .sigmoid_first = sigmoid_first});
      const auto after = ipu::passes::fuse_swish(before);
      CHECK_NOTHROW(ipu::validate(after));
      REQUIRE(count(after, "Swish") == 1);
      for (const auto& op : after.ops())
        if (op.type == "Swish") {
          CHECK(op.domain == "ai.graphcore");
          CHECK(op.name == "act/Swish");
          CHECK(after.tensor(op.outputs[0]).name == "act/Mul");  // the Mul's output keeps its tensor
        }
      const auto want = run(before, type), got = run(after, type);
      REQUIRE(want.size() == got.size());
      for (std::size_t k = 0; k < want.size(); ++k) CHECK(same_bits(want[k], got[k]));
    }
}

TEST_CASE("what must not fuse is left as it is") {
  for (const auto& s : {silu_spelling{.sigmoid_output = true}, silu_spelling{.sigmoid_reused = true},
                        silu_spelling{.other_operand = true}}) {
    const auto before = written_out(s);
    CHECK(ipu::passes::fuse_swish(before) == before);
  }
  auto checkpointed = written_out();
  for (ipu::op_id id = 0; id < checkpointed.num_ops(); ++id)
    if (checkpointed.op(id).type == "Sigmoid") checkpointed.op(id).where.checkpoint = true;
  CHECK(ipu::passes::fuse_swish(checkpointed) == checkpointed);
  auto recomputed = written_out();
  for (ipu::op_id id = 0; id < recomputed.num_ops(); ++id)
    if (recomputed.op(id).type == "Mul") recomputed.op(id).where.recompute = true;
  CHECK(ipu::passes::fuse_swish(recomputed) == recomputed);
}

}  // namespace test_fuse_swish
