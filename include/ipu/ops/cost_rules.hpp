#pragma once
// The cost rules of the op table: what one op costs on one IPU for one micro-batch, constexpr so
// plans can be made in constant expressions. Which op uses which rule is said once, in the op
// families' rows (ops/families/); estimate_op_cost (ops/op_cost.hpp) applies them.
//
// Every estimate is built from the device model (include/ipu/device/, docs/cost-model.md), never
// from fitted numbers:
//  - MatMul, Gemm, Conv, LSTM / GRU / RNN: the matmul / convolution planner (plan_matmul,
//    plan_conv): operand exchange, AMP passes, partial-sum reduction, serial passes, temporaries;
//  - element-wise ops: elementwise_cost (one 64-bit result vector per cycle per worker), plus the
//    exchange of broadcast operands (a bias or a scale each tile needs part of);
//  - reductions, softmax and normalisations: vector passes over the input, plus one exchange and
//    reduction of per-tile partial results;
//  - pooling: one vector op per kernel element per output, plus the exchange of input windows;
//  - data movement (Transpose, Concat, Slice, Gather, Pad...): every tile receives its share of the
//    output through the exchange;
//  - views (Reshape, Flatten, Squeeze, Identity, Dropout in inference: ipu/ops/flags.hpp): free;
//  - optimizers (Adagrad, Momentum, Adam): one element-wise pass per optimized tensor, reading it,
//    its gradient and its state, with Adagrad's and Adam's square root at the scalar rate;
//  - ConvTranspose, Einsum, LRN, losses and control flow: see docs/cost-model.md, "Per-op costs".
// Choices the spec has no figure for, and which the model therefore states rather than fits:
//  - transcendental functions (Exp, Tanh, Erf...) run at the scalar rate, one instruction per
//    element (the spec gives no vector rate for them);
//  - every superstep costs one global sync of the device the op runs on;
//  - ops of unknown type cost one element-wise pass over their outputs reading every input.
//
// A user extends the table without touching it: plan_options::cost_hook is consulted first (see
// execution_strategy.hpp) and may return std::nullopt to fall back to the built-in estimate.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/data_type.hpp"
#include "ipu/device/cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/tile_mapping.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/flags.hpp"
#include "ipu/ops/fused_activation.hpp"
#include "ipu/ops/plan_annotations.hpp"

namespace ipu {

/// What the cost model is told about how the model is compiled.
struct op_cost_options {
  /// F32 or F16: float tensors are costed and stored as this type (PopRT's --precision); unset: as
  /// the model declares them.
  std::optional<data_type> float_type;
  /// Type of matmul / convolution partial sums (PopTorch's partials type).
  data_type partials_type = data_type::F32;
  double available_memory_proportion = default_available_memory_proportion;
  /// Tiles an op may use; 0: all tiles of one IPU.
  std::uint32_t tiles = 0;
  friend constexpr bool operator==(const op_cost_options&, const op_cost_options&) = default;
};

/// The type a tensor of type `t` is costed and stored as under `o` (F16 <-> F32 by the precision).
constexpr data_type costed_type(data_type t, const op_cost_options& o) noexcept {
  if (o.float_type && (t == data_type::F32 || t == data_type::F16)) return *o.float_type;
  return t;
}

/// Bytes of a tensor as costed under `o`.
constexpr std::uint64_t costed_bytes(const tensor_info& info, const op_cost_options& o) noexcept {
  const auto n = info.num_elements();
  return n <= 0 ? 0 : static_cast<std::uint64_t>(n) * size_of(costed_type(info.type, o));
}

/// One op's predicted cost for one micro-batch on one IPU.
struct op_cost {
  std::uint64_t compute_cycles = 0;   // slowest tile's compute, summed over the op's supersteps
  std::uint64_t exchange_cycles = 0;  // on-chip exchange phases
  std::uint64_t sync_cycles = 0;      // one global sync per superstep
  std::uint32_t tiles = 0;            // tiles the op's work is spread over (0: none, a view)
  std::uint64_t temporary_bytes_per_tile = 0;
  std::uint64_t macs = 0;             // multiply-accumulates on the AMP (matmul, convolution)
  bool fits_temporary_budget = true;  // false: even the most serialised plan overflows the budget

  [[nodiscard]] constexpr std::uint64_t cycles() const noexcept {
    return compute_cycles + exchange_cycles + sync_cycles;
  }
  constexpr op_cost& operator+=(const op_cost& o) noexcept {
    compute_cycles += o.compute_cycles;
    exchange_cycles += o.exchange_cycles;
    sync_cycles += o.sync_cycles;
    tiles = std::max(tiles, o.tiles);
    temporary_bytes_per_tile = std::max(temporary_bytes_per_tile, o.temporary_bytes_per_tile);
    macs += o.macs;
    fits_temporary_budget = fits_temporary_budget && o.fits_temporary_budget;
    return *this;
  }
  /// `n` repetitions (time steps of a recurrent op).
  [[nodiscard]] constexpr op_cost times(std::uint64_t n) const noexcept {
    op_cost r = *this;
    r.compute_cycles *= n;
    r.exchange_cycles *= n;
    r.sync_cycles *= n;
    r.macs *= n;
    return r;
  }
  friend constexpr bool operator==(const op_cost&, const op_cost&) = default;
};

struct op_cost_context;
/// A user's hook, consulted before the table: std::nullopt falls back to the built-in estimate.
using op_cost_hook = std::optional<op_cost> (*)(const op_cost_context&);
/// How one op of a graph is estimated (estimate_op_cost, ops/op_cost.hpp): the rules that cost a
/// subgraph (control flow) estimate its ops through it, so the rules need not know the table.
using op_cost_estimator = op_cost (*)(const graph&, op_id, const device_description&, const op_cost_options&,
                                      op_cost_hook);

namespace detail::cost_rules {
/// The estimator of a context made outside estimate_op_cost (a function, not a null pointer: a
/// function's address is never compared with null in constant expressions under the sanitizers).
constexpr op_cost no_estimator(const graph& g, op_id, const device_description&, const op_cost_options&, op_cost_hook) {
  if (g.num_ops() != 0)  // a body of no ops costs nothing, with or without an estimator
    throw error(error_category::internal, "a subgraph was costed without an estimator", "op cost",
                "cost ops through estimate_op_cost");
  return {};
}
}  // namespace detail::cost_rules

/// Everything a cost function may look at.
struct op_cost_context {
  const graph* model = nullptr;
  const op_node* op = nullptr;
  const device_description* device = nullptr;
  op_cost_options options{};
  op_cost_estimator estimate = detail::cost_rules::no_estimator;

