// The graphcore family (PopART's ai.graphcore helper ops) against hand-computed results: dynamic
// slices and updates with clamped offsets, group normalisation, the printed text of PrintTensor,
// the attributes the shape rules refuse, and the costs.
#include "ipu/ops/kernels/graphcore.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/device/cost.hpp"
#include "ipu/log.hpp"
#include "ipu/ops/families/graphcore.hpp"
#include "ipu/ops/op_cost.hpp"
#include "tensor_kernel_harness.hpp"
#include "../captured_log.hpp"

namespace test_graphcore {

using namespace tk;

/// Runs ai.graphcore op `type`.
std::vector<host_tensor> run_gc(const std::string& type, std::vector<host_tensor> inputs, std::vector<tensor_info> outputs,
                                std::vector<attribute> attrs = {}) {
  return run_in("ai.graphcore", type, std::vector<input>(inputs.begin(), inputs.end()), std::move(outputs),
                std::move(attrs));
}
std::vector<attribute> window(std::vector<std::int64_t> axes, std::vector<std::int64_t> sizes) {
  return {attr("axes", std::move(axes)), attr("sizes", std::move(sizes))};
}
std::vector<float> slice(const host_tensor& t, std::vector<std::int64_t> offset, std::vector<std::int64_t> axes,
                         std::vector<std::int64_t> sizes, shape out) {
  const auto n = static_cast<std::int64_t>(offset.size());
  return values<float>(run_gc("DynamicSlice", {t, i64({n}, offset)}, {f32_info(out)}, window(axes, sizes))[0]);
}

TEST_CASE("DynamicSlice: the window at the offset; offsets out of range clamp to [0, dim - size]") {
  const auto t = iota_f32({3, 4});  // [[0 1 2 3] [4 5 6 7] [8 9 10 11]]
  CHECK(slice(t, {1}, {1}, {2}, {3, 2}) == std::vector<float>{1, 2, 5, 6, 9, 10});
  CHECK(slice(t, {1, 2}, {0, 1}, {2, 2}, {2, 2}) == std::vector<float>{6, 7, 10, 11});
  CHECK(slice(t, {2, 1}, {1, 0}, {2, 2}, {2, 2}) == std::vector<float>{6, 7, 10, 11});  // axes in any order
  CHECK(slice(t, {-1}, {-1}, {1}, {3, 1}) == std::vector<float>{0, 4, 8});             // negative axis; offset -1 -> 0
  CHECK(slice(t, {5}, {1}, {2}, {3, 2}) == std::vector<float>{2, 3, 6, 7, 10, 11});     // 5 -> 2
  CHECK(slice(t, {-3}, {1}, {2}, {3, 2}) == std::vector<float>{0, 1, 4, 5, 8, 9});      // -3 -> 0
  constexpr auto big = std::numeric_limits<std::int64_t>::max(), small = std::numeric_limits<std::int64_t>::min();
  CHECK(slice(t, {big, small}, {0, 1}, {1, 4}, {1, 4}) == std::vector<float>{8, 9, 10, 11});
  // UINT32 offsets (PopTorch's type); an offset the window does not fit is refused.
  auto y = run_gc("DynamicSlice", {t, make<std::uint32_t>({1}, {4000000000u})}, {f32_info({1, 4})}, window({0}, {1}));
  CHECK(values<float>(y[0]) == std::vector<float>{8, 9, 10, 11});
  CHECK_THROWS_AS(run_gc("DynamicSlice", {t, i64({2}, {0, 0})}, {f32_info({1, 4})}, window({0}, {1})), ipu::error);
  CHECK_THROWS_AS(run_gc("DynamicSlice", {t, i64({1}, {0})}, {f32_info({1, 4})}, window({0}, {4})), ipu::error);
  CHECK_THROWS_AS(run_gc("DynamicSlice", {t, i64({1}, {0})}, {f32_info({2, 4})}, window({0}, {1})), ipu::error);
}

TEST_CASE("DynamicUpdate writes the slice into a copy of t; DynamicAdd adds it; both clamp like DynamicSlice") {
  const auto z = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  auto u = run_gc("DynamicUpdate", {z, i64({1}, {2}), f32({2, 1}, {7, 8})}, {f32_info({2, 3})}, window({1}, {1}));
  CHECK(values<float>(u[0]) == std::vector<float>{0, 0, 7, 0, 0, 8});
  u = run_gc("DynamicUpdate", {z, i64({1}, {9}), f32({2, 2}, {1, 2, 3, 4})}, {f32_info({2, 3})}, window({1}, {2}));
  CHECK(values<float>(u[0]) == std::vector<float>{0, 1, 2, 0, 3, 4});  // 9 -> 1
  const auto ones = f32({2, 3}, {1, 1, 1, 1, 1, 1});
  auto a = run_gc("DynamicAdd", {ones, i32({1}, {1}), f32({1, 3}, {1, 2, 3})}, {f32_info({2, 3})}, window({0}, {1}));
  CHECK(values<float>(a[0]) == std::vector<float>{1, 1, 1, 2, 3, 4});
  a = run_gc("DynamicAdd", {i64({4}, {1, 2, 3, 4}), i64({1}, {-7}), i64({2}, {10, 20})}, {info(data_type::S64, {4})},
             window({0}, {2}));
  CHECK(values<std::int64_t>(a[0]) == std::vector<std::int64_t>{11, 22, 3, 4});
  // Integers wrap like numpy instead of overflowing; a UINT64 offset beyond INT64_MAX is too large,
  // not negative, so it clamps to the end like any other large offset.
  constexpr auto top = std::numeric_limits<std::int32_t>::max();
  a = run_gc("DynamicAdd", {i32({3}, {top, 0, 5}), make<std::uint64_t>({1}, {~std::uint64_t{0}}), i32({2}, {2, 1})},
             {info(data_type::S32, {3})}, window({0}, {2}));
  CHECK(values<std::int32_t>(a[0]) == std::vector<std::int32_t>{top, 2, 6});
  a = run_gc("DynamicAdd", {i32({2}, {top, 0}), make<std::uint64_t>({1}, {0}), i32({1}, {1})}, {info(data_type::S32, {2})},
             window({0}, {1}));
  CHECK(values<std::int32_t>(a[0]) == std::vector<std::int32_t>{std::numeric_limits<std::int32_t>::min(), 0});
  CHECK_THROWS_AS(run_gc("DynamicUpdate", {z, i64({1}, {0}), f32({2, 2}, {1, 2, 3, 4})}, {f32_info({2, 3})},
                         window({1}, {1})),
                  ipu::error);
}

TEST_CASE("GroupNormalization: y, mean and 1 / sqrt(var + eps) per sample and group") {
  // One sample, 4 channels of 2 elements (0..7), 2 groups: each group's mean is 1.5 or 5.5 and its
  // variance 1.25, so 1 / sigma = 0.894427191; scale [1 2 1 1], bias [0 0 1 0].
  auto out = run_gc("GroupNormalization", {iota_f32({1, 4, 2}), f32({4}, {1, 2, 1, 1}), f32({4}, {0, 0, 1, 0})},
                    {f32_info({1, 4, 2}), f32_info({2}), f32_info({2})}, {attr("num_groups", 2), attr("epsilon", 0.0f)});
  const float s = 0.894427191f;
  check_close(values<float>(out[0]), {-1.5f * s, -0.5f * s, 2 * 0.5f * s, 2 * 1.5f * s, 1 - 1.5f * s, 1 - 0.5f * s,
                                      0.5f * s, 1.5f * s});
  check_close(values<float>(out[1]), {1.5f, 5.5f});
  check_close(values<float>(out[2]), {s, s});
  // Two samples, one group: sample 0 [1 3] (mean 2, var 1), sample 1 [0 4] (mean 2, var 4); eps 0.25.
  out = run_gc("GroupNormalization", {f32({2, 2}, {1, 3, 0, 4}), f32({2}, {1, 1}), f32({2}, {0, 0})},
               {f32_info({2, 2}), f32_info({2}), f32_info({2})}, {attr("num_groups", 1), attr("epsilon", 0.25f)});
  const float a = 1 / std::sqrt(1.25f), b = 1 / std::sqrt(4.25f);
  check_close(values<float>(out[0]), {-a, a, -2 * b, 2 * b});
  check_close(values<float>(out[1]), {2, 2});
  check_close(values<float>(out[2]), {a, b});
  CHECK_THROWS_AS(run_gc("GroupNormalization", {iota_f32({1, 4, 2}), f32({4}, {1, 1, 1, 1}), f32({4}, {0, 0, 0, 0})},
                         {f32_info({1, 4, 2}), f32_info({3}), f32_info({3})}, {attr("num_groups", 3)}),
                  ipu::error);
  // Every buffer is read as X's type, so the kernel refuses other types (a PopEF graph is not
  // re-inferred): an F16 scale or F16 statistics would be read or written past their ends.
  const auto half_scale = make<ipu::half>({4}, {ipu::half(1.0f), ipu::half(1.0f), ipu::half(1.0f), ipu::half(1.0f)});
  CHECK_THROWS_AS(run_gc("GroupNormalization", {iota_f32({1, 4, 2}), half_scale, f32({4}, {0, 0, 0, 0})},
                         {f32_info({1, 4, 2}), f32_info({2}), f32_info({2})}, {attr("num_groups", 2)}),
                  ipu::error);
  CHECK_THROWS_AS(run_gc("GroupNormalization", {iota_f32({1, 4, 2}), f32({4}, {1, 1, 1, 1}), f32({4}, {0, 0, 0, 0})},
                         {f32_info({1, 4, 2}), info(data_type::F16, {2}), info(data_type::F16, {2})},
                         {attr("num_groups", 2)}),
                  ipu::error);
  // No channels: no number of groups fits (every g divides 0, and N * g could be anything).
  CHECK_THROWS_AS(run_gc("GroupNormalization", {f32({1, 0}, {}), f32({0}, {}), f32({0}, {})},
                         {f32_info({1, 0}), f32_info({4}), f32_info({4})}, {attr("num_groups", 4)}),
                  ipu::error);
}

TEST_CASE("Nop copies; PrintTensor copies and prints 'title: values' to the log sink whatever the level") {
  const auto x = f32({2, 2}, {1, 2.5f, -3, 4});
  CHECK(values<float>(run_gc("Nop", {x}, {f32_info({2, 2})})[0]) == values<float>(x));
  const ipu_test::captured_log log(ipu::log::level::off);
  auto y = run_gc("PrintTensor", {x}, {f32_info({2, 2})}, {attr("title", "x")});
  (void)run_gc("PrintTensor", {i32({3}, {1, 2, 3})}, {info(data_type::S32, {3})}, {attr("title", "ints")});
  (void)run_gc("PrintTensor", {f32({}, {7})}, {f32_info({})}, {attr("title", "scalar")});
  const auto printed = log.messages();
  CHECK(values<float>(y[0]) == values<float>(x));
  REQUIRE(printed.size() == 3);
  CHECK(printed[0] == "x: [[1, 2.5],\n [-3, 4]]");
  CHECK(printed[1] == "ints: [1, 2, 3]");
  CHECK(printed[2] == "scalar: 7");
}

TEST_CASE("shape rules: window shapes, and bad attributes refused with what to fix") {
  ipu::builder b("gc");
  const auto t = b.add_input_tensor({data_type::F32, {3, 4}}, "t");
  const auto off = b.add_input_tensor({data_type::S32, {1}}, "off");
  const auto off2 = b.add_input_tensor({data_type::S32, {2}}, "off2");
  CHECK(b.info(b.dynamic_slice(t, off, {1}, {2})) == tensor_info{data_type::F32, {3, 2}});
  CHECK(b.info(b.dynamic_slice(t, off2, {0, -1}, {1, 3}, true)) == tensor_info{data_type::F32, {1, 3}});
  const auto s = b.add_input_tensor({data_type::F32, {3, 2}}, "s");
  CHECK(b.info(b.dynamic_update(t, off, s, {1}, {2})) == tensor_info{data_type::F32, {3, 4}});
  const auto ti = b.info(t);  // a copy: adding ops moves the builder's tensors
  CHECK(b.info(b.nop(t)) == ti);
  CHECK(b.info(b.print_tensor(t, "t")) == ti);
  using doctest::Contains;
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off, {1}, {5}), Contains("outside [1, 4]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off, {1}, {0}), Contains("outside [1, 4]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off, {2}, {1}), Contains("out of range"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off2, {1, 1}, {1, 1}), Contains("appears twice"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off, {0, 1}, {1}), Contains("axes has 2 values and sizes 1"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, off2, {1}, {1}), Contains("for 1 axes"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_slice(t, t, {1}, {1}), Contains("not an integer tensor"), ipu::error);
  CHECK_THROWS_WITH_AS(b.dynamic_update(t, off, s, {1}, {3}), Contains("the slice is F32[3,2]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("DynamicSlice", {t, off}, {{"axes", std::vector<std::int64_t>{1}}}, {.opset = 1, .domain = "ai.graphcore"}),
                       Contains("needs the attributes axes and sizes"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("DynamicSlice", {t, off},
                            {{"axes", std::vector<std::int64_t>{1}}, {"sizes", std::vector<std::int64_t>{1}},
                             {"noOverlap", std::int64_t{2}}},
                            {.opset = 1, .domain = "ai.graphcore"}),
                       Contains("noOverlap is 2"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("Nop", {t}, {{"title", std::string("x")}}, {.opset = 1, .domain = "ai.graphcore"}),
                       Contains("attribute 'title' is not one of Nop's"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("PrintTensor", {t}, {{"summariseThreshold", std::int64_t{3}}}, {.opset = 1, .domain = "ai.graphcore"}),
                       Contains("use only title, print_gradient"), ipu::error);

  const auto x = b.add_input_tensor({data_type::F32, {2, 6, 5}}, "x");
  const auto c6 = b.add_input_tensor({data_type::F32, {6}}, "c6");
  const auto gn = b.group_normalization(x, c6, c6, 3);
  REQUIRE(gn.size() == 3);
  CHECK(b.info(gn[0]) == tensor_info{data_type::F32, {2, 6, 5}});
  CHECK(b.info(gn[1]) == tensor_info{data_type::F32, {6}});
  CHECK(b.info(gn[2]) == tensor_info{data_type::F32, {6}});
  CHECK_THROWS_WITH_AS(b.group_normalization(x, c6, c6, 4), Contains("does not divide the 6 channels"), ipu::error);
  CHECK_THROWS_WITH_AS(b.group_normalization(x, c6, c6, 0), Contains("does not divide"), ipu::error);
  const auto no_channels = b.add_input_tensor({data_type::F32, {2, 0}}, "no_channels");
  const auto c0 = b.add_input_tensor({data_type::F32, {0}}, "c0");
  CHECK_THROWS_WITH_AS(b.group_normalization(no_channels, c0, c0, 3), Contains("the 0 channels"), ipu::error);
  CHECK_THROWS_WITH_AS(b.group_normalization(x, c6, c6, 2, -1.0f), Contains("epsilon is negative"), ipu::error);
  CHECK_THROWS_WITH_AS(b.group_normalization(x, s, c6, 2), Contains("scale is F32[3,2]"), ipu::error);
  CHECK_THROWS_WITH_AS(b.op("GroupNormalization", {x, c6, c6}, {}, {.opset = 1, .num_outputs = 3, .domain = "ai.graphcore"}),
                       Contains("needs num_groups"), ipu::error);
}

TEST_CASE("costs: Nop is a copy pass (Identity is free); GroupNormalization with one channel per group costs InstanceNormalization") {
  const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();
  ipu::builder b("cost");
  const auto x = b.add_input_tensor({data_type::F32, {4, 8, 16}}, "x");
  const auto c8 = b.add_input_tensor({data_type::F32, {8}}, "c8");
  b.add_output(b.nop(x));                                                   // op 0
  b.add_output(b.identity(x));                                              // op 1
  b.add_output(b.group_normalization(x, c8, c8, 8)[0]);                     // op 2
  b.add_output(b.op("InstanceNormalization", {x, c8, c8}).front());         // op 3
  b.add_output(b.group_normalization(x, c8, c8, 2)[0]);                     // op 4
  const auto g = std::move(b).build();
  const auto nop = ipu::estimate_op_cost(g, 0, mk2);
  CHECK(nop.cycles() == ipu::elementwise_cost(mk2.arch, data_type::F32, 4 * 8 * 16, 1, 1).cycles + ipu::sync_cycles(mk2));
  CHECK(ipu::estimate_op_cost(g, 1, mk2).cycles() == 0);
  CHECK(ipu::estimate_op_cost(g, 2, mk2).cycles() == ipu::estimate_op_cost(g, 3, mk2).cycles());
  CHECK(ipu::estimate_op_cost(g, 4, mk2).cycles() != ipu::estimate_op_cost(g, 2, mk2).cycles());
}

}  // namespace test_graphcore
