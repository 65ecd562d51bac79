#pragma once
// The op table's norm family: normalisations: batch, layer, instance, LRN, mean-variance; and the
// library's own training-mode batch normalisation (domain "ipu"): its forward, which a training
// graph writes for a BatchNormalization in PyTorch's train() mode, and its backward; and layer
// normalisation's backward as one op (LayerNormalization's gradient rule writes it). A row
// holds what the library knows about an op: shape rule (ops/shape_rules.hpp), cost rule
// (ops/cost_rules.hpp), flags (ops/flags.hpp) and the slot for its gradient rule; the host kernels
// sit beside it, in ipu/ops/kernels/norm.hpp.
#include "ipu/ops/op_def.hpp"

namespace ipu::op_families {

inline constexpr op_def norm[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "BatchNormalization", detail::infer::batch_norm, detail::cost_rules::batch_norm, {}},
    {"", "InstanceNormalization", detail::infer::channel_norm, detail::cost_rules::instance_norm, {},
     detail::grad::instance_norm},
    {"", "LayerNormalization", detail::infer::layer_norm, detail::cost_rules::layer_norm, {},
     detail::grad::layer_norm},
    {"", "LRN", detail::infer::unary_float, detail::cost_rules::lrn, {}},
    {"", "MeanVarianceNormalization", detail::infer::unary_float, detail::cost_rules::mean_variance_norm, {}},
    {"ipu", "BatchNormalizationTraining", detail::infer::batch_norm_training, detail::cost_rules::batch_norm_training,
     {}, detail::grad::batch_norm_training},
    {"ipu", "BatchNormalizationTrainingGrad", detail::infer::batch_norm_training_grad,
     detail::cost_rules::batch_norm_training_grad, {}},
    {"ipu", "LayerNormalizationGrad", detail::infer::layer_norm_grad, detail::cost_rules::layer_norm_grad, {}},
    // Inference BatchNormalization on channel-blocked data (ops/kernels/nchwc_channel.hpp), which the
    // nchwc-layout pass makes of one between blocked convolutions. Inference only: no gradient.
    {"ipu", "NchwcBatchNormalization", detail::infer::nchwc_batch_norm, detail::cost_rules::nchwc_channelwise, {}},
};

}  // namespace ipu::op_families
