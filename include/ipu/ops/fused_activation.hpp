#pragma once
// The activations com.microsoft FusedConv (and ipu::NchwcConv) applies to the convolution's output,
// by the name its `activation` attribute gives, and how many `activation_params` each takes: one
// table for the shape rule that checks a model and the kernel that runs it.
#include <cstddef>
#include <optional>
#include <string_view>

namespace ipu {

enum class fused_activation_kind : unsigned char { none, relu, clip, leaky_relu, hard_sigmoid, sigmoid, tanh };

struct fused_activation {
  std::string_view name;  // "" for none
  fused_activation_kind kind;
  std::size_t params;
};

inline constexpr fused_activation fused_activations[] = {
    {"", fused_activation_kind::none, 0},
    {"Relu", fused_activation_kind::relu, 0},
    {"Clip", fused_activation_kind::clip, 2},               // min, max
    {"LeakyRelu", fused_activation_kind::leaky_relu, 1},    // alpha
    {"HardSigmoid", fused_activation_kind::hard_sigmoid, 2},  // alpha, beta
    {"Sigmoid", fused_activation_kind::sigmoid, 0},
    {"Tanh", fused_activation_kind::tanh, 0},
};

/// The activation called `name`; none when FusedConv applies none of that name. (A value, not a
/// pointer into the table: GCC's UBSan builds cannot compare such a pointer with null in a
/// constant expression, and the shape rules run in them.)
[[nodiscard]] constexpr std::optional<fused_activation> find_fused_activation(std::string_view name) noexcept {
  for (const auto& a : fused_activations)
    if (a.name == name) return a;
  return std::nullopt;
}

/// How to mend an unknown activation, and a wrong count of parameters.
inline constexpr std::string_view fused_activation_names_help =
    "use Relu, Clip, LeakyRelu, HardSigmoid, Sigmoid or Tanh, or a Conv followed by the activation op";
inline constexpr std::string_view fused_activation_params_help =
    "give Clip [min, max], LeakyRelu [alpha], HardSigmoid [alpha, beta], the others none";

}  // namespace ipu