  [[nodiscard]] constexpr const architecture_description& arch() const noexcept { return device->arch; }
  [[nodiscard]] constexpr std::size_t num_inputs() const noexcept { return op->inputs.size(); }
  [[nodiscard]] constexpr bool has_input(std::size_t i) const noexcept {
    return i < op->inputs.size() && op->inputs[i] != no_tensor;
  }
  [[nodiscard]] constexpr const tensor_info& input(std::size_t i) const {
    if (!has_input(i))
      throw error(error_category::internal, "op input " + ipu::format_uint(i) + " is absent",
                  "cost of op " + graph::describe(*op));
    return model->tensor(op->inputs[i]).info;
  }
  [[nodiscard]] constexpr const tensor_info& output(std::size_t i = 0) const {
    if (i >= op->outputs.size())
      throw error(error_category::internal, "op output " + ipu::format_uint(i) + " is absent",
                  "cost of op " + graph::describe(*op));
    return model->tensor(op->outputs[i]).info;
  }
  /// Elements of output `i` (0 for an absent or empty output).
  [[nodiscard]] constexpr std::uint64_t output_elements(std::size_t i = 0) const {
    if (i >= op->outputs.size()) return 0;
    const auto n = output(i).num_elements();
    return n > 0 ? static_cast<std::uint64_t>(n) : 0;
  }
  [[nodiscard]] constexpr std::uint64_t input_elements(std::size_t i) const {
    if (!has_input(i)) return 0;
    const auto n = input(i).num_elements();
    return n > 0 ? static_cast<std::uint64_t>(n) : 0;
  }
  /// The costed type of an info (precision applied).
  [[nodiscard]] constexpr data_type type(const tensor_info& t) const noexcept { return costed_type(t.type, options); }
  [[nodiscard]] constexpr std::uint32_t tiles() const noexcept {
    return options.tiles == 0 ? device->arch.tiles_per_ipu : options.tiles;
  }

  // Attribute access with defaults (an attribute of another kind counts as absent).
  [[nodiscard]] constexpr std::int64_t int_attr(std::string_view n, std::int64_t dflt) const {
    if (const auto* a = op->find_attribute(n))
      if (const auto* v = std::get_if<std::int64_t>(&a->value)) return *v;
    return dflt;
  }
  [[nodiscard]] constexpr std::vector<std::int64_t> ints_attr(std::string_view n) const {
    if (const auto* a = op->find_attribute(n))
      if (const auto* v = std::get_if<std::vector<std::int64_t>>(&a->value)) return *v;
    return {};
  }
  [[nodiscard]] constexpr std::string string_attr(std::string_view n) const {
    if (const auto* a = op->find_attribute(n))
      if (const auto* v = std::get_if<std::string>(&a->value)) return *v;
    return {};
  }
};

/// A cost function of the table.
using op_cost_fn = op_cost (*)(const op_cost_context&);

namespace detail::cost_rules {

using ipu::ceil_div;
using ipu::mul_sat;

constexpr std::uint64_t dim(const tensor_info& t, std::int64_t axis) {
  const auto r = static_cast<std::int64_t>(t.shape.rank());
  if (r == 0) return 1;
  if (axis < 0) axis += r;
  if (axis < 0 || axis >= r) return 1;
  const auto v = t.shape[static_cast<std::size_t>(axis)];
  return v > 0 ? static_cast<std::uint64_t>(v) : 0;
}

constexpr std::uint64_t product(const tensor_info& t, std::int64_t from, std::int64_t to) {
  std::uint64_t p = 1;
  for (auto i = from; i < to; ++i) p = mul_sat(p, dim(t, i));
  return p;
}

constexpr std::uint64_t sync(const op_cost_context& c) { return sync_cycles(*c.device); }

/// One superstep of element-wise work over `elements` results of type `t` reading `inputs` operands
/// and taking `ops` vector instructions per result vector, with `exchange_bytes` received per tile.
constexpr op_cost vector_pass(const op_cost_context& c, data_type t, std::uint64_t elements, std::uint32_t inputs,
                              std::uint32_t ops, std::uint64_t exchange_bytes = 0) {
  op_cost r;
  if (elements == 0) return r;
  const auto e = elementwise_cost(c.arch(), t, elements, inputs, ops, c.tiles());
  r.compute_cycles = e.cycles;
  r.exchange_cycles = exchange_cycles(c.arch(), exchange_bytes);
  r.sync_cycles = sync(c);
  r.tiles = e.mapping.tiles_used;
  return r;
}

/// Instructions per result vector of a transcendental function at the scalar rate.
constexpr std::uint32_t scalar_rate_ops(const op_cost_context& c, data_type t) {
  return vector_width(c.arch(), t);
}

/// Bytes each tile receives for the broadcast operands of an element-wise op: a smaller operand is
/// not mapped like the output, so each tile fetches the part its output share needs (at most the
/// whole operand).
constexpr std::uint64_t broadcast_exchange_bytes(const op_cost_context& c, std::uint64_t out_elements) {
  if (out_elements == 0) return 0;
  const auto share = ceil_div(out_elements, c.tiles());
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const auto n = c.input_elements(i);
    if (n >= out_elements || n <= 1) continue;  // mapped alike, or a scalar held by every tile
    bytes += std::min(n, share) * size_of(c.type(c.input(i)));
  }
  return bytes;
}

/// Bytes each tile receives of input `i` when it is added to an output of `out_elements` mapped
/// linearly (a bias: each tile needs the part its share of the output covers, at most all of it).
constexpr std::uint64_t operand_exchange_bytes(const op_cost_context& c, std::size_t i, std::uint64_t out_elements) {
  if (!c.has_input(i) || out_elements == 0) return 0;
  const auto n = c.input_elements(i);
  if (n >= out_elements || n <= 1) return 0;
  return std::min(n, ceil_div(out_elements, c.tiles())) * size_of(c.type(c.input(i)));
}

/// Element-wise: one result per output element, reading every present input.
constexpr op_cost elementwise(const op_cost_context& c, std::uint32_t ops_per_vector) {
  const auto out = c.output_elements();
  std::uint32_t inputs = 0;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) inputs += c.has_input(i) ? 1u : 0u;
  return vector_pass(c, c.type(c.output()), out, std::max<std::uint32_t>(inputs, 1), ops_per_vector,
                     broadcast_exchange_bytes(c, out));
}

