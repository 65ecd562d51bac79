#pragma once
// The shape and type rules of the op table (ops/op_table.hpp), usable in constant expressions.
//
// Each rule takes what is known about an op's inputs (type, shape and, for constants, contents)
// plus its attributes and returns the infos of its outputs; a mismatch is an `ipu::error` of
// category `shape` that names the op and the shapes involved. Rules read the attribute and input
// forms of every opset they cover (Squeeze axes as attribute or input, ...), so the opset matters
// only where ONNX changed an output (BatchNormalization's extra outputs, uneven Split).
// Which op uses which rule is said once, in the op families' rows (ops/families/).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/data_type.hpp"
#include "ipu/error.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/graph/topological_order.hpp"
#include "ipu/ops/fused_activation.hpp"
#include "ipu/ops/nchwc_blocks.hpp"
#include "ipu/tensor_info.hpp"

namespace ipu {

/// What inference knows about one op input.
struct infer_input {
  const tensor_info* info = nullptr;  // nullptr: an omitted optional input
  const byte_buffer* data = nullptr;  // the contents when known (constants, weights), else nullptr
};

/// The numpy broadcast of two shapes, or nullopt when they are incompatible.
constexpr std::optional<shape> broadcast_shapes(const shape& a, const shape& b) {
  const auto r = std::max(a.rank(), b.rank());
  std::vector<shape::dim_type> out(r, 1);
  for (std::size_t i = 0; i < r; ++i) {
    const auto x = i < a.rank() ? a[a.rank() - 1 - i] : 1;
    const auto y = i < b.rank() ? b[b.rank() - 1 - i] : 1;
    if (x != y && x != 1 && y != 1) return std::nullopt;
    out[r - 1 - i] = x == 1 ? y : x;
  }
  return shape(std::move(out));
}

/// True when `from` broadcasts to exactly `to` (ONNX's unidirectional broadcasting).
constexpr bool broadcasts_to(const shape& from, const shape& to) {
  if (from.rank() > to.rank()) return false;
  for (std::size_t i = 0; i < from.rank(); ++i) {
    const auto f = from[from.rank() - 1 - i];
    if (f != 1 && f != to[to.rank() - 1 - i]) return false;
  }
  return true;
}

/// One op, as seen by an inference rule: attributes, inputs and how many outputs are wanted.
class infer_context {
 public:
  constexpr infer_context(const op_node& op, std::span<const infer_input> inputs, std::size_t num_outputs)
      : op_(&op), inputs_(inputs), num_outputs_(num_outputs) {}

  [[nodiscard]] constexpr const op_node& op() const noexcept { return *op_; }
  /// The op's opset version; 0 (unknown) reads as the newest form.
  [[nodiscard]] constexpr std::int64_t opset() const noexcept { return op_->opset ? op_->opset : 1000; }
  [[nodiscard]] constexpr std::size_t num_outputs() const noexcept { return num_outputs_; }
  [[nodiscard]] constexpr std::size_t num_inputs() const noexcept { return inputs_.size(); }
  [[nodiscard]] constexpr std::span<const infer_input> inputs() const noexcept { return inputs_; }
  [[nodiscard]] constexpr bool has_input(std::size_t i) const noexcept {
    return i < inputs_.size() && inputs_[i].info != nullptr;
  }

  /// Input `i`, which the op requires.
  [[nodiscard]] constexpr const tensor_info& input(std::size_t i) const {
    if (!has_input(i))
      throw fail("required input #" + std::to_string(i) + " is missing (" + std::to_string(inputs_.size()) +
                     " given)",
                 "connect the input; see the ONNX operator specification");
    return *inputs_[i].info;
  }
  [[nodiscard]] constexpr const shape& in_shape(std::size_t i) const { return input(i).shape; }
  [[nodiscard]] constexpr data_type in_type(std::size_t i) const { return input(i).type; }
  [[nodiscard]] constexpr bool has_value(std::size_t i) const noexcept {
    return has_input(i) && inputs_[i].data != nullptr;
  }
  /// Whether the rule asked for the contents of an input that is not known (see int_values): its
  /// failure then says nothing about the op, only that the graph computes the input at run time.
  [[nodiscard]] constexpr bool needed_unknown_value() const noexcept { return needed_unknown_value_; }

  /// The contents of integer input `i` (a shape, axes, pads...), which must be known.
  [[nodiscard]] constexpr std::vector<std::int64_t> int_values(std::size_t i, std::string_view what) const {
    const auto& info = input(i);
    if (!has_value(i)) {
      needed_unknown_value_ = true;
      throw fail("input #" + std::to_string(i) + " (" + std::string(what) +
                     ") must be a constant or initializer for its output shape to be known",
                 "compute it from constants, or fold it before building the graph");
    }
    const auto& d = *inputs_[i].data;
    const auto n = static_cast<std::size_t>(info.num_elements());
    if (d.size() != info.num_bytes())
      throw fail("input #" + std::to_string(i) + " (" + std::string(what) + ") holds " + std::to_string(d.size()) +
                 " bytes but " + to_string(info) + " needs " + std::to_string(info.num_bytes()));
    std::vector<std::int64_t> out(n);
    for (std::size_t k = 0; k < n; ++k) {
      switch (info.type) {
        case data_type::S64: out[k] = d.load<std::int64_t>(k); break;
        case data_type::S32: out[k] = d.load<std::int32_t>(k); break;
        default:
          throw fail("input #" + std::to_string(i) + " (" + std::string(what) + ") is " +
                         std::string(to_string(info.type)) + ", not an integer tensor",
                     "ONNX takes int64 (or int32) here");
      }
    }
    return out;
  }

  // Attributes with defaults; a present attribute of the wrong kind is an error.
  [[nodiscard]] constexpr bool has_attr(std::string_view name) const noexcept {
    return op_->find_attribute(name) != nullptr;
  }
  [[nodiscard]] constexpr std::int64_t attr_int(std::string_view name, std::int64_t fallback) const {
    return get<std::int64_t>(name, fallback);
  }
  [[nodiscard]] constexpr float attr_float(std::string_view name, float fallback) const {
    return get<float>(name, fallback);
  }
  [[nodiscard]] constexpr std::string attr_string(std::string_view name, std::string_view fallback = {}) const {
    if (const attribute* a = op_->find_attribute(name)) return *as<std::string>(*a);
    return std::string(fallback);
  }
  [[nodiscard]] constexpr std::vector<std::int64_t> attr_ints(std::string_view name,
                                                              std::vector<std::int64_t> fallback = {}) const {
    if (const attribute* a = op_->find_attribute(name)) return *as<std::vector<std::int64_t>>(*a);
    return fallback;
  }
  [[nodiscard]] constexpr std::vector<float> attr_floats(std::string_view name) const {
    if (const attribute* a = op_->find_attribute(name)) return *as<std::vector<float>>(*a);
    return {};
  }
  [[nodiscard]] constexpr std::vector<std::string> attr_strings(std::string_view name) const {
    if (const attribute* a = op_->find_attribute(name)) return *as<std::vector<std::string>>(*a);
    return {};
  }
  [[nodiscard]] constexpr const constant_tensor* attr_tensor(std::string_view name) const {
    if (const attribute* a = op_->find_attribute(name)) return as<constant_tensor>(*a);
    return nullptr;
  }

  /// Maps `axis` (negative counts from the back) into [0, rank), naming the op when out of range.
  [[nodiscard]] constexpr std::size_t axis(std::int64_t a, std::size_t rank, std::string_view what = "axis") const {
    const auto r = static_cast<std::int64_t>(rank);
    if (a < -r || a >= r)
      throw fail(std::string(what) + " " + std::to_string(a) + " is out of range for rank " + std::to_string(r) +
                     " (inputs " + describe_inputs() + ")",
                 "use an axis in [-rank, rank)");
    return static_cast<std::size_t>(a < 0 ? a + r : a);
  }

  /// An error about this op: category `shape`, located at the op.
  [[nodiscard]] error fail(const std::string& what, const std::string& fix = {}) const {
    return error(error_category::shape, what, "op " + graph::describe(*op_), fix);
  }
  /// "F32[2,3], (none), S64[2]": the inputs, for error messages.
  [[nodiscard]] std::string describe_inputs() const {
    std::string s;
    for (std::size_t i = 0; i < inputs_.size(); ++i) {
      if (i) s += ", ";
      s += inputs_[i].info ? to_string(*inputs_[i].info) : std::string("(none)");
    }
    return s;
  }

 private:
  template <class T>
  constexpr const T* as(const attribute& a) const {
    if (const T* v = std::get_if<T>(&a.value)) return v;
    throw error(error_category::graph,
                "attribute '" + a.name + "' is " + std::string(to_string(a.kind())) + ", not the kind expected",
                "op " + graph::describe(*op_), "check the op against the ONNX operator specification");
  }
  template <class T>
  constexpr T get(std::string_view name, T fallback) const {
    if (const attribute* a = op_->find_attribute(name)) return *as<T>(*a);
    return fallback;
  }

