#pragma once
// The op table's elementwise family: element-wise arithmetic, comparisons, logic and transcendental
// functions, with broadcasting. A row holds what the library knows about an op: shape rule
// (ops/shape_rules.hpp), cost rule (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/elementwise.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def elementwise[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "Abs", detail::infer::unary, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Neg", detail::infer::unary, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Sign", detail::infer::unary, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Exp", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Log", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Sqrt", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Reciprocal", detail::infer::unary_float, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Floor", detail::infer::unary_float, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Ceil", detail::infer::unary_float, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Round", detail::infer::unary_float, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Sin", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Cos", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Tan", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Asin", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Acos", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Atan", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Sinh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Cosh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Asinh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Acosh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "Atanh", detail::infer::unary_float, detail::cost_rules::transcendental, elementwise_op},
    {"", "IsNaN", detail::infer::unary_to_bool, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "IsInf", detail::infer::unary_to_bool, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Not", detail::infer::unary_bool, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "BitwiseNot", detail::infer::unary, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Add", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Sub", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Mul", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Div", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Mod", detail::infer::broadcast_same_type, detail::cost_rules::two_op_elementwise, elementwise_op},
    {"", "Pow", detail::infer::pow, detail::cost_rules::transcendental, elementwise_op},
    {"", "Equal", detail::infer::compare, detail::cost_rules::simple_elementwise, {}},
    {"", "Greater", detail::infer::compare, detail::cost_rules::simple_elementwise, {}},
    {"", "GreaterOrEqual", detail::infer::compare, detail::cost_rules::simple_elementwise, {}},
    {"", "Less", detail::infer::compare, detail::cost_rules::simple_elementwise, {}},
    {"", "LessOrEqual", detail::infer::compare, detail::cost_rules::simple_elementwise, {}},
    {"", "And", detail::infer::logical, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Or", detail::infer::logical, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Xor", detail::infer::logical, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "BitwiseAnd", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "BitwiseOr", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "BitwiseXor", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "BitShift", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Max", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Min", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Sum", detail::infer::broadcast_same_type, detail::cost_rules::simple_elementwise, elementwise_op},
    {"", "Mean", detail::infer::broadcast_same_type, detail::cost_rules::two_op_elementwise, elementwise_op},
    {"", "Where", detail::infer::where, detail::cost_rules::simple_elementwise, elementwise_op},
};

}  // namespace ipu::op_families