constexpr op_cost simple_elementwise(const op_cost_context& c) { return elementwise(c, 1); }
constexpr op_cost two_op_elementwise(const op_cost_context& c) { return elementwise(c, 2); }
constexpr op_cost three_op_elementwise(const op_cost_context& c) { return elementwise(c, 3); }
constexpr op_cost transcendental(const op_cost_context& c) {
  return elementwise(c, scalar_rate_ops(c, c.type(c.output())));
}
/// A transcendental plus a few arithmetic instructions per vector (GELU, Softplus, Mish...).
constexpr op_cost transcendental_plus(const op_cost_context& c) {
  return elementwise(c, scalar_rate_ops(c, c.type(c.output())) + 3);
}
/// Cast reads one type and writes another: costed in the wider of the two.
constexpr op_cost cast(const op_cost_context& c) {
  const auto in = c.type(c.input(0)), out = c.type(c.output());
  return vector_pass(c, size_of(in) > size_of(out) ? in : out, c.output_elements(), 1, 1);
}

/// Views and shape queries: no work on the device.
constexpr op_cost free_op(const op_cost_context&) { return {}; }

/// Dropout is a view in inference (ipu/ops/flags.hpp); in training, or with its mask wanted, a
/// random draw, a compare and a scale per element.
constexpr op_cost dropout(const op_cost_context& c) {
  if (dropout_is_identity(*c.model, *c.op)) return {};
  return elementwise(c, scalar_rate_ops(c, c.type(c.output())) + 2);
}

/// ipu::DropoutMask: a counter-based draw (Philox's ten rounds of multiplies, for four elements)
/// and a compare per element, written as bytes.
constexpr op_cost dropout_mask(const op_cost_context& c) { return elementwise(c, scalar_rate_ops(c, data_type::F32) + 10); }

/// Data movement: every tile receives its share of the output through the exchange.
constexpr op_cost data_movement(const op_cost_context& c) {
  op_cost r;
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < c.op->outputs.size(); ++i) bytes += costed_bytes(c.output(i), c.options);
  if (bytes == 0) return r;
  r.exchange_cycles = exchange_cycles(c.arch(), ceil_div(bytes, c.tiles()));
  r.sync_cycles = sync(c);
  r.tiles = static_cast<std::uint32_t>(std::min<std::uint64_t>(c.tiles(), ceil_div(bytes, 8)));
  return r;
}

/// Reduction of `in` elements into `out` results of type `t`: each tile reduces its share of the
/// input; the tiles then exchange their partial results to the tiles owning the outputs, which add
/// them up. `extra_ops` instructions per input vector on top of the reduction's one (e.g. squaring).
constexpr op_cost reduction(const op_cost_context& c, data_type t, std::uint64_t in, std::uint64_t out,
                            std::uint32_t extra_ops = 0) {
  op_cost r = vector_pass(c, t, in, 1, 1 + extra_ops);
  if (in == 0 || out == 0) return r;
  const std::uint64_t used = r.tiles;
  // Partials: a tile holding `share` inputs contributes to at most min(out, share) outputs.
  const std::uint64_t share = ceil_div(in, std::max<std::uint64_t>(used, 1));
  const std::uint64_t partials = mul_sat(used, std::min(out, share));
  if (partials <= out) return r;  // every output already complete on one tile
  const std::uint64_t per_tile = ceil_div(partials, c.tiles());
  const std::uint64_t per_output = ceil_div(partials, out);
  op_cost second = vector_pass(c, t, out, static_cast<std::uint32_t>(std::min<std::uint64_t>(per_output, 64)),
                               static_cast<std::uint32_t>(std::min<std::uint64_t>(per_output, 64)),
                               mul_sat(per_tile, size_of(t)));
  r += second;
  return r;
}

constexpr op_cost reduce(const op_cost_context& c) {
  return reduction(c, c.type(c.input(0)), c.input_elements(0), c.output_elements());
}
/// ReduceSumSquare, ReduceL2, ReduceLogSumExp...: one more instruction per input vector.
constexpr op_cost reduce_with_map(const op_cost_context& c) {
  return reduction(c, c.type(c.input(0)), c.input_elements(0), c.output_elements(), 1);
}
/// ArgMax / ArgMin / TopK: a compare-and-select reduction (two instructions per input vector).
constexpr op_cost select_reduction(const op_cost_context& c) {
  return reduction(c, c.type(c.input(0)), c.input_elements(0), c.output_elements(), 1);
}

/// Softmax over rows: max, exp(x - max) and its sum, divide: three supersteps over the input.
constexpr op_cost softmax(const op_cost_context& c) {
  const auto t = c.type(c.input(0));
  const auto n = c.input_elements(0);
  const auto axis = c.int_attr("axis", -1);
  const auto rows = ceil_div(n, std::max<std::uint64_t>(dim(c.input(0), axis), 1));
  op_cost r = reduction(c, t, n, rows);                                      // row maxima
  r += reduction(c, t, n, rows, 1 + scalar_rate_ops(c, t));                 // exp(x - max), row sums
  r += vector_pass(c, t, n, 2, 1, broadcast_exchange_bytes(c, n));           // divide by the sums
  return r;
}

/// Batch normalisation in inference: scale and shift folded into 2 instructions per vector, with the
/// per-channel parameters exchanged like a broadcast operand.
constexpr op_cost batch_norm(const op_cost_context& c) {
  const auto out = c.output_elements();
  const auto channels = c.input(0).shape.rank() >= 2 ? dim(c.input(0), 1) : 1;
  const auto share = ceil_div(out, c.tiles());
  return vector_pass(c, c.type(c.output()), out, 1, 2, 2 * std::min(channels, share) * size_of(c.type(c.output())));
}

/// ipu::NchwcBatchNormalization (a multiply and an add) and ipu::NchwcScale (a multiply) per
/// element of the channels the per-channel operand gives, not of the blocks' padding.
constexpr op_cost nchwc_channelwise(const op_cost_context& c) {
  const bool scale = c.op->type == "NchwcScale";
  const auto padded = std::max<std::uint64_t>(dim(c.input(0), 1), 1);
  const auto channels = std::min(scale ? dim(c.input(1), 1) : c.input_elements(1), padded);
  const auto out = c.output_elements() / padded * channels;
  const auto share = ceil_div(out, c.tiles());
  const auto t = c.type(c.output());
  return vector_pass(c, t, out, scale ? 2 : 1, scale ? 1 : 2, (scale ? 1 : 2) * std::min(channels, share) * size_of(t));
}

/// Two reductions of `n` elements of type `t` into `groups` statistics: a sum, and a sum of a
/// product with `extra_ops` more instructions per vector (squares, centred products).
constexpr op_cost statistics(const op_cost_context& c, data_type t, std::uint64_t n, std::uint64_t groups,
                             std::uint32_t extra_ops) {
  op_cost r = reduction(c, t, n, groups);
  r += reduction(c, t, n, groups, extra_ops);
  return r;
}

