#pragma once
// Builds a graph op by op, in the spirit of popart::Builder, usable in constant expressions.
//
//   ipu::builder b("mlp");
//   auto x = b.add_input_tensor({ipu::data_type::F32, {8, 16}}, "x");
//   {
//     auto s = b.scope().ipu(1).stage(1);       // every op built here runs on IPU 1, stage 1
//     x = b.relu(b.matmul(x, w));
//   }                                           // leaving the scope restores the outer one
//   b.add_output(x);
//   ipu::graph g = std::move(b).build();        // validated
//
// Output infos come from shape inference (ipu/ops/infer.hpp), so shape errors surface at the
// op that causes them. Names are generated when not given and are unique within the graph.
#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/known_values.hpp"
#include "ipu/graph/validate.hpp"
#include "ipu/ops/infer.hpp"
#include "ipu/ops/plan_annotations.hpp"
#include "ipu/tensor.hpp"

namespace ipu {

namespace detail {
/// std::to_string, usable in constant expressions (for generated names).
constexpr std::string decimal(std::size_t v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + v % 10));
    v /= 10;
  } while (v);
  return s;
}
}  // namespace detail

/// A constant tensor holding `values` with shape `s`: `make_constant<float>({2, 2}, {1, 2, 3, 4})`.
template <class T>
constexpr constant_tensor make_constant(const shape& s, std::span<const T> values) {
  if (static_cast<std::int64_t>(values.size()) != s.num_elements())
    throw error(error_category::shape,
                std::to_string(values.size()) + " values given for shape " + to_string(s) + " of " +
                    std::to_string(s.num_elements()) + " elements",
                "make_constant", "give exactly one value per element");
  return constant_tensor{tensor_info{data_type_of_v<T>, s}, byte_buffer::from_values<T>(values)};
}
template <class T>
constexpr constant_tensor make_constant(const shape& s, std::initializer_list<T> values) {
  return make_constant<T>(s, std::span<const T>(values.begin(), values.size()));
}
template <class T>
constexpr constant_tensor make_constant(const shape& s, const std::vector<T>& values) {
  return make_constant<T>(s, std::span<const T>(values));
}
/// A rank-0 constant.
template <class T>
constexpr constant_tensor make_scalar(T value) {
  return make_constant<T>(shape{}, std::span<const T>(&value, 1));
}

/// Options of the generic `builder::op`.
struct op_options {
  std::int64_t opset = 0;       // 0: the builder's opset (required for other domains)
  std::size_t num_outputs = 1;  // how many outputs to create
  std::string_view name{};      // op name, also the first output's name; generated when empty
  std::string_view domain{};    // empty: ai.onnx
};

struct gemm_options {
  float alpha = 1.0f;
  float beta = 1.0f;
  bool trans_a = false;
  bool trans_b = false;
};

struct conv_options {
  std::vector<std::int64_t> strides{};    // empty: 1 per spatial dim
  std::vector<std::int64_t> pads{};       // begins then ends; empty: no padding
  std::vector<std::int64_t> dilations{};  // empty: 1 per spatial dim
  std::int64_t group = 1;
  std::string_view auto_pad{};  // empty: NOTSET
};

/// One convolution of a MultiConv (aiGraphcore.multiconv): its data, weights, optional bias and
/// windows (empty: strides and dilations 1, no padding).
struct multi_conv_input {
  tensor_id x = no_tensor;
  tensor_id w = no_tensor;
  tensor_id b = no_tensor;
  std::vector<std::int64_t> strides{};
  std::vector<std::int64_t> pads{};  // begins then ends
  std::vector<std::int64_t> dilations{};
};

/// PopTorch's MultiConv settings (poptorch.MultiConv's setters); unset ones keep PopLibs' defaults.
/// Per-conv lists hold one value per convolution, or one for all.
struct multi_conv_options {
  std::vector<float> available_memory_proportions{};
  std::vector<std::string> partials_types{};  // "float" or "half"
  std::string_view plan_type{};               // "parallel" (default) or "serial"
  std::int64_t per_conv_reserved_tiles = 0;   // 0: PopLibs' 50
  float cycle_back_off = -1.0f;               // below 0: PopLibs' 0.1
};

struct pool_options {
  std::vector<std::int64_t> kernel_shape{};  // required
  std::vector<std::int64_t> strides{};
  std::vector<std::int64_t> pads{};
  bool ceil_mode = false;
  bool count_include_pad = false;  // AveragePool only
  std::string_view auto_pad{};
};

class builder {
 public:
  static constexpr std::int64_t default_opset = 13;

  constexpr builder() : builder("graph") {}
  /// `opset` is the ai.onnx version every op is built for, recorded in the graph's opset imports.
  constexpr explicit builder(std::string_view name, std::int64_t opset = default_opset) : g_(name), opset_(opset) {
    if (opset < 1)
      throw error(error_category::usage, "opset " + std::to_string(opset) + " is not an ONNX opset version",
                  "builder '" + std::string(name) + "'", "use 13 or later");
    imports_.push_back(opset_import{"", opset});
  }

  /// Continues `g` (imported or built before): its tensors and ops stay as they are, new names are
  /// unique among its own, and new ops are built for its ai.onnx opset (13 when it records none).
  constexpr explicit builder(graph g)
      : g_(std::move(g)), opset_(g_.opset_version() > 0 ? g_.opset_version() : default_opset) {
    imports_ = g_.opset_imports();
    if (g_.opset_version() == 0) imports_.push_back(opset_import{"", opset_});
    for (const auto& t : g_.tensors()) (void)claim(t.name);
    for (const auto& o : g_.ops()) (void)claim(o.name);
  }

