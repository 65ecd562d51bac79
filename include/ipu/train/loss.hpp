#pragma once
// Losses, added to a model as ordinary ops: the scalar autodiff starts from.
//   mse            mean (or sum) of (prediction - labels)^2          labels: the prediction's info
//   l1             mean (or sum) of |prediction - labels|            labels: the prediction's info
//   nll            NegativeLogLikelihoodLoss of log-probabilities    labels: S64 class indices [N, ...]
//                  [N, C, ...] (PopART's nllloss on log-probabilities, with ignore_index)
//   cross_entropy  LogSoftmax over axis 1, then nll                  labels: S64 class indices [N, ...]
//   bce            binary cross-entropy of probabilities p:          labels: the prediction's info
//                  -(y log p + (1 - y) log(1 - p)), each log clamped at -100 as PyTorch's BCELoss does
//                  (in F32, at log(1.2e-38) = -87.3 below p = 1.2e-38, so the gradient stays finite)
//   output         the output is the loss already: a scalar the model computed (PopART's
//                  TrainingSession names its loss tensor; a model ending in identity_loss)       no labels
// and identity_loss (PopTorch's, seed 4.6.3): a custom loss the model computed itself, reduced; and
// the PopART Builder's loss ops (aiGraphcore.nllloss, l1loss, identityloss), written as ONNX ops.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"