/// Layer / instance normalisation: mean and variance reductions, then normalise (subtract,
/// scale by the reciprocal square root, affine: 3 instructions per vector).
constexpr op_cost normalisation(const op_cost_context& c, std::uint64_t groups) {
  const auto t = c.type(c.input(0));
  const auto n = c.input_elements(0);
  op_cost r = statistics(c, t, n, groups, 1);
  r += vector_pass(c, t, n, 1, 3, broadcast_exchange_bytes(c, n));
  return r;
}
/// ipu::BatchNormalizationTraining: the batch's mean and variance per channel (two reductions over
/// [N, C, ...], the second squaring), then the affine normalisation of inference.
constexpr op_cost batch_norm_training(const op_cost_context& c) {
  op_cost r = statistics(c, c.type(c.input(0)), c.input_elements(0), dim(c.input(0), 1), 1);
  r += batch_norm(c);
  return r;
}
/// ipu::BatchNormalizationTrainingGrad: per channel, the sums of dY and of dY times the centred X
/// (two reductions, the second a subtract and a multiply more per vector), then dX from dY and X
/// (a multiply-add of each and an add: 3 instructions per vector over two inputs).
constexpr op_cost batch_norm_training_grad(const op_cost_context& c) {
  const auto t = c.type(c.input(1));
  const auto n = c.input_elements(1);
  op_cost r = statistics(c, t, n, dim(c.input(1), 1), 2);
  r += vector_pass(c, t, n, 2, 3, broadcast_exchange_bytes(c, n));
  return r;
}
constexpr op_cost layer_norm(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.rank());
  auto axis = c.int_attr("axis", -1);
  if (axis < 0) axis += r;
  return normalisation(c, product(x, 0, std::clamp<std::int64_t>(axis, 0, r)));
}
constexpr op_cost instance_norm(const op_cost_context& c) { return normalisation(c, product(c.input(0), 0, 2)); }
/// ipu::LayerNormalizationGrad: per row, the sums of dY * Scale and of that times the centred X (two
/// reductions, the second a subtract and a multiply more per vector), then dX (3 instructions per
/// vector over two inputs); per normalised element, dScale and dB summed over the rows; and the
/// row statistics again when the forward op's are not given.
constexpr op_cost layer_norm_grad(const op_cost_context& c) {
  const auto& x = c.input(1);
  const auto r = static_cast<std::int64_t>(x.shape.rank());
  auto axis = c.int_attr("axis", -1);
  if (axis < 0) axis += r;
  const auto rows = product(x, 0, std::clamp<std::int64_t>(axis, 0, r));
  const auto t = c.type(x);
  const auto n = c.input_elements(1);
  op_cost cost = statistics(c, t, n, rows, 2);
  cost += vector_pass(c, t, n, 2, 3, broadcast_exchange_bytes(c, n));
  cost += statistics(c, t, n, ceil_div(n, std::max<std::uint64_t>(rows, 1)), 1);
  if (!c.has_input(3)) cost += statistics(c, t, n, rows, 1);
  return cost;
}


/// The AMP precision of inputs of type `t` under the options, or nullopt for types the AMP does not
/// take (integers run on the vector units).
constexpr std::optional<precision> amp_precision(const op_cost_context& c, data_type t) {
  return precision_for(t, t == data_type::F32 ? data_type::F32 : c.options.partials_type);
}

constexpr op_cost from_amp_plan(const amp_plan& p) {
  op_cost r;
  const auto passes = p.parts.serial_passes;
  r.compute_cycles = mul_sat(passes, p.compute.compute_cycles + p.reduction.compute_cycles);
  r.exchange_cycles = mul_sat(passes, p.compute.exchange_cycles + p.reduction.exchange_cycles);
  r.sync_cycles = mul_sat(passes, p.compute.sync_cycles + p.reduction.sync_cycles);
  r.tiles = p.tiles_used;
  r.temporary_bytes_per_tile = p.temporary_bytes_per_tile;
  r.macs = p.problem.macs();
  r.fits_temporary_budget = p.fits_temporary_budget();
  return r;
}

/// A matmul of type `t`: on the AMP, or for integer types as k multiply-adds per output on the
/// vector units.
constexpr op_cost matmul_of(const op_cost_context& c, data_type t, const matmul_shape& s) {
  if (s.macs() == 0) return {};
  if (const auto p = amp_precision(c, t)) {
    amp_plan_options o;
    o.tiles = c.options.tiles;
    o.available_memory_proportion = op_available_memory_proportion(*c.op).value_or(c.options.available_memory_proportion);
    return from_amp_plan(plan_matmul(*c.device, s, *p, o));
  }
  op_cost r = vector_pass(c, t, mul_sat(mul_sat(s.batch, s.m), s.n), 2,
                          static_cast<std::uint32_t>(std::min<std::uint64_t>(s.k, 1u << 20)));
  r.macs = s.macs();
  return r;
}

/// ONNX MatMul with numpy broadcasting. A rank-2 right operand (a weight) lets the leading
/// dimensions of the left one fold into its rows, which fills the AMP better.
constexpr op_cost matmul(const op_cost_context& c) {
  const auto& a = c.input(0);
  const auto& b = c.input(1);
  const auto ra = static_cast<std::int64_t>(a.shape.rank()), rb = static_cast<std::int64_t>(b.shape.rank());
  matmul_shape s;
  s.k = dim(a, -1);
  s.n = rb >= 2 ? dim(b, -1) : 1;
  if (rb <= 2) {
    s.m = ra >= 2 ? product(a, 0, ra - 1) : 1;
  } else {
    s.m = ra >= 2 ? dim(a, -2) : 1;
    const auto& out = c.output();
    const auto ro = static_cast<std::int64_t>(out.shape.rank());
    s.batch = product(out, 0, std::max<std::int64_t>(ro - 2, 0));
  }
  // A serialised matmul (plan_annotations.hpp) runs `factor` slices one after another; a split of
  // the reducing dimension then sums the slices' products into the output.
  const auto ser = op_matmul_serialization(*c.op);
  if (ser.factor <= 1) return matmul_of(c, c.type(a), s);
  auto& sliced = ser.mode == matmul_serialization_mode::input_channels ? s.m
                 : ser.mode == matmul_serialization_mode::reducing_dim ? s.k
                                                                       : s.n;
  if (ser.factor > sliced)
    throw error(error_category::usage,
                std::string(attr_serialize_matmul_factor) + " " + format_uint(ser.factor) + " exceeds the " +
                    format_uint(sliced) + " " + std::string(to_string(ser.mode)) + " it slices",
                "op " + graph::describe(*c.op), "give a factor no larger than the sliced dimension");
  sliced = ceil_div(sliced, ser.factor);
  op_cost r = matmul_of(c, c.type(a), s).times(ser.factor);
  if (ser.mode == matmul_serialization_mode::reducing_dim) {
    const auto out = c.output_elements();
    r += vector_pass(c, c.type(c.output()), out, 2, 1).times(ser.factor - 1);
  }
  return r;
}