  // --- what has been built so far ----------------------------------------------------------
  [[nodiscard]] constexpr std::int64_t opset() const noexcept { return opset_; }
  /// The graph under construction (not yet validated).
  [[nodiscard]] constexpr const graph& current() const noexcept { return g_; }
  [[nodiscard]] constexpr const tensor_info& info(tensor_id t) const { return g_.tensor(checked(t)).info; }
  [[nodiscard]] constexpr const std::string& name_of(tensor_id t) const { return g_.tensor(checked(t)).name; }
  /// The annotation ops built now receive.
  [[nodiscard]] constexpr const annotation& current_annotation() const noexcept { return where_; }

  // --- graph inputs, weights, constants, outputs ---------------------------------------------
  /// A tensor the host feeds each iteration (PopART's addInputTensor).
  constexpr tensor_id add_input_tensor(const tensor_info& info, std::string_view name = {}) {
    return g_.add_tensor(new_name(name, "input"), info, tensor_kind::input);
  }
  /// A weight initialised from `value` (PopART's addInitializedInputTensor): a graph variable.
  constexpr tensor_id add_initialized_input(const constant_tensor& value, std::string_view name = {}) {
    return add_data(value, name, "weight", tensor_kind::variable);
  }
  /// Fixed data folded into the executable.
  constexpr tensor_id add_constant(const constant_tensor& value, std::string_view name = {}) {
    return add_data(value, name, "constant", tensor_kind::constant);
  }
  /// Declares `t` a graph output; outputs keep the order they are added in.
  constexpr void add_output(tensor_id t) { g_.mark_output(checked(t)); }

  // --- generic ops -------------------------------------------------------------------------
  /// Adds an op whose output infos come from shape inference (ipu/ops/infer.hpp); returns its
  /// outputs. Ops of other domains than ai.onnx record their domain's version in the opset imports.
  constexpr std::vector<tensor_id> op(std::string_view type, const std::vector<tensor_id>& inputs,
                                      const std::vector<attribute>& attributes = {}, const op_options& options = {}) {
    const auto domain = options.domain == "ai.onnx" ? onnx_domain : options.domain;
    if (!domain.empty() && options.opset < 1)
      throw error(error_category::usage,
                  "op " + std::string(type) + " of domain '" + std::string(domain) + "' needs its domain version",
                  "builder '" + g_.name() + "'", "set op_options::opset");
    op_node n = make_node(type, domain, options.opset ? options.opset : opset_, inputs, attributes, options.name);
    std::vector<infer_input> known;
    known.reserve(inputs.size());
    for (auto t : inputs)
      known.push_back(t == no_tensor ? infer_input{} : infer_input{&g_.tensor(t).info, known_data(g_, t)});
    const auto infos = infer_outputs(n, known, options.num_outputs);
    if (!domain.empty()) import_domain(domain, options.opset);
    return finish(std::move(n), infos);
  }
  constexpr std::vector<tensor_id> op(std::string_view type, const std::vector<tensor_id>& inputs,
                                      const std::vector<attribute>& attributes, std::int64_t opset) {
    return op(type, inputs, attributes, op_options{opset, 1, {}, {}});
  }

  /// Adds an op of any domain with the output infos given (no inference); records the domain's
  /// version in the graph's opset imports.
  constexpr std::vector<tensor_id> custom_op(std::string_view domain, std::string_view type, std::int64_t version,
                                             const std::vector<tensor_id>& inputs,
                                             const std::vector<tensor_info>& output_infos,
                                             const std::vector<attribute>& attributes = {},
                                             std::string_view name = {}) {
    if (domain == "ai.onnx") domain = onnx_domain;
    if (version < 1)
      throw error(error_category::usage, "op " + std::string(type) + " needs a domain version >= 1",
                  "builder '" + g_.name() + "'");
    import_domain(domain, version);
    return finish(make_node(type, domain, version, inputs, attributes, name), output_infos);
  }

  // --- typed helpers -----------------------------------------------------------------------
  constexpr tensor_id add(tensor_id a, tensor_id b, std::string_view name = {}) { return one("Add", {a, b}, {}, name); }
  constexpr tensor_id sub(tensor_id a, tensor_id b, std::string_view name = {}) { return one("Sub", {a, b}, {}, name); }
  constexpr tensor_id mul(tensor_id a, tensor_id b, std::string_view name = {}) { return one("Mul", {a, b}, {}, name); }
  constexpr tensor_id div(tensor_id a, tensor_id b, std::string_view name = {}) { return one("Div", {a, b}, {}, name); }
  constexpr tensor_id pow(tensor_id a, tensor_id b, std::string_view name = {}) { return one("Pow", {a, b}, {}, name); }
  constexpr tensor_id matmul(tensor_id a, tensor_id b, std::string_view name = {}) {
    return one("MatMul", {a, b}, {}, name);
  }
  /// alpha * A' * B' + beta * C; pass `no_tensor` for no C.
  constexpr tensor_id gemm(tensor_id a, tensor_id b, tensor_id c, const gemm_options& o = {},
                           std::string_view name = {}) {
    std::vector<attribute> at;
    if (o.alpha != 1.0f) at.push_back({"alpha", o.alpha});
    if (o.beta != 1.0f) at.push_back({"beta", o.beta});
    if (o.trans_a) at.push_back({"transA", std::int64_t{1}});
    if (o.trans_b) at.push_back({"transB", std::int64_t{1}});
    std::vector<tensor_id> in{a, b};
    if (c != no_tensor) in.push_back(c);
    return one("Gemm", in, at, name);
  }

