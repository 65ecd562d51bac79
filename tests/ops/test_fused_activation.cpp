// The activations FusedConv applies, as ONNX Runtime's com.microsoft FusedConv names them, and the
// count of activation_params each takes (the contrib op's documentation: Clip min and max,
// LeakyRelu alpha, HardSigmoid alpha and beta).
#include "ipu/ops/fused_activation.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <iterator>

namespace test_fused_activation {

// The table is read at compile time as well (shape rules run in constant expressions).
static_assert(ipu::find_fused_activation("Clip")->params == 2);
static_assert(!ipu::find_fused_activation("Gelu"));

TEST_CASE("FusedConv's activations: names, kinds and parameter counts") {
  struct expected {
    const char* name;
    ipu::fused_activation_kind kind;
    std::size_t params;
  };
  const expected all[] = {{"", ipu::fused_activation_kind::none, 0},
                          {"Relu", ipu::fused_activation_kind::relu, 0},
                          {"Clip", ipu::fused_activation_kind::clip, 2},
                          {"LeakyRelu", ipu::fused_activation_kind::leaky_relu, 1},
                          {"HardSigmoid", ipu::fused_activation_kind::hard_sigmoid, 2},
                          {"Sigmoid", ipu::fused_activation_kind::sigmoid, 0},
                          {"Tanh", ipu::fused_activation_kind::tanh, 0}};
  CHECK(std::size(ipu::fused_activations) == std::size(all));
  for (const auto& e : all) {
    CAPTURE(e.name);
    const auto a = ipu::find_fused_activation(e.name);
    REQUIRE(a.has_value());
    CHECK(a->kind == e.kind);
    CHECK(a->params == e.params);
  }
}

TEST_CASE("names are matched exactly: other spellings and other activations are not FusedConv's") {
  for (const char* name : {"relu", "RELU", "Swish", "Gelu", "Softplus", "Relu ", " Relu"}) {
    CAPTURE(name);
    CHECK_FALSE(ipu::find_fused_activation(name).has_value());
  }
}

}  // namespace test_fused_activation
