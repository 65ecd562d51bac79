#pragma once
// The op table's quantization family: linear (de)quantization and integer matrix products:
// QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger,
// QLinearMatMul, QLinearConv (8-bit operands, per-tensor or per-axis scales and zero points).
// The shape and cost rules are here, beside the rows; the host kernels are in
// ipu/ops/kernels/quantization.hpp.
//
// Cost: the device model has no 8-bit AMP mode (the IPU spec in shared/reference gives AMP rates
// for FP32, FP16.16 and FP16.32 only), so integer products are costed like every other integer
// matmul / convolution: k multiply-adds per output on the vector units (cost_rules::matmul_of,
// conv_of), plus one element-wise pass to requantize the QLinear outputs.
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace detail::infer {

constexpr bool is_8bit(data_type t) { return t == data_type::S8 || t == data_type::U8; }

constexpr void need_8bit(const infer_context& c, std::size_t i, std::string_view what) {
  if (!is_8bit(c.in_type(i)))
    throw c.fail(std::string(what) + " is " + std::string(to_string(c.in_type(i))) + ", but only INT8 and UINT8 are supported",
                 "quantize to int8 or uint8");
}

/// Zero point `zp`, when given, has the type of the operand `of` it shifts (so its values are in
/// that operand's range).
constexpr void need_operand_type(const infer_context& c, std::size_t zp, std::size_t of, std::string_view what) {
  if (c.has_input(zp) && c.in_type(zp) != c.in_type(of))
    throw c.fail(std::string(what) + " is " + std::string(to_string(c.in_type(zp))) + " but its operand is " +
                     std::string(to_string(c.in_type(of))) + " (" + c.describe_inputs() + ")",
                 "give the zero point its operand's type");
}

/// A scale or zero point: a scalar (per tensor) or a 1-D tensor of `n` values (per axis / row).
constexpr void need_scalar_or_vector(const infer_context& c, std::size_t i, std::int64_t n, std::string_view what) {
  if (!c.has_input(i)) return;
  const auto& s = c.in_shape(i);
  const bool scalar = s.rank() == 0 || (s.rank() == 1 && s[0] == 1);
  if (scalar || (s.rank() == 1 && s[0] == n)) return;
  throw c.fail(std::string(what) + " " + to_string(c.input(i)) + " must be a scalar or hold " + std::to_string(n) +
                   " values (inputs " + c.describe_inputs() + ")",
               "give one value per tensor or one per element of the quantized axis");
}

/// The length of the quantized axis: 1 when every scale and zero point is a scalar (`axis` is then
/// ignored, as ONNX says, even when it is out of range for x).
constexpr std::int64_t quantized_axis_length(const infer_context& c, const shape& x) {
  bool per_axis = false;
  for (std::size_t i : {std::size_t{1}, std::size_t{2}})
    if (c.has_input(i) && c.in_shape(i).num_elements() > 1) per_axis = true;
  if (!per_axis) return 1;
  if (x.rank() == 0) throw c.fail("a per-axis scale or zero point needs x of rank >= 1 (" + c.describe_inputs() + ")");
  return x[c.axis(c.attr_int("axis", 1), x.rank())];
}

constexpr std::vector<tensor_info> quantize_linear(const infer_context& c) {
  const auto& x = c.input(0);
  if (x.type != data_type::F32 && x.type != data_type::F16 && x.type != data_type::S32)
    throw c.fail("x is " + std::string(to_string(x.type)) + "; QuantizeLinear takes FLOAT, FLOAT16 or INT32");
  const data_type out = c.has_input(2) ? c.in_type(2) : data_type::U8;
  if (!is_8bit(out))
    throw c.fail("y_zero_point is " + std::string(to_string(out)) + ", but only INT8 and UINT8 outputs are supported",
                 "give an int8 or uint8 zero point");
  const auto n = quantized_axis_length(c, x.shape);
  need_scalar_or_vector(c, 1, n, "y_scale");
  need_scalar_or_vector(c, 2, n, "y_zero_point");
  return {tensor_info{out, x.shape}};
}

constexpr std::vector<tensor_info> dequantize_linear(const infer_context& c) {
  const auto& x = c.input(0);
  if (!is_8bit(x.type) && x.type != data_type::S32)
    throw c.fail("x is " + std::string(to_string(x.type)) + "; DequantizeLinear takes INT8, UINT8 or INT32");
  if (c.has_input(2) && c.in_type(2) != x.type)
    throw c.fail("x_zero_point's type differs from x's (" + c.describe_inputs() + ")", "give both the same type");
  const auto n = quantized_axis_length(c, x.shape);
  need_scalar_or_vector(c, 1, n, "x_scale");
  need_scalar_or_vector(c, 2, n, "x_zero_point");
  return {tensor_info{c.has_input(1) ? c.in_type(1) : data_type::F32, x.shape}};
}

constexpr std::vector<tensor_info> dynamic_quantize_linear(const infer_context& c) {
  if (c.in_type(0) != data_type::F32) throw c.fail("x must be FLOAT, got " + to_string(c.input(0)));
  return {tensor_info{data_type::U8, c.in_shape(0)}, tensor_info{data_type::F32, shape{}},
          tensor_info{data_type::U8, shape{}}};
}

/// MatMul's or Conv's shape rule applied to inputs `a` and `b` of `c` (typed alike for the rule).
constexpr shape product_shape(const infer_context& c, std::size_t a, std::size_t b, bool convolution) {
  const tensor_info ta = c.input(a);
  const tensor_info tb{ta.type, c.in_shape(b)};
  const infer_input ins[] = {{&ta, nullptr}, {&tb, nullptr}};
  const infer_context pair(c.op(), ins, 1);
  return (convolution ? conv(pair) : matmul(pair)).front().shape;
}

/// The rows (last-but-one dim, or 1 for a vector) and columns (last dim) of a matmul operand.
constexpr std::int64_t rows_of(const shape& s) { return s.rank() >= 2 ? s[s.rank() - 2] : 1; }
constexpr std::int64_t cols_of(const shape& s) { return s.rank() ? s[s.rank() - 1] : 1; }

constexpr std::vector<tensor_info> matmul_integer(const infer_context& c) {
  need_8bit(c, 0, "A");
  need_8bit(c, 1, "B");
  need_scalar_or_vector(c, 2, rows_of(c.in_shape(0)), "a_zero_point");
  need_scalar_or_vector(c, 3, cols_of(c.in_shape(1)), "b_zero_point");
  need_operand_type(c, 2, 0, "a_zero_point");
  need_operand_type(c, 3, 1, "b_zero_point");
  return {tensor_info{data_type::S32, product_shape(c, 0, 1, false)}};
}

constexpr std::vector<tensor_info> qlinear_matmul(const infer_context& c) {
  need_8bit(c, 0, "a");
  need_8bit(c, 3, "b");
  need_8bit(c, 7, "y_zero_point");
  need_scalar_or_vector(c, 1, rows_of(c.in_shape(0)), "a_scale");
  need_scalar_or_vector(c, 2, rows_of(c.in_shape(0)), "a_zero_point");
  need_scalar_or_vector(c, 4, cols_of(c.in_shape(3)), "b_scale");
  need_scalar_or_vector(c, 5, cols_of(c.in_shape(3)), "b_zero_point");
  need_scalar_or_vector(c, 6, 1, "y_scale");
  need_operand_type(c, 2, 0, "a_zero_point");
  need_operand_type(c, 5, 3, "b_zero_point");
  return {tensor_info{c.in_type(7), product_shape(c, 0, 3, false)}};
}

constexpr std::vector<tensor_info> conv_integer(const infer_context& c) {
  need_8bit(c, 0, "x");
  need_8bit(c, 1, "w");
  need_scalar_or_vector(c, 2, 1, "x_zero_point");
  need_scalar_or_vector(c, 3, c.in_shape(1).rank() ? c.in_shape(1)[0] : 1, "w_zero_point");
  need_operand_type(c, 2, 0, "x_zero_point");
  need_operand_type(c, 3, 1, "w_zero_point");
  return {tensor_info{data_type::S32, product_shape(c, 0, 1, true)}};
}

constexpr std::vector<tensor_info> qlinear_conv(const infer_context& c) {
  need_8bit(c, 0, "x");
  need_8bit(c, 3, "w");
  need_8bit(c, 7, "y_zero_point");
  const auto m = c.in_shape(3).rank() ? c.in_shape(3)[0] : 1;
  need_scalar_or_vector(c, 1, 1, "x_scale");
  need_scalar_or_vector(c, 2, 1, "x_zero_point");
  need_scalar_or_vector(c, 4, m, "w_scale");
  need_scalar_or_vector(c, 5, m, "w_zero_point");
  need_scalar_or_vector(c, 6, 1, "y_scale");
  need_operand_type(c, 2, 0, "x_zero_point");
  need_operand_type(c, 5, 3, "w_zero_point");
  if (c.has_input(8) && (c.in_type(8) != data_type::S32 || c.in_shape(8) != shape{m}))
    throw c.fail("B " + to_string(c.input(8)) + " must be INT32[" + std::to_string(m) + "]");
  return {tensor_info{c.in_type(7), product_shape(c, 0, 3, true)}};
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// The cost of `rule` on inputs `a` and `b` of `c` alone (a QLinear op's operands).
constexpr op_cost on_operands(const op_cost_context& c, std::size_t a, std::size_t b, op_cost (*rule)(const op_cost_context&)) {
  op_node pair = *c.op;
  pair.inputs = {c.op->inputs.at(a), c.op->inputs.at(b)};
  op_cost_context pc = c;
  pc.op = &pair;
  return rule(pc);
}

constexpr op_cost conv_no_bias(const op_cost_context& c) { return conv_of(c, conv_shape_of(c), 2); }

/// Integer product, then one pass to rescale, round and saturate each output.
constexpr op_cost requantized(const op_cost_context& c, op_cost product) {
  product += vector_pass(c, data_type::F32, c.output_elements(), 2, 3);
  return product;
}

constexpr op_cost matmul_integer(const op_cost_context& c) { return on_operands(c, 0, 1, matmul); }
constexpr op_cost conv_integer(const op_cost_context& c) { return on_operands(c, 0, 1, conv_no_bias); }
constexpr op_cost qlinear_matmul(const op_cost_context& c) { return requantized(c, on_operands(c, 0, 3, matmul)); }
constexpr op_cost qlinear_conv(const op_cost_context& c) {
  op_cost r = requantized(c, on_operands(c, 0, 3, conv_no_bias));
  if (c.has_input(8)) r += vector_pass(c, data_type::S32, c.output_elements(), 2, 1, operand_exchange_bytes(c, 8, c.output_elements()));
  return r;
}
/// Divide, round, add the zero point, saturate: a few vector instructions per element.
constexpr op_cost quantize(const op_cost_context& c) { return elementwise(c, 4); }
/// A min/max reduction over x, then quantize.
constexpr op_cost dynamic_quantize(const op_cost_context& c) {
  op_cost r = vector_pass(c, data_type::F32, c.input_elements(0), 1, 2);
  r += vector_pass(c, data_type::F32, c.input_elements(0), 1, 4);
  return r;
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def quantization[] = {
    // domain, type, shape rule, cost rule, flags (no gradient: integer outputs)
    {"", "QuantizeLinear", detail::infer::quantize_linear, detail::cost_rules::quantize, {}},
    {"", "DequantizeLinear", detail::infer::dequantize_linear, detail::cost_rules::quantize, {}},
    {"", "DynamicQuantizeLinear", detail::infer::dynamic_quantize_linear, detail::cost_rules::dynamic_quantize, {}},
    {"", "MatMulInteger", detail::infer::matmul_integer, detail::cost_rules::matmul_integer, {}},
    {"", "QLinearMatMul", detail::infer::qlinear_matmul, detail::cost_rules::qlinear_matmul, {}},
    {"", "ConvInteger", detail::infer::conv_integer, detail::cost_rules::conv_integer, {}},
    {"", "QLinearConv", detail::infer::qlinear_conv, detail::cost_rules::qlinear_conv, {}},
};

}  // namespace op_families
}  // namespace ipu