  const op_node* op_;
  std::span<const infer_input> inputs_;
  std::size_t num_outputs_;
  mutable bool needed_unknown_value_ = false;
};

/// An inference rule: the infos of every output the op can produce (callers keep the first n).
using infer_fn = std::vector<tensor_info> (*)(const infer_context&);

namespace detail::infer {

using dims = std::vector<shape::dim_type>;

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + ((a % b != 0) && ((a < 0) == (b < 0))); }
constexpr std::int64_t floor_div(std::int64_t a, std::int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

constexpr std::int64_t product(const dims& d, std::size_t begin, std::size_t end) {
  std::int64_t n = 1;
  for (std::size_t i = begin; i < end; ++i) n *= d[i];
  return n;
}

inline std::string list(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(v[i]);  // appended, not "," + ...: GCC 12 -Wrestrict misfires on that at -O3
  }
  s += ']';
  return s;
}

constexpr void same_type(const infer_context& c, std::size_t i, std::size_t j) {
  if (c.in_type(i) != c.in_type(j))
    throw c.fail("inputs #" + std::to_string(i) + " and #" + std::to_string(j) + " have different element types (" +
                     c.describe_inputs() + ")",
                 "cast one of them so both have the same type");
}

constexpr void need_rank(const infer_context& c, std::size_t i, std::size_t min_rank, std::string_view what) {
  if (c.in_shape(i).rank() < min_rank)
    throw c.fail(std::string(what) + " must have rank >= " + std::to_string(min_rank) + ", got " +
                 to_string(c.input(i)));
}

constexpr void need_float(const infer_context& c, std::size_t i) {
  if (!is_floating_point(c.in_type(i)))
    throw c.fail("input #" + std::to_string(i) + " is " + std::string(to_string(c.in_type(i))) +
                     ", but this op needs a floating-point tensor",
                 "cast the input to a float type first");
}

constexpr tensor_info same_as_input(const infer_context& c, std::size_t i = 0) { return c.input(i); }

/// Refuses attributes other than `known` (a misspelt one would otherwise be ignored).
constexpr void only_attributes(const infer_context& c, std::initializer_list<std::string_view> known) {
  for (const auto& a : c.op().attributes) {
    if (a.name.starts_with("__")) continue;  // annotations
    if (std::find(known.begin(), known.end(), std::string_view(a.name)) == known.end()) {
      std::string list;
      for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      throw c.fail("attribute '" + a.name + "' is not one of " + c.op().type + "'s",
                   list.empty() ? std::string("remove it") : "use only " + list);
    }
  }
}

// --- element-wise ------------------------------------------------------------------------------
constexpr std::vector<tensor_info> unary(const infer_context& c) { return {same_as_input(c)}; }

constexpr std::vector<tensor_info> unary_float(const infer_context& c) {
  need_float(c, 0);
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> unary_bool(const infer_context& c) {
  if (c.in_type(0) != data_type::BOOL)
    throw c.fail("input is " + std::string(to_string(c.in_type(0))) + ", not BOOL", "compare or cast to BOOL first");
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> unary_to_bool(const infer_context& c) {
  return {tensor_info{data_type::BOOL, c.in_shape(0)}};
}

/// Multidirectional broadcast of every given input.
constexpr shape broadcast_all(const infer_context& c, std::size_t first = 0) {
  shape s = c.in_shape(first);
  for (std::size_t i = first + 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    auto b = broadcast_shapes(s, c.in_shape(i));
    if (!b)
      throw c.fail("shapes " + c.describe_inputs() + " cannot be broadcast together",
                   "numpy broadcasting needs trailing dimensions that are equal or 1");
    s = *std::move(b);
  }
  return s;
}

/// Element-wise ops whose inputs share one type: Add, Mul, Max, Sum...
constexpr std::vector<tensor_info> broadcast_same_type(const infer_context& c) {
  (void)c.input(0);
  for (std::size_t i = 1; i < c.num_inputs(); ++i) same_type(c, 0, i);
  return {tensor_info{c.in_type(0), broadcast_all(c)}};
}

constexpr std::vector<tensor_info> compare(const infer_context& c) {
  (void)c.input(1);
  same_type(c, 0, 1);
  return {tensor_info{data_type::BOOL, broadcast_all(c)}};
}

constexpr std::vector<tensor_info> logical(const infer_context& c) {
  for (std::size_t i = 0; i < 2; ++i)
    if (c.in_type(i) != data_type::BOOL)
      throw c.fail("input #" + std::to_string(i) + " is " + std::string(to_string(c.in_type(i))) + ", not BOOL");
  return {tensor_info{data_type::BOOL, broadcast_all(c)}};
}

/// Pow: the base's type; the exponent may be any numeric type.
constexpr std::vector<tensor_info> pow(const infer_context& c) {
  (void)c.input(1);
  return {tensor_info{c.in_type(0), broadcast_all(c)}};
}

constexpr std::vector<tensor_info> where(const infer_context& c) {
  if (c.in_type(0) != data_type::BOOL)
    throw c.fail("condition is " + std::string(to_string(c.in_type(0))) + ", not BOOL");
  (void)c.input(2);
  same_type(c, 1, 2);
  return {tensor_info{c.in_type(1), broadcast_all(c)}};
}

/// PRelu: the slope broadcasts to X, which keeps its shape.
constexpr std::vector<tensor_info> prelu(const infer_context& c) {
  same_type(c, 0, 1);
  if (!broadcasts_to(c.in_shape(1), c.in_shape(0)))
    throw c.fail("slope " + to_string(c.input(1)) + " does not broadcast to X " + to_string(c.input(0)));
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> clip(const infer_context& c) {
  for (std::size_t i = 1; i < 3; ++i)
    if (c.has_input(i)) {
      same_type(c, 0, i);
      if (c.in_shape(i).num_elements() != 1 || c.in_shape(i).rank() > 1)
        throw c.fail("min/max must be scalars, got " + to_string(c.input(i)));
    }
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> dropout(const infer_context& c) {
  return {same_as_input(c), tensor_info{data_type::BOOL, c.in_shape(0)}};
}

/// ipu::DropoutMask(data, ratio, seed): a BOOL mask of data's shape; ratio a floating-point scalar,
/// seed U64[3] (seed, step, micro-batch).
constexpr std::vector<tensor_info> dropout_mask(const infer_context& c) {
  const auto& r = c.input(1);
  if (!is_floating_point(r.type) || r.shape.num_elements() != 1 || r.shape.rank() > 1)
    throw c.fail("the ratio is " + to_string(r) + ", not a floating-point scalar", "give the ratio as one float");
  if (c.input(2) != tensor_info{data_type::U64, shape{3}})
    throw c.fail("the seed is " + to_string(c.input(2)) + ", not U64[3] (seed, step, micro-batch)");
  return {tensor_info{data_type::BOOL, c.in_shape(0)}};
}

constexpr std::vector<tensor_info> softmax(const infer_context& c) {
  need_float(c, 0);
  const auto& s = c.in_shape(0);
  (void)c.axis(c.attr_int("axis", c.opset() >= 13 ? -1 : 1), s.rank());
  return {same_as_input(c)};
}

/// The output is the input's shape whatever the axis; a known axis is checked, an unknown one is
/// left to run time (as ONNX does).
constexpr std::vector<tensor_info> cumsum(const infer_context& c) {
  if (c.has_value(1)) (void)c.axis(c.int_values(1, "axis").at(0), c.in_shape(0).rank());
  return {same_as_input(c)};
}

constexpr std::vector<tensor_info> cast(const infer_context& c) {
  const auto to = c.attr_int("to", 0);
  const auto t = data_type_from_onnx_code(to);
  if (!t) throw c.fail("cannot cast to ONNX data type " + std::to_string(to), "the IPU has no such element type");
  return {tensor_info{*t, c.in_shape(0)}};
}

constexpr std::vector<tensor_info> cast_like(const infer_context& c) {
  return {tensor_info{c.in_type(1), c.in_shape(0)}};
}

// --- linear algebra ------------------------------------------------------------------------------
constexpr std::vector<tensor_info> matmul(const infer_context& c) {
  const auto& a = c.in_shape(0);
  const auto& b = c.in_shape(1);
  same_type(c, 0, 1);
  if (a.rank() == 0 || b.rank() == 0) throw c.fail("cannot multiply scalars: " + c.describe_inputs(), "use Mul");
  // numpy: a 1-D left operand is a row vector, a 1-D right operand a column vector; the added
  // dimension is removed from the result.
  dims da = a.dims(), db = b.dims();
  if (a.rank() == 1) da = dims{1, da.front()};  // not insert(): GCC 12 warns of a null dereference there
  if (b.rank() == 1) db.push_back(1);
  const auto k1 = da.back(), k2 = db[db.size() - 2];
  if (k1 != k2)
    throw c.fail("cannot multiply " + c.describe_inputs() + ": inner dimensions " + std::to_string(k1) + " and " +
                     std::to_string(k2) + " differ",
                 "the last dimension of A must equal the second-to-last of B");
  const auto batch = broadcast_shapes(shape(dims(da.begin(), da.end() - 2)), shape(dims(db.begin(), db.end() - 2)));
  if (!batch)
    throw c.fail("batch dimensions of " + c.describe_inputs() + " cannot be broadcast together");
  dims out = batch->dims();
  if (a.rank() != 1) out.push_back(da[da.size() - 2]);
  if (b.rank() != 1) out.push_back(db.back());
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

constexpr std::vector<tensor_info> gemm(const infer_context& c) {
  const auto& a = c.in_shape(0);
  const auto& b = c.in_shape(1);
  same_type(c, 0, 1);
  if (a.rank() != 2 || b.rank() != 2)
    throw c.fail("A and B must be matrices, got " + c.describe_inputs(), "use MatMul for other ranks");
  const bool ta = c.attr_int("transA", 0) != 0, tb = c.attr_int("transB", 0) != 0;
  const auto m = ta ? a[1] : a[0], ka = ta ? a[0] : a[1];
  const auto kb = tb ? b[1] : b[0], n = tb ? b[0] : b[1];
  if (ka != kb)
    throw c.fail("cannot multiply " + c.describe_inputs() + " (transA=" + std::to_string(ta) + ", transB=" +
                     std::to_string(tb) + "): inner dimensions " + std::to_string(ka) + " and " + std::to_string(kb) +
                     " differ",
                 "check transA/transB against the weight layout");
  shape out{m, n};
  if (c.has_input(2)) {
    same_type(c, 0, 2);
    if (!broadcasts_to(c.in_shape(2), out))
      throw c.fail("C " + to_string(c.input(2)) + " does not broadcast to the product's shape " + to_string(out));
  }
  return {tensor_info{c.in_type(0), std::move(out)}};
}

// --- convolution and pooling ---------------------------------------------------------------------
/// Output sizes of a sliding window over spatial dims (Conv, pools), per ONNX's rules for pads,
/// strides, dilations and auto_pad.
struct window {
  dims kernel, strides, dilations, pads;
  std::string auto_pad;
  bool ceil_mode = false;
};

constexpr window read_window(const infer_context& c, std::size_t spatial, const dims& kernel) {
  window w;
  w.kernel = kernel;
  w.strides = c.attr_ints("strides", dims(spatial, 1));
  w.dilations = c.attr_ints("dilations", dims(spatial, 1));
  w.pads = c.attr_ints("pads", dims(2 * spatial, 0));
  w.auto_pad = c.attr_string("auto_pad", "NOTSET");
  w.ceil_mode = c.attr_int("ceil_mode", 0) != 0;
  // Every value, and every window's extent, is at most a shape's element bound (2^59), so the
  // window arithmetic that follows (padded sizes, output counts) stays inside int64.
  auto check = [&](const dims& v, std::size_t n, std::string_view name, std::int64_t min) {
    if (v.size() != n)
      throw c.fail(std::string(name) + " has " + std::to_string(v.size()) + " values but the input has " +
                       std::to_string(spatial) + " spatial dimensions (" + c.describe_inputs() + ")",
                   "give one value per spatial dimension (pads: begins then ends)");
    for (auto x : v)
      if (x < min || x > shape::max_elements)
        throw c.fail(std::string(name) + " " + list(v) + " must be >= " + std::to_string(min) + " and <= 2^59");
  };
  check(w.kernel, spatial, "kernel_shape", 1);
  check(w.strides, spatial, "strides", 1);
  check(w.dilations, spatial, "dilations", 1);
  check(w.pads, 2 * spatial, "pads", 0);
  std::int64_t taps = 1;
  for (std::size_t i = 0; i < spatial; ++i) {
    std::int64_t span = 0;
    if (__builtin_mul_overflow(w.kernel[i] - 1, w.dilations[i], &span) || span >= shape::max_elements)
      throw c.fail("kernel_shape " + list(w.kernel) + " with dilations " + list(w.dilations) +
                       " spans more than 2^59 elements on spatial dimension " + std::to_string(i),
                   "use a smaller kernel or dilation");
    if (__builtin_mul_overflow(taps, w.kernel[i], &taps) || taps > shape::max_elements)
      throw c.fail("kernel_shape " + list(w.kernel) + " has more than 2^59 taps", "use a smaller kernel");
  }
  if (w.auto_pad != "NOTSET" && w.auto_pad != "VALID" && w.auto_pad != "SAME_UPPER" && w.auto_pad != "SAME_LOWER")
    throw c.fail("auto_pad '" + w.auto_pad + "' is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  return w;
}

constexpr dims window_output(const infer_context& c, const dims& in, const window& w) {
  const auto n = in.size();
  dims out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto ek = (w.kernel[i] - 1) * w.dilations[i] + 1;  // effective kernel extent
    const auto s = w.strides[i];
    if (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") {
      out[i] = ceil_div(in[i], s);
      continue;
    }
    const auto padded = w.auto_pad == "VALID" ? in[i] : in[i] + w.pads[i] + w.pads[i + n];
    if (padded < ek)
      throw c.fail("the window (kernel " + list(w.kernel) + ", dilations " + list(w.dilations) + ") spans " +
                       std::to_string(ek) + " elements but spatial dimension " + std::to_string(i) + " of " +
                       c.describe_inputs() + " is only " + std::to_string(padded) + " with padding",
                   "use a smaller kernel or dilation, or pad the input");
    out[i] = (w.ceil_mode ? ceil_div(padded - ek, s) : floor_div(padded - ek, s)) + 1;
    // As PyTorch and ONNX Runtime: with ceil_mode the last window must start inside the input or
    // its leading padding.
    if (w.ceil_mode && w.auto_pad != "VALID" && (out[i] - 1) * s >= in[i] + w.pads[i]) --out[i];
  }
  return out;
}

constexpr std::vector<tensor_info> conv(const infer_context& c) {
  const auto& x = c.in_shape(0);
  const auto& wt = c.in_shape(1);
  same_type(c, 0, 1);
  need_rank(c, 0, 3, "X");
  if (wt.rank() != x.rank())
    throw c.fail("X " + to_string(c.input(0)) + " and W " + to_string(c.input(1)) + " differ in rank",
                 "W is [M, C/group, k1, ..., kn] for X [N, C, d1, ..., dn]");
  const auto spatial = x.rank() - 2;
  const auto group = c.attr_int("group", 1);
  if (group < 1) throw c.fail("group " + std::to_string(group) + " must be >= 1");
  if (x[1] != wt[1] * group)
    throw c.fail("X has " + std::to_string(x[1]) + " channels but W " + to_string(c.input(1)) + " with group " +
                     std::to_string(group) + " expects " + std::to_string(wt[1] * group),
                 "W's second dimension is input channels / group");
  if (wt[0] % group != 0)
    throw c.fail("W's " + std::to_string(wt[0]) + " output channels do not divide into " + std::to_string(group) +
                 " groups");
  const dims kernel(wt.dims().begin() + 2, wt.dims().end());
  if (c.has_attr("kernel_shape") && c.attr_ints("kernel_shape") != kernel)
    throw c.fail("kernel_shape " + list(c.attr_ints("kernel_shape")) + " disagrees with W " + to_string(c.input(1)));
  if (c.has_input(2)) {
    same_type(c, 0, 2);
    if (c.in_shape(2) != shape{wt[0]})
      throw c.fail("bias " + to_string(c.input(2)) + " must be [" + std::to_string(wt[0]) + "]");
  }
  const auto w = read_window(c, spatial, kernel);
  dims out{x[0], wt[0]};
  const auto sp = window_output(c, dims(x.dims().begin() + 2, x.dims().end()), w);
  out.insert(out.end(), sp.begin(), sp.end());
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

/// com.microsoft FusedConv(X, W, B, Z): Conv's shape; F32 as ONNX Runtime's, or F16 (a model
/// compiled at half precision); Z, when
/// given, of the output's shape; an activation the kernel applies, with its parameters.
constexpr std::vector<tensor_info> fused_conv(const infer_context& c) {
  auto out = conv(c);
  if (c.in_type(0) != data_type::F32 && c.in_type(0) != data_type::F16)
    throw c.fail("FusedConv takes F32 or F16, not " + std::string(to_string(c.in_type(0))),
                 "use Conv and the activation op for other types");
  if (c.has_input(3)) {
    same_type(c, 0, 3);
    if (c.in_shape(3) != out[0].shape)
      throw c.fail("Z " + to_string(c.input(3)) + " is not of the output's shape " + to_string(out[0].shape),
                   "give Z the convolution's output shape");
  }
  const auto activation = c.attr_string("activation");
  const auto params = c.attr_floats("activation_params").size();
  const auto known = find_fused_activation(activation);
  if (!known)
    throw c.fail("activation '" + activation + "' is not one FusedConv applies",
                 std::string(fused_activation_names_help));
  if (params != known->params)
    throw c.fail("activation '" + activation + "' takes " + std::to_string(known->params) +
                     " activation_params, not " + std::to_string(params),
                 std::string(fused_activation_params_help));
  return out;
}

// --- channel-blocked data (the nchwc-layout pass) ----------------------------------------------
/// The `block` attribute of ipu::ToNchwc, FromNchwc and NchwcConv: channels per block, 8 or 16.
constexpr std::int64_t nchwc_block(const infer_context& c) {
  const auto b = c.attr_int("block", 8);
  if (!is_nchwc_block(b)) throw c.fail("block " + std::to_string(b) + " is not 8 or 16", "give block 8 or 16");
  return b;
}
constexpr void need_nchwc_data(const infer_context& c, std::size_t i, std::string_view what) {
  if (c.in_type(i) != data_type::F32 && c.in_type(i) != data_type::F16)
    throw c.fail(std::string(what) + " is " + std::string(to_string(c.in_type(i))) + "; blocked layouts hold F32 or F16",
                 "leave other types in NCHW (the nchwc-layout pass does)");
  if (c.in_shape(i).rank() != 4)
    throw c.fail(std::string(what) + " " + to_string(c.input(i)) + " is not 4-D [N, C, H, W]",
                 "block 2-D image data only");
}

/// ipu::ToNchwc(X): X [N, C, H, W] (F32, or the F16 of a model compiled at half precision) with its channels in blocks, [N, ceil(C / block) * block, H,
/// W], the last block's unused channels zero.
constexpr std::vector<tensor_info> to_nchwc(const infer_context& c) {
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  const auto& x = c.in_shape(0);
  if (nchwc_padded_channels(x[1], b) < 0) throw c.fail("X " + to_string(c.input(0)) + " has too many channels to block");
  return {tensor_info{c.in_type(0), shape{x[0], nchwc_padded_channels(x[1], b), x[2], x[3]}}};
}

/// ipu::FromNchwc(X), attribute `channels` C: blocked X [N, ceil(C / block) * block, H, W] back to
/// [N, C, H, W].
constexpr std::vector<tensor_info> from_nchwc(const infer_context& c) {
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  const auto& x = c.in_shape(0);
  const auto channels = c.attr_int("channels", 0);
  if (channels < 1 || nchwc_padded_channels(channels, b) != x[1])
    throw c.fail("channels " + std::to_string(channels) + " do not fill X " + to_string(c.input(0)) + " in blocks of " +
                     std::to_string(b),
                 "give the channel count X had before ToNchwc");
  return {tensor_info{c.in_type(0), shape{x[0], channels, x[2], x[3]}}};
}

/// ipu::NchwcConv(X, W, B, Z): FusedConv on blocked X (and Z, and the output), W and B as Conv's;
/// an X of fewer channels than a block is read in NCHW, as it is.
/// The rule is FusedConv's on the unblocked shapes, whose channel counts W and group give.
constexpr std::vector<tensor_info> nchwc_conv(const infer_context& c) {
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  const auto& x = c.in_shape(0);
  const auto& wt = c.in_shape(1);
  const auto group = c.attr_int("group", 1);
  if (wt.rank() != 4 || group < 1 || group > x[1] || wt[1] < 1 || wt[1] > x[1] / group)
    throw c.fail("W " + to_string(c.input(1)) + " with group " + std::to_string(group) + " does not fit blocked X " +
                     to_string(c.input(0)),
                 "give W [M, C/group, kh, kw] and 1 <= group <= C");
  const auto channels = wt[1] * group;  // at most x[1]: no overflow
  // X is blocked, or, with fewer channels than a block (an RGB stem), NCHW as it is.
  if (nchwc_padded_channels(channels, b) != x[1] && !(channels == x[1] && channels < b))
    throw c.fail("blocked X " + to_string(c.input(0)) + " does not hold the " + std::to_string(channels) +
                     " channels W " + to_string(c.input(1)) + " and group " + std::to_string(group) + " read",
                 "block the convolution's input with ToNchwc of the same block");
  const tensor_info plain_x{c.in_type(0), shape{x[0], channels, x[2], x[3]}};
  std::vector<infer_input> plain(c.inputs().begin(), c.inputs().begin() + static_cast<std::ptrdiff_t>(std::min<std::size_t>(c.num_inputs(), 3)));
  plain[0].info = &plain_x;
  auto out = fused_conv(infer_context(c.op(), plain, 1));
  auto& y = out[0].shape;
  if (nchwc_padded_channels(y[1], b) < 0) throw c.fail("W " + to_string(c.input(1)) + " has too many channels to block");
  y = shape{y[0], nchwc_padded_channels(y[1], b), y[2], y[3]};
  if (c.has_input(3)) {
    same_type(c, 0, 3);
    if (c.in_shape(3) != y)
      throw c.fail("Z " + to_string(c.input(3)) + " is not of the blocked output's shape " + to_string(y),
                   "block Z as the output");
  }
  return out;
}

/// ipu::ConvWeightsGrad(dY, X), attributes of the Conv from X to Y (kernel_shape required): dW
/// [M, C/group, kernel...]; dY must be what that Conv makes of X.
constexpr std::vector<tensor_info> conv_weights_grad(const infer_context& c) {
  const auto& dy = c.in_shape(0);
  const auto& x = c.in_shape(1);
  same_type(c, 0, 1);
  need_float(c, 1);
  need_rank(c, 1, 3, "X");
  const auto spatial = x.rank() - 2;
  const auto kernel = c.attr_ints("kernel_shape");
  if (kernel.size() != spatial)
    throw c.fail("kernel_shape " + list(kernel) + " is not one size per spatial dimension of X " + to_string(c.input(1)),
                 "give the forward Conv's kernel_shape");
  const auto group = c.attr_int("group", 1);
  if (group < 1) throw c.fail("group " + std::to_string(group) + " must be >= 1");
  if (dy.rank() != x.rank() || dy[0] != x[0] || x[1] % group != 0 || dy[1] % group != 0)
    throw c.fail("dY " + to_string(c.input(0)) + " and X " + to_string(c.input(1)) + " do not fit a Conv of group " +
                     std::to_string(group),
                 "dY is the Conv's [N, M, ...] output gradient, X its [N, C, ...] input; C and M divisible by group");
  const auto w = read_window(c, spatial, dims(kernel.begin(), kernel.end()));
  const auto sp = window_output(c, dims(x.dims().begin() + 2, x.dims().end()), w);
  if (!std::equal(sp.begin(), sp.end(), dy.dims().begin() + 2, dy.dims().end()))
    throw c.fail("dY " + to_string(c.input(0)) + " is not the output of the Conv of X " + to_string(c.input(1)) +
                     " these attributes describe",
                 "give the forward Conv's kernel_shape, strides, dilations and pads");
  dims out{dy[1], x[1] / group};
  out.insert(out.end(), kernel.begin(), kernel.end());
  return {tensor_info{c.in_type(1), shape(std::move(out))}};
}

constexpr std::vector<tensor_info> conv_transpose(const infer_context& c) {
  const auto& x = c.in_shape(0);
  const auto& wt = c.in_shape(1);
  same_type(c, 0, 1);
  need_rank(c, 0, 3, "X");
  if (wt.rank() != x.rank())
    throw c.fail("X " + to_string(c.input(0)) + " and W " + to_string(c.input(1)) + " differ in rank");
  const auto spatial = x.rank() - 2;
  const auto group = c.attr_int("group", 1);
  if (group < 1) throw c.fail("group " + std::to_string(group) + " must be >= 1");
  if (x[1] != wt[0])
    throw c.fail("X has " + std::to_string(x[1]) + " channels but W " + to_string(c.input(1)) + " expects " +
                     std::to_string(wt[0]),
                 "ConvTranspose's W is [C, M/group, k1, ..., kn]");
  const auto m = wt[1] * group;
  const dims kernel(wt.dims().begin() + 2, wt.dims().end());
  auto w = read_window(c, spatial, kernel);
  const auto out_pad = c.attr_ints("output_padding", dims(spatial, 0));
  if (out_pad.size() != spatial) throw c.fail("output_padding " + list(out_pad) + " needs one value per spatial dim");
  for (auto p : out_pad)
    if (p < 0 || p > shape::max_elements)
      throw c.fail("output_padding " + list(out_pad) + " must be >= 0 and <= 2^59",
                   "output_padding adds that many elements at each spatial dimension's end");
  dims out{x[0], m};
  if (c.has_attr("output_shape")) {
    auto os = c.attr_ints("output_shape");
    if (os.size() == spatial + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != spatial) throw c.fail("output_shape " + list(os) + " needs one value per spatial dim");
    out.insert(out.end(), os.begin(), os.end());
  } else {
    for (std::size_t i = 0; i < spatial; ++i) {
      // read_window bounds the extent, pads and output_padding by 2^59; the stride's product
      // with the input can still overflow.
      const auto ek = (kernel[i] - 1) * w.dilations[i] + 1;
      std::int64_t full = 0;
      if (__builtin_mul_overflow(w.strides[i], x[i + 2] - 1, &full) ||
          __builtin_add_overflow(full, out_pad[i] + ek, &full) || full > shape::max_elements)
        throw c.fail("strides " + list(w.strides) + " on X " + to_string(c.input(0)) + " give spatial dimension " +
                         std::to_string(i) + " more than 2^59 elements",
                     "use a smaller stride or kernel");
      const auto d = (w.auto_pad == "SAME_UPPER" || w.auto_pad == "SAME_LOWER") ? x[i + 2] * w.strides[i]
                     : w.auto_pad == "VALID"                                 ? full
                                                                             : full - w.pads[i] - w.pads[i + spatial];
      if (d < 1) throw c.fail("output spatial dimension " + std::to_string(i) + " would be " + std::to_string(d));
      out.push_back(d);
    }
  }
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

constexpr std::vector<tensor_info> pool(const infer_context& c, bool with_indices) {
  const auto& x = c.in_shape(0);
  need_rank(c, 0, 3, "X");
  const auto spatial = x.rank() - 2;
  if (!c.has_attr("kernel_shape")) throw c.fail("attribute kernel_shape is required", "set kernel_shape");
  const auto w = read_window(c, spatial, c.attr_ints("kernel_shape"));
  dims out{x[0], x[1]};
  const auto sp = window_output(c, dims(x.dims().begin() + 2, x.dims().end()), w);
  out.insert(out.end(), sp.begin(), sp.end());
  std::vector<tensor_info> r{tensor_info{c.in_type(0), shape(out)}};
  if (with_indices) r.push_back(tensor_info{data_type::S64, shape(std::move(out))});
  return r;
}
constexpr std::vector<tensor_info> max_pool(const infer_context& c) { return pool(c, true); }
constexpr std::vector<tensor_info> average_pool(const infer_context& c) { return pool(c, false); }

/// ipu::NchwcMaxPool / NchwcAveragePool(X): MaxPool (without Indices) / AveragePool over the 2-D
/// windows of blocked X [N, Cp, H, W], which holds `channels` channels in blocks of `block`.
constexpr std::vector<tensor_info> nchwc_pool(const infer_context& c) {
  if (c.op().type == "NchwcMaxPool")
    only_attributes(c, {"block", "channels", "kernel_shape", "auto_pad", "pads", "strides", "dilations", "ceil_mode"});
  else
    only_attributes(c, {"block", "channels", "kernel_shape", "auto_pad", "pads", "strides", "dilations", "ceil_mode",
                        "count_include_pad"});
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  const auto channels = c.attr_int("channels", 0);
  if (channels < 1 || nchwc_padded_channels(channels, b) != c.in_shape(0)[1])
    throw c.fail("channels " + std::to_string(channels) + " do not fill blocked X " + to_string(c.input(0)) +
                     " in blocks of " + std::to_string(b),
                 "give the channel count X had before ToNchwc");
  return pool(c, false);
}

constexpr std::vector<tensor_info> global_pool(const infer_context& c) {
  need_rank(c, 0, 3, "X");
  dims out = c.in_shape(0).dims();
  for (std::size_t i = 2; i < out.size(); ++i) out[i] = 1;
  return {tensor_info{c.in_type(0), shape(std::move(out))}};
}

// --- normalisation -------------------------------------------------------------------------------
constexpr std::vector<tensor_info> batch_norm(const infer_context& c) {
  need_rank(c, 0, 2, "X");
  const auto ch = c.in_shape(0)[1];
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (std::size_t i = 1; i < 5; ++i)
    if (c.in_shape(i) != shape{ch})
      throw c.fail(std::string(names[i]) + " " + to_string(c.input(i)) + " must be [" + std::to_string(ch) +
                       "] for X " + to_string(c.input(0)),
                   "per-channel parameters have one value per channel (dimension 1 of X)");
  // Training outputs: running mean and variance (opset 14+); opsets 9-13 add saved mean and
  // saved inverse standard deviation.
  std::vector<tensor_info> r{same_as_input(c)};
  const std::size_t extra = c.opset() >= 14 ? 2 : 4;
  for (std::size_t i = 0; i < extra; ++i) r.push_back(tensor_info{c.in_type(3), shape{ch}});
  return r;
}

/// ipu::NchwcBatchNormalization(X, scale, B, input_mean, input_var): inference BatchNormalization
/// of blocked X [N, Cp, H, W], whose C channels the per-channel operands [C] give.
constexpr std::vector<tensor_info> nchwc_batch_norm(const infer_context& c) {
  only_attributes(c, {"block", "epsilon"});
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  const auto ch = c.in_shape(1).rank() == 1 ? c.in_shape(1)[0] : -1;
  const char* names[] = {"", "scale", "B", "input_mean", "input_var"};
  for (std::size_t i = 1; i < 5; ++i)
    if (c.in_shape(i) != shape{ch} || ch < 1)
      throw c.fail(std::string(names[i]) + " " + to_string(c.input(i)) + " is not [C] as scale " +
                       to_string(c.input(1)) + " is",
                   "give one value per channel in each per-channel operand");
  if (nchwc_padded_channels(ch, b) != c.in_shape(0)[1])
    throw c.fail("blocked X " + to_string(c.input(0)) + " does not hold the " + std::to_string(ch) +
                     " channels of scale " + to_string(c.input(1)) + " in blocks of " + std::to_string(b),
                 "block the normalised data with ToNchwc of the same block");
  return {same_as_input(c)};
}

/// ipu::NchwcScale(X, S): blocked X [N, Cp, H, W] times S [N or 1, C, 1, 1] (NCHW), X's type.
constexpr std::vector<tensor_info> nchwc_scale(const infer_context& c) {
  only_attributes(c, {"block"});
  const auto b = nchwc_block(c);
  need_nchwc_data(c, 0, "X");
  same_type(c, 0, 1);
  const auto& x = c.in_shape(0);
  const auto& s = c.in_shape(1);
  if (s.rank() != 4 || (s[0] != 1 && s[0] != x[0]) || s[2] != 1 || s[3] != 1 || s[1] < 1 ||
      nchwc_padded_channels(s[1], b) != x[1])
    throw c.fail("S " + to_string(c.input(1)) + " is not one factor per image (or one for all) and channel of blocked X " +
                     to_string(c.input(0)),
                 "give S [N or 1, C, 1, 1], C the channels X had before ToNchwc");
  return {same_as_input(c)};
}

/// Per-channel operands `first`..`last` of a batch normalisation over X (input `x`): [C], X's type.
constexpr void need_per_channel(const infer_context& c, std::size_t x, std::size_t first, std::size_t last,
                                const char* const* names) {
  const auto ch = c.in_shape(x)[1];
  for (std::size_t i = first; i <= last; ++i) {
    same_type(c, x, i);
    if (c.in_shape(i) != shape{ch})
      throw c.fail(std::string(names[i]) + " " + to_string(c.input(i)) + " must be [" + std::to_string(ch) + "] for X " +
                       to_string(c.input(x)),
                   "per-channel operands have one value per channel (dimension 1 of X)");
  }
}
/// ipu::BatchNormalizationTraining(X, scale, B): Y like X, then the batch's mean and biased
/// variance per channel, in X's type.
constexpr std::vector<tensor_info> batch_norm_training(const infer_context& c) {
  need_float(c, 0);
  need_rank(c, 0, 2, "X");
  const char* names[] = {"X", "scale", "B"};
  need_per_channel(c, 0, 1, 2, names);
  const tensor_info stat{c.in_type(0), shape{c.in_shape(0)[1]}};
  return {same_as_input(c), stat, stat};
}
/// ipu::BatchNormalizationTrainingGrad(dY, X, scale, mean, var): dX like X, then dScale and dB per
/// channel.
constexpr std::vector<tensor_info> batch_norm_training_grad(const infer_context& c) {
  need_float(c, 1);
  need_rank(c, 1, 2, "X");
  if (c.input(0) != c.input(1))
    throw c.fail("dY " + to_string(c.input(0)) + " is not like X " + to_string(c.input(1)),
                 "give the gradient of the forward op's Y");
  const char* names[] = {"dY", "X", "scale", "mean", "var"};
  need_per_channel(c, 1, 2, 4, names);
  const tensor_info stat{c.in_type(1), shape{c.in_shape(1)[1]}};
  return {c.input(1), stat, stat};
}

constexpr std::vector<tensor_info> layer_norm(const infer_context& c) {
  need_float(c, 0);
  const auto& x = c.in_shape(0);
  const auto a = c.axis(c.attr_int("axis", -1), x.rank());
  const shape normalized(dims(x.dims().begin() + static_cast<std::ptrdiff_t>(a), x.dims().end()));
  for (std::size_t i = 1; i < 3; ++i)
    if (c.has_input(i) && !broadcasts_to(c.in_shape(i), normalized))
      throw c.fail(std::string(i == 1 ? "scale " : "bias ") + to_string(c.input(i)) +
                       " does not broadcast to the normalised shape " + to_string(normalized) + " of X " +
                       to_string(c.input(0)),
                   "scale and bias cover the dimensions from `axis` on");
  dims stats = x.dims();
  for (std::size_t i = a; i < stats.size(); ++i) stats[i] = 1;
  const auto stash = data_type_from_onnx_code(c.attr_int("stash_type", 1)).value_or(data_type::F32);
  return {same_as_input(c), tensor_info{stash, shape(stats)}, tensor_info{stash, shape(stats)}};
}

/// ipu::LayerNormalizationGrad(dY, X, Scale, [Mean], [InvStdDev]), attribute axis: dX like X, then
/// dScale and dB like Scale, which spans the normalised axes exactly. Mean and InvStdDev, when
/// given, are the forward op's: X's shape with the normalised axes 1, any float type.
constexpr std::vector<tensor_info> layer_norm_grad(const infer_context& c) {
  need_float(c, 1);
  if (c.input(0) != c.input(1))
    throw c.fail("dY " + to_string(c.input(0)) + " is not like X " + to_string(c.input(1)),
                 "give the gradient of the forward op's Y");
  const auto& x = c.in_shape(1);
  const auto a = c.axis(c.attr_int("axis", -1), x.rank());
  const shape normalized(dims(x.dims().begin() + static_cast<std::ptrdiff_t>(a), x.dims().end()));
  same_type(c, 1, 2);
  if (c.in_shape(2) != normalized)
    throw c.fail("Scale " + to_string(c.input(2)) + " is not the normalised shape " + to_string(normalized) + " of X " +
                     to_string(c.input(1)),
                 "give Scale spanning the dimensions from `axis` on (broadcast Scales take the op-by-op gradient)");
  dims stats = x.dims();
  for (std::size_t i = a; i < stats.size(); ++i) stats[i] = 1;
  for (std::size_t i = 3; i < 5; ++i) {
    if (!c.has_input(i)) continue;
    need_float(c, i);
    if (c.in_shape(i) != shape(stats))
      throw c.fail(std::string(i == 3 ? "Mean " : "InvStdDev ") + to_string(c.input(i)) + " is not " +
                       to_string(shape(stats)) + " for X " + to_string(c.input(1)),
                   "give the forward LayerNormalization's statistics outputs, or leave them out");
  }
  if (c.has_input(3) != c.has_input(4))
    throw c.fail("only one of Mean and InvStdDev is given", "give both, or neither (the op then computes them)");
  return {c.input(1), c.input(2), c.input(2)};
}

constexpr std::vector<tensor_info> channel_norm(const infer_context& c) {  // InstanceNormalization
  need_rank(c, 0, 3, "X");
  const auto ch = c.in_shape(0)[1];
  for (std::size_t i = 1; i < 3; ++i)
    if (c.in_shape(i) != shape{ch})
      throw c.fail("scale and B must be [" + std::to_string(ch) + "], got " + c.describe_inputs());
  return {same_as_input(c)};
}

// --- shape manipulation -------------------------------------------------------------------------
constexpr std::vector<tensor_info> reshape(const infer_context& c) {
  const auto& x = c.input(0);
  const auto target = c.int_values(1, "shape");
  const bool allow_zero = c.attr_int("allowzero", 0) != 0;
  dims out(target.size());
  std::optional<std::size_t> infer_at;
  for (std::size_t i = 0; i < target.size(); ++i) {
    const auto v = target[i];
    if (v == -1) {
      if (infer_at)
        throw c.fail("shape " + list(target) + " has more than one -1", "let at most one dimension be inferred");
      infer_at = i;
      out[i] = 1;
    } else if (v == 0 && !allow_zero) {
      if (i >= x.shape.rank())
        throw c.fail("shape " + list(target) + " copies dimension " + std::to_string(i) + " (0) but the input " +
                     to_string(x) + " has rank " + std::to_string(x.shape.rank()));
      out[i] = x.shape[i];
    } else if (v < 0) {
      throw c.fail("shape " + list(target) + " has the negative dimension " + std::to_string(v));
    } else {
      out[i] = v;
    }
  }
  const auto known = product(out, 0, out.size());
  const auto total = x.shape.num_elements();
  if (infer_at) {
    if (known == 0 || total % known != 0)
      throw c.fail("cannot reshape " + to_string(x) + " (" + std::to_string(total) + " elements) to " + list(target),
                   "the product of the known dimensions must divide the element count");
    out[*infer_at] = total / known;
  } else if (known != total) {
    throw c.fail("cannot reshape " + to_string(x) + " (" + std::to_string(total) + " elements) to " + list(target) +
                     " (" + std::to_string(known) + " elements)",
                 "the element count must stay the same");
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> transpose(const infer_context& c) {
  const auto& x = c.input(0);
  const auto r = x.shape.rank();
  dims perm = c.attr_ints("perm");
  if (perm.empty())
    for (std::size_t i = 0; i < r; ++i) perm.push_back(static_cast<std::int64_t>(r - 1 - i));
  if (perm.size() != r) throw c.fail("perm " + list(perm) + " does not match the rank of " + to_string(x));
  std::vector<bool> seen(r, false);
  dims out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const auto p = c.axis(perm[i], r, "perm entry");
    if (seen[p]) throw c.fail("perm " + list(perm) + " is not a permutation", "use each axis exactly once");
    seen[p] = true;
    out[i] = x.shape[p];
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> flatten(const infer_context& c) {
  const auto& x = c.input(0);
  const auto r = static_cast<std::int64_t>(x.shape.rank());
  auto a = c.attr_int("axis", 1);
  if (a < -r || a > r)
    throw c.fail("axis " + std::to_string(a) + " is out of range for " + to_string(x), "use an axis in [-rank, rank]");
  if (a < 0) a += r;
  const auto& d = x.shape.dims();
  const auto split = static_cast<std::size_t>(a);
  return {tensor_info{x.type, shape{product(d, 0, split), product(d, split, d.size())}}};
}

constexpr std::vector<tensor_info> concat(const infer_context& c) {
  const auto& first = c.input(0);
  if (!c.has_attr("axis")) throw c.fail("attribute axis is required");
  const auto a = c.axis(c.attr_int("axis", 0), first.shape.rank());
  dims out = first.shape.dims();
  for (std::size_t i = 1; i < c.num_inputs(); ++i) {
    same_type(c, 0, i);
    const auto& s = c.in_shape(i);
    bool ok = s.rank() == first.shape.rank();
    for (std::size_t k = 0; ok && k < s.rank(); ++k) ok = k == a || s[k] == first.shape[k];
    if (!ok)
      throw c.fail("inputs " + c.describe_inputs() + " differ outside axis " + std::to_string(a),
                   "concatenated tensors must match in every other dimension");
    out[a] += s[a];
  }
  return {tensor_info{first.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> split(const infer_context& c) {
  const auto& x = c.input(0);
  const auto a = c.axis(c.attr_int("axis", 0), x.shape.rank());
  const auto d = x.shape[a];
  dims sizes;
  if (c.has_input(1)) sizes = c.int_values(1, "split");
  else if (c.has_attr("split")) sizes = c.attr_ints("split");
  if (sizes.empty()) {
    const auto n = c.has_attr("num_outputs") ? c.attr_int("num_outputs", 1)
                                             : static_cast<std::int64_t>(std::max<std::size_t>(c.num_outputs(), 1));
    if (n < 1) throw c.fail("num_outputs " + std::to_string(n) + " must be >= 1");
    if (d % n != 0 && c.opset() < 18)
      throw c.fail("dimension " + std::to_string(d) + " of " + to_string(x) + " does not split evenly into " +
                       std::to_string(n) + " parts",
                   "give explicit split sizes");
    const auto chunk = ceil_div(d, n);
    for (std::int64_t i = 0; i < n; ++i) sizes.push_back(std::max<std::int64_t>(0, std::min(chunk, d - i * chunk)));
  }
  std::int64_t sum = 0;
  for (auto s : sizes) {
    if (s < 0) throw c.fail("split sizes " + list(sizes) + " include a negative size");
    sum += s;
  }
  if (sum != d)
    throw c.fail("split sizes " + list(sizes) + " add up to " + std::to_string(sum) + ", not dimension " +
                 std::to_string(a) + " of " + to_string(x) + " (" + std::to_string(d) + ")");
  std::vector<tensor_info> r;
  for (auto s : sizes) {
    dims o = x.shape.dims();
    o[a] = s;
    r.push_back(tensor_info{x.type, shape(std::move(o))});
  }
  return r;
}

/// Axes from input #i (newer opsets) or attribute "axes" (older ones); nullopt when neither is given.
constexpr std::optional<dims> axes_of(const infer_context& c, std::size_t i) {
  if (c.has_input(i)) return c.int_values(i, "axes");
  if (c.has_attr("axes")) return c.attr_ints("axes");
  return std::nullopt;
}

/// Normalises axes against `rank` and rejects repeats.
constexpr std::vector<bool> axis_mask(const infer_context& c, const dims& axes, std::size_t rank) {
  std::vector<bool> mask(rank, false);
  for (auto a : axes) {
    const auto k = c.axis(a, rank);
    if (mask[k]) throw c.fail("axes " + list(axes) + " repeat axis " + std::to_string(k));
    mask[k] = true;
  }
  return mask;
}

constexpr std::vector<tensor_info> squeeze(const infer_context& c) {
  const auto& x = c.input(0);
  const auto axes = axes_of(c, 1);
  dims out;
  if (!axes) {
    for (auto d : x.shape) if (d != 1) out.push_back(d);
  } else {
    const auto mask = axis_mask(c, *axes, x.shape.rank());
    for (std::size_t i = 0; i < x.shape.rank(); ++i) {
      if (!mask[i]) out.push_back(x.shape[i]);
      else if (x.shape[i] != 1)
        throw c.fail("cannot squeeze axis " + std::to_string(i) + " of " + to_string(x) + ": its size is " +
                     std::to_string(x.shape[i]) + ", not 1");
    }
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> unsqueeze(const infer_context& c) {
  const auto& x = c.input(0);
  const auto axes = axes_of(c, 1);
  if (!axes) throw c.fail("axes are required");
  const auto r = x.shape.rank() + axes->size();
  const auto mask = axis_mask(c, *axes, r);
  dims out;
  std::size_t k = 0;
  for (std::size_t i = 0; i < r; ++i) out.push_back(mask[i] ? 1 : x.shape[k++]);
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> gather(const infer_context& c) {
  const auto& x = c.input(0);
  const auto& idx = c.input(1);
  if (idx.type != data_type::S32 && idx.type != data_type::S64)
    throw c.fail("indices are " + std::string(to_string(idx.type)) + ", not S32 or S64");
  need_rank(c, 0, 1, "data");
  const auto a = c.axis(c.attr_int("axis", 0), x.shape.rank());
  dims out(x.shape.dims().begin(), x.shape.dims().begin() + static_cast<std::ptrdiff_t>(a));
  out.insert(out.end(), idx.shape.begin(), idx.shape.end());
  out.insert(out.end(), x.shape.dims().begin() + static_cast<std::ptrdiff_t>(a) + 1, x.shape.dims().end());
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> shape_of(const infer_context& c) {
  const auto r = static_cast<std::int64_t>(c.in_shape(0).rank());
  auto clamp = [r](std::int64_t v) { return std::clamp(v < 0 ? v + r : v, std::int64_t{0}, r); };
  const auto start = clamp(c.attr_int("start", 0)), end = clamp(c.attr_int("end", r));
  return {tensor_info{data_type::S64, shape{std::max<std::int64_t>(0, end - start)}}};
}

constexpr std::vector<tensor_info> size_of_op(const infer_context& c) {
  (void)c.input(0);
  return {tensor_info{data_type::S64, shape{}}};
}

constexpr std::vector<tensor_info> constant(const infer_context& c) {
  if (const auto* t = c.attr_tensor("value")) return {t->info};
  if (c.has_attr("value_float")) return {tensor_info{data_type::F32, shape{}}};
  if (c.has_attr("value_int")) return {tensor_info{data_type::S64, shape{}}};
  if (c.has_attr("value_floats"))
    return {tensor_info{data_type::F32,
                        shape{static_cast<std::int64_t>(c.attr_floats("value_floats").size())}}};
  if (c.has_attr("value_ints"))
    return {tensor_info{data_type::S64, shape{static_cast<std::int64_t>(c.attr_ints("value_ints").size())}}};
  throw c.fail("Constant needs one of value, value_float(s), value_int(s)",
               "string and sparse constants are not supported on the IPU");
}

constexpr std::vector<tensor_info> constant_of_shape(const infer_context& c) {
  const auto s = c.int_values(0, "shape");
  for (auto d : s)
    if (d < 0) throw c.fail("shape " + list(s) + " has a negative dimension");
  const auto* v = c.attr_tensor("value");
  if (v && v->info.num_elements() != 1) throw c.fail("value must hold exactly one element");
  return {tensor_info{v ? v->info.type : data_type::F32, shape(s)}};
}

constexpr std::vector<tensor_info> expand(const infer_context& c) {
  const auto target = shape(c.int_values(1, "shape"));
  auto out = broadcast_shapes(c.in_shape(0), target);
  if (!out)
    throw c.fail("cannot expand " + to_string(c.input(0)) + " to " + to_string(target),
                 "numpy broadcasting needs trailing dimensions that are equal or 1");
  return {tensor_info{c.in_type(0), *std::move(out)}};
}

constexpr std::vector<tensor_info> tile(const infer_context& c) {
  const auto& x = c.input(0);
  const auto reps = c.int_values(1, "repeats");
  if (reps.size() != x.shape.rank())
    throw c.fail("repeats " + list(reps) + " needs one value per dimension of " + to_string(x));
  dims out = x.shape.dims();
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (reps[i] < 0) throw c.fail("repeats " + list(reps) + " has a negative value");
    out[i] *= reps[i];
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> slice(const infer_context& c) {
  const auto& x = c.input(0);
  const auto r = x.shape.rank();
  dims starts, ends, axes, steps;
  if (c.num_inputs() > 1) {  // opset 10+: inputs
    starts = c.int_values(1, "starts");
    ends = c.int_values(2, "ends");
    if (c.has_input(3)) axes = c.int_values(3, "axes");
    if (c.has_input(4)) steps = c.int_values(4, "steps");
  } else {
    starts = c.attr_ints("starts");
    ends = c.attr_ints("ends");
    axes = c.attr_ints("axes");
  }
  if (axes.empty())
    for (std::size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    throw c.fail("starts " + list(starts) + ", ends " + list(ends) + ", axes " + list(axes) + " and steps " +
                 list(steps) + " differ in length");
  const auto mask = axis_mask(c, axes, r);
  (void)mask;
  dims out = x.shape.dims();
  for (std::size_t i = 0; i < starts.size(); ++i) {
    const auto a = c.axis(axes[i], r);
    const auto d = x.shape[a];
    const auto step = steps[i];
    if (step == 0) throw c.fail("steps " + list(steps) + " contain 0");
    auto s = starts[i], e = ends[i];
    if (s < 0) s += d;
    if (e < 0) e += d;
    if (step > 0) {
      s = std::clamp<std::int64_t>(s, 0, d);
      e = std::clamp<std::int64_t>(e, 0, d);
      out[a] = e > s ? ceil_div(e - s, step) : 0;
    } else {
      s = std::clamp<std::int64_t>(s, 0, d - 1);
      e = std::clamp<std::int64_t>(e, -1, d - 1);
      out[a] = s > e ? ceil_div(s - e, -step) : 0;
    }
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> pad(const infer_context& c) {
  const auto& x = c.input(0);
  const auto r = x.shape.rank();
  const auto pads = c.num_inputs() > 1 ? c.int_values(1, "pads") : c.attr_ints("pads");
  dims axes;
  if (c.has_input(3)) axes = c.int_values(3, "axes");
  else
    for (std::size_t i = 0; i < r; ++i) axes.push_back(static_cast<std::int64_t>(i));
  if (pads.size() != 2 * axes.size())
    throw c.fail("pads " + list(pads) + " needs " + std::to_string(2 * axes.size()) + " values for " + to_string(x),
                 "give all begins, then all ends");
  (void)axis_mask(c, axes, r);
  dims out = x.shape.dims();
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const auto a = c.axis(axes[i], r);
    out[a] += pads[i] + pads[i + axes.size()];
    if (out[a] < 0) throw c.fail("pads " + list(pads) + " remove more than dimension " + std::to_string(a) + " holds");
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

/// ReduceSum (opset 13+) and every Reduce* from opset 18 take axes as an input.
constexpr std::vector<tensor_info> reduce(const infer_context& c) {
  const auto& x = c.input(0);
  const bool keep = c.attr_int("keepdims", 1) != 0;
  const auto axes = axes_of(c, 1);
  if ((!axes || axes->empty()) && c.attr_int("noop_with_empty_axes", 0) != 0) return {x};
  std::vector<bool> mask(x.shape.rank(), true);
  if (axes && !axes->empty()) mask = axis_mask(c, *axes, x.shape.rank());
  dims out;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!mask[i]) out.push_back(x.shape[i]);
    else if (keep) out.push_back(1);
  }
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> arg_reduce(const infer_context& c) {
  const auto& x = c.input(0);
  const auto a = c.axis(c.attr_int("axis", 0), x.shape.rank());
  dims out = x.shape.dims();
  if (c.attr_int("keepdims", 1) != 0) out[a] = 1;
  else out.erase(out.begin() + static_cast<std::ptrdiff_t>(a));
  return {tensor_info{data_type::S64, shape(std::move(out))}};
}

/// Einsum: one term per input (letters, at most one "..." standing for broadcast dimensions); the
/// output is the explicit term after "->", or else the broadcast dimensions followed by the letters
/// used once, in character order (as ONNX and NumPy read an implicit equation). A label's sizes
/// agree across operands or are 1 (broadcast).
constexpr std::vector<tensor_info> einsum(const infer_context& c) {
  std::string eq;
  for (char ch : c.attr_string("equation"))
    if (ch != ' ') eq += ch;
  if (eq.empty()) throw c.fail("attribute equation is missing or empty", "give an equation such as \"ij,jk->ik\"");
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  struct term {
    std::string before, after;  // the letters around the ellipsis (all in `before` without one)
    bool ellipsis = false;
  };
  auto parse = [&](const std::string& t) {
    term r;
    const auto dots = t.find("...");
    r.ellipsis = dots != std::string::npos;
    r.before = t.substr(0, dots);
    if (r.ellipsis) r.after = t.substr(dots + 3);
    for (char ch : r.before + r.after)
      if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')))
        throw c.fail("invalid character '" + std::string(1, ch) + "' in einsum term '" + t + "'",
                     "use letters and at most one '...' per term");
    return r;
  };
  std::vector<term> terms;
  for (std::size_t start = 0;;) {
    const auto comma = lhs.find(',', start);
    terms.push_back(parse(lhs.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != c.num_inputs())
    throw c.fail("the equation has " + std::to_string(terms.size()) + " terms for " + std::to_string(c.num_inputs()) +
                     " inputs",
                 "give one term per input");
  std::int64_t letter_dim[128]{};
  int letter_count[128]{};
  std::vector<std::int64_t> broadcast;  // the ellipsis dimensions, right-aligned across operands
  auto bind = [&](std::int64_t& d, std::int64_t v) {
    if (d != 0 && d != v && d != 1 && v != 1)
      throw c.fail("einsum dimension mismatch: " + std::to_string(d) + " vs " + std::to_string(v) + " (" +
                       c.describe_inputs() + ")",
                   "operands must agree on every label's size");
    if (d == 0 || d == 1) d = v;
  };
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto& t = terms[i];
    const auto& sh = c.input(i).shape;
    const auto letters = t.before.size() + t.after.size();
    if (sh.rank() < letters || (!t.ellipsis && sh.rank() != letters))
      throw c.fail("term " + std::to_string(i) + " has " + std::to_string(letters) + " labels for a rank-" +
                       std::to_string(sh.rank()) + " input",
                   "give one label per axis (or use '...')");
    const auto n = sh.rank() - letters;  // ellipsis dimensions of this operand
    if (n > broadcast.size()) broadcast.insert(broadcast.begin(), n - broadcast.size(), 0);
    std::size_t axis = 0;
    for (char ch : t.before) {
      ++letter_count[static_cast<unsigned char>(ch)];
      bind(letter_dim[static_cast<unsigned char>(ch)], sh[axis++]);
    }
    for (std::size_t j = 0; j < n; ++j) bind(broadcast[broadcast.size() - n + j], sh[axis++]);
    for (char ch : t.after) {
      ++letter_count[static_cast<unsigned char>(ch)];
      bind(letter_dim[static_cast<unsigned char>(ch)], sh[axis++]);
    }
  }
  for (auto& d : broadcast)
    if (d == 0) d = 1;
  dims out;
  if (arrow == std::string::npos) {
    out = broadcast;
    for (int ch = 0; ch < 128; ++ch)
      if (letter_count[ch] == 1) out.push_back(letter_dim[ch]);
  } else {
    const auto t = parse(eq.substr(arrow + 2));
    bool seen[128]{};
    auto add = [&](const std::string& letters) {
      for (char ch : letters) {
        const auto u = static_cast<unsigned char>(ch);
        if (letter_count[u] == 0)
          throw c.fail("output label '" + std::string(1, ch) + "' does not appear in any input", "fix the equation");
        if (seen[u]) throw c.fail("output label '" + std::string(1, ch) + "' appears twice", "fix the equation");
        seen[u] = true;
        out.push_back(letter_dim[u]);
      }
    };
    add(t.before);
    if (t.ellipsis) out.insert(out.end(), broadcast.begin(), broadcast.end());
    add(t.after);
  }
  return {tensor_info{c.input(0).type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> top_k(const infer_context& c) {
  const auto& x = c.input(0);
  const auto a = c.axis(c.attr_int("axis", -1), x.shape.rank());
  const auto k = c.has_input(1) ? c.int_values(1, "K").at(0) : c.attr_int("k", -1);
  if (k < 0 || k > x.shape[a])
    throw c.fail("K = " + std::to_string(k) + " is outside [0, " + std::to_string(x.shape[a]) + "] for " +
                 to_string(x));
  dims out = x.shape.dims();
  out[a] = k;
  return {tensor_info{x.type, shape(out)}, tensor_info{data_type::S64, shape(out)}};
}

// --- rearrangements, indexing, recurrent ops and losses ----------------------------------------
constexpr std::int64_t block_size(const infer_context& c) {
  const auto b = c.attr_int("blocksize", 0);
  if (b < 1) throw c.fail("attribute blocksize is missing or not positive", "give the block size");
  return b;
}

constexpr void need_exact_rank(const infer_context& c, std::size_t i, std::size_t rank, std::string_view what) {
  if (c.in_shape(i).rank() != rank)
    throw c.fail(std::string(what) + " must have rank " + std::to_string(rank) + ", got " + to_string(c.input(i)));
}

constexpr std::vector<tensor_info> depth_to_space(const infer_context& c) {
  need_exact_rank(c, 0, 4, "input [N, C, H, W]");
  const auto& x = c.input(0);
  const auto b = block_size(c);
  if (x.shape[1] % (b * b) != 0)
    throw c.fail("channels " + std::to_string(x.shape[1]) + " are not a multiple of blocksize^2 = " +
                 std::to_string(b * b));
  return {tensor_info{x.type, shape{x.shape[0], x.shape[1] / (b * b), x.shape[2] * b, x.shape[3] * b}}};
}

constexpr std::vector<tensor_info> space_to_depth(const infer_context& c) {
  need_exact_rank(c, 0, 4, "input [N, C, H, W]");
  const auto& x = c.input(0);
  const auto b = block_size(c);
  if (x.shape[2] % b != 0 || x.shape[3] % b != 0)
    throw c.fail("height and width of " + to_string(x) + " are not multiples of blocksize " + std::to_string(b));
  return {tensor_info{x.type, shape{x.shape[0], x.shape[1] * b * b, x.shape[2] / b, x.shape[3] / b}}};
}

constexpr std::vector<tensor_info> eye_like(const infer_context& c) {
  need_exact_rank(c, 0, 2, "input");
  const auto& x = c.input(0);
  auto type = x.type;
  if (c.has_attr("dtype")) {
    const auto t = data_type_from_onnx_code(c.attr_int("dtype", 0));
    if (!t) throw c.fail("attribute dtype " + std::to_string(c.attr_int("dtype", 0)) + " is not a supported type");
    type = *t;
  }
  return {tensor_info{type, x.shape}};
}

constexpr std::vector<tensor_info> gather_elements(const infer_context& c) {
  const auto& x = c.input(0);
  const auto& idx = c.input(1);
  if (x.shape.rank() != idx.shape.rank())
    throw c.fail("data and indices ranks differ (" + c.describe_inputs() + ")", "give indices of the data's rank");
  return {tensor_info{x.type, idx.shape}};
}

constexpr std::vector<tensor_info> gather_nd(const infer_context& c) {
  const auto& x = c.input(0);
  const auto& idx = c.input(1);
  const auto b = static_cast<std::size_t>(std::max<std::int64_t>(c.attr_int("batch_dims", 0), 0));
  const auto q = idx.shape.rank(), r = x.shape.rank();
  if (q < 1 || r < 1 || b >= std::min(q, r)) throw c.fail("batch_dims must be below both ranks (" + c.describe_inputs() + ")");
  const auto last = idx.shape[q - 1];
  if (last < 1 || static_cast<std::size_t>(last) > r - b)
    throw c.fail("indices' last dimension " + std::to_string(last) + " must be in [1, data rank - batch_dims]");
  dims out(idx.shape.dims().begin(), idx.shape.dims().end() - 1);
  for (auto i = b + static_cast<std::size_t>(last); i < r; ++i) out.push_back(x.shape[i]);
  return {tensor_info{x.type, shape(std::move(out))}};
}

constexpr std::vector<tensor_info> one_hot(const infer_context& c) {
  const auto& idx = c.input(0);
  const auto depth = c.int_values(1, "depth");
  if (depth.size() != 1 || depth[0] < 1) throw c.fail("depth must be one positive value");
  const auto& values = c.input(2);
  const auto r = static_cast<std::int64_t>(idx.shape.rank());
  auto a = c.attr_int("axis", -1);
  if (a < -r - 1 || a > r) throw c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r + 1));
  if (a < 0) a += r + 1;
  dims out = idx.shape.dims();
  out.insert(out.begin() + a, depth[0]);
  return {tensor_info{values.type, shape(std::move(out))}};
}

/// LSTM / GRU / RNN: X [seq, batch, input] (layout 1: [batch, seq, input]); Y [seq, dirs, batch,
/// hidden], Y_h (and LSTM's Y_c) [dirs, batch, hidden] (layout 1: batch first).
constexpr std::vector<tensor_info> recurrent(const infer_context& c) {
  need_exact_rank(c, 0, 3, "X");
  need_exact_rank(c, 1, 3, "W");
  const auto& x = c.input(0);
  const auto hidden = c.attr_int("hidden_size", 0);
  if (hidden < 1) throw c.fail("attribute hidden_size is missing or not positive");
  const auto dirs = c.attr_string("direction", "forward") == "bidirectional" ? 2 : 1;
  const bool batch_first = c.attr_int("layout", 0) != 0;
  const auto seq = x.shape[batch_first ? 1 : 0], batch = x.shape[batch_first ? 0 : 1];
  const tensor_info y{x.type, batch_first ? shape{batch, seq, dirs, hidden} : shape{seq, dirs, batch, hidden}};
  const tensor_info h{x.type, batch_first ? shape{batch, dirs, hidden} : shape{dirs, batch, hidden}};
  if (c.op().type == "LSTM") return {y, h, h};
  return {y, h};
}

constexpr std::vector<tensor_info> nll_loss(const infer_context& c) {
  need_rank(c, 0, 2, "input [N, C, ...]");
  const auto& x = c.input(0);
  const auto& t = c.input(1);
  if (t.shape.rank() + 1 != x.shape.rank())
    throw c.fail("target rank must be the input's minus one (" + c.describe_inputs() + ")");
  const bool none = c.attr_string("reduction", "mean") == "none";
  return {tensor_info{x.type, none ? t.shape : shape{}}};
}

constexpr std::vector<tensor_info> softmax_cross_entropy(const infer_context& c) {
  auto out = nll_loss(c);
  out.push_back(c.input(0));  // log_prob
  return out;
}

// --- optimizers (ai.onnx.preview.training) ---------------------------------------------------------
/// How many tensors each optimized X brings among the inputs: X, G and the optimizer's state
/// (Adagrad: H; Momentum: V; Adam: V and H).
constexpr std::size_t optimizer_group(std::string_view type) { return type == "Adam" ? 4 : 3; }

/// Adagrad / Momentum / Adam: inputs [R, T, X1..Xn, G1..Gn, S1..Sn, ...], outputs the inputs
/// without R, T and the gradients: [X1_new..Xn_new, S1_new..Sn_new, ...], each like its input.
constexpr std::vector<tensor_info> optimizer(const infer_context& c) {
  const auto k = optimizer_group(c.op().type);
  if (c.num_inputs() < 2 + k || (c.num_inputs() - 2) % k != 0)
    throw c.fail(std::to_string(c.num_inputs()) + " inputs; " + c.op().type + " takes R, T and " + std::to_string(k) +
                     " tensors per optimized tensor (" + c.describe_inputs() + ")",
                 "see the ONNX operator specification of " + c.op().type);
  const auto n = (c.num_inputs() - 2) / k;
  for (std::size_t i = 0; i < 2; ++i)
    if (c.in_shape(i).num_elements() != 1)
      throw c.fail(std::string(i == 0 ? "the learning rate R" : "the update count T") + " is " + to_string(c.input(i)) +
                       ", not a scalar",
                   "give one value");
  if (c.in_type(0) != data_type::F32 && c.in_type(0) != data_type::F64)
    throw c.fail("the learning rate R is " + to_string(c.input(0)) + ", not F32 or F64");
  if (c.in_type(1) != data_type::S64) throw c.fail("the update count T is " + to_string(c.input(1)) + ", not S64");
  for (std::size_t i = 0; i < n; ++i) {
    const auto& x = c.input(2 + i);
    if (x.type != data_type::F32 && x.type != data_type::F64)
      throw c.fail("optimized tensor #" + std::to_string(i) + " is " + to_string(x) + ", not F32 or F64");
    for (std::size_t j = 1; j < k; ++j)
      if (c.input(2 + j * n + i) != x)
        throw c.fail("input #" + std::to_string(2 + j * n + i) + " is " + to_string(c.input(2 + j * n + i)) +
                         " but the tensor it belongs to, input #" + std::to_string(2 + i) + ", is " + to_string(x),
                     "give each gradient and state the optimized tensor's type and shape");
  }
  if (c.op().type == "Momentum") {
    for (const char* a : {"alpha", "beta", "norm_coefficient", "mode"})
      if (!c.has_attr(a)) throw c.fail(std::string("attribute '") + a + "' is missing", "Momentum requires it");
    const auto mode = c.attr_string("mode");
    if (mode != "standard" && mode != "nesterov")
      throw c.fail("mode '" + mode + "' is neither 'standard' nor 'nesterov'");
  }
  std::vector<tensor_info> out;
  for (std::size_t j = 0; j < k; ++j)
    if (j != 1)  // the gradients have no output
      for (std::size_t i = 0; i < n; ++i) out.push_back(c.input(2 + j * n + i));
  return out;
}

}  // namespace detail::infer

}  // namespace ipu
