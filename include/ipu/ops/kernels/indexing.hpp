#pragma once
// Indexing kernels: Gather, GatherElements, GatherND, ScatterElements, ScatterND, Compress,
// Unique and NonZero. Reads and plain writes move bytes (every element type); scatter reductions
// need numbers.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// An index into an axis of size n, with negative values counting from the back.
inline std::int64_t checked_index(const kernel_context& ctx, std::int64_t i, std::int64_t n) {
  if (i < -n || i >= n)
    throw ctx.fail("index " + std::to_string(i) + " is out of range for an axis of size " + std::to_string(n),
                   "indices must lie in [-n, n)");
  return i < 0 ? i + n : i;
}

/// Steps a multi-index through a shape in row-major order.
struct odometer {
  std::vector<std::int64_t> dims, idx;
  explicit odometer(std::vector<std::int64_t> d) : dims(std::move(d)), idx(dims.size(), 0) {}
  void next() {
    for (std::size_t k = dims.size(); k-- > 0;) {
      if (++idx[k] < dims[k]) return;
      idx[k] = 0;
    }
  }
};

inline void gather_kernel(const kernel_context& ctx) {
  const auto data = ctx.input(0);
  const auto& ds = data.info().shape;
  const auto indices = read_ints(ctx, ctx.input(1), "indices");
  const auto& is = ctx.inputs[1].info().shape;
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), ds.rank());
  std::vector<std::int64_t> out_dims(ds.begin(), ds.begin() + static_cast<std::ptrdiff_t>(axis));
  out_dims.insert(out_dims.end(), is.begin(), is.end());
  out_dims.insert(out_dims.end(), ds.begin() + static_cast<std::ptrdiff_t>(axis) + 1, ds.end());
  check_output_shape(ctx, 0, shape(out_dims));
  // The indices' axes are contiguous in the output, so they act as one axis of the copy.
  const auto st = ds.strides();
  axis_tables t;
  for (std::size_t k = 0; k < ds.rank(); ++k) {
    if (k != axis) {
      t.dims.push_back(ds[k]);
      t.offsets.push_back(linear_table(ds[k], 0, 1, st[k]));
      continue;
    }
    std::vector<std::int64_t> tab(indices.size());
    for (std::size_t i = 0; i < indices.size(); ++i) tab[i] = checked_index(ctx, indices[i], ds[k]) * st[k];
    t.dims.push_back(static_cast<std::int64_t>(indices.size()));
    t.offsets.push_back(std::move(tab));
  }
  gather_axes(ctx, t, data.data(), ctx.outputs[0].data(), size_of(data.info().type));
}

inline void gather_elements_kernel(const kernel_context& ctx) {
  const auto data = ctx.input(0);
  const auto& ds = data.info().shape;
  const auto indices = read_ints(ctx, ctx.input(1), "indices");
  const auto& is = ctx.inputs[1].info().shape;
  if (is.rank() != ds.rank()) throw ctx.fail("data and indices differ in rank", "give indices the data's rank");
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), ds.rank());
  check_output_shape(ctx, 0, is);
  const auto st = ds.strides();
  const std::size_t esize = size_of(data.info().type);
  odometer it(is.dims());
  for (std::size_t p = 0; p < indices.size(); ++p, it.next()) {
    std::int64_t off = 0;
    for (std::size_t k = 0; k < ds.rank(); ++k) {
      const std::int64_t i = k == axis ? checked_index(ctx, indices[p], ds[k]) : it.idx[k];
      if (i >= ds[k]) throw ctx.fail("indices is larger than data outside the gather axis", "fix the shapes");
      off += i * st[k];
    }
    std::memcpy(ctx.outputs[0].data() + p * esize, data.data() + static_cast<std::size_t>(off) * esize, esize);
  }
}

/// For GatherND/ScatterND: the element offset in `data` of each index tuple, plus the slice size.
struct nd_plan {
  std::vector<std::int64_t> offsets;  // one per tuple, in elements
  std::int64_t slice = 1;             // elements per gathered slice
};