/// Gemm: alpha A' B' + beta C; the bias is an element-wise add over the output.
constexpr op_cost gemm(const op_cost_context& c) {
  const auto& a = c.input(0);
  const auto& b = c.input(1);
  const bool ta = c.int_attr("transA", 0) != 0, tb = c.int_attr("transB", 0) != 0;
  matmul_shape s{1, ta ? dim(a, 1) : dim(a, 0), ta ? dim(a, 0) : dim(a, 1), tb ? dim(b, 0) : dim(b, 1)};
  op_cost r = matmul_of(c, c.type(a), s);
  if (c.has_input(2)) {
    const auto out = c.output_elements();
    r += vector_pass(c, c.type(c.output()), out, 2, 1, operand_exchange_bytes(c, 2, out));
  }
  return r;
}

/// The convolution shape of an ONNX Conv (pads from auto_pad when set).
constexpr conv_shape conv_shape_of(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto& w = c.input(1);
  const auto rank = x.shape.rank() >= 2 ? x.shape.rank() - 2 : 0;
  conv_shape s;
  s.batch = dim(x, 0);
  s.in_channels = dim(x, 1);
  s.out_channels = dim(w, 0);
  s.groups = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("group", 1), 1));
  auto to_u = [](const std::vector<std::int64_t>& v) {
    std::vector<std::uint64_t> r;
    for (auto e : v) r.push_back(e > 0 ? static_cast<std::uint64_t>(e) : 0);
    return r;
  };
  for (std::size_t i = 0; i < rank; ++i) {
    s.input.push_back(dim(x, static_cast<std::int64_t>(i + 2)));
    s.kernel.push_back(dim(w, static_cast<std::int64_t>(i + 2)));
  }
  s.strides = to_u(c.ints_attr("strides"));
  s.dilations = to_u(c.ints_attr("dilations"));
  const auto pads = to_u(c.ints_attr("pads"));
  const auto auto_pad = c.string_attr("auto_pad");
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (std::size_t i = 0; i < rank; ++i) {
      const auto st = s.strides.empty() ? 1 : std::max<std::uint64_t>(s.strides[i], 1);
      const auto dl = s.dilations.empty() ? 1 : std::max<std::uint64_t>(s.dilations[i], 1);
      const auto out = ceil_div(s.input[i], st);
      const auto need = (out - 1) * st + (s.kernel[i] - 1) * dl + 1;
      const auto total = need > s.input[i] ? need - s.input[i] : 0;
      const auto small = total / 2, large = total - small;
      s.pads_begin.push_back(auto_pad == "SAME_UPPER" ? small : large);
      s.pads_end.push_back(auto_pad == "SAME_UPPER" ? large : small);
    }
  } else if (pads.size() == 2 * rank && auto_pad != "VALID") {
    s.pads_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(rank));
    s.pads_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(rank), pads.end());
  }
  return s;
}

/// Max / average pooling: per output, one instruction per kernel element, reading the window; the
/// input windows are exchanged to the tiles computing the outputs (they are not mapped alike when
/// the stride differs from 1 or windows overlap).
constexpr op_cost pooling(const op_cost_context& c) {
  std::uint64_t window = 1;
  for (auto k : c.ints_attr("kernel_shape")) window = mul_sat(window, k > 0 ? static_cast<std::uint64_t>(k) : 1);
  const auto t = c.type(c.input(0));
  const auto in_bytes = costed_bytes(c.input(0), c.options);
  const auto w = static_cast<std::uint32_t>(std::min<std::uint64_t>(window, 1u << 16));
  return vector_pass(c, t, c.output_elements(), w, std::max<std::uint32_t>(w - 1, 1), ceil_div(in_bytes, c.tiles()));
}

/// ipu::NchwcMaxPool / NchwcAveragePool: pooling's cost over the `channels` the blocked data
/// holds, not its padding (the blocked layout is the host's, as for ipu::NchwcConv).
constexpr op_cost nchwc_pooling(const op_cost_context& c) {
  std::uint64_t window = 1;
  for (auto k : c.ints_attr("kernel_shape")) window = mul_sat(window, k > 0 ? static_cast<std::uint64_t>(k) : 1);
  const auto padded = std::max<std::uint64_t>(dim(c.input(0), 1), 1);
  const auto channels = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("channels", 1), 1)), padded);
  const auto t = c.type(c.input(0));
  const auto in_bytes = costed_bytes(c.input(0), c.options) / padded * channels;
  const auto w = static_cast<std::uint32_t>(std::min<std::uint64_t>(window, 1u << 16));
  return vector_pass(c, t, c.output_elements() / padded * channels, w, std::max<std::uint32_t>(w - 1, 1),
                     ceil_div(in_bytes, c.tiles()));
}

constexpr op_cost global_pool(const op_cost_context& c) { return reduce(c); }

/// LSTM / GRU / RNN: per direction and time step, the input and recurrent matmuls and the gate
/// non-linearities. Gates: 4 for LSTM, 3 for GRU, 1 for RNN.
constexpr op_cost recurrent(const op_cost_context& c) {
  const auto& x = c.input(0);  // [seq, batch, input]
  const auto& w = c.input(1);  // [dirs, gates * hidden, input]
  const auto seq = dim(x, 0), batch = dim(x, 1), in = dim(x, 2);
  const auto dirs = dim(w, 0), gh = dim(w, 1);
  const std::uint64_t gates = c.op->type == "LSTM" ? 4 : c.op->type == "GRU" ? 3 : 1;
  const auto hidden = gh / gates;
  const auto t = c.type(x);
  op_cost step = matmul_of(c, t, matmul_shape{1, batch, in, gh});
  step += matmul_of(c, t, matmul_shape{1, batch, hidden, gh});
  step += vector_pass(c, t, mul_sat(batch, gh), 2, scalar_rate_ops(c, t) + 2);
  return step.times(mul_sat(seq, dirs));
}

