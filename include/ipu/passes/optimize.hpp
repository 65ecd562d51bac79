#pragma once
// The graph optimisation stage: named passes run in a given order, as PopRT's model conversion and
// ONNX Runtime's graph transformers do before a model is planned. `ipu run`, `ipu compile` and
// `ipu convert` run default_passes() unless told otherwise (`--passes`, `--no-optimize`); library
// users call optimize() themselves. Every default pass keeps what the graph computes, up to
// rounding; fuse-qdq, which runs a QDQ model's products on the integers, is asked for by name.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/passes/dead_code.hpp"
#include "ipu/passes/fold_batch_normalization.hpp"
#include "ipu/passes/fold_constants.hpp"
#include "ipu/passes/fuse_conv_activation.hpp"
#include "ipu/passes/fuse_layer_normalization.hpp"
#include "ipu/passes/fuse_qdq.hpp"
#include "ipu/passes/fuse_swish.hpp"
#include "ipu/passes/nchwc_layout.hpp"

namespace ipu::passes {

struct pass_info {
  std::string_view name;
  std::string_view does;
  graph (*run)(const graph&);
  bool by_default = true;    // in default_passes()
  std::string_view before;   // a pass this one must precede in a list, when it has one
};

/// Every pass; default_passes() runs those marked by_default, in this order.
inline const std::vector<pass_info>& all_passes() {
  static const std::vector<pass_info> passes{
      {"fuse-qdq",
       "run a QDQ model's Conv and MatMul on the integers as QLinearConv / QLinearMatMul (results may move by a "
       "quantization step; not a default pass)",
       [](const graph& g) { return fuse_qdq(g); }, false, "fold-constants"},
      {"eliminate-dead-code", "drop ops no graph output depends on", [](const graph& g) { return eliminate_dead_code(g); }, true, {}},
      {"fold-constants", "run ops whose inputs are all known once, keeping their outputs as constants",
       [](const graph& g) { return fold_constants(g); }, true, {}},
      {"fold-batch-normalization", "fold inference BatchNormalization into the Conv or Gemm before it",
       [](const graph& g) { return fold_batch_normalization(g); }, true, {}},
      {"fuse-conv-activation",
       "fuse a Relu, Clip or LeakyRelu into the F32 Conv before it (com.microsoft FusedConv, as ONNX Runtime fuses them)",
       [](const graph& g) { return fuse_conv_activation(g); }, true, "nchwc-layout"},
      {"fuse-layer-normalization", "fuse layer normalisation written out as nine ONNX ops into LayerNormalization",
       [](const graph& g) { return fuse_layer_normalization(g); }, true, {}},
      {"fuse-swish", "fuse Sigmoid(x) times x (SiLU) into ai.graphcore Swish", [](const graph& g) { return fuse_swish(g); }, true, {}},
      {"nchwc-layout",
       "run chains of F32 2-D convolutions on channel-blocked data (ipu NchwcConv between ToNchwc and FromNchwc), as "
       "ONNX Runtime's NCHWc transformer does",
       [](const graph& g) { return nchwc_layout(g); }, true, {}},
  };
  return passes;
}

inline std::vector<std::string> default_passes() {
  std::vector<std::string> names;
  for (const auto& p : all_passes())
    if (p.by_default) names.emplace_back(p.name);
  return names;
}

/// The pass named `name`; an error listing the passes when there is none.
inline const pass_info& find_pass(std::string_view name) {
  std::string known;
  for (const auto& p : all_passes()) {
    if (p.name == name) return p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  throw error(error_category::usage, "there is no graph pass '" + std::string(name) + "'", "--passes",
              "name passes from: " + known);
}

/// "a,b,c" as pass names, each checked; "none" is the empty list and "default", alone or as an item,
/// default_passes(). A pass that must precede another is refused after it.
inline std::vector<std::string> parse_pass_list(std::string_view list) {
  if (list == "none") return {};
  std::vector<std::string> names;
  std::size_t from = 0;
  while (from <= list.size()) {
    const auto comma = list.find(',', from);
    const auto name = list.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from);
    if (name.empty())
      throw error(error_category::usage, "the pass list '" + std::string(list) + "' has an empty name", "--passes",
                  "separate pass names with single commas, e.g. --passes fold-constants,eliminate-dead-code");
    if (name == "default") {
      for (auto& d : default_passes()) names.push_back(std::move(d));
    } else {
      names.emplace_back(find_pass(name).name);
    }
    if (comma == std::string_view::npos) break;
    from = comma + 1;
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    const auto& pass = find_pass(names[i]);
    if (pass.before.empty()) continue;
    for (std::size_t j = 0; j < i; ++j)
      if (names[j] == pass.before)
        throw error(error_category::usage,
                    "pass '" + names[i] + "' comes after '" + names[j] + "' in '" + std::string(list) + "'", "--passes",
                    "name " + names[i] + " before " + names[j] + " (e.g. --passes " + names[i] + ",default): " +
                        names[j] + " would leave it nothing to match");
  }
  return names;
}

/// What one pass did: ops and tensors before and after it.
struct pass_report {
  std::string name;
  std::size_t ops_before = 0, ops_after = 0, tensors_before = 0, tensors_after = 0;
};

/// `g` after the passes `names`, in that order; `report`, when given, gets a line per pass.
inline graph optimize(const graph& g, std::span<const std::string> names, std::vector<pass_report>* report = nullptr) {
  graph out = g;
  for (const auto& name : names) {
    const auto& pass = find_pass(name);
    pass_report r{name, out.num_ops(), 0, out.num_tensors(), 0};
    out = pass.run(out);
    r.ops_after = out.num_ops();
    r.tensors_after = out.num_tensors();
    if (report) report->push_back(r);
  }
  return out;
}

}  // namespace ipu::passes