inline nd_plan plan_nd(const kernel_context& ctx, const shape& ds, const std::vector<std::int64_t>& indices,
                       const shape& is, std::size_t batch_dims) {
  if (is.rank() < 1 || batch_dims >= is.rank() || batch_dims > ds.rank())
    throw ctx.fail("batch_dims " + std::to_string(batch_dims) + " is too large for these shapes", "reduce batch_dims");
  const auto m = static_cast<std::size_t>(is[is.rank() - 1]);
  if (m < 1 || batch_dims + m > ds.rank())
    throw ctx.fail("index tuples of length " + std::to_string(m) + " do not fit data of rank " +
                       std::to_string(ds.rank()),
                   "the last indices dimension must be in [1, rank(data) - batch_dims]");
  std::int64_t batches = 1;
  for (std::size_t k = 0; k < batch_dims; ++k) {
    if (is[k] != ds[k]) throw ctx.fail("data and indices differ in a batch dimension", "fix the shapes");
    batches *= is[k];
  }
  nd_plan p;
  for (std::size_t k = batch_dims + m; k < ds.rank(); ++k) p.slice *= ds[k];
  const auto st = ds.strides();
  const std::int64_t batch_stride = batch_dims ? st[batch_dims - 1] : 0;
  const auto tuples = static_cast<std::int64_t>(indices.size() / m);
  const std::int64_t per_batch = batches ? tuples / batches : 0;
  p.offsets.assign(static_cast<std::size_t>(tuples), 0);  // not resize: GCC 12 -O3 -Wnull-dereference
  for (std::int64_t t = 0; t < tuples; ++t) {
    std::int64_t off = per_batch ? (t / per_batch) * batch_stride : 0;
    for (std::size_t j = 0; j < m; ++j)
      off += checked_index(ctx, indices[static_cast<std::size_t>(t) * m + j], ds[batch_dims + j]) * st[batch_dims + j];
    p.offsets[static_cast<std::size_t>(t)] = off;
  }
  return p;
}

inline void gather_nd_kernel(const kernel_context& ctx) {
  const auto data = ctx.input(0);
  const auto& ds = data.info().shape;
  const auto indices = read_ints(ctx, ctx.input(1), "indices");
  const auto& is = ctx.inputs[1].info().shape;
  const auto b = static_cast<std::size_t>(ctx.attr_int("batch_dims", 0));
  const auto plan = plan_nd(ctx, ds, indices, is, b);
  std::vector<std::int64_t> out_dims(is.begin(), is.end() - 1);
  out_dims.insert(out_dims.end(), ds.begin() + static_cast<std::ptrdiff_t>(b + static_cast<std::size_t>(is[is.rank() - 1])),
                  ds.end());
  check_output_shape(ctx, 0, shape(out_dims));
  const std::size_t bytes = static_cast<std::size_t>(plan.slice) * size_of(data.info().type);
  for (std::size_t t = 0; t < plan.offsets.size(); ++t)
    std::memcpy(ctx.outputs[0].data() + t * bytes,
                data.data() + static_cast<std::size_t>(plan.offsets[t]) * size_of(data.info().type), bytes);
}

/// Applies a scatter reduction ("none", "add", "mul", "max", "min") of `src` into `dst`.
enum class scatter_reduction { none, add, mul, max, min };

inline scatter_reduction parse_reduction(const kernel_context& ctx) {
  const std::string r = ctx.attr_string("reduction", "none");
  if (r == "none") return scatter_reduction::none;
  if (r == "add") return scatter_reduction::add;
  if (r == "mul") return scatter_reduction::mul;
  if (r == "max") return scatter_reduction::max;
  if (r == "min") return scatter_reduction::min;
  throw ctx.fail("unknown reduction '" + r + "'", "use none, add, mul, max or min");
}

/// d (op)= s for one element of type T.
template <class T>
void scatter_one(scatter_reduction red, T& d, const T s) {
  if constexpr (std::is_same_v<T, bool>) {
    // BOOL: add is logical or, mul logical and (numpy semantics).
    if (red == scatter_reduction::add || red == scatter_reduction::max) d = d || s;
    else if (red == scatter_reduction::none) d = s;
    else d = d && s;
  } else {
    using A = acc_t<T>;  // exact for add/mul before the single rounding back to T
    const A a = static_cast<A>(d), b = static_cast<A>(s);
    A r = a;
    switch (red) {
      case scatter_reduction::add: r = acc_add(a, b); break;
      case scatter_reduction::mul: r = acc_mul(a, b); break;
      case scatter_reduction::max: r = a < b ? b : a; break;
      case scatter_reduction::min: r = b < a ? b : a; break;
      case scatter_reduction::none: d = s; return;
    }
    d = convert<T>(r);
  }
}

/// dst[k] (op)= src[k] for a run of n elements.
inline void scatter_run(const kernel_context& ctx, scatter_reduction red, data_type type, std::byte* dst,
                        const std::byte* src, std::int64_t n) {
  const std::size_t esize = size_of(type);
  if (red == scatter_reduction::none) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * esize);
    return;
  }
  visit_type(type, ctx, [&]<class T>() {
    auto* d = reinterpret_cast<T*>(dst);
    const auto* s = reinterpret_cast<const T*>(src);
    for (std::int64_t k = 0; k < n; ++k) scatter_one(red, d[k], s[k]);
  });
}