  constexpr tensor_id identity(tensor_id x, std::string_view name = {}) { return one("Identity", {x}, {}, name); }
  /// PopART's Builder::checkpointOutput, PopTorch's recomputationCheckpoint: `x` through an
  /// Identity marked as a recomputation checkpoint (annotation::checkpoint), so a recomputing
  /// pipeline stashes it and reruns only what comes after it.
  constexpr tensor_id checkpoint_output(tensor_id x, std::string_view name = {}) {
    auto s = scope();  // restores the annotation
    where_.checkpoint = true;
    return identity(x, name);
  }
  /// PopART's Builder::setAvailableMemoryProportion, PopTorch's set_available_memory: the op that
  /// makes `x` (a Conv, ConvTranspose, MatMul or Gemm) may use this share of each tile's memory
  /// for temporaries, in place of the compile-wide one (ops/plan_annotations.hpp).
  constexpr void set_available_memory_proportion(tensor_id x, double proportion) {
    annotate(x, {{std::string(attr_available_memory_proportion), static_cast<float>(proportion)}});
  }
  /// PopART's Builder::setSerializeMatMul, PopTorch's serializedMatMul: the MatMul making `x` is
  /// planned as `factor` slices of one dimension, one after another (ops/plan_annotations.hpp).
  constexpr void set_serialize_matmul(tensor_id x, matmul_serialization_mode mode, std::int64_t factor) {
    annotate(x, {{std::string(attr_serialize_matmul_mode), std::string(to_string(mode))},
                 {std::string(attr_serialize_matmul_factor), factor}});
  }

  /// PopTorch's serializedMatMul(lhs, rhs, mode, factor): lhs x rhs, planned as `factor` slices.
  constexpr tensor_id serialized_matmul(tensor_id a, tensor_id b, matmul_serialization_mode mode, std::int64_t factor,
                                        std::string_view name = {}) {
    const auto y = matmul(a, b, name);
    set_serialize_matmul(y, mode, factor);
    return y;
  }

  /// PopART's Builder::recomputeOutputInBackwardPass (RecomputeType::Recompute): the op that makes
  /// `x` is marked annotation::recompute, so a pipelined training step reruns it in the backward
  /// stages that read `x` instead of stashing `x`.
  constexpr void recompute_output_in_backward_pass(tensor_id x) {
    const auto producer = g_.tensor(checked(x)).producer;
    if (producer == no_op)
      throw error(error_category::usage, "'" + g_.tensor(x).name + "' is not computed by an op, so it cannot be recomputed",
                  "builder '" + g_.name() + "'", "mark the output of an op");
    auto& w = g_.op(producer).where;
    if (w.checkpoint)
      throw error(error_category::usage, "op " + graph::describe(g_.op(producer)) + " is a recomputation checkpoint",
                  "builder '" + g_.name() + "'", "an op is either stashed (a checkpoint) or recomputed");
    w.recompute = true;
  }
  constexpr tensor_id relu(tensor_id x, std::string_view name = {}) { return one("Relu", {x}, {}, name); }
  constexpr tensor_id sigmoid(tensor_id x, std::string_view name = {}) { return one("Sigmoid", {x}, {}, name); }
  constexpr tensor_id tanh(tensor_id x, std::string_view name = {}) { return one("Tanh", {x}, {}, name); }
  constexpr tensor_id exp(tensor_id x, std::string_view name = {}) { return one("Exp", {x}, {}, name); }
  constexpr tensor_id log(tensor_id x, std::string_view name = {}) { return one("Log", {x}, {}, name); }
  constexpr tensor_id sqrt(tensor_id x, std::string_view name = {}) { return one("Sqrt", {x}, {}, name); }
  constexpr tensor_id neg(tensor_id x, std::string_view name = {}) { return one("Neg", {x}, {}, name); }
  constexpr tensor_id abs(tensor_id x, std::string_view name = {}) { return one("Abs", {x}, {}, name); }
  constexpr tensor_id erf(tensor_id x, std::string_view name = {}) { return one("Erf", {x}, {}, name); }
  constexpr tensor_id leaky_relu(tensor_id x, float alpha = 0.01f, std::string_view name = {}) {
    return one("LeakyRelu", {x}, {{"alpha", alpha}}, name);
  }
  /// Clamps to [lo, hi]; opset 11 on takes the bounds as scalar inputs of x's type.
  constexpr tensor_id clip(tensor_id x, double lo, double hi, std::string_view name = {}) {
    if (opset_ < 11) return one("Clip", {x}, {{"min", static_cast<float>(lo)}, {"max", static_cast<float>(hi)}}, name);
    const auto t = info(x).type;
    return one("Clip", {x, scalar(t, lo), scalar(t, hi)}, {}, name);
  }
  /// GELU, exact (erf) or with the tanh approximation. Before opset 20, which added Gelu, it is
  /// built from primitive ops the way exporters do.
  constexpr tensor_id gelu(tensor_id x, bool tanh_approximation = false, std::string_view name = {}) {
    if (opset_ >= 20)
      return one("Gelu", {x}, tanh_approximation ? std::vector<attribute>{{"approximate", std::string("tanh")}}
                                                 : std::vector<attribute>{},
                 name);
    const auto t = info(x).type;
    tensor_id inner;
    if (!tanh_approximation) {  // 0.5 x (1 + erf(x / sqrt 2))
      inner = erf(div(x, scalar(t, 1.4142135623730951)));
    } else {  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
      const auto cube = mul(mul(x, x), x);
      inner = tanh(mul(add(x, mul(cube, scalar(t, 0.044715))), scalar(t, 0.7978845608028654)));
    }
    return mul(mul(x, scalar(t, 0.5)), add(inner, scalar(t, 1.0)), name);
  }
  constexpr tensor_id softmax(tensor_id x, std::int64_t axis = -1, std::string_view name = {}) {
    return one("Softmax", {x}, {{"axis", axis}}, name);
  }
  constexpr tensor_id log_softmax(tensor_id x, std::int64_t axis = -1, std::string_view name = {}) {
    return one("LogSoftmax", {x}, {{"axis", axis}}, name);
  }

