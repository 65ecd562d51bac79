// register_math_kernels: the registry the other numeric-kernel tests run through.
#include "ipu/ops/kernels/math.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <string_view>

#include "math_kernel_harness.hpp"

namespace test_math {

TEST_CASE("register_math_kernels registers every numeric op once") {
  const auto& r = mk::registry();
  for (std::string_view op :
       {"Conv", "ConvTranspose", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LpPool",
        "BatchNormalization", "InstanceNormalization", "LayerNormalization", "Gemm", "MatMul", "Relu", "LeakyRelu",
        "PRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Erf", "Elu", "Selu", "Celu", "Softplus",
        "Softsign", "ThresholdedRelu", "Mish", "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Floor", "Ceil",
        "Round", "Sign", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh",
        "IsNaN", "IsInf", "Not", "Softmax", "LogSoftmax", "Hardmax", "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Max",
        "Min", "Mean", "Sum", "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor",
        "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "Where", "Gelu", "Shrink", "LRN",
        "MeanVarianceNormalization"}) {
    const auto* e = r.find("", op);
    CHECK_MESSAGE(e != nullptr, op);
    if (e) CHECK(static_cast<bool>(e->kernel));
  }
  CHECK(r.find("ai.onnx", "Conv") == r.find("", "Conv"));
  // Registering twice into one registry is caught, not silently shadowed.
  ipu::op_registry twice;
  ipu::register_math_kernels(twice);
  CHECK_THROWS_AS(ipu::register_math_kernels(twice), ipu::error);
}

}  // namespace test_math