inline void scatter_elements_kernel(const kernel_context& ctx) {
  copy_whole(ctx, 0, 0);
  const auto& ds = ctx.inputs[0].info().shape;
  // S64 indices are read in place (MaxPool's gradient scatters millions); others are widened.
  const auto index_view = ctx.input(1);
  std::vector<std::int64_t> widened;
  if (index_view.info().type != data_type::S64) widened = read_ints(ctx, index_view, "indices");
  const std::int64_t* indices =
      index_view.info().type == data_type::S64 ? data_as<std::int64_t>(index_view) : widened.data();
  const auto& is = ctx.inputs[1].info().shape;
  const auto count = static_cast<std::size_t>(is.num_elements());
  const auto updates = ctx.input(2);
  if (updates.info().shape != is || is.rank() != ds.rank() || updates.info().type != ctx.inputs[0].info().type)
    throw ctx.fail("updates must have the indices' shape and the data's type and rank", "fix the inputs");
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), ds.rank());
  const auto red = parse_reduction(ctx);
  const auto st = ds.strides();
  // The element type is dispatched once for the whole loop, not per element: MaxPool's gradient
  // scatters one update per pooled value.
  visit_type(updates.info().type, ctx, [&]<class T>() {
    auto* d = reinterpret_cast<T*>(ctx.outputs[0].data());
    const auto* s = reinterpret_cast<const T*>(updates.data());
    if (ds.rank() == 1) {
      // Flat data (MaxPool's gradient): the index is the offset; one unsigned compare checks it,
      // checked_index words the error.
      const std::int64_t n = ds[0];
      for (std::size_t p = 0; p < count; ++p) {
        const std::int64_t i = indices[p] < 0 ? indices[p] + n : indices[p];
        if (static_cast<std::uint64_t>(i) >= static_cast<std::uint64_t>(n)) checked_index(ctx, indices[p], n);
        if (red == scatter_reduction::none) d[i] = s[p];
        else scatter_one(red, d[i], s[p]);
      }
      return;
    }
    odometer it(is.dims());
    for (std::size_t p = 0; p < count; ++p, it.next()) {
      std::int64_t off = 0;
      for (std::size_t k = 0; k < ds.rank(); ++k) {
        const std::int64_t i = k == axis ? checked_index(ctx, indices[p], ds[k]) : it.idx[k];
        if (i >= ds[k]) throw ctx.fail("indices is larger than data outside the scatter axis", "fix the shapes");
        off += i * st[k];
      }
      scatter_one(red, d[off], s[p]);
    }
  });
}

inline void scatter_nd_kernel(const kernel_context& ctx) {
  copy_whole(ctx, 0, 0);
  const auto& ds = ctx.inputs[0].info().shape;
  const auto indices = read_ints(ctx, ctx.input(1), "indices");
  const auto& is = ctx.inputs[1].info().shape;
  const auto updates = ctx.input(2);
  const auto plan = plan_nd(ctx, ds, indices, is, 0);
  std::vector<std::int64_t> up_dims(is.begin(), is.end() - 1);
  up_dims.insert(up_dims.end(), ds.begin() + is[is.rank() - 1], ds.end());
  if (updates.info().shape != shape(up_dims) || updates.info().type != ctx.inputs[0].info().type)
    throw ctx.fail("updates is " + to_string(updates.info()) + ", expected shape " + to_string(shape(up_dims)) +
                       " and the data's type",
                   "fix the updates shape");
  const auto red = parse_reduction(ctx);
  const auto type = updates.info().type;
  const std::size_t esize = size_of(type);
  for (std::size_t t = 0; t < plan.offsets.size(); ++t)
    scatter_run(ctx, red, type, ctx.outputs[0].data() + static_cast<std::size_t>(plan.offsets[t]) * esize,
                updates.data() + t * static_cast<std::size_t>(plan.slice) * esize, plan.slice);
}