/// Ops of unknown type: one element-wise pass over every output, reading every input.
constexpr op_cost generic(const op_cost_context& c) {
  op_cost r;
  std::uint32_t inputs = 0;
  for (std::size_t i = 0; i < c.num_inputs(); ++i) inputs += c.has_input(i) ? 1u : 0u;
  for (std::size_t i = 0; i < c.op->outputs.size(); ++i)
    r += vector_pass(c, c.type(c.output(i)), c.output_elements(i), std::max<std::uint32_t>(inputs, 1), 1);
  return r;
}

/// ConvTranspose is the data gradient of the forward convolution from its output Y to its input X:
/// that convolution (Y's channels in, X's out, the same kernel, strides and dilations, the pads that
/// bring Y back to X's size) does the same multiply-accumulates, so the AMP plans it alike.
constexpr conv_shape conv_transpose_shape_of(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto& w = c.input(1);  // [C_in, C_out / group, k...]
  const auto& y = c.output();
  const auto rank = x.shape.rank() >= 2 ? x.shape.rank() - 2 : 0;
  conv_shape s;
  s.batch = dim(x, 0);
  s.groups = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("group", 1), 1));
  s.in_channels = mul_sat(dim(w, 1), s.groups);
  s.out_channels = dim(x, 1);
  const auto strides = c.ints_attr("strides"), dilations = c.ints_attr("dilations"), pads = c.ints_attr("pads");
  for (std::size_t i = 0; i < rank; ++i) {
    const auto at = [&](const std::vector<std::int64_t>& v, std::uint64_t dflt) {
      return i < v.size() && v[i] > 0 ? static_cast<std::uint64_t>(v[i]) : dflt;
    };
    const auto in = dim(y, static_cast<std::int64_t>(i + 2)), out = dim(x, static_cast<std::int64_t>(i + 2));
    const auto k = std::max<std::uint64_t>(dim(w, static_cast<std::int64_t>(i + 2)), 1);
    const auto st = at(strides, 1), dl = at(dilations, 1);
    s.input.push_back(in);
    s.kernel.push_back(k);
    s.strides.push_back(st);
    s.dilations.push_back(dl);
    // Total padding for `out` windows over `in`; split as the pads attribute says when it adds up.
    const auto need = (out > 0 ? (out - 1) * st : 0) + (k - 1) * dl + 1;
    const auto total = need > in ? need - in : 0;
    std::uint64_t begin = total / 2;
    if (pads.size() == 2 * rank && pads[i] >= 0 && static_cast<std::uint64_t>(pads[i]) <= total) begin = static_cast<std::uint64_t>(pads[i]);
    s.pads_begin.push_back(begin);
    s.pads_end.push_back(total - begin);
  }
  return s;
}

/// A convolution of shape `s` (on the AMP, or on the vector units for integer types) plus the bias
/// of input `bias_input`, added over the output.
constexpr op_cost conv_of(const op_cost_context& c, const conv_shape& s, std::size_t bias_input) {
  const auto t = c.type(c.input(0));
  op_cost r;
  if (const auto p = amp_precision(c, t)) {
    amp_plan_options o;
    o.tiles = c.options.tiles;
    o.available_memory_proportion = op_available_memory_proportion(*c.op).value_or(c.options.available_memory_proportion);
    r = from_amp_plan(plan_conv(*c.device, s, *p, o));
  } else {
    const auto out = c.output_elements();
    r = vector_pass(c, t, out, 2, static_cast<std::uint32_t>(std::min<std::uint64_t>(ceil_div(s.macs(), std::max<std::uint64_t>(out, 1)), 1u << 20)));
    r.macs = s.macs();
  }
  if (c.has_input(bias_input)) {
    const auto out = c.output_elements();
    r += vector_pass(c, c.type(c.output()), out, 2, 1, operand_exchange_bytes(c, bias_input, out));
  }
  return r;
}

constexpr op_cost conv(const op_cost_context& c) { return conv_of(c, conv_shape_of(c), 2); }

/// com.microsoft FusedConv: the convolution, then Z's addition and the activation as passes over
/// the output (PopLibs applies a non-linearity as a vertex pass of its own after the convolution).
constexpr op_cost fused_conv_of(const op_cost_context& c, const conv_shape& s) {
  auto r = conv_of(c, s, 2);
  const auto out = c.output_elements();
  const auto t = c.type(c.output());
  if (c.has_input(3)) r += vector_pass(c, t, out, 2, 1, operand_exchange_bytes(c, 3, out));
  // The shape rule has refused an unknown activation before any cost is asked for.
  const auto activation = find_fused_activation(c.string_attr("activation"));
  const auto kind = activation ? activation->kind : fused_activation_kind::none;
  if (kind == fused_activation_kind::sigmoid || kind == fused_activation_kind::tanh)
    r += vector_pass(c, t, out, 1, scalar_rate_ops(c, t));
  else if (kind != fused_activation_kind::none) r += vector_pass(c, t, out, 1, 2);
  return r;
}

constexpr op_cost fused_conv(const op_cost_context& c) { return fused_conv_of(c, conv_shape_of(c)); }

/// ipu::NchwcConv: FusedConv's cost over the channels W and group give, not X's blocked padding
/// (the blocked layout is the host's; an IPU lays a tensor out over its tiles in its own way).
constexpr op_cost nchwc_conv(const op_cost_context& c) {
  auto s = conv_shape_of(c);
  s.in_channels = dim(c.input(1), 1) * s.groups;
  return fused_conv_of(c, s);
}

/// ipu::ToNchwc / FromNchwc: one copy of the output.
constexpr op_cost nchwc_reorder(const op_cost_context& c) {
  return vector_pass(c, c.type(c.output()), c.output_elements(), 1, 1);
}