  /// Convolution; pass `no_tensor` for no bias.
  constexpr tensor_id conv(tensor_id x, tensor_id w, tensor_id bias = no_tensor, const conv_options& o = {},
                           std::string_view name = {}) {
    std::vector<attribute> at;
    if (!o.strides.empty()) at.push_back({"strides", o.strides});
    if (!o.pads.empty()) at.push_back({"pads", o.pads});
    if (!o.dilations.empty()) at.push_back({"dilations", o.dilations});
    if (o.group != 1) at.push_back({"group", o.group});
    if (!o.auto_pad.empty()) at.push_back({"auto_pad", std::string(o.auto_pad)});
    std::vector<tensor_id> in{x, w};
    if (bias != no_tensor) in.push_back(bias);
    return one("Conv", in, at, name);
  }
  constexpr tensor_id max_pool(tensor_id x, const pool_options& o, std::string_view name = {}) {
    return one("MaxPool", {x}, pool_attributes(o, false), name);
  }
  constexpr tensor_id average_pool(tensor_id x, const pool_options& o, std::string_view name = {}) {
    return one("AveragePool", {x}, pool_attributes(o, true), name);
  }
  constexpr tensor_id global_average_pool(tensor_id x, std::string_view name = {}) {
    return one("GlobalAveragePool", {x}, {}, name);
  }
  constexpr tensor_id global_max_pool(tensor_id x, std::string_view name = {}) {
    return one("GlobalMaxPool", {x}, {}, name);
  }

  /// Inference-mode batch normalisation.
  constexpr tensor_id batch_normalization(tensor_id x, tensor_id scale, tensor_id bias, tensor_id mean,
                                          tensor_id var, float epsilon = 1e-5f, std::string_view name = {}) {
    return one("BatchNormalization", {x, scale, bias, mean, var}, {{"epsilon", epsilon}}, name);
  }
  /// Normalises over the dimensions from `axis` on; pass `no_tensor` for no bias. Before opset 17,
  /// which added LayerNormalization, it is built from primitive ops the way exporters do.
  constexpr tensor_id layer_normalization(tensor_id x, tensor_id scale, tensor_id bias, std::int64_t axis = -1,
                                          float epsilon = 1e-5f, std::string_view name = {}) {
    if (opset_ >= 17) {
      std::vector<tensor_id> in{x, scale};
      if (bias != no_tensor) in.push_back(bias);
      return one("LayerNormalization", in, {{"axis", axis}, {"epsilon", epsilon}}, name);
    }
    const auto xi = info(x);  // a copy: building ops below may move the tensor table
    const auto r = static_cast<std::int64_t>(xi.shape.rank());
    if (axis < -r || axis >= r)
      throw error(error_category::shape, "axis " + std::to_string(axis) + " is out of range for " + to_string(xi),
                  "layer_normalization", "use an axis in [-rank, rank)");
    std::vector<std::int64_t> axes;
    for (auto a = axis < 0 ? axis + r : axis; a < r; ++a) axes.push_back(a);
    const auto centred = sub(x, reduce_mean(x, axes));
    const auto var = reduce_mean(mul(centred, centred), axes);
    const auto normed = div(centred, sqrt(add(var, scalar(xi.type, epsilon))));
    if (bias == no_tensor) return mul(normed, scale, name);
    return add(mul(normed, scale), bias, name);
  }