/// Compress: keeps the slices (or, without an axis, the flattened elements) whose condition is
/// true. The output shape depends on the condition, so it must match the IR's.
inline void compress_kernel(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto cond = ctx.input(1);
  if (cond.info().type != data_type::BOOL || cond.info().shape.rank() != 1)
    throw ctx.fail("condition must be a 1-D BOOL tensor", "fix the condition input");
  const bool* c = data_as<bool>(cond);
  const auto nc = cond.info().num_elements();
  const std::size_t esize = size_of(x.info().type);
  const auto& xs = x.info().shape;
  std::vector<std::int64_t> kept;
  if (!ctx.has_attr("axis")) {
    for (std::int64_t i = 0; i < std::min(nc, xs.num_elements()); ++i)
      if (c[i]) kept.push_back(i);
    check_output_shape(ctx, 0, shape{static_cast<std::int64_t>(kept.size())});
    for (std::size_t i = 0; i < kept.size(); ++i)
      std::memcpy(ctx.outputs[0].data() + i * esize, x.data() + static_cast<std::size_t>(kept[i]) * esize, esize);
    return;
  }
  const std::size_t axis = normalize_axis(ctx, ctx.attr_int("axis", 0), xs.rank());
  for (std::int64_t i = 0; i < std::min(nc, xs[axis]); ++i)
    if (c[i]) kept.push_back(i);
  std::vector<std::int64_t> dims = xs.dims();
  dims[axis] = static_cast<std::int64_t>(kept.size());
  check_output_shape(ctx, 0, shape(dims));
  const auto st = xs.strides();
  axis_tables t;
  for (std::size_t k = 0; k < xs.rank(); ++k) {
    t.dims.push_back(dims[k]);
    if (k == axis) {
      std::vector<std::int64_t> tab;
      for (auto i : kept) tab.push_back(i * st[k]);
      t.offsets.push_back(std::move(tab));
    } else {
      t.offsets.push_back(linear_table(dims[k], 0, 1, st[k]));
    }
  }
  gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), esize);
}

/// Unique's order on elements: numbers by value, NaN after every number and equal to NaN (as
/// numpy's unique collapses NaNs), so the sort is a strict weak order for every input.
template <class T>
int unique_compare(T a, T b) {
  if constexpr (is_float_v<T>) {
    const auto x = static_cast<compute_t<T>>(a), y = static_cast<compute_t<T>>(b);
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return nx == ny ? 0 : nx ? 1 : -1;
    return x < y ? -1 : y < x ? 1 : 0;
  } else {
    return a < b ? -1 : b < a ? 1 : 0;
  }
}

