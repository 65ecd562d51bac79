#pragma once
// Constant folding of shape computations, so that every tensor's shape is static after import.
//
// Exporters compute sizes at run time (Shape -> Gather -> Add -> Div -> Slice in PyTorch's attention
// heads); ONNX's shape inference propagates some of that data but not through every op, leaving
// some shapes unknown. Like PopART's const-expr folding, this evaluates integer / bool ops whose
// inputs are all known - Shape and Size of statically shaped tensors, Constant nodes, small integer
// initializers - and replaces them with Constant nodes. Float ops are never folded (their results
// would depend on host arithmetic; a Cast of integers to FLOAT / DOUBLE, which involves none, is),
// nor are outputs over `max_folded_elements`.
// Works on the canonical (opset-17) form produced by normalize.hpp.
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ipu/onnx/proto_edit.hpp"
#include "ipu/ops/op_table.hpp"
#include "ipu/onnx/tensor.hpp"

namespace ipu::onnx {

inline constexpr std::int64_t max_folded_elements = 1 << 16;

namespace detail {

/// An integer or bool tensor held as int64 values.
struct int_tensor {
  std::int32_t type = ::onnx::TensorProto_DataType_INT64;
  std::vector<std::int64_t> dims;
  std::vector<std::int64_t> values;

  /// Element count, saturating so that a corrupt shape cannot overflow.
  [[nodiscard]] std::int64_t size() const {
    std::int64_t n = 1;
    for (auto d : dims)
      if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<std::int64_t>::max();
    return n;
  }
};

inline bool is_int_type(std::int32_t t) {
  switch (t) {
    case ::onnx::TensorProto_DataType_INT64:
    case ::onnx::TensorProto_DataType_INT32:
    case ::onnx::TensorProto_DataType_INT16:
    case ::onnx::TensorProto_DataType_INT8:
    case ::onnx::TensorProto_DataType_UINT8:
    case ::onnx::TensorProto_DataType_UINT16:
    case ::onnx::TensorProto_DataType_UINT32:
    case ::onnx::TensorProto_DataType_UINT64:
    case ::onnx::TensorProto_DataType_BOOL: return true;
    default: return false;
  }
}

/// Wraps a value to the range of `type` (as a cast in C would).
inline std::int64_t wrap(std::int32_t type, std::int64_t v) {
  switch (type) {
    case ::onnx::TensorProto_DataType_INT32: return static_cast<std::int32_t>(v);
    case ::onnx::TensorProto_DataType_INT16: return static_cast<std::int16_t>(v);
    case ::onnx::TensorProto_DataType_INT8: return static_cast<std::int8_t>(v);
    case ::onnx::TensorProto_DataType_UINT8: return static_cast<std::uint8_t>(v);
    case ::onnx::TensorProto_DataType_UINT16: return static_cast<std::uint16_t>(v);
    case ::onnx::TensorProto_DataType_UINT32: return static_cast<std::uint32_t>(v);
    case ::onnx::TensorProto_DataType_BOOL: return v != 0;
    default: return v;
  }
}

/// Decodes a small integer TensorProto; nullopt for other types, big tensors or external data.
inline std::optional<int_tensor> decode_int(const ::onnx::TensorProto& t) {
  if (!is_int_type(t.data_type())) return std::nullopt;
  if (t.has_data_location() && t.data_location() == ::onnx::TensorProto_DataLocation_EXTERNAL) return std::nullopt;
  int_tensor r;
  r.type = t.data_type();
  r.dims.assign(t.dims().begin(), t.dims().end());
  for (auto d : r.dims)
    if (d < 0) return std::nullopt;
  if (r.size() > max_folded_elements) return std::nullopt;
  const auto c = to_constant_tensor(t);
  const auto n = static_cast<std::size_t>(c.info.num_elements());
  r.values.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    switch (c.info.type) {
      case data_type::S64: r.values[i] = c.data.load<std::int64_t>(i); break;
      case data_type::S32: r.values[i] = c.data.load<std::int32_t>(i); break;
      case data_type::S16: r.values[i] = c.data.load<std::int16_t>(i); break;
      case data_type::S8: r.values[i] = c.data.load<std::int8_t>(i); break;
      case data_type::U8: r.values[i] = c.data.load<std::uint8_t>(i); break;
      case data_type::BOOL: r.values[i] = c.data.load<std::uint8_t>(i) != 0; break;
      case data_type::U16: r.values[i] = c.data.load<std::uint16_t>(i); break;
      case data_type::U32: r.values[i] = c.data.load<std::uint32_t>(i); break;
      case data_type::U64: r.values[i] = static_cast<std::int64_t>(c.data.load<std::uint64_t>(i)); break;
      default: return std::nullopt;
    }
  }
  return r;
}

inline ::onnx::TensorProto encode_int(const int_tensor& v) {
  ::onnx::TensorProto t;
  t.set_data_type(v.type);
  for (auto d : v.dims) t.add_dims(d);
  for (auto x : v.values) {
    switch (v.type) {
      case ::onnx::TensorProto_DataType_INT64: t.add_int64_data(x); break;
      case ::onnx::TensorProto_DataType_UINT32:
      case ::onnx::TensorProto_DataType_UINT64: t.add_uint64_data(static_cast<std::uint64_t>(x)); break;
      default: t.add_int32_data(static_cast<std::int32_t>(x)); break;
    }
  }
  return t;
}

inline std::vector<std::int64_t> strides_of(const std::vector<std::int64_t>& dims) {
  std::vector<std::int64_t> s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

/// Numpy broadcasting of several shapes; nullopt when they do not broadcast.
inline std::optional<std::vector<std::int64_t>> broadcast(const std::vector<const int_tensor*>& xs) {
  std::size_t rank = 0;
  for (auto* x : xs) rank = std::max(rank, x->dims.size());
  std::vector<std::int64_t> out(rank, 1);
  for (auto* x : xs)
    for (std::size_t i = 0; i < x->dims.size(); ++i) {
      auto& o = out[rank - x->dims.size() + i];
      const auto d = x->dims[i];
      if (d == o || d == 1) continue;
      if (o != 1) return std::nullopt;
      o = d;
    }
  return out;
}

/// The element of `x` that broadcasts to flat output index `i` of shape `out`.
inline std::int64_t broadcast_at(const int_tensor& x, const std::vector<std::int64_t>& out, std::int64_t i) {
  const auto out_strides = strides_of(out);
  const auto x_strides = strides_of(x.dims);
  const auto offset = out.size() - x.dims.size();
  std::int64_t k = 0;
  for (std::size_t a = 0; a < out.size(); ++a) {
    const auto idx = (i / out_strides[a]) % out[a];
    if (a >= offset && x.dims[a - offset] != 1) k += idx * x_strides[a - offset];
  }
  return x.values[static_cast<std::size_t>(k)];
}

class folder {
 public:
  explicit folder(::onnx::ModelProto& m) : model_(m) {}

  /// One folding pass over the model; returns the number of nodes replaced.
  std::size_t run() {
    count_ = 0;
    graph(*model_.mutable_graph(), nullptr, {});
    return count_;
  }

  using const_map = std::unordered_map<std::string, int_tensor>;

 private:
  void graph(::onnx::GraphProto& g, const type_scope* parent, const_map consts) {
    const type_scope scope(g, parent);
    for (const auto& t : g.initializer())
      if (auto v = decode_int(t)) consts[t.name()] = std::move(*v);
    // Formal subgraph inputs shadow outer constants.
    for (const auto& in : g.input()) consts.erase(in.name());
    for (auto& n : *g.mutable_node()) {
      for (auto& a : *n.mutable_attribute()) {
        if (a.has_g()) graph(*a.mutable_g(), &scope, consts);
        for (auto& sub : *a.mutable_graphs()) graph(sub, &scope, consts);
      }
      if (!(n.domain().empty() || n.domain() == "ai.onnx")) continue;
      if (n.op_type() == "Constant") {
        if (n.output_size() == 1)
          if (auto* a = find_attr(n, "value"); a && a->has_t())
            if (auto v = decode_int(a->t())) consts[n.output(0)] = std::move(*v);
        if (n.output_size() == 1 && find_attr(n, "value_int")) {
          int_tensor v;
          v.values = {attr_int(n, "value_int", 0)};
          consts[n.output(0)] = std::move(v);
        }
        if (n.output_size() == 1 && find_attr(n, "value_ints")) {
          int_tensor v;
          v.values = attr_ints(n, "value_ints");
          v.dims = {static_cast<std::int64_t>(v.values.size())};
          consts[n.output(0)] = std::move(v);
        }
        continue;
      }
      if (n.output_size() != 1 || n.output(0).empty()) continue;
      auto result = evaluate(n, scope, consts);
      if (!result) {
        if (auto c = integers_as_floats(n, consts)) {
          n = std::move(*c);
          ++count_;
        }
        continue;
      }
      if (result->size() > max_folded_elements) continue;
      ::onnx::NodeProto c = constant_node(n.name(), n.output(0), encode_int(*result));
      consts[n.output(0)] = std::move(*result);
      n = std::move(c);
      ++count_;
    }
  }

  /// A Cast of known integers to FLOAT or DOUBLE as a Constant: converting is exact up to 2^24
  /// (2^53), rounds to nearest beyond as the kernel does, and involves no arithmetic, so the
  /// result cannot depend on the host. It gives a Range of a computed float size (the window
  /// functions' expansions) a static shape.
  static std::optional<::onnx::NodeProto> integers_as_floats(const ::onnx::NodeProto& n, const const_map& consts) {
    if (n.op_type() != "Cast" || n.input_size() != 1) return std::nullopt;
    const auto to = attr_int(n, "to", 0);
    if (to != ::onnx::TensorProto_DataType_FLOAT && to != ::onnx::TensorProto_DataType_DOUBLE) return std::nullopt;
    const auto* x = in(n, 0, consts);
    // UINT64 values past 2^63 are held wrapped, so they are left to the kernel.
    if (!x || x->type == ::onnx::TensorProto_DataType_UINT64 || x->size() > max_folded_elements) return std::nullopt;
    ::onnx::TensorProto t;
    t.set_data_type(static_cast<std::int32_t>(to));
    for (auto d : x->dims) t.add_dims(d);
    for (auto v : x->values) {
      if (to == ::onnx::TensorProto_DataType_FLOAT) t.add_float_data(static_cast<float>(v));
      else t.add_double_data(static_cast<double>(v));
    }
    return constant_node(n.name(), n.output(0), std::move(t));
  }

  static const int_tensor* in(const ::onnx::NodeProto& n, int i, const const_map& consts) {
    if (i >= n.input_size() || n.input(i).empty()) return nullptr;
    auto it = consts.find(n.input(i));
    return it == consts.end() ? nullptr : &it->second;
  }

 public:
  /// The value of `n`'s single output when its inputs are in `consts` (or its shape is static,
  /// for Shape / Size) and the op is one this folder evaluates; nullopt otherwise.
  static std::optional<int_tensor> evaluate(const ::onnx::NodeProto& n, const type_scope& scope, const const_map& consts) {
    const auto& op = n.op_type();
    if (op == "Shape" || op == "Size") {
      auto dims = scope.static_shape(n.input(0));
      if (!dims) return std::nullopt;
      int_tensor r;
      if (op == "Size") {
        std::int64_t p = 1;
        for (auto d : *dims)
          if (__builtin_mul_overflow(p, d, &p)) return std::nullopt;
        r.values = {p};
        return r;
      }
      const auto rank = static_cast<std::int64_t>(dims->size());
      auto clamp = [&](std::int64_t v) { return std::clamp(v < 0 ? v + rank : v, std::int64_t{0}, rank); };
      const auto start = clamp(attr_int(n, "start", 0));
      const auto end = clamp(attr_int(n, "end", rank));
      for (auto i = start; i < end; ++i) r.values.push_back((*dims)[static_cast<std::size_t>(i)]);
      r.dims = {static_cast<std::int64_t>(r.values.size())};
      return r;
    }
    // Every other op needs all of its given inputs known.
    std::vector<const int_tensor*> xs;
    for (int i = 0; i < n.input_size(); ++i) {
      if (n.input(i).empty()) {
        xs.push_back(nullptr);
        continue;
      }
      auto* x = in(n, i, consts);
      if (!x) return std::nullopt;
      xs.push_back(x);
    }
    if (xs.empty() || !xs[0]) return std::nullopt;
    const auto& x = *xs[0];

    // A view keeps its input's values in order (ipu/ops/flags.hpp): Identity and Dropout (in
    // inference) keep the shape too, Flatten makes it 2-D; Reshape, Squeeze and Unsqueeze read
    // their shape operands below.
    if (flags_of("", op).view && op != "Reshape" && op != "Squeeze" && op != "Unsqueeze") {
      if (op == "Dropout" && xs.size() > 2 && xs[2] && std::any_of(xs[2]->values.begin(), xs[2]->values.end(),
                                                                   [](std::int64_t v) { return v != 0; }))
        return std::nullopt;  // training: a random mask
      if (op != "Flatten") return x;
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      auto axis = attr_int(n, "axis", 1);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis > rank) return std::nullopt;
      int_tensor r = x;
      std::int64_t outer = 1, inner = 1;
      for (std::int64_t i = 0; i < rank; ++i) (i < axis ? outer : inner) *= x.dims[static_cast<std::size_t>(i)];
      r.dims = {outer, inner};
      return r;
    }
    if (op == "Cast") {
      const auto to = static_cast<std::int32_t>(attr_int(n, "to", 0));
      if (!is_int_type(to)) return std::nullopt;
      int_tensor r = x;
      r.type = to;
      for (auto& v : r.values) v = wrap(to, v);
      return r;
    }
    if (op == "Neg" || op == "Abs" || op == "Not") {
      int_tensor r = x;
      for (auto& v : r.values) {
        if (op != "Not" && v == std::numeric_limits<std::int64_t>::min()) return std::nullopt;
        v = wrap(r.type, op == "Neg" ? -v : op == "Abs" ? (v < 0 ? -v : v) : !v);
      }
      return r;
    }
    if (op == "Add" || op == "Sub" || op == "Mul" || op == "Div" || op == "Mod" || op == "Min" || op == "Max" ||
        op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" || op == "GreaterOrEqual" ||
        op == "And" || op == "Or" || op == "Where") {
      for (auto* p : xs)
        if (!p) return std::nullopt;
      if ((op == "Min" || op == "Max") ? xs.empty() : (op == "Where" ? xs.size() != 3 : xs.size() != 2))
        return std::nullopt;
      auto out = broadcast(xs);
      if (!out) return std::nullopt;
      int_tensor r;
      r.dims = *out;
      const bool compare = op == "Equal" || op == "Less" || op == "Greater" || op == "LessOrEqual" ||
                           op == "GreaterOrEqual";
      r.type = compare ? static_cast<std::int32_t>(::onnx::TensorProto_DataType_BOOL) : (op == "Where" ? xs[1]->type : x.type);
      const auto count = r.size();
      if (count > max_folded_elements) return std::nullopt;
      r.values.resize(static_cast<std::size_t>(count));
      for (std::int64_t i = 0; i < count; ++i) {
        auto at = [&](std::size_t k) { return broadcast_at(*xs[k], *out, i); };
        std::int64_t v = 0;
        if (op == "Where") v = at(0) ? at(1) : at(2);
        else if (op == "Min" || op == "Max") {
          v = at(0);
          for (std::size_t k = 1; k < xs.size(); ++k) v = op == "Min" ? std::min(v, at(k)) : std::max(v, at(k));
        } else {
          const auto a = at(0), b = at(1);
          // Overflowing values are left to run time rather than folded with undefined behaviour.
          if (op == "Add") {
            if (__builtin_add_overflow(a, b, &v)) return std::nullopt;
          } else if (op == "Sub") {
            if (__builtin_sub_overflow(a, b, &v)) return std::nullopt;
          } else if (op == "Mul") {
            if (__builtin_mul_overflow(a, b, &v)) return std::nullopt;
          } else if (op == "Div" || op == "Mod") {
            if (b == 0 || (b == -1 && a == std::numeric_limits<std::int64_t>::min()))
              return std::nullopt;  // leave the error to run time
            if (op == "Div") v = a / b;       // integer Div truncates, as ONNX Runtime does
            else if (attr_int(n, "fmod", 0)) v = a % b;
            else v = ((a % b) + b) % b;       // Mod with fmod=0 takes the divisor's sign
          } else if (op == "Equal") v = a == b;
          else if (op == "Less") v = a < b;
          else if (op == "Greater") v = a > b;
          else if (op == "LessOrEqual") v = a <= b;
          else if (op == "GreaterOrEqual") v = a >= b;
          else if (op == "And") v = a && b;
          else if (op == "Or") v = a || b;
        }
        r.values[static_cast<std::size_t>(i)] = wrap(r.type, v);
      }
      return r;
    }
    if (op == "Unsqueeze" || op == "Squeeze") {
      if (xs.size() < 2 || !xs[1]) {
        if (op == "Unsqueeze") return std::nullopt;
        int_tensor r = x;
        r.dims.erase(std::remove(r.dims.begin(), r.dims.end(), 1), r.dims.end());
        return r;
      }
      int_tensor r = x;
      const auto& axes = xs[1]->values;
      if (op == "Unsqueeze") {
        const auto rank = static_cast<std::int64_t>(x.dims.size() + axes.size());
        std::vector<bool> is_new(static_cast<std::size_t>(rank), false);
        for (auto a : axes) {
          const auto k = a < 0 ? a + rank : a;
          if (k < 0 || k >= rank) return std::nullopt;
          is_new[static_cast<std::size_t>(k)] = true;
        }
        r.dims.clear();
        std::size_t j = 0;
        for (std::int64_t k = 0; k < rank; ++k) r.dims.push_back(is_new[static_cast<std::size_t>(k)] ? 1 : x.dims[j++]);
        if (j != x.dims.size()) return std::nullopt;
      } else {
        const auto rank = static_cast<std::int64_t>(x.dims.size());
        std::vector<bool> drop(x.dims.size(), false);
        for (auto a : axes) {
          const auto k = a < 0 ? a + rank : a;
          if (k < 0 || k >= rank || x.dims[static_cast<std::size_t>(k)] != 1) return std::nullopt;
          drop[static_cast<std::size_t>(k)] = true;
        }
        r.dims.clear();
        for (std::size_t k = 0; k < x.dims.size(); ++k)
          if (!drop[k]) r.dims.push_back(x.dims[k]);
      }
      return r;
    }
    if (op == "Reshape") {
      if (xs.size() < 2 || !xs[1]) return std::nullopt;
      const bool allowzero = attr_int(n, "allowzero", 0) != 0;
      int_tensor r = x;
      r.dims.clear();
      std::int64_t known = 1, infer = -1;
      for (std::size_t i = 0; i < xs[1]->values.size(); ++i) {
        auto d = xs[1]->values[i];
        if (d == 0 && !allowzero) {
          if (i >= x.dims.size()) return std::nullopt;
          d = x.dims[i];
        }
        if (d == -1) {
          if (infer >= 0) return std::nullopt;
          infer = static_cast<std::int64_t>(i);
        } else if (d < 0 || __builtin_mul_overflow(known, d, &known)) {
          return std::nullopt;
        }
        r.dims.push_back(d);
      }
      if (infer >= 0) {
        if (known == 0 || x.size() % known) return std::nullopt;
        r.dims[static_cast<std::size_t>(infer)] = x.size() / known;
      }
      if (r.size() != x.size()) return std::nullopt;
      return r;
    }
    if (op == "Concat") {
      for (auto* p : xs)
        if (!p || p->dims.size() != x.dims.size()) return std::nullopt;
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      auto axis = attr_int(n, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      const auto ax = static_cast<std::size_t>(axis);
      int_tensor r;
      r.type = x.type;
      r.dims = x.dims;
      r.dims[ax] = 0;
      for (auto* p : xs) {
        for (std::size_t k = 0; k < p->dims.size(); ++k)
          if (k != ax && p->dims[k] != x.dims[k]) return std::nullopt;
        r.dims[ax] += p->dims[ax];
      }
      std::int64_t outer = 1;
      for (std::size_t k = 0; k < ax; ++k) outer *= x.dims[k];
      for (std::int64_t o = 0; o < outer; ++o)
        for (auto* p : xs) {
          std::int64_t inner = 1;
          for (std::size_t k = ax; k < p->dims.size(); ++k) inner *= p->dims[k];
          for (std::int64_t i = 0; i < inner; ++i) r.values.push_back(p->values[static_cast<std::size_t>(o * inner + i)]);
        }
      return r;
    }
    if (op == "Gather") {
      if (xs.size() < 2 || !xs[1] || x.dims.empty()) return std::nullopt;
      const auto& idx = *xs[1];
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      auto axis = attr_int(n, "axis", 0);
      if (axis < 0) axis += rank;
      if (axis < 0 || axis >= rank) return std::nullopt;
      const auto ax = static_cast<std::size_t>(axis);
      int_tensor r;
      r.type = x.type;
      r.dims.assign(x.dims.begin(), x.dims.begin() + axis);
      r.dims.insert(r.dims.end(), idx.dims.begin(), idx.dims.end());
      r.dims.insert(r.dims.end(), x.dims.begin() + axis + 1, x.dims.end());
      std::int64_t outer = 1, inner = 1;
      for (std::size_t k = 0; k < ax; ++k) outer *= x.dims[k];
      for (std::size_t k = ax + 1; k < x.dims.size(); ++k) inner *= x.dims[k];
      const auto extent = x.dims[ax];
      for (std::int64_t o = 0; o < outer; ++o)
        for (auto j : idx.values) {
          if (j < 0) j += extent;
          if (j < 0 || j >= extent) return std::nullopt;
          for (std::int64_t i = 0; i < inner; ++i)
            r.values.push_back(x.values[static_cast<std::size_t>((o * extent + j) * inner + i)]);
        }
      return r;
    }
    if (op == "Slice") {
      if (xs.size() < 3 || !xs[1] || !xs[2]) return std::nullopt;
      const auto rank = static_cast<std::int64_t>(x.dims.size());
      const auto& starts = xs[1]->values;
      const auto& ends = xs[2]->values;
      if (starts.size() != ends.size()) return std::nullopt;
      std::vector<std::int64_t> axes(starts.size()), steps(starts.size(), 1);
      for (std::size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<std::int64_t>(i);
      if (xs.size() > 3 && xs[3]) axes = xs[3]->values;
      if (xs.size() > 4 && xs[4]) steps = xs[4]->values;
      if (axes.size() != starts.size() || steps.size() != starts.size()) return std::nullopt;
      std::vector<std::int64_t> lo(x.dims.size(), 0), step(x.dims.size(), 1), count = x.dims;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        auto a = axes[i] < 0 ? axes[i] + rank : axes[i];
        constexpr std::int64_t big = std::int64_t{1} << 62;
        if (a < 0 || a >= rank || steps[i] == 0 || steps[i] > big || steps[i] < -big) return std::nullopt;
        const auto dim = x.dims[static_cast<std::size_t>(a)];
        auto s = starts[i], e = ends[i];
        if (s < 0) s += dim;
        if (e < 0) e += dim;
        std::int64_t c = 0;
        if (steps[i] > 0) {
          s = std::clamp(s, std::int64_t{0}, dim);
          e = std::clamp(e, std::int64_t{0}, dim);
          c = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
        } else {
          s = std::clamp(s, std::int64_t{0}, dim - 1);
          e = std::clamp(e, std::int64_t{-1}, dim - 1);
          c = s > e ? (s - e - steps[i] - 1) / -steps[i] : 0;
        }
        const auto k = static_cast<std::size_t>(a);
        lo[k] = s;
        step[k] = steps[i];
        count[k] = c;
      }
      int_tensor r;
      r.type = x.type;
      r.dims = count;
      const auto total = r.size();
      const auto out_strides = strides_of(count);
      const auto in_strides = strides_of(x.dims);
      for (std::int64_t i = 0; i < total; ++i) {
        std::int64_t src = 0;
        for (std::size_t k = 0; k < count.size(); ++k)
          src += (lo[k] + ((i / out_strides[k]) % count[k]) * step[k]) * in_strides[k];
        r.values.push_back(x.values[static_cast<std::size_t>(src)]);
      }
      return r;
    }
    if (op == "ConstantOfShape") {
      int_tensor r;
      r.dims = x.values;
      for (auto d : r.dims)
        if (d < 0) return std::nullopt;
      std::int64_t fill = 0;
      r.type = ::onnx::TensorProto_DataType_FLOAT;  // ONNX's default value is a float zero
      if (const auto* a = find_attr(n, "value"); a && a->has_t()) {
        auto v = decode_int(a->t());
        if (!v || v->values.size() != 1) return std::nullopt;
        r.type = v->type;
        fill = v->values[0];
      }
      if (!is_int_type(r.type) || r.size() > max_folded_elements) return std::nullopt;
      r.values.assign(static_cast<std::size_t>(r.size()), fill);
      return r;
    }
    if (op == "Range") {
      if (xs.size() != 3 || !xs[1] || !xs[2] || x.values.size() != 1) return std::nullopt;
      const auto start = x.values[0], limit = xs[1]->values.at(0), delta = xs[2]->values.at(0);
      if (delta == 0) return std::nullopt;
      // ceil((limit - start) / delta); extreme bounds are left to run time.
      std::int64_t span = 0;
      constexpr std::int64_t big = std::int64_t{1} << 62;
      if (__builtin_sub_overflow(limit, start, &span) || span > big || span < -big || delta > big || delta < -big)
        return std::nullopt;
      const auto count = std::max<std::int64_t>(0, (span + delta + (delta > 0 ? -1 : 1)) / delta);
      if (count > max_folded_elements) return std::nullopt;
      int_tensor r;
      r.type = x.type;
      r.dims = {count};
      for (std::int64_t i = 0; i < count; ++i) r.values.push_back(start + i * delta);
      return r;
    }
    if (op == "Expand") {
      if (xs.size() < 2 || !xs[1]) return std::nullopt;
      int_tensor target;
      target.dims = xs[1]->values;
      for (auto d : target.dims)
        if (d < 0) return std::nullopt;
      auto out = broadcast({&x, &target});
      if (!out) return std::nullopt;
      int_tensor r;
      r.type = x.type;
      r.dims = *out;
      const auto count = r.size();
      if (count > max_folded_elements) return std::nullopt;
      for (std::int64_t i = 0; i < count; ++i) r.values.push_back(broadcast_at(x, *out, i));
      return r;
    }
    return std::nullopt;
  }
 private:

  ::onnx::ModelProto& model_;
  std::size_t count_ = 0;
};

}  // namespace detail

/// One round of folding over the whole model (subgraphs included); returns how many nodes became
/// Constant nodes. Run shape inference between rounds: folding needs static shapes for Shape and
/// Size, and folded values let inference resolve more shapes.
inline std::size_t fold_constants(::onnx::ModelProto& model) { return detail::folder(model).run(); }

}  // namespace ipu::onnx