  /// Reshapes to `dims` (0 copies the input dimension, -1 is inferred), via a constant shape input.
  constexpr tensor_id reshape(tensor_id x, const std::vector<std::int64_t>& dims, std::string_view name = {}) {
    return one("Reshape", {x, int_constant(dims)}, {}, name);
  }
  /// Permutes dimensions; an empty `perm` reverses them.
  constexpr tensor_id transpose(tensor_id x, const std::vector<std::int64_t>& perm = {}, std::string_view name = {}) {
    return one("Transpose", {x}, perm.empty() ? std::vector<attribute>{} : std::vector<attribute>{{"perm", perm}}, name);
  }
  constexpr tensor_id flatten(tensor_id x, std::int64_t axis = 1, std::string_view name = {}) {
    return one("Flatten", {x}, {{"axis", axis}}, name);
  }
  constexpr tensor_id concat(const std::vector<tensor_id>& inputs, std::int64_t axis, std::string_view name = {}) {
    return one("Concat", inputs, {{"axis", axis}}, name);
  }
  constexpr std::vector<tensor_id> split(tensor_id x, const std::vector<std::int64_t>& sizes, std::int64_t axis = 0,
                                         std::string_view name = {}) {
    const op_options o{0, sizes.size(), name, {}};
    if (opset_ >= 13) return op("Split", {x, int_constant(sizes)}, {{"axis", axis}}, o);
    return op("Split", {x}, {{"axis", axis}, {"split", sizes}}, o);
  }
  constexpr tensor_id cast(tensor_id x, data_type to, std::string_view name = {}) {
    return one("Cast", {x}, {{"to", onnx_code_of(to)}}, name);
  }
  /// Dropout as in inference: the identity, kept so the graph mirrors the trained model.
  constexpr tensor_id dropout(tensor_id x, float ratio = 0.5f, std::string_view name = {}) {
    if (opset_ >= 12) return one("Dropout", {x, scalar(data_type::F32, ratio)}, {}, name);
    return one("Dropout", {x}, {{"ratio", ratio}}, name);
  }
  constexpr tensor_id squeeze(tensor_id x, const std::vector<std::int64_t>& axes, std::string_view name = {}) {
    if (opset_ >= 13) return one("Squeeze", {x, int_constant(axes)}, {}, name);
    return one("Squeeze", {x}, {{"axes", axes}}, name);
  }
  constexpr tensor_id unsqueeze(tensor_id x, const std::vector<std::int64_t>& axes, std::string_view name = {}) {
    if (opset_ >= 13) return one("Unsqueeze", {x, int_constant(axes)}, {}, name);
    return one("Unsqueeze", {x}, {{"axes", axes}}, name);
  }
  constexpr tensor_id gather(tensor_id x, tensor_id indices, std::int64_t axis = 0, std::string_view name = {}) {
    return one("Gather", {x, indices}, {{"axis", axis}}, name);
  }
  constexpr tensor_id reduce_mean(tensor_id x, const std::vector<std::int64_t>& axes, bool keepdims = true,
                                  std::string_view name = {}) {
    return reduce("ReduceMean", 18, x, axes, keepdims, name);
  }
  constexpr tensor_id reduce_sum(tensor_id x, const std::vector<std::int64_t>& axes, bool keepdims = true,
                                 std::string_view name = {}) {
    return reduce("ReduceSum", 13, x, axes, keepdims, name);
  }
  /// numpy's x[starts:ends:steps] along `axes` (all leading axes when empty).
  constexpr tensor_id slice(tensor_id x, const std::vector<std::int64_t>& starts, const std::vector<std::int64_t>& ends,
                            const std::vector<std::int64_t>& axes = {}, const std::vector<std::int64_t>& steps = {},
                            std::string_view name = {}) {
    if (opset_ < 10) {
      if (!steps.empty())
        throw error(error_category::usage, "Slice steps need opset 10 or later", "builder '" + g_.name() + "'");
      std::vector<attribute> at{{"starts", starts}, {"ends", ends}};
      if (!axes.empty()) at.push_back({"axes", axes});
      return one("Slice", {x}, at, name);
    }
    std::vector<tensor_id> in{x, int_constant(starts), int_constant(ends)};
    if (!axes.empty() || !steps.empty()) {
      std::vector<std::int64_t> all_axes = axes;
      if (all_axes.empty())
        for (std::size_t i = 0; i < starts.size(); ++i) all_axes.push_back(static_cast<std::int64_t>(i));
      in.push_back(int_constant(all_axes));
    }
    if (!steps.empty()) in.push_back(int_constant(steps));
    return one("Slice", in, {}, name);
  }

  // --- PopART's aiGraphcore ops (domain ai.graphcore, version 1; ipu/ops/families/graphcore.hpp) ---
  /// aiGraphcore.nop: `x` through an op the optimiser keeps (poptorch.nop).
  constexpr tensor_id nop(tensor_id x, std::string_view name = {}) { return graphcore("Nop", {x}, {}, 1, name).front(); }
  /// aiGraphcore.printtensor (poptorch.ipu_print_tensor): `x`, printed as "title: [...]" each time
  /// it runs; with `print_gradient`, training prints its gradient too ("Gradient of title").
  constexpr tensor_id print_tensor(tensor_id x, std::string_view title = {}, bool print_gradient = true,
                                   std::string_view name = {}) {
    return graphcore("PrintTensor", {x},
                     {{"title", std::string(title)}, {"print_gradient", std::int64_t{print_gradient ? 1 : 0}}}, 1, name)
        .front();
  }
  /// aiGraphcore.dynamicslice: t[offset : offset + sizes] along `axes`, `offset` an integer tensor
  /// read at run time (clamped into range); `no_overlap` as PopART's noOverlap.
  constexpr tensor_id dynamic_slice(tensor_id t, tensor_id offset, const std::vector<std::int64_t>& axes,
                                    const std::vector<std::int64_t>& sizes, bool no_overlap = false,
                                    std::string_view name = {}) {
    return graphcore("DynamicSlice", {t, offset}, window(axes, sizes, no_overlap), 1, name).front();
  }
  /// aiGraphcore.dynamicupdate: `t` with the window at `offset` replaced by `slice`.
  constexpr tensor_id dynamic_update(tensor_id t, tensor_id offset, tensor_id slice, const std::vector<std::int64_t>& axes,
                                     const std::vector<std::int64_t>& sizes, bool no_overlap = false,
                                     std::string_view name = {}) {
    return graphcore("DynamicUpdate", {t, offset, slice}, window(axes, sizes, no_overlap), 1, name).front();
  }
  /// aiGraphcore.dynamicadd: `t` with `slice` added into the window at `offset`.
  constexpr tensor_id dynamic_add(tensor_id t, tensor_id offset, tensor_id slice, const std::vector<std::int64_t>& axes,
                                  const std::vector<std::int64_t>& sizes, bool no_overlap = false,
                                  std::string_view name = {}) {
    return graphcore("DynamicAdd", {t, offset, slice}, window(axes, sizes, no_overlap), 1, name).front();
  }
  /// aiGraphcore.groupnormalization: {y, mean, inv std dev} of X [N, C, ...] in `num_groups` groups
  /// of channels; scale and bias [C].
  constexpr std::vector<tensor_id> group_normalization(tensor_id x, tensor_id scale, tensor_id bias,
                                                       std::int64_t num_groups, float epsilon = 1e-5f,
                                                       std::string_view name = {}) {
    return graphcore("GroupNormalization", {x, scale, bias}, {{"num_groups", num_groups}, {"epsilon", epsilon}}, 3, name);
  }

