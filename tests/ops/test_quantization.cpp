// The quantization family's kernels against hand-computed integer results: round half to even,
// saturation, per-axis scales and zero points.
#include "ipu/ops/kernels/quantization.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ipu/ops/families/quantization.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_quantization {

using namespace tk;

host_tensor u8(shape s, std::vector<std::uint8_t> v) { return make<std::uint8_t>(std::move(s), std::move(v)); }
host_tensor s8(shape s, std::vector<std::int8_t> v) { return make<std::int8_t>(std::move(s), std::move(v)); }

TEST_CASE("QuantizeLinear: ties round to even, results saturate, the zero point's type is the output's") {
  auto x = f32({7}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 300.0f, -300.0f});
  auto y = run1("QuantizeLinear", {x, f32({}, {1.0f}), s8({}, {0})}, info(data_type::S8, {7}));
  CHECK(values<std::int8_t>(y) == std::vector<std::int8_t>{0, 2, 2, 0, -2, 127, -128});
  // uint8, scale 2, zero point 128: 1/2 -> 0, 3/2 -> 2, -1/2 -> -0, 5/2 -> 2, then + 128; -600/2 saturates at 0.
  auto u = run1("QuantizeLinear", {f32({5}, {1, 3, -1, 5, -600}), f32({}, {2.0f}), u8({}, {128})}, info(data_type::U8, {5}));
  CHECK(values<std::uint8_t>(u) == std::vector<std::uint8_t>{128, 130, 128, 130, 0});
  // No zero point: uint8, zero point 0.
  auto d = run1("QuantizeLinear", {f32({3}, {-1, 254.5f, 1000}), f32({}, {1.0f})}, info(data_type::U8, {3}));
  CHECK(values<std::uint8_t>(d) == std::vector<std::uint8_t>{0, 254, 255});
  CHECK_THROWS_AS(run1("QuantizeLinear", {x, f32({}, {0.0f}), s8({}, {0})}, info(data_type::S8, {7})), ipu::error);
}

TEST_CASE("QuantizeLinear and DequantizeLinear per axis") {
  // axis 1 (the default): column 0 has scale 1, zero point 0; column 1 scale 2, zero point 10.
  auto x = f32({2, 2}, {1, 2, 3, 5});
  auto y = run1("QuantizeLinear", {x, f32({2}, {1, 2}), s8({2}, {0, 10})}, info(data_type::S8, {2, 2}));
  CHECK(values<std::int8_t>(y) == std::vector<std::int8_t>{1, 11, 3, 12});  // 5/2 = 2.5 -> 2
  // axis 0: row 0 scale 1 zero point 10, row 1 scale 0.5 zero point 20.
  auto q = u8({2, 2}, {10, 20, 30, 40});
  auto r = run1("DequantizeLinear", {q, f32({2}, {1.0f, 0.5f}), u8({2}, {10, 20})}, f32_info({2, 2}), {attr("axis", 0)});
  CHECK(values<float>(r) == std::vector<float>{0, 10, 5, 10});
  CHECK_THROWS_AS(run1("DequantizeLinear", {q, f32({3}, {1, 1, 1})}, f32_info({2, 2})), ipu::error);
}

TEST_CASE("DequantizeLinear: int8 extremes, int32 input, no zero point") {
  auto r = run1("DequantizeLinear", {s8({3}, {-128, 0, 127}), f32({}, {0.5f}), s8({}, {-1})}, f32_info({3}));
  CHECK(values<float>(r) == std::vector<float>{-63.5f, 0.5f, 64.0f});
  auto w = run1("DequantizeLinear", {i32({2}, {-1000000, 7}), f32({}, {0.25f})}, f32_info({2}));
  CHECK(values<float>(w) == std::vector<float>{-250000.0f, 1.75f});
}