/// ipu::ConvWeightsGrad(dY, X): the weight-update pass. PopLibs turns it into a convolution
/// (poplin::getWeightUpdateParams: X's channels as the batch, the batch as the reduced input
/// channels, dY's channels out, dY's spatial extent as the kernel, the forward's strides becoming
/// dilations and the reverse), and its planner may then expand the spatial dimensions into the
/// reduced channels (the expandDims transform), which makes it a matmul
///   dW[ic/g * k, oc/g] = im2col(X)[ic/g * k, N * out pixels] x dY[N * out pixels, oc/g]
/// with the expanded X rearranged on the way in. Both are planned and the cheaper taken, as the
/// planner would: the convolution form reduces over only the batch (8 for a ResNet micro-batch)
/// per kernel position and sums the partials of every one of dY's pixels, which PopLibs avoids.
constexpr op_cost conv_weights_grad(const op_cost_context& c) {
  const auto& dy = c.input(0);
  const auto& x = c.input(1);
  const auto rank = x.shape.rank() >= 2 ? x.shape.rank() - 2 : 0;
  conv_shape s;
  s.groups = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("group", 1), 1));
  s.batch = dim(x, 1) / s.groups;
  s.in_channels = mul_sat(dim(x, 0), s.groups);
  s.out_channels = dim(dy, 1);
  const auto strides = c.ints_attr("strides"), dilations = c.ints_attr("dilations"), pads = c.ints_attr("pads");
  for (std::size_t i = 0; i < rank; ++i) {
    const auto at = [&](const std::vector<std::int64_t>& v, std::size_t k, std::uint64_t dflt) {
      return k < v.size() && v[k] > 0 ? static_cast<std::uint64_t>(v[k]) : dflt;
    };
    s.input.push_back(dim(x, static_cast<std::int64_t>(i + 2)));
    s.kernel.push_back(std::max<std::uint64_t>(dim(dy, static_cast<std::int64_t>(i + 2)), 1));
    s.strides.push_back(at(dilations, i, 1));
    s.dilations.push_back(at(strides, i, 1));
    s.pads_begin.push_back(pads.size() == 2 * rank ? at(pads, i, 0) : 0);
    s.pads_end.push_back(pads.size() == 2 * rank ? at(pads, rank + i, 0) : 0);
  }
  const auto as_conv = conv_of(c, s, static_cast<std::size_t>(-1));  // no bias input
  // The expanded form: per group, rows = the weights' ic/g x kernel positions, reduced over the batch
  // times dY's pixels, oc/g columns.
  const auto& dw = c.output();  // [oc, ic/g, kernel...]
  matmul_shape m;
  m.batch = s.groups;
  m.m = product(dw, 1, static_cast<std::int64_t>(dw.shape.rank()));
  m.k = mul_sat(dim(x, 0), product(dy, 2, static_cast<std::int64_t>(dy.shape.rank())));
  m.n = s.out_channels / s.groups;
  if (m.macs() == 0) return as_conv;
  const auto as_matmul = matmul_of(c, c.type(x), m);
  return as_matmul.cycles() < as_conv.cycles() ? as_matmul : as_conv;
}
constexpr op_cost conv_transpose(const op_cost_context& c) { return conv_of(c, conv_transpose_shape_of(c), 2); }

/// The labels of an Einsum equation, as bit sets over 64 labels: letters a-z, A-Z (0..51) and the
/// ellipsis dimensions, right-aligned (52..63), with each label's size (the largest over the
/// operands: a broadcast dimension is 1).
struct einsum_labels {
  std::vector<std::uint64_t> operands;  // the labels of each operand
  std::uint64_t output = 0;
  std::uint64_t size[64]{};
  bool valid = true;  // false: an equation the cost model cannot read (costed generically)
};

constexpr einsum_labels parse_einsum_labels(const op_cost_context& c) {
  einsum_labels e;
  for (auto& s : e.size) s = 1;
  std::string eq;
  for (char ch : c.string_attr("equation"))
    if (ch != ' ') eq += ch;
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  auto label = [](char ch) -> int {
    if (ch >= 'a' && ch <= 'z') return ch - 'a';
    if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
    return -1;
  };
  // Reads one term; `rank` is the operand's rank (ellipsis dimensions = rank - letters), or -1 for
  // the output, whose ellipsis stands for every ellipsis dimension seen.
  std::uint64_t ellipsis_all = 0;
  auto term = [&](const std::string& t, std::int64_t op_index) {
    std::uint64_t set = 0;
    const auto dots = t.find("...");
    std::size_t letters = 0;
    for (char ch : t) letters += label(ch) >= 0 ? 1 : 0;
    const tensor_info* info = op_index >= 0 ? &c.input(static_cast<std::size_t>(op_index)) : nullptr;
    const auto rank = info ? info->shape.rank() : 0;
    const auto ell = dots == std::string::npos || !info ? 0 : (rank >= letters ? rank - letters : 0);
    if (ell > 12) e.valid = false;
    std::size_t axis = 0;
    for (std::size_t i = 0; i < t.size() && e.valid;) {
      if (t.compare(i, 3, "...") == 0) {
        if (!info) set |= ellipsis_all;
        for (std::size_t k = 0; k < ell && k < 12; ++k) {
          const auto l = 52 + (ell - 1 - k);  // right-aligned
          set |= std::uint64_t{1} << l;
          e.size[l] = std::max(e.size[l], dim(*info, static_cast<std::int64_t>(axis++)));
        }
        i += 3;
        continue;
      }
      const int l = label(t[i]);
      if (l < 0) { e.valid = false; break; }
      set |= std::uint64_t{1} << l;
      if (info) e.size[l] = std::max(e.size[l], dim(*info, static_cast<std::int64_t>(axis++)));
      ++i;
    }
    if (info) ellipsis_all |= set & ~((std::uint64_t{1} << 52) - 1);
    return set;
  };
  std::size_t start = 0;
  for (std::int64_t i = 0;; ++i) {
    const auto comma = lhs.find(',', start);
    if (!c.has_input(static_cast<std::size_t>(i))) { e.valid = false; return e; }
    e.operands.push_back(term(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start), i));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (arrow != std::string::npos) {
    e.output = term(eq.substr(arrow + 2), -1);
  } else {
    // Implicit output: the ellipsis and every letter that occurs once.
    std::uint64_t once = 0, twice = 0;
    for (const auto& o : e.operands) {
      twice |= once & o;
      once |= o;
    }
    std::uint64_t repeated_in_term = 0;
    for (char ch : lhs)
      if (label(ch) >= 0 && std::count(lhs.begin(), lhs.end(), ch) > 1) repeated_in_term |= std::uint64_t{1} << label(ch);
    e.output = ((once & ~twice & ~repeated_in_term) & ((std::uint64_t{1} << 52) - 1)) | ellipsis_all;
  }
  return e;
}

/// Product of the sizes of the labels in `set`.
constexpr std::uint64_t label_product(const einsum_labels& e, std::uint64_t set) {
  std::uint64_t p = 1;
  for (int l = 0; l < 64; ++l)
    if (set >> l & 1) p = mul_sat(p, e.size[l]);
  return p;
}

