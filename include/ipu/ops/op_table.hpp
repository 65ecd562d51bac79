#pragma once
// The op table: one row per op the library implements (ops/op_def.hpp), kept by family in
// ops/families/ beside the family's host kernels in ops/kernels/. Shape inference (ops/infer.hpp),
// the cost model (ops/op_cost.hpp), the planners' view and in-place questions (flags_of, is_view)
// and the host registry (ops/all.hpp, which takes only kernels that have a row) all read it.
// Usable in constant expressions.
#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/ops/families/activation.hpp"
#include "ipu/ops/families/control_flow.hpp"
#include "ipu/ops/families/conv.hpp"
#include "ipu/ops/families/einsum.hpp"
#include "ipu/ops/families/elementwise.hpp"
#include "ipu/ops/families/gemm.hpp"
#include "ipu/ops/families/generators.hpp"
#include "ipu/ops/families/graphcore.hpp"
#include "ipu/ops/families/indexing.hpp"
#include "ipu/ops/families/linalg.hpp"
#include "ipu/ops/families/loss.hpp"
#include "ipu/ops/families/norm.hpp"
#include "ipu/ops/families/pool.hpp"
#include "ipu/ops/families/quantization.hpp"
#include "ipu/ops/families/random.hpp"
#include "ipu/ops/families/recurrent.hpp"
#include "ipu/ops/families/reduce.hpp"
#include "ipu/ops/families/resize.hpp"
#include "ipu/ops/families/shape_ops.hpp"
#include "ipu/ops/families/signal.hpp"
#include "ipu/ops/families/slice_ops.hpp"
#include "ipu/ops/families/softmax.hpp"
#include "ipu/ops/families/text.hpp"
#include "ipu/ops/families/topk.hpp"
#include "ipu/ops/families/training.hpp"
#include "ipu/ops/families/vision.hpp"
#include "ipu/ops/custom_store.hpp"
#include "ipu/ops/flags.hpp"
#include "ipu/ops/op_def.hpp"

namespace ipu {

namespace detail::op_table {
template <std::size_t... N>
constexpr auto join(const op_def (&... family)[N]) {
  std::array<op_def, (N + ...)> all{};
  std::size_t at = 0;
  ((std::copy(family, family + N, all.begin() + static_cast<std::ptrdiff_t>(at)), at += N), ...);
  return all;
}

inline constexpr auto rows = join(op_families::activation, op_families::elementwise, op_families::softmax, op_families::gemm, op_families::linalg, op_families::conv, op_families::pool, op_families::norm, op_families::shape_ops, op_families::slice_ops, op_families::generators, op_families::indexing, op_families::reduce, op_families::topk, op_families::einsum, op_families::resize, op_families::vision, op_families::recurrent, op_families::loss, op_families::control_flow, op_families::training, op_families::quantization, op_families::graphcore, op_families::signal, op_families::text, op_families::random);

constexpr bool unique_rows() {
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = i + 1; j < rows.size(); ++j)
      if (rows[i].domain == rows[j].domain && rows[i].type == rows[j].type) return false;
  return true;
}
static_assert(unique_rows(), "ipu: an op has two rows in the op table; keep one, in its family's file");

#if defined(IPU_SEPARATE_KERNELS)
// The rows point at every op's shape, cost and gradient rules, so a translation unit that reads
// them at run time emits all of those functions. Under separate compilation (ops/all.hpp) run-time
// readers reach the rows through this function instead, defined once beside the kernels; constant
// expressions still read `rows`.
std::span<const op_def> runtime_rows() noexcept;
#endif
}  // namespace detail::op_table

/// Every row of the op table, family by family.
constexpr std::span<const op_def> op_table() noexcept {
#if defined(IPU_SEPARATE_KERNELS)
  if (!std::is_constant_evaluated()) return detail::op_table::runtime_rows();
#endif
  return detail::op_table::rows;
}

/// Returned by op_def_index for an op the table has no row for.
inline constexpr std::size_t no_op_def = static_cast<std::size_t>(-1);

/// The index of (domain, type)'s row ("ai.onnx" is the default domain ""), for op_row_at, or
/// no_op_def. Below op_table().size() it is the op table's; at run time, past it, a custom op's
/// (ops/custom_ops.hpp). (Indices rather than pointers are compared in constant expressions.)
constexpr std::size_t op_def_index(std::string_view domain, std::string_view type) noexcept {
  if (domain == "ai.onnx") domain = "";
  const auto rows = op_table();
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].domain == domain && rows[i].type == type) return i;
  if (!std::is_constant_evaluated())
    if (const auto c = ops::detail::custom::index_of(domain, type); c != ops::detail::custom::none) return rows.size() + c;
  return no_op_def;
}

/// The row at `i`, an index op_def_index returned (not no_op_def).
constexpr const op_def& op_row_at(std::size_t i) noexcept {
  const auto rows = op_table();
  if (std::is_constant_evaluated() || i < rows.size()) return rows[i];
  return ops::detail::custom::at(i - rows.size()).def;
}

/// The row of (domain, type), or nullptr.
constexpr const op_def* find_op_def(std::string_view domain, std::string_view type) noexcept {
  const auto i = op_def_index(domain, type);
  return i == no_op_def ? nullptr : &op_row_at(i);
}

/// The flags of (domain, type); none for an op the table does not list.
constexpr op_flags flags_of(std::string_view domain, std::string_view type) noexcept {
  const auto i = op_def_index(domain, type);
  return i == no_op_def ? op_flags{} : op_row_at(i).flags;
}

/// Whether `op` of `g` is a view: output 0 shares input 0's bytes and nothing runs. Dropout is one
/// in inference only (training_mode absent or a constant false) and without its mask output.
constexpr bool is_view(const graph& g, const op_node& op) {
  if (!flags_of(op.domain, op.type).view) return false;
  if (op.outputs.empty() || op.inputs.empty() || op.inputs[0] == no_tensor) return false;
  return op.type != "Dropout" || dropout_is_identity(g, op);
}

/// Refuses a STRING input or output of an op whose kernel does not take strings (ops/flags.hpp):
/// its elements are addresses, which other kernels would read as numbers. Ops the table does not
/// list (custom ops) declare their own types and are not checked.
constexpr void check_string_operands(const graph& g, const op_node& op, const std::string& where) {
  const auto i = op_def_index(op.domain, op.type);
  if (i == no_op_def || op_row_at(i).flags.strings || op_row_at(i).flags.view) return;
  auto refuse = [&](tensor_id t) {
    if (t != no_tensor && g.tensor(t).info.type == data_type::STRING)
      throw error(error_category::graph,
                  "op " + graph::describe(op) + " is given STRING tensor '" + g.tensor(t).name + "', which it does not take",
                  where,
                  "strings go through Cast, CastLike, StringNormalizer, TfIdfVectorizer and the ops that move elements (Identity, "
                  "Reshape, Transpose, Gather, Concat, Split, Slice...); cast them to numbers first");
  };
  for (auto t : op.inputs) refuse(t);
  for (auto t : op.outputs) refuse(t);
}

}  // namespace ipu
