// Broadcast plans: shape rules, dimension merging and run iteration.
#include "ipu/ops/kernels/broadcast.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdint>
#include <vector>

#include "math_kernel_harness.hpp"

namespace test_broadcast {

using namespace mk;
using namespace ipu::detail::math_ops;

namespace {
ipu::op_node node() {
  ipu::op_node op;
  op.type = "Test";
  return op;
}
}  // namespace

TEST_CASE("broadcast_shapes follows numpy and names a clash") {
  const auto op = node();
  const ipu::kernel_context ctx{op, {}, {}};
  const std::array<shape, 3> ok{shape{2, 1, 3}, shape{4, 1}, shape{}};
  CHECK(broadcast_shapes(ctx, ok) == shape{2, 4, 3});
  const std::array<shape, 2> bad{shape{2, 3}, shape{4, 3}};
  CHECK_THROWS_WITH_AS(broadcast_shapes(ctx, bad), doctest::Contains("cannot be broadcast"), ipu::error);
}

TEST_CASE("plans drop size-1 dimensions and merge contiguous ones") {
  const auto op = node();
  const ipu::kernel_context ctx{op, {}, {}};
  // Same shapes collapse to one dimension.
  auto same = make_broadcast_plan<2>(ctx, shape{2, 3, 4}, {shape{2, 3, 4}, shape{2, 3, 4}});
  CHECK(same.dims == ints{24});
  CHECK(same.strides[0] == ints{1});
  // A per-channel vector: [N, C, H, W] + [C, 1, 1] -> (N, C, H*W) with the vector's stride 1 on C.
  auto chan = make_broadcast_plan<2>(ctx, shape{2, 3, 4, 5}, {shape{2, 3, 4, 5}, shape{3, 1, 1}});
  CHECK(chan.dims == ints{2, 3, 20});
  CHECK(chan.strides[0] == ints{60, 20, 1});
  CHECK(chan.strides[1] == ints{0, 1, 0});
  // A scalar against anything: zero strides.
  auto scalar = make_broadcast_plan<2>(ctx, shape{3, 1, 2}, {shape{3, 1, 2}, shape{}});
  CHECK(scalar.dims == ints{6});
  CHECK(scalar.strides[1] == ints{0});
  // A rank-0 output is one element.
  auto none = make_broadcast_plan<1>(ctx, shape{}, {shape{}});
  CHECK(none.dims == ints{1});
  CHECK(none.size == 1);
  CHECK_THROWS_AS(make_broadcast_plan<1>(ctx, shape{3}, {shape{2}}), ipu::error);
  CHECK_THROWS_AS(make_broadcast_plan<1>(ctx, shape{3}, {shape{1, 3}}), ipu::error);
}

TEST_CASE("for_each_run visits every element once from any start") {
  const auto op = node();
  const ipu::kernel_context ctx{op, {}, {}};
  auto plan = make_broadcast_plan<2>(ctx, shape{3, 4, 5}, {shape{3, 1, 5}, shape{4, 1}});
  REQUIRE(plan.dims == ints{3, 4, 5});
  for (std::int64_t begin : {0, 1, 7, 23, 59}) {
    std::vector<int> seen(60, 0);
    for_each_run(plan, begin, 60, [&](std::int64_t o, const std::array<std::int64_t, 2>& in, std::int64_t len) {
      for (std::int64_t i = 0; i < len; ++i) {
        const std::int64_t e = o + i, a = e / 20, b = (e / 5) % 4, c = e % 5;
        ++seen[static_cast<std::size_t>(e)];
        CHECK(in[0] + i * plan.inner_stride(0) == a * 5 + c);
        CHECK(in[1] + i * plan.inner_stride(1) == b);
      }
    });
    for (std::int64_t e = 0; e < 60; ++e) CHECK(seen[static_cast<std::size_t>(e)] == (e >= begin ? 1 : 0));
  }
}

}  // namespace test_broadcast