/// Einsum as the pairwise contractions it stands for, left to right: with the running result R and
/// the next operand B, labels wanted later (by a later operand or the output) and in both are the
/// batch, those in one only are the rows (R) or columns (B), and those in both but not wanted later
/// are contracted: a matmul of [batch, rows, contracted] x [contracted, columns]. Labels only one
/// operand has and nothing later wants are summed out of it first (a reduction). A single operand
/// is a reduction, or a transposition when nothing is summed.
constexpr op_cost einsum(const op_cost_context& c) {
  const auto e = parse_einsum_labels(c);
  if (!e.valid || e.operands.empty()) return generic(c);
  const auto t = c.type(c.output());
  auto wanted_after = [&](std::size_t i) {
    std::uint64_t w = e.output;
    for (std::size_t j = i + 1; j < e.operands.size(); ++j) w |= e.operands[j];
    return w;
  };
  op_cost r;
  // Sums labels of `set` nobody else wants; returns what is left.
  auto pre_reduce = [&](std::uint64_t set, std::uint64_t others) {
    const auto kept = set & others;
    if (kept != set) r += reduction(c, t, label_product(e, set), label_product(e, kept));
    return kept;
  };
  std::uint64_t running = e.operands[0];
  if (e.operands.size() == 1) {
    if (running == e.output) return data_movement(c);
    pre_reduce(running, e.output);
    return r;
  }
  running = pre_reduce(running, wanted_after(0));
  for (std::size_t i = 1; i < e.operands.size(); ++i) {
    const auto later = wanted_after(i);
    const auto b = pre_reduce(e.operands[i], later | running);
    const auto shared = running & b;
    matmul_shape s;
    s.batch = label_product(e, shared & later);
    s.k = label_product(e, shared & ~later);
    s.m = label_product(e, running & ~b);
    s.n = label_product(e, b & ~running);
    r += matmul_of(c, t, s);
    running = (running | b) & later;
  }
  // The final result's labels are the output's (a transposition is free: the contraction writes
  // its result in any order).
  return r;
}

/// LRN: per element, the sum of squares over `size` neighbouring channels (a multiply-add per
/// channel of the window), then (bias + alpha / size * sum)^beta at the scalar rate and a divide.
/// Neighbouring channels live on other tiles: each tile receives its share of the input again.
constexpr op_cost lrn(const op_cost_context& c) {
  const auto t = c.type(c.input(0));
  const auto size = static_cast<std::uint32_t>(std::clamp<std::int64_t>(c.int_attr("size", 1), 1, 1 << 16));
  return vector_pass(c, t, c.output_elements(), 1, size + scalar_rate_ops(c, t) + 2,
                     ceil_div(costed_bytes(c.input(0), c.options), c.tiles()));
}

/// MeanVarianceNormalization: layer normalisation over `axes` (default N, H, W: one group per channel).
constexpr op_cost mean_variance_norm(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.rank());
  auto axes = c.ints_attr("axes");
  if (!c.op->find_attribute("axes")) axes = {0, 2, 3};
  std::uint64_t reduced = 1;
  for (std::int64_t a = 0; a < r; ++a)
    if (std::find(axes.begin(), axes.end(), a) != axes.end() || std::find(axes.begin(), axes.end(), a - r) != axes.end())
      reduced = mul_sat(reduced, dim(x, a));
  return normalisation(c, ceil_div(c.input_elements(0), std::max<std::uint64_t>(reduced, 1)));
}

/// NegativeLogLikelihoodLoss: one gathered (and weighted) value per target, summed or averaged into
/// the output (no reduction when the output has one element per target).
constexpr op_cost nll_loss(const op_cost_context& c) {
  const auto targets = c.input_elements(1);
  const auto t = c.type(c.input(0));
  op_cost r = vector_pass(c, t, targets, c.has_input(2) ? 2 : 1, c.has_input(2) ? 2 : 1);
  if (c.output_elements() < targets) r += reduction(c, t, targets, c.output_elements());
  return r;
}

/// SoftmaxCrossEntropyLoss: a log-softmax over the class axis (1), then the NLL loss.
constexpr op_cost softmax_cross_entropy(const op_cost_context& c) {
  const auto t = c.type(c.input(0));
  const auto n = c.input_elements(0);
  const auto rows = ceil_div(n, std::max<std::uint64_t>(dim(c.input(0), 1), 1));
  op_cost r = reduction(c, t, n, rows);
  r += reduction(c, t, n, rows, 1 + scalar_rate_ops(c, t));
  r += vector_pass(c, t, n, 2, 1 + scalar_rate_ops(c, t));  // x - max - log(sum)
  r += nll_loss(c);
  return r;
}

/// Adagrad / Momentum / Adam: one element-wise pass per optimized tensor, reading it, its gradient
/// and its state, with a square root (Adagrad, Adam) at the scalar rate.
constexpr op_cost optimizer(const op_cost_context& c) {
  const bool adam = c.op->type == "Adam", momentum = c.op->type == "Momentum";
  const std::uint32_t k = adam ? 4 : 3;
  const auto n = c.num_inputs() >= 2 ? (c.num_inputs() - 2) / k : 0;
  op_cost r;
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = c.type(c.input(2 + i));
    const std::uint32_t ops = momentum ? 5 : (adam ? 10 : 6) + scalar_rate_ops(c, t);
    r += vector_pass(c, t, c.input_elements(2 + i), k, ops);
  }
  return r;
}

/// A subgraph's ops, each estimated as the whole model's are (through the context's estimator).
constexpr op_cost subgraph_cost(const op_cost_context& c, const graph& body) {
  op_cost r;
  for (std::size_t id = 0; id < body.num_ops(); ++id)
    r += c.estimate(body, static_cast<op_id>(id), *c.device, c.options, nullptr);
  return r;
}

/// If: the costlier branch (which one runs is known only at run time). Loop: one iteration of the
/// body (the trip count is a run-time value). Scan: the body once per element of the first scan
/// input's leading axis.
constexpr op_cost control_flow(const op_cost_context& c) {
  op_cost r;
  if (c.op->type == "If") {
    for (const char* branch : {"then_branch", "else_branch"})
      if (const auto* a = c.op->find_attribute(branch))
        if (const auto* s = std::get_if<subgraph>(&a->value)) {
          const auto b = subgraph_cost(c, *s->body);
          if (b.cycles() > r.cycles()) r = b;
        }
    return r;
  }
  if (const auto* a = c.op->find_attribute("body"))
    if (const auto* s = std::get_if<subgraph>(&a->value)) r = subgraph_cost(c, *s->body);
  if (c.op->type == "Scan") {
    const auto scans = static_cast<std::size_t>(std::max<std::int64_t>(c.int_attr("num_scan_inputs", 1), 1));
    const auto first_scan = c.num_inputs() >= scans ? c.num_inputs() - scans : 0;
    if (c.has_input(first_scan)) r = r.times(dim(c.input(first_scan), 0));
  }
  return r;
}

}  // namespace detail::cost_rules

}  // namespace ipu
