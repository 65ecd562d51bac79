#pragma once
// One row of the op table: everything the library knows about an op except its host kernels
// (which need OpenBLAS and live in ops/kernels/, beside each family's rows in ops/families/): its
// shape rule, cost rule, flags and gradient rule.
#include <string_view>

#include "ipu/ops/cost_rules.hpp"
#include "ipu/ops/flags.hpp"
#include "ipu/ops/gradient_rules.hpp"
#include "ipu/ops/shape_rules.hpp"

namespace ipu {

/// A rule of a row, or none. Presence is a flag rather than a null test: a function's address is
/// not compared with null in constant expressions under the sanitizers' -fno-delete-null-pointer-checks.
template <class Fn>
struct op_rule {
  Fn fn = nullptr;
  bool present = false;
  constexpr op_rule() = default;
  constexpr op_rule(Fn f) noexcept : fn(f), present(true) {}  // NOLINT: a rule converts from its function
  constexpr explicit operator bool() const noexcept { return present; }
};

struct op_def {
  std::string_view domain;  // "" for ai.onnx
  std::string_view type;
  op_rule<infer_fn> shape;   // none: the outputs' infos depend on values or subgraphs and are given
  op_rule<op_cost_fn> cost;  // every row has one
  op_flags flags{};
  op_rule<gradient_fn> gradient{};  // none: an op on a weight's path to the loss cannot be trained through
};

}  // namespace ipu
