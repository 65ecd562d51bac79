#pragma once
// Numeric kernels: element-wise maths, activations, linear algebra (GEMM, Det), convolution,
// MultiConv, pooling, norms.
// The implementations live in one header per family (namespace ipu::detail::math_ops).
#include "ipu/ops/kernels/activation.hpp"
#include "ipu/ops/kernels/blas.hpp"
#include "ipu/ops/kernels/conv.hpp"
#include "ipu/ops/kernels/elementwise.hpp"
#include "ipu/ops/kernels/gemm.hpp"
#include "ipu/ops/kernels/linalg.hpp"
#include "ipu/ops/kernels/multi_conv.hpp"
#include "ipu/ops/kernels/nchwc.hpp"
#include "ipu/ops/kernels/nchwc_channel.hpp"
#include "ipu/ops/kernels/nchwc_pool.hpp"
#include "ipu/ops/kernels/norm.hpp"
#include "ipu/ops/kernels/pool.hpp"
#include "ipu/ops/kernels/softmax.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu {

inline void register_math_kernels(op_registry& registry) {
  detail::math_ops::register_elementwise_kernels(registry);
  detail::math_ops::register_activation_kernels(registry);
  detail::math_ops::register_softmax_kernels(registry);
  detail::math_ops::register_gemm_kernels(registry);
  detail::math_ops::register_linalg_kernels(registry);
  detail::math_ops::register_conv_kernels(registry);
  detail::math_ops::register_multi_conv_kernels(registry);
  detail::math_ops::register_nchwc_kernels(registry);
  detail::math_ops::register_nchwc_pool_kernels(registry);
  detail::math_ops::register_nchwc_channel_kernels(registry);
  detail::math_ops::register_pool_kernels(registry);
  detail::math_ops::register_norm_kernels(registry);
}

}  // namespace ipu
