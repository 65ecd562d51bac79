// Per-op plan annotations (PopTorch's set_available_memory and serializedMatMul): what they change
// in a MatMul's or Conv's plan, checked against the device model's planner called by hand, and the
// values and ops they are refused for.
#include "ipu/ops/plan_annotations.hpp"

#include <doctest/doctest.h>

#include <string>
#include <utility>

#include "ipu/builder/builder.hpp"
#include "ipu/device/cost.hpp"
#include "ipu/ops/op_cost.hpp"

namespace test_plan_annotations {

namespace {

using ipu::data_type;

const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();

struct built {
  ipu::builder b{"mm"};
  ipu::tensor_id y = ipu::no_tensor;
};

built matmul(std::int64_t m, std::int64_t k, std::int64_t n) {
  built r;
  auto x = r.b.add_input_tensor({data_type::F32, {m, k}}, "x");
  auto w = r.b.add_input_tensor({data_type::F32, {k, n}}, "w");
  r.y = r.b.matmul(x, w, "mm");
  r.b.add_output(r.y);
  return r;
}

ipu::op_cost cost_of(built&& r) {
  const auto g = std::move(r.b).build();
  return ipu::estimate_op_cost(g, 0, mk2);
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("an op's available memory proportion replaces the compile-wide one in its plan") {
  auto r = matmul(2048, 2048, 2048);
  r.b.set_available_memory_proportion(r.y, 0.05);
  const auto c = cost_of(std::move(r));
  ipu::amp_plan_options o;
  o.available_memory_proportion = 0.05;
  const auto p = ipu::plan_matmul(mk2, {1, 2048, 2048, 2048}, ipu::precision::fp32, o);
  CHECK(c.temporary_bytes_per_tile == p.temporary_bytes_per_tile);
  CHECK(c.compute_cycles == p.parts.serial_passes * (p.compute.compute_cycles + p.reduction.compute_cycles));
  // The default plan of this matmul is another one: the annotation is what changed it.
  const auto plain = ipu::plan_matmul(mk2, {1, 2048, 2048, 2048}, ipu::precision::fp32);
  CHECK(plain.temporary_bytes_per_tile != p.temporary_bytes_per_tile);
  CHECK(c.temporary_bytes_per_tile < plain.temporary_bytes_per_tile);
}

TEST_CASE("a serialised MatMul is planned as its slices, one after another") {
  SUBCASE("output channels: four [512 x 256] x [256 x 128] matmuls") {
    auto r = matmul(512, 256, 512);
    r.b.set_serialize_matmul(r.y, ipu::matmul_serialization_mode::output_channels, 4);
    const auto c = cost_of(std::move(r));
    const auto slice = ipu::estimate_op_cost(std::move(matmul(512, 256, 128).b).build(), 0, mk2);
    CHECK(c.compute_cycles == 4 * slice.compute_cycles);
    CHECK(c.exchange_cycles == 4 * slice.exchange_cycles);
    CHECK(c.temporary_bytes_per_tile == slice.temporary_bytes_per_tile);
    CHECK(c.macs == 4 * slice.macs);
  }
  SUBCASE("reducing dimension: the slices' products are summed into the output") {
    auto r = matmul(256, 1024, 256);
    r.b.set_serialize_matmul(r.y, ipu::matmul_serialization_mode::reducing_dim, 2);
    const auto c = cost_of(std::move(r));
    const auto slice = ipu::estimate_op_cost(std::move(matmul(256, 512, 256).b).build(), 0, mk2);
    CHECK(c.compute_cycles > 2 * slice.compute_cycles);  // plus one add over the output
    CHECK(c.temporary_bytes_per_tile >= slice.temporary_bytes_per_tile);
  }
  SUBCASE("serialized_matmul builds the annotated MatMul") {
    ipu::builder b("smm");
    auto x = b.add_input_tensor({data_type::F32, {512, 256}}, "x");
    auto w = b.add_input_tensor({data_type::F32, {256, 512}}, "w");
    b.add_output(b.serialized_matmul(x, w, ipu::matmul_serialization_mode::output_channels, 4, "smm"));
    const auto g = std::move(b).build();
    const auto s = ipu::op_matmul_serialization(g.op(0));
    CHECK(s.mode == ipu::matmul_serialization_mode::output_channels);
    CHECK(s.factor == 4);
  }
  SUBCASE("none, or a factor of 1, is the plain matmul") {
    auto r = matmul(64, 64, 64);
    r.b.set_serialize_matmul(r.y, ipu::matmul_serialization_mode::none, 1);
    const auto c = cost_of(std::move(r));
    const auto plain = ipu::estimate_op_cost(std::move(matmul(64, 64, 64).b).build(), 0, mk2);
    CHECK(c.cycles() == plain.cycles());
  }
}

TEST_CASE("plan annotations are refused on other ops, out of range, or with unknown modes") {
  SUBCASE("a proportion outside (0, 1]") {
    auto r = matmul(8, 8, 8);
    CHECK_THROWS_WITH(r.b.set_available_memory_proportion(r.y, 1.5), doctest::Contains("not a FLOAT in (0, 1]"));
    CHECK_THROWS_WITH(r.b.set_available_memory_proportion(r.y, 0.0), doctest::Contains("not a FLOAT in (0, 1]"));
  }
  SUBCASE("on an op without temporaries") {
    ipu::builder b("relu");
    auto x = b.add_input_tensor({data_type::F32, {4}}, "x");
    auto y = b.relu(x);
    CHECK_THROWS_WITH(b.set_available_memory_proportion(y, 0.5), doctest::Contains("set on a Relu"));
    CHECK_THROWS_WITH(b.set_serialize_matmul(y, ipu::matmul_serialization_mode::reducing_dim, 2),
                      doctest::Contains("serialisation is set on a Relu"));
  }
  SUBCASE("a factor below 1, or above the sliced dimension") {
    auto r = matmul(8, 8, 8);
    CHECK_THROWS_WITH(r.b.set_serialize_matmul(r.y, ipu::matmul_serialization_mode::input_channels, 0),
                      doctest::Contains("below 1"));
    r.b.set_serialize_matmul(r.y, ipu::matmul_serialization_mode::input_channels, 16);
    try {
      (void)cost_of(std::move(r));
      FAIL("a factor of 16 on 8 rows was accepted");
    } catch (const ipu::error& e) {
      CHECK(contains(e.what(), "16 exceeds the 8 input_channels it slices"));
    }
  }
  SUBCASE("an unknown mode in an imported op") {
    ipu::op_node op;
    op.type = "MatMul";
    op.attributes.push_back({std::string(ipu::attr_serialize_matmul_mode), std::string("rows")});
    op.attributes.push_back({std::string(ipu::attr_serialize_matmul_factor), std::int64_t{2}});
    CHECK_THROWS_WITH(ipu::check_plan_annotations(op), doctest::Contains("not a known mode"));
  }
}

}  // namespace test_plan_annotations