  /// aiGraphcore.multiconv (poptorch.MultiConv): independent convolutions planned together, one
  /// output per convolution (ipu/ops/families/multi_conv.hpp).
  constexpr std::vector<tensor_id> multi_conv(const std::vector<multi_conv_input>& convs,
                                              const multi_conv_options& o = {}, std::string_view name = {}) {
    std::vector<tensor_id> inputs;
    std::vector<std::int64_t> strides, pads, dilations;
    bool any_strides = false, any_pads = false, any_dilations = false;
    for (const auto& c : convs) {
      inputs.insert(inputs.end(), {c.x, c.w, c.b});
      const auto r = c.x == no_tensor ? 0 : g_.tensor(c.x).info.shape.rank() - 2;
      const auto put = [&](std::vector<std::int64_t>& all, const std::vector<std::int64_t>& own, std::size_t n,
                           std::int64_t fallback, bool& any) {
        any = any || !own.empty();
        if (own.empty()) all.insert(all.end(), n, fallback);
        else all.insert(all.end(), own.begin(), own.end());
      };
      put(strides, c.strides, r, 1, any_strides);
      put(pads, c.pads, 2 * r, 0, any_pads);
      put(dilations, c.dilations, r, 1, any_dilations);
    }
    std::vector<attribute> a;
    if (any_strides) a.push_back({"strides", strides});
    if (any_pads) a.push_back({"pads", pads});
    if (any_dilations) a.push_back({"dilations", dilations});
    if (!o.available_memory_proportions.empty()) a.push_back({"availableMemoryProportions", o.available_memory_proportions});
    if (!o.partials_types.empty()) a.push_back({"partialsTypes", o.partials_types});
    if (!o.plan_type.empty()) a.push_back({"planType", std::string(o.plan_type)});
    if (o.per_conv_reserved_tiles != 0) a.push_back({"perConvReservedTiles", o.per_conv_reserved_tiles});
    if (o.cycle_back_off >= 0.0f) a.push_back({"cycleBackOff", o.cycle_back_off});
    return graphcore("MultiConv", inputs, a, convs.size(), name);
  }
  /// aiGraphcore.ctcbeamsearchdecoder (poptorch.ctc_beam_search_decoder): {label_probs [N, top_paths],
  /// label_lengths [N, top_paths] UINT32, decoded_labels [N, top_paths, T] UINT32} of log_probs [T, N, C].
  constexpr std::vector<tensor_id> ctc_beam_search_decoder(tensor_id log_probs, tensor_id lengths, std::int64_t blank = 0,
                                                           std::int64_t beam_width = 100, std::int64_t top_paths = 1,
                                                           std::string_view name = {}) {
    return graphcore("CtcBeamSearchDecoder", {log_probs, lengths},
                     {{"blank", blank}, {"beam_width", beam_width}, {"top_paths", top_paths}}, 3, name);
  }

  // --- scoped annotation -------------------------------------------------------------------
  /// Restores the builder's annotation and name scope when it goes out of scope. Setters apply
  /// at once and chain: `auto s = b.scope().ipu(1).stage(1);`. Scopes nest; fields a scope does
  /// not set are inherited from the enclosing one. Destroy scopes in reverse order of creation.
  class scope_guard {
   public:
    constexpr explicit scope_guard(builder& b) : b_(&b), saved_(b.where_), saved_prefix_(b.prefix_) {}
    scope_guard(const scope_guard&) = delete;
    scope_guard& operator=(const scope_guard&) = delete;
    scope_guard& operator=(scope_guard&&) = delete;
    constexpr scope_guard(scope_guard&& o) noexcept
        : b_(std::exchange(o.b_, nullptr)), saved_(std::move(o.saved_)), saved_prefix_(std::move(o.saved_prefix_)) {}
    constexpr ~scope_guard() {
      if (!b_) return;
      b_->where_ = std::move(saved_);
      b_->prefix_ = std::move(saved_prefix_);
    }