TEST_CASE("DynamicQuantizeLinear: the range includes 0; ties round to even") {
  auto out = run("DynamicQuantizeLinear", {f32({4}, {0, 255, 127.5f, 1.5f})},
                 {info(data_type::U8, {4}), f32_info({}), info(data_type::U8, {})});
  CHECK(values<std::uint8_t>(out[0]) == std::vector<std::uint8_t>{0, 255, 128, 2});
  CHECK(values<float>(out[1]) == std::vector<float>{1.0f});
  CHECK(values<std::uint8_t>(out[2]) == std::vector<std::uint8_t>{0});
  // min -51, max 204: scale 1, zero point 51; 0.5 -> 0 (even) + 51.
  auto neg = run("DynamicQuantizeLinear", {f32({3}, {-51, 204, 0.5f})},
                 {info(data_type::U8, {3}), f32_info({}), info(data_type::U8, {})});
  CHECK(values<std::uint8_t>(neg[0]) == std::vector<std::uint8_t>{0, 255, 51});
  CHECK(values<std::uint8_t>(neg[2]) == std::vector<std::uint8_t>{51});
}

TEST_CASE("MatMulInteger: zero points per tensor and per column, int8 extremes, batch broadcast") {
  // (A - 1) = [[0,1],[2,3]]; (B - [5,6]) = [[0,0],[2,2]] -> [[2,2],[6,6]].
  auto y = run1("MatMulInteger", {u8({2, 2}, {1, 2, 3, 4}), u8({2, 2}, {5, 6, 7, 8}), u8({}, {1}), u8({2}, {5, 6})},
                info(data_type::S32, {2, 2}));
  CHECK(values<std::int32_t>(y) == std::vector<std::int32_t>{2, 2, 6, 6});
  auto e = run1("MatMulInteger", {s8({1, 2}, {-128, 127}), s8({2, 1}, {127, -128})}, info(data_type::S32, {1, 1}));
  CHECK(values<std::int32_t>(e) == std::vector<std::int32_t>{-32512});
  // A [2,1,2] x B [2,1]: each batch is a dot product.
  auto b = run1("MatMulInteger", {u8({2, 1, 2}, {1, 2, 3, 4}), u8({2, 1}, {10, 1})}, info(data_type::S32, {2, 1, 1}));
  CHECK(values<std::int32_t>(b) == std::vector<std::int32_t>{12, 34});
  // 255 * 255 * 70000 = 4551750000 wraps to 4551750000 - 2^32 in int32, without signed overflow.
  const std::vector<std::uint8_t> full(70000, 255);
  auto w = run1("MatMulInteger", {u8({1, 70000}, full), u8({70000, 1}, full)}, info(data_type::S32, {1, 1}));
  CHECK(values<std::int32_t>(w) == std::vector<std::int32_t>{256782704});
}

TEST_CASE("QLinearMatMul: requantized result rounds half to even and saturates") {
  // a . b = 2 + 4 = 6; * 0.5 * 1 / 2 = 1.5 -> 2.
  auto y = run1("QLinearMatMul",
                {u8({1, 2}, {2, 4}), f32({}, {0.5f}), u8({}, {0}), u8({2, 1}, {1, 1}), f32({}, {1.0f}), u8({}, {0}),
                 f32({}, {2.0f}), u8({}, {0})},
                info(data_type::U8, {1, 1}));
  CHECK(values<std::uint8_t>(y) == std::vector<std::uint8_t>{2});
  // 6 * 0.5 / 0.01 = 300 saturates at 127; with zero point -1 and y_scale 1: 3 - 1 = 2.
  auto s = run1("QLinearMatMul",
                {u8({1, 2}, {2, 4}), f32({}, {0.5f}), u8({}, {0}), u8({2, 1}, {1, 1}), f32({}, {1.0f}), u8({}, {0}),
                 f32({}, {0.01f}), s8({}, {0})},
                info(data_type::S8, {1, 1}));
  CHECK(values<std::int8_t>(s) == std::vector<std::int8_t>{127});
}