namespace ipu::train {

enum class loss_kind : std::uint8_t { mse, l1, nll, cross_entropy, bce, output };
/// How a loss over many values becomes one: PyTorch's `reduction` (none is not a training loss).
enum class loss_reduction : std::uint8_t { mean, sum };

constexpr std::string_view to_string(loss_kind k) noexcept {
  switch (k) {
    case loss_kind::mse: return "mse";
    case loss_kind::l1: return "l1";
    case loss_kind::nll: return "nll";
    case loss_kind::cross_entropy: return "cross-entropy";
    case loss_kind::bce: return "bce";
    case loss_kind::output: return "output";
  }
  return "?";
}

/// "mse", "l1", "nll", "cross-entropy" or "bce" (the losses that read labels); anything else is a
/// usage error listing them.
constexpr loss_kind parse_loss_kind(std::string_view s) {
  for (auto k : {loss_kind::mse, loss_kind::l1, loss_kind::nll, loss_kind::cross_entropy, loss_kind::bce})
    if (to_string(k) == s) return k;
  throw error(error_category::usage, "unknown loss '" + std::string(s) + "'", "loss",
              "use mse, l1, nll, cross-entropy or bce");
}

struct loss_options {
  loss_kind kind = loss_kind::mse;
  loss_reduction reduction = loss_reduction::mean;
  std::optional<std::int64_t> ignore_index;  // nll / cross-entropy: targets with this class count for nothing
  std::string labels_name = "labels";        // the graph input the labels are fed to
};

/// What add_loss added: the labels input (none for loss_kind::output) and the scalar loss.
struct loss_tensors {
  tensor_id labels = no_tensor;
  tensor_id loss = no_tensor;
};

namespace detail {
constexpr std::vector<std::int64_t> all_axes(const tensor_info& t) {
  std::vector<std::int64_t> a;
  for (std::size_t i = 0; i < t.shape.rank(); ++i) a.push_back(static_cast<std::int64_t>(i));
  return a;
}
constexpr tensor_id reduce_all(builder& b, tensor_id x, loss_reduction r, std::string_view name) {
  const auto axes = all_axes(b.info(x));
  if (axes.empty()) return b.identity(x, name);
  return r == loss_reduction::mean ? b.reduce_mean(x, axes, false, name) : b.reduce_sum(x, axes, false, name);
}
}  // namespace detail

/// Adds the labels input and the loss of `prediction` to the builder's graph.
constexpr loss_tensors add_loss(builder& b, tensor_id prediction, const loss_options& o = {}) {
  const auto p = b.info(prediction);  // a copy: adding tensors moves the builder's
  const std::string where = "loss on '" + b.name_of(prediction) + "'";
  if (p.type != data_type::F32 && p.type != data_type::F64)
    throw error(error_category::usage, "the prediction is " + to_string(p) + "; a loss needs F32 or F64", where,
                "cast the output to F32 before the loss");
  loss_tensors r;
  switch (o.kind) {
    case loss_kind::output:
      if (p.shape.rank() != 0)
        throw error(error_category::usage, "the loss output is " + to_string(p) + "; a loss is a scalar", where,
                    "reduce it to one value (mean or sum), e.g. with identityloss or identity_loss");
      r.loss = prediction;
      return r;
    case loss_kind::mse:
    case loss_kind::l1: {
      r.labels = b.add_input_tensor(p, o.labels_name);
      const auto d = b.sub(prediction, r.labels);
      const auto e = o.kind == loss_kind::mse ? b.mul(d, d) : b.abs(d);
      r.loss = detail::reduce_all(b, e, o.reduction, "loss");
      return r;
    }
    case loss_kind::bce: {
      r.labels = b.add_input_tensor(p, o.labels_name);
      // PyTorch clamps each log at -100. The log is taken of max(p, tiny) and clipped to [-100, 0],
      // so that where p is exactly 0 or 1 (a saturated sigmoid) the gradient, 1 / p, stays finite
      // instead of 0 / 0: tiny is e^-100 in F64 (PyTorch's values exactly) and, in F32, the
      // smallest normal float (1.2e-38, log -87.3), whose reciprocal still fits in F32.
      const bool f64 = p.type == data_type::F64;
      auto constant = [&](double v) {
        return b.add_constant(f64 ? make_scalar<double>(v) : make_scalar<float>(static_cast<float>(v)));
      };
      const auto one = constant(1), tiny = constant(f64 ? 3.720075976020836e-44 : 1.1754943508222875e-38);
      auto safe_log = [&](tensor_id x) { return b.clip(b.log(b.op("Max", {x, tiny}).front()), -100, 0); };
      const auto log_p = safe_log(prediction);
      const auto log_q = safe_log(b.sub(one, prediction));
      const auto e = b.neg(b.add(b.mul(r.labels, log_p), b.mul(b.sub(one, r.labels), log_q)));
      r.loss = detail::reduce_all(b, e, o.reduction, "loss");
      return r;
    }
    case loss_kind::nll:
    case loss_kind::cross_entropy: {
      if (p.shape.rank() < 2)
        throw error(error_category::usage, "the prediction is " + to_string(p) + "; a classification loss needs [N, C, ...]",
                    where, "give the model's class scores, batch first");
      auto dims = p.shape.dims();
      dims.erase(dims.begin() + 1);
      r.labels = b.add_input_tensor({data_type::S64, shape(std::move(dims))}, o.labels_name);
      const auto log_probs = o.kind == loss_kind::nll ? prediction : b.log_softmax(prediction, 1);
      std::vector<attribute> at{{"reduction", std::string(o.reduction == loss_reduction::mean ? "mean" : "sum")}};
      if (o.ignore_index) at.push_back({"ignore_index", *o.ignore_index});
      r.loss = b.op("NegativeLogLikelihoodLoss", {log_probs, r.labels}, at, op_options{0, 1, "loss", {}}).front();
      return r;
    }
  }
  throw error(error_category::internal, "unknown loss kind", where);
}

/// PopTorch's identity_loss: `x`, computed by the model, is the loss, reduced to a scalar.
constexpr tensor_id identity_loss(builder& b, tensor_id x, loss_reduction r = loss_reduction::mean) {
  return detail::reduce_all(b, x, r, "loss");
}

/// PopART's ReductionType for the Builder's loss ops: a scalar (sum or mean) or one value per
/// element (none: a loss to reduce further, not one to train on directly).
enum class popart_reduction : std::uint8_t { sum, mean, none };

namespace detail {
constexpr tensor_id reduce_popart(builder& b, tensor_id x, popart_reduction r, std::string_view name) {
  if (r == popart_reduction::none) return b.identity(x, name);
  return reduce_all(b, x, r == popart_reduction::mean ? loss_reduction::mean : loss_reduction::sum, name);
}
}  // namespace detail

/// PopART's aiGraphcore.nllloss: -log(probs[label]) per sample. `probs` holds probabilities
/// (log-probabilities with `input_is_log_probability`) with the classes on the last axis,
/// [..., C]; `labels` holds S32 or S64 class indices, [...]. Mean divides by the number of samples
/// whose label is not `ignore_index`. Written as Log, a Transpose bringing the classes to axis 1,
/// and NegativeLogLikelihoodLoss.
constexpr tensor_id nllloss(builder& b, tensor_id probs, tensor_id labels, popart_reduction r = popart_reduction::mean,
                            std::optional<std::int64_t> ignore_index = {}, bool input_is_log_probability = false,
                            std::string_view name = "nllloss") {
  const auto p = b.info(probs), l = b.info(labels);
  const std::string where = "nllloss on '" + b.name_of(probs) + "'";
  if (!is_floating_point(p.type) || p.shape.rank() < 2)
    throw error(error_category::usage, "probs is " + to_string(p) + "; nllloss takes floating-point [N, ..., C]", where,
                "give the class probabilities, classes on the last axis");
  if ((l.type != data_type::S32 && l.type != data_type::S64) || l.shape.rank() + 1 != p.shape.rank() ||
      !std::equal(l.shape.dims().begin(), l.shape.dims().end(), p.shape.dims().begin()))
    throw error(error_category::usage, "labels are " + to_string(l) + " for probs " + to_string(p), where,
                "give S32 or S64 labels shaped as probs without its last (class) axis");
  auto log_probs = input_is_log_probability ? probs : b.log(probs);
  if (const auto rank = static_cast<std::int64_t>(p.shape.rank()); rank > 2) {
    std::vector<std::int64_t> perm{0, rank - 1};
    for (std::int64_t i = 1; i < rank - 1; ++i) perm.push_back(i);
    log_probs = b.transpose(log_probs, perm);
  }
  std::vector<attribute> at{
      {"reduction", std::string(r == popart_reduction::mean ? "mean" : r == popart_reduction::sum ? "sum" : "none")}};
  if (ignore_index) at.push_back({"ignore_index", *ignore_index});
  return b.op("NegativeLogLikelihoodLoss", {log_probs, labels}, at, op_options{0, 1, name, {}}).front();
}

/// PopART's aiGraphcore.l1loss: lambda * |x|, reduced.
constexpr tensor_id l1loss(builder& b, tensor_id x, float lambda, popart_reduction r = popart_reduction::mean,
                           std::string_view name = "l1loss") {
  const auto t = b.info(x);
  if (t.type != data_type::F32 && t.type != data_type::F64)
    throw error(error_category::usage, "the input is " + to_string(t) + "; l1loss takes F32 or F64",
                "l1loss on '" + b.name_of(x) + "'", "cast it to F32 first");
  const auto scale = t.type == data_type::F64 ? b.add_constant(make_scalar<double>(lambda))
                                              : b.add_constant(make_scalar<float>(lambda));
  return detail::reduce_popart(b, b.mul(b.abs(x), scale), r, name);
}

/// PopART's aiGraphcore.identityloss: `x`, computed by the model, reduced.
constexpr tensor_id identityloss(builder& b, tensor_id x, popart_reduction r = popart_reduction::mean,
                                 std::string_view name = "identityloss") {
  return detail::reduce_popart(b, x, r, name);
}

}  // namespace ipu::train