    /// PopART's virtual graph: the IPU the ops run on.
    constexpr scope_guard& ipu(std::int64_t v) & { return set(&annotation::ipu, v, "IPU"); }
    constexpr scope_guard&& ipu(std::int64_t v) && { return std::move(ipu(v)); }
    /// Pipeline stage.
    constexpr scope_guard& stage(std::int64_t v) & { return set(&annotation::stage, v, "pipeline stage"); }
    constexpr scope_guard&& stage(std::int64_t v) && { return std::move(stage(v)); }
    /// Execution phase (phased execution).
    constexpr scope_guard& phase(std::int64_t v) & { return set(&annotation::phase, v, "execution phase"); }
    constexpr scope_guard&& phase(std::int64_t v) && { return std::move(phase(v)); }
    /// PopTorch block name, for strategies that map blocks to stages and phases.
    constexpr scope_guard& block(std::string_view name) & {
      live().where_.block = name;
      return *this;
    }
    constexpr scope_guard&& block(std::string_view name) && { return std::move(block(name)); }
    /// Prefixes generated and given names with "name/" (PopART's nameScope); nests.
    constexpr scope_guard& name_scope(std::string_view name) & {
      if (name.empty() || name.find('/') != std::string_view::npos)
        throw error(error_category::usage, "name scope '" + std::string(name) + "' must be non-empty without '/'",
                    "builder '" + live().g_.name() + "'");
      live().prefix_ += std::string(name) + "/";
      return *this;
    }
    constexpr scope_guard&& name_scope(std::string_view name) && { return std::move(name_scope(name)); }

   private:
    constexpr builder& live() const {
      if (!b_) throw error(error_category::usage, "scope used after being moved from", "builder scope");
      return *b_;
    }
    constexpr scope_guard& set(std::optional<std::int64_t> annotation::*field, std::int64_t v, const char* what) {
      if (v < 0)
        throw error(error_category::usage, std::string(what) + " " + std::to_string(v) + " is negative",
                    "builder '" + live().g_.name() + "'", "number IPUs, stages and phases from 0");
      live().where_.*field = v;
      return *this;
    }

    builder* b_;
    annotation saved_;
    std::string saved_prefix_;
  };

  /// A scope to annotate with `.ipu(n)`, `.stage(n)`, `.phase(n)`, `.block(name)`, `.name_scope(s)`.
  [[nodiscard]] constexpr scope_guard scope() { return scope_guard(*this); }
  /// PopTorch's `Block(name, ipu_id)`: ops built in it belong to block `name`, on `ipu` if given.
  [[nodiscard]] constexpr scope_guard block(std::string_view name, std::optional<std::int64_t> ipu = std::nullopt) {
    scope_guard s(*this);
    s.block(name);
    if (ipu) s.ipu(*ipu);
    return s;
  }

  // --- result ------------------------------------------------------------------------------
  /// Validates and returns the graph (a copy; the builder can go on).
  [[nodiscard]] constexpr graph build() const& {
    graph g = g_;
    finish_graph(g);
    return g;
  }
  /// Validates and returns the graph, leaving the builder empty.
  [[nodiscard]] constexpr graph build() && {
    finish_graph(g_);
    return std::move(g_);
  }

 private:
  constexpr tensor_id checked(tensor_id t) const {
    if (t >= g_.num_tensors())
      throw error(error_category::usage, "tensor id " + std::to_string(t) + " does not exist",
                  "builder '" + g_.name() + "'", "use ids this builder returned");
    return t;
  }

  constexpr tensor_id add_data(const constant_tensor& value, std::string_view name, std::string_view stem,
                               tensor_kind kind) {
    const auto nm = new_name(name, stem);
    if (value.data.size() != value.info.num_bytes())
      throw error(error_category::shape,
                  "tensor '" + nm + "' holds " + std::to_string(value.data.size()) + " bytes but " +
                      to_string(value.info) + " needs " + std::to_string(value.info.num_bytes()),
                  "builder '" + g_.name() + "'", "supply data matching the type and shape");
    return g_.add_tensor(nm, value.info, kind, value.data);
  }

  /// `prefix + given` if given (must be unused), else `prefix + stem + "_" + n` for a fresh n.
  constexpr std::string new_name(std::string_view given, std::string_view stem) {
    if (!given.empty()) {
      std::string n = prefix_ + std::string(given);
      if (!claim(n))
        throw error(error_category::usage, "the name '" + n + "' is already used", "builder '" + g_.name() + "'",
                    "give every tensor and op output a unique name");
      return n;
    }
    for (;;) {
      std::string n = prefix_ + std::string(stem) + "_" + detail::decimal(counter_++);
      if (claim(n)) return n;
    }
  }
  /// Records `n` as used; false if it already was. Names stay sorted for binary search.
  constexpr bool claim(const std::string& n) {
    auto it = std::lower_bound(names_.begin(), names_.end(), n);
    if (it != names_.end() && *it == n) return false;
    names_.insert(it, n);
    return true;
  }

  constexpr op_node make_node(std::string_view type, std::string_view domain, std::int64_t version,
                              const std::vector<tensor_id>& inputs, const std::vector<attribute>& attributes,
                              std::string_view name) {
    for (auto t : inputs)
      if (t != no_tensor) (void)checked(t);
    op_node n;
    n.type = type;
    n.domain = domain;
    n.opset = version;
    n.name = name;
    n.inputs = inputs;
    n.attributes = attributes;
    n.where = where_;
    return n;
  }