TEST_CASE("ConvInteger: zero points, padding contributes nothing") {
  std::vector<std::uint8_t> nine{1, 2, 3, 4, 5, 6, 7, 8, 9};
  // x - 1 = 0..8; a 2x2 kernel of ones sums each window.
  auto y = run1("ConvInteger", {u8({1, 1, 3, 3}, nine), u8({1, 1, 2, 2}, {1, 1, 1, 1}), u8({}, {1})},
                info(data_type::S32, {1, 1, 2, 2}));
  CHECK(values<std::int32_t>(y) == std::vector<std::int32_t>{8, 12, 20, 24});
  // Padded by 1: the corner window sees only x[0,0] - 1 = 0; the next one also x[0,1] - 1 = 1.
  auto p = run1("ConvInteger", {u8({1, 1, 3, 3}, nine), u8({1, 1, 2, 2}, {1, 1, 1, 1}), u8({}, {1})},
                info(data_type::S32, {1, 1, 4, 4}), {attr("pads", std::vector<std::int64_t>{1, 1, 1, 1})});
  const auto pv = values<std::int32_t>(p);
  CHECK(pv[0] == 0);
  CHECK(pv[1] == 1);
  CHECK(pv[5] == 8);
  CHECK(pv[15] == 8);
}

TEST_CASE("QLinearConv: per-channel weight scales, bias, ties and saturation") {
  // Channel 0: (x + bias 1) * 0.5 * 1 / 1 = 5.5, 10.5, 15.5, 20.5 -> 6, 10, 16, 20.
  // Channel 1: -x * 0.5 * 2 = -10... saturates at 0 in uint8.
  auto y = run1("QLinearConv",
                {u8({1, 1, 2, 2}, {10, 20, 30, 40}), f32({}, {0.5f}), u8({}, {0}), s8({2, 1, 1, 1}, {1, -1}),
                 f32({2}, {1.0f, 2.0f}), s8({2}, {0, 0}), f32({}, {1.0f}), u8({}, {0}), i32({2}, {1, 0})},
                info(data_type::U8, {1, 2, 2, 2}));
  CHECK(values<std::uint8_t>(y) == std::vector<std::uint8_t>{6, 10, 16, 20, 0, 0, 0, 0});
}

TEST_CASE("saturate_quantized rounds half to even as nearbyint does; requantize_row and quantize_row give its bits") {
  using ipu::detail::tensor_ops::quantize_row;
  using ipu::detail::tensor_ops::requantize_row;
  using ipu::detail::tensor_ops::saturate_quantized;
  // Ties to even, both signs, at and beyond 2^22, and the saturations.
  for (const float v : {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, 126.5f, 127.5f, -128.5f, 4194303.5f, 4194304.0f, 1e30f,
                        -1e30f, 3.4e38f}) {
    CAPTURE(v);
    const float r = std::nearbyint(v);
    CHECK(saturate_quantized<std::int8_t>(v, 0.0f) == static_cast<std::int8_t>(std::clamp(r, -128.0f, 127.0f)));
    CHECK(saturate_quantized<std::uint8_t>(v, 3.0f) == static_cast<std::uint8_t>(std::clamp(r + 3.0f, 0.0f, 255.0f)));
  }
  CHECK(saturate_quantized<std::uint8_t>(std::nanf(""), 7.0f) == 7);
  // A row of 8-lane blocks and a tail: sums that wrap, ties after scaling, both output types.
  std::vector<std::int32_t> acc;
  for (int i = 0; i < 37; ++i) acc.push_back(i * 2 - 37);
  acc.push_back(2147483647);  // + bias wraps to negative
  acc.push_back(-2147483647 - 1);
  std::vector<std::uint8_t> yu(acc.size());
  std::vector<std::int8_t> ys(acc.size());
  for (const float multiplier : {0.25f, 0.5f, 3.0f, std::numeric_limits<float>::infinity()}) {
    CAPTURE(multiplier);
    requantize_row(acc.data(), 5u, multiplier, 100.0f, yu.data(), acc.size());
    requantize_row(acc.data(), 5u, multiplier, -3.0f, ys.data(), acc.size());
    for (std::size_t i = 0; i < acc.size(); ++i) {
      CAPTURE(i);
      const auto sum = static_cast<float>(static_cast<std::int32_t>(static_cast<std::uint32_t>(acc[i]) + 5u));
      CHECK(yu[i] == saturate_quantized<std::uint8_t>(sum * multiplier, 100.0f));
      CHECK(ys[i] == saturate_quantized<std::int8_t>(sum * multiplier, -3.0f));
    }
  }
  std::vector<float> x{std::nanf(""), std::numeric_limits<float>::infinity(), -1e9f};
  for (int i = -20; i < 20; ++i) x.push_back(static_cast<float>(i) * 0.75f);
  yu.resize(x.size());
  ys.resize(x.size());
  quantize_row(x.data(), 0.5f, 128.0f, yu.data(), x.size());
  quantize_row(x.data(), 0.5f, 0.0f, ys.data(), x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    CAPTURE(x[i]);
    CHECK(yu[i] == saturate_quantized<std::uint8_t>(x[i] / 0.5f, 128.0f));
    CHECK(ys[i] == saturate_quantized<std::int8_t>(x[i] / 0.5f, 0.0f));
  }
}

