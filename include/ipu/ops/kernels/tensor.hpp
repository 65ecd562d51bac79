#pragma once
// Data-movement, indexing, reduction, vision, recurrent, loss, control-flow, optimizer,
// quantization, text, random and signal kernels.
#include "ipu/ops/kernels/control_flow.hpp"
#include "ipu/ops/kernels/einsum.hpp"
#include "ipu/ops/kernels/generators.hpp"
#include "ipu/ops/kernels/graphcore.hpp"
#include "ipu/ops/kernels/indexing.hpp"
#include "ipu/ops/kernels/loss.hpp"
#include "ipu/ops/kernels/quantization.hpp"
#include "ipu/ops/kernels/random.hpp"
#include "ipu/ops/kernels/recurrent.hpp"
#include "ipu/ops/kernels/reduce.hpp"
#include "ipu/ops/kernels/resize.hpp"
#include "ipu/ops/kernels/shape_ops.hpp"
#include "ipu/ops/kernels/signal.hpp"
#include "ipu/ops/kernels/slice_ops.hpp"
#include "ipu/ops/kernels/text.hpp"
#include "ipu/ops/kernels/topk.hpp"
#include "ipu/ops/kernels/training.hpp"
#include "ipu/ops/kernels/vision.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu {

/// Adds every kernel in this group to `registry`.
inline void register_tensor_kernels(op_registry& registry) {
  using namespace detail::tensor_ops;
  register_shape_ops(registry);
  register_slice_ops(registry);
  register_generators(registry);
  register_indexing(registry);
  register_reduce(registry);
  register_topk(registry);
  register_einsum(registry);
  register_resize(registry);
  register_vision(registry);
  register_recurrent(registry);
  register_loss(registry);
  register_control_flow(registry);
  register_training(registry);
  register_quantization(registry);
  register_graphcore(registry);
  register_text(registry);
  register_random(registry);
  detail::signal_ops::register_signal(registry);
}

}  // namespace ipu