/// Unique: the distinct elements (no axis: of the flattened input) or distinct slices along
/// `axis`, sorted ascending (slices lexicographically) or, with sorted=0, in order of first
/// occurrence; with the first occurrence, the inverse mapping and the count of each.
inline void unique_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"axis", "sorted"});
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  const bool sorted = ctx.attr_int("sorted", 1) != 0;
  const bool has_axis = ctx.has_attr("axis");
  const std::size_t axis = has_axis ? normalize_axis(ctx, ctx.attr_int("axis", 0), xs.rank()) : 0;
  // Slice k holds, for every o < outer and i < inner, element (o * n + k) * inner + i.
  std::int64_t outer = 1, n = xs.num_elements(), inner = 1;
  if (has_axis) {
    n = xs[axis];
    for (std::size_t k = 0; k < axis; ++k) outer *= xs[k];
    for (std::size_t k = axis + 1; k < xs.rank(); ++k) inner *= xs[k];
  }
  std::vector<std::int64_t> order(static_cast<std::size_t>(n));
  for (std::int64_t k = 0; k < n; ++k) order[static_cast<std::size_t>(k)] = k;
  std::vector<std::int64_t> group(static_cast<std::size_t>(n));  // slice -> its group, in sorted order
  std::vector<std::int64_t> first;                                // group -> first slice
  visit_type(x.info().type, ctx, [&]<class T>() {
    const T* p = data_as<T>(x);
    auto compare = [&](std::int64_t a, std::int64_t b) {
      for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t i = 0; i < inner; ++i)
          if (const int c = unique_compare(p[(o * n + a) * inner + i], p[(o * n + b) * inner + i])) return c;
      return 0;
    };
    // Stable: within a group the first occurrence comes first.
    std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return compare(a, b) < 0; });
    for (std::size_t j = 0; j < order.size(); ++j) {
      if (j == 0 || compare(order[j - 1], order[j]) != 0) first.push_back(order[j]);
      group[static_cast<std::size_t>(order[j])] = static_cast<std::int64_t>(first.size()) - 1;
    }
  });
  const auto u = static_cast<std::int64_t>(first.size());
  // Output position of each group: sorted order, or order of first occurrence.
  std::vector<std::int64_t> position(first.size());
  for (std::size_t gi = 0; gi < first.size(); ++gi) position[gi] = static_cast<std::int64_t>(gi);
  if (!sorted) {
    std::vector<std::int64_t> by_first(first.size());
    for (std::size_t gi = 0; gi < first.size(); ++gi) by_first[gi] = static_cast<std::int64_t>(gi);
    std::sort(by_first.begin(), by_first.end(), [&](std::int64_t a, std::int64_t b) {
      return first[static_cast<std::size_t>(a)] < first[static_cast<std::size_t>(b)];
    });
    for (std::size_t j = 0; j < by_first.size(); ++j) position[static_cast<std::size_t>(by_first[j])] = static_cast<std::int64_t>(j);
  }
  std::vector<std::int64_t> firsts(first.size()), counts(first.size(), 0), inverse(static_cast<std::size_t>(n));
  for (std::size_t gi = 0; gi < first.size(); ++gi) firsts[static_cast<std::size_t>(position[gi])] = first[gi];
  for (std::int64_t k = 0; k < n; ++k) {
    const auto at = position[static_cast<std::size_t>(group[static_cast<std::size_t>(k)])];
    inverse[static_cast<std::size_t>(k)] = at;
    ++counts[static_cast<std::size_t>(at)];
  }

  std::vector<std::int64_t> y_dims = has_axis ? xs.dims() : std::vector<std::int64_t>{u};
  if (has_axis) y_dims[axis] = u;
  check_output_shape(ctx, 0, shape(y_dims));
  if (ctx.outputs[0].info().type != x.info().type)
    throw ctx.fail("Y must have X's type, the IR says " + to_string(ctx.outputs[0].info()), "declare Y like X");
  if (has_axis) {  // Y gathers the first slice of every group along the axis
    const auto st = xs.strides();
    axis_tables t;
    for (std::size_t k = 0; k < xs.rank(); ++k) {
      t.dims.push_back(y_dims[k]);
      if (k == axis) {
        std::vector<std::int64_t> tab;
        for (auto f : firsts) tab.push_back(f * st[k]);
        t.offsets.push_back(std::move(tab));
      } else {
        t.offsets.push_back(linear_table(y_dims[k], 0, 1, st[k]));
      }
    }
    gather_axes(ctx, t, x.data(), ctx.outputs[0].data(), size_of(x.info().type));
  } else {
    const std::size_t esize = size_of(x.info().type);
    for (std::size_t j = 0; j < firsts.size(); ++j)
      std::memcpy(ctx.outputs[0].data() + j * esize, x.data() + static_cast<std::size_t>(firsts[j]) * esize, esize);
  }
  const std::vector<std::int64_t>* extra[] = {&firsts, &inverse, &counts};
  for (std::size_t i = 1; i < 4; ++i) {
    if (!has_output(ctx, i)) continue;
    const auto& v = *extra[i - 1];
    check_output_shape(ctx, i, shape{static_cast<std::int64_t>(v.size())});
    if (ctx.outputs[i].info().type != data_type::S64)
      throw ctx.fail("output #" + std::to_string(i) + " must be INT64, the IR says " + to_string(ctx.outputs[i].info()),
                     "declare it INT64");
    if (!v.empty()) std::memcpy(ctx.outputs[i].data(), v.data(), v.size() * sizeof(std::int64_t));
  }
}

/// NonZero: the indices of the non-zero elements, [rank, count], in row-major order (a scalar
/// gives [0, count]).
inline void non_zero_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {});
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  const auto total = xs.num_elements();
  std::vector<std::int64_t> hits;
  visit_type(x.info().type, ctx, [&]<class T>() {
    const T* p = data_as<T>(x);
    for (std::int64_t i = 0; i < total; ++i)
      if (convert<bool>(p[i])) hits.push_back(i);
  });
  const auto count = static_cast<std::int64_t>(hits.size());
  check_output_shape(ctx, 0, shape{static_cast<std::int64_t>(xs.rank()), count});
  if (ctx.outputs[0].info().type != data_type::S64)
    throw ctx.fail("the output must be INT64, the IR says " + to_string(ctx.outputs[0].info()), "declare it INT64");
  auto* out = data_as<std::int64_t>(ctx.outputs[0]);
  const auto st = xs.strides();
  for (std::size_t k = 0; k < xs.rank(); ++k)
    for (std::int64_t j = 0; j < count; ++j)
      out[static_cast<std::int64_t>(k) * count + j] = hits[static_cast<std::size_t>(j)] / st[k] % xs[k];
}

inline void register_indexing(op_registry& r) {
  r.add({"", "Gather", gather_kernel});
  r.add({"", "GatherElements", gather_elements_kernel});
  r.add({"", "GatherND", gather_nd_kernel});
  r.add({"", "ScatterElements", scatter_elements_kernel});
  r.add({"", "ScatterND", scatter_nd_kernel});
  r.add({"", "Compress", compress_kernel});
  r.add({"", "Unique", unique_kernel});
  r.add({"", "NonZero", non_zero_kernel});
}

}  // namespace ipu::detail::tensor_ops