TEST_CASE("quantization shape rules: output types, per-axis lengths, 8-bit only") {
  ipu::op_node op;
  op.type = "QuantizeLinear";
  const tensor_info x{data_type::F32, {2, 3}}, scale{data_type::F32, {3}}, zp{data_type::S8, {3}}, bad{data_type::S8, {2}};
  const tensor_info zp16{data_type::S16, {}};
  auto infer = [&](ipu::infer_fn f, std::vector<const tensor_info*> in) {
    std::vector<ipu::infer_input> ins;
    for (auto* t : in) ins.push_back({t, nullptr});
    return f(ipu::infer_context(op, ins, 1));
  };
  CHECK(infer(ipu::detail::infer::quantize_linear, {&x, &scale, &zp}).at(0) == tensor_info{data_type::S8, {2, 3}});
  CHECK(infer(ipu::detail::infer::quantize_linear, {&x, &scale}).at(0).type == data_type::U8);
  CHECK_THROWS_AS(infer(ipu::detail::infer::quantize_linear, {&x, &scale, &bad}), ipu::error);
  CHECK_THROWS_AS(infer(ipu::detail::infer::quantize_linear, {&x, &scale, &zp16}), ipu::error);
  // Per tensor, axis is ignored: the default axis 1 is out of range for a vector but not an error.
  const tensor_info v{data_type::F32, {6}}, one{data_type::F32, {}};
  CHECK(infer(ipu::detail::infer::quantize_linear, {&v, &one}).at(0) == tensor_info{data_type::U8, {6}});
  op.type = "MatMulInteger";
  const tensor_info a{data_type::U8, {4, 2, 3}}, b{data_type::S8, {3, 5}};
  CHECK(infer(ipu::detail::infer::matmul_integer, {&a, &b}).at(0) == tensor_info{data_type::S32, {4, 2, 5}});
  // A zero point has its operand's type, so its value is in the operand's range.
  const tensor_info a_zp{data_type::S8, {}};
  CHECK_THROWS_WITH_AS(infer(ipu::detail::infer::matmul_integer, {&a, &b, &a_zp}),
                       doctest::Contains("a_zero_point is S8 but its operand is U8"), ipu::error);
  op.type = "ConvInteger";
  const tensor_info cx{data_type::U8, {1, 1, 2, 2}}, cx_zp{data_type::U8, {}}, cw{data_type::S8, {1, 1, 1, 1}}, cw_zp{data_type::U8, {}};
  CHECK_THROWS_WITH_AS(infer(ipu::detail::infer::conv_integer, {&cx, &cw, &cx_zp, &cw_zp}),
                       doctest::Contains("w_zero_point is U8 but its operand is S8"), ipu::error);
}

}  // namespace test_quantization