  /// Names the op and its outputs, adds the outputs and the op.
  constexpr std::vector<tensor_id> finish(op_node&& n, const std::vector<tensor_info>& infos) {
    const auto base = new_name(n.name, n.type);
    n.name = base;
    std::vector<tensor_id> outs;
    for (std::size_t i = 0; i < infos.size(); ++i) {
      // Built in place: GCC 12 mishandles moved short strings in constant evaluation.
      std::string nm = base;
      if (i != 0) {
        nm += ':';
        nm += detail::decimal(i);
      }
      if (i != 0 && !claim(nm))
        throw error(error_category::usage, "the name '" + nm + "' is already used", "builder '" + g_.name() + "'",
                    "give every tensor and op output a unique name");
      outs.push_back(g_.add_tensor(nm, infos[i]));
    }
    n.outputs = outs;
    g_.add_op(std::move(n));
    return outs;
  }

  /// Sets attributes `as` on the op making `x` (replacing those of the same names) and checks the
  /// op's plan annotations, so a bad value is refused where it is set (the op is then unchanged).
  constexpr void annotate(tensor_id x, const std::vector<attribute>& as) {
    const auto producer = g_.tensor(checked(x)).producer;
    if (producer == no_op)
      throw error(error_category::usage, "'" + g_.tensor(x).name + "' is not computed by an op, so it has no plan to annotate",
                  "builder '" + g_.name() + "'", "annotate the output of a Conv, ConvTranspose, MatMul or Gemm");
    op_node annotated = g_.op(producer);
    for (const auto& a : as) {
      std::erase_if(annotated.attributes, [&](const attribute& old) { return old.name == a.name; });
      annotated.attributes.push_back(a);
    }
    check_plan_annotations(annotated);
    g_.op(producer).attributes = std::move(annotated.attributes);
  }

  constexpr tensor_id one(std::string_view type, const std::vector<tensor_id>& inputs,
                          const std::vector<attribute>& attributes, std::string_view name) {
    return op(type, inputs, attributes, op_options{0, 1, name, {}}).front();
  }

  constexpr std::vector<tensor_id> graphcore(std::string_view type, const std::vector<tensor_id>& inputs,
                                             const std::vector<attribute>& attributes, std::size_t outputs,
                                             std::string_view name) {
    return op(type, inputs, attributes, op_options{1, outputs, name, "ai.graphcore"});
  }
  static constexpr std::vector<attribute> window(const std::vector<std::int64_t>& axes,
                                                 const std::vector<std::int64_t>& sizes, bool no_overlap) {
    return {{"axes", axes}, {"sizes", sizes}, {"noOverlap", std::int64_t{no_overlap ? 1 : 0}}};
  }

  constexpr tensor_id reduce(std::string_view type, std::int64_t axes_input_from, tensor_id x,
                             const std::vector<std::int64_t>& axes, bool keepdims, std::string_view name) {
    const attribute keep{"keepdims", std::int64_t{keepdims ? 1 : 0}};
    if (opset_ >= axes_input_from) return one(type, {x, int_constant(axes)}, {keep}, name);
    return one(type, {x}, {keep, {"axes", axes}}, name);
  }

  constexpr std::vector<attribute> pool_attributes(const pool_options& o, bool average) const {
    std::vector<attribute> at{{"kernel_shape", o.kernel_shape}};
    if (!o.strides.empty()) at.push_back({"strides", o.strides});
    if (!o.pads.empty()) at.push_back({"pads", o.pads});
    if (o.ceil_mode) at.push_back({"ceil_mode", std::int64_t{1}});
    if (average && o.count_include_pad) at.push_back({"count_include_pad", std::int64_t{1}});
    if (!o.auto_pad.empty()) at.push_back({"auto_pad", std::string(o.auto_pad)});
    return at;
  }

  constexpr tensor_id int_constant(const std::vector<std::int64_t>& v) {
    return add_constant(make_constant<std::int64_t>(shape{static_cast<std::int64_t>(v.size())}, v));
  }
  /// A rank-0 constant of floating-point type `t`.
  constexpr tensor_id scalar(data_type t, double v) {
    switch (t) {
      case data_type::F32: return add_constant(make_scalar(static_cast<float>(v)));
      case data_type::F64: return add_constant(make_scalar(v));
      case data_type::F16: return add_constant(make_scalar(half(static_cast<float>(v))));
      default:
        throw error(error_category::usage, "this op needs a floating-point input, not " + std::string(to_string(t)),
                    "builder '" + g_.name() + "'", "cast the input to F32 or F16 first");
    }
  }

  constexpr void import_domain(std::string_view domain, std::int64_t version) {
    for (auto& o : imports_)
      if (o.domain == domain) {
        o.version = std::max(o.version, version);
        return;
      }
    imports_.push_back(opset_import{std::string(domain), version});
  }

  constexpr void finish_graph(graph& g) const {
    if (g.outputs().empty())
      throw error(error_category::usage, "the graph has no outputs", "builder '" + g.name() + "'",
                  "declare outputs with add_output");
    g.set_opset_imports(imports_);
    validate(g);
  }

  graph g_;
  std::int64_t opset_;
  std::vector<opset_import> imports_;
  annotation where_;
  std::string prefix_;
  std::vector<std::string> names_;  // sorted: every tensor name handed out
  std::size_t counter_ = 0;
};

}  // namespace ipu
