#pragma once
// Einsum: any number of operands, explicit or implicit output, ellipsis broadcasting, repeated
// labels within an operand (diagonals) and summation over labels missing from the output.
//
// The kernel walks every (output index, summed index) pair once, so its cost is the product of all
// label sizes; that is exact and simple rather than fast (no contraction reordering).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// A parsed equation with labels numbered: ellipsis dimensions are labels 0..ellipsis_rank-1
/// (right-aligned across operands), letters follow.
struct einsum_spec {
  std::size_t ellipsis_rank = 0;
  std::vector<std::int64_t> label_dims;                // size of each label
  std::vector<std::vector<std::size_t>> operand_axes;  // label of each axis of each operand
  std::vector<std::size_t> output;                     // label of each output axis
};

namespace einsum_detail {
struct term {
  std::string letters_before, letters_after;  // around the ellipsis (all in `before` if none)
  bool has_ellipsis = false;
};

inline term parse_term(const kernel_context& ctx, const std::string& s) {
  term t;
  const auto dots = s.find("...");
  if (dots != std::string::npos) {
    t.has_ellipsis = true;
    t.letters_before = s.substr(0, dots);
    t.letters_after = s.substr(dots + 3);
  } else {
    t.letters_before = s;
  }
  for (char c : t.letters_before + t.letters_after)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')))
      throw ctx.fail("invalid character '" + std::string(1, c) + "' in einsum term '" + s + "'",
                     "use letters and at most one '...' per term");
  return t;
}
}  // namespace einsum_detail

inline einsum_spec parse_einsum(const kernel_context& ctx, std::string eq, const std::vector<shape>& shapes) {
  using einsum_detail::term;
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const auto arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<term> terms;
  for (std::size_t start = 0;;) {
    const auto comma = lhs.find(',', start);
    terms.push_back(einsum_detail::parse_term(ctx, lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (terms.size() != shapes.size())
    throw ctx.fail("the equation has " + std::to_string(terms.size()) + " operands but the op has " +
                       std::to_string(shapes.size()) + " inputs",
                   "give one term per input");
  einsum_spec spec;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const auto letters = terms[i].letters_before.size() + terms[i].letters_after.size();
    if (shapes[i].rank() < letters || (!terms[i].has_ellipsis && shapes[i].rank() != letters))
      throw ctx.fail("term " + std::to_string(i) + " has " + std::to_string(letters) + " labels for a rank-" +
                         std::to_string(shapes[i].rank()) + " input",
                     "give one label per axis (or use '...')");
    if (terms[i].has_ellipsis) spec.ellipsis_rank = std::max(spec.ellipsis_rank, shapes[i].rank() - letters);
  }
  const std::size_t e = spec.ellipsis_rank;
  std::vector<int> letter_label(128, -1);
  std::vector<int> letter_count(128, 0);
  spec.label_dims.assign(e, 1);
  auto label_of = [&](char c) {
    auto& l = letter_label[static_cast<unsigned char>(c)];
    if (l < 0) {
      l = static_cast<int>(spec.label_dims.size());
      spec.label_dims.push_back(1);
    }
    return static_cast<std::size_t>(l);
  };
  // Dimensions agree, or one side is 1 and broadcasts.
  auto bind = [&](std::size_t label, std::int64_t dim) {
    auto& d = spec.label_dims[label];
    if (d != dim && d != 1 && dim != 1)
      throw ctx.fail("einsum dimension mismatch: " + std::to_string(d) + " vs " + std::to_string(dim),
                     "operands must agree on every label's size");
    if (dim != 1) d = dim;
  };
  for (std::size_t i = 0; i < terms.size(); ++i) {
    std::vector<std::size_t> axes;
    std::size_t k = 0;
    for (char c : terms[i].letters_before) {
      ++letter_count[static_cast<unsigned char>(c)];
      axes.push_back(label_of(c));
      bind(axes.back(), shapes[i][k++]);
    }
    if (terms[i].has_ellipsis) {
      const std::size_t n = shapes[i].rank() - terms[i].letters_before.size() - terms[i].letters_after.size();
      for (std::size_t j = 0; j < n; ++j) {
        axes.push_back(e - n + j);
        bind(axes.back(), shapes[i][k++]);
      }
    }
    for (char c : terms[i].letters_after) {
      ++letter_count[static_cast<unsigned char>(c)];
      axes.push_back(label_of(c));
      bind(axes.back(), shapes[i][k++]);
    }
    spec.operand_axes.push_back(std::move(axes));
  }
  if (arrow == std::string::npos) {  // implicit: broadcast dims, then letters used once, sorted
    for (std::size_t j = 0; j < e; ++j) spec.output.push_back(j);
    for (int c = 0; c < 128; ++c)
      if (letter_count[static_cast<std::size_t>(c)] == 1) spec.output.push_back(static_cast<std::size_t>(letter_label[static_cast<std::size_t>(c)]));
  } else {
    const auto out = einsum_detail::parse_term(ctx, eq.substr(arrow + 2));
    auto add = [&](const std::string& letters) {
      for (char c : letters) {
        const int l = letter_label[static_cast<unsigned char>(c)];
        if (l < 0)
          throw ctx.fail("output label '" + std::string(1, c) + "' does not appear in any input", "fix the equation");
        if (std::find(spec.output.begin(), spec.output.end(), static_cast<std::size_t>(l)) != spec.output.end())
          throw ctx.fail("output label '" + std::string(1, c) + "' appears twice", "fix the equation");
        spec.output.push_back(static_cast<std::size_t>(l));
      }
    };
    add(out.letters_before);
    if (out.has_ellipsis)  // without '...' in the output, broadcast dimensions are summed over
      for (std::size_t j = 0; j < e; ++j) spec.output.push_back(j);
    add(out.letters_after);
  }
  return spec;
}

inline void einsum_kernel(const kernel_context& ctx) {
  std::vector<shape> shapes;
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i) shapes.push_back(ctx.input(i).info().shape);
  const auto spec = parse_einsum(ctx, ctx.attr_string("equation"), shapes);
  const std::size_t labels = spec.label_dims.size();
  std::vector<std::int64_t> out_dims;
  for (auto l : spec.output) out_dims.push_back(spec.label_dims[l]);
  check_output_shape(ctx, 0, shape(out_dims));
  std::vector<bool> in_output(labels, false);
  for (auto l : spec.output) in_output[l] = true;
  std::vector<std::size_t> summed;
  for (std::size_t l = 0; l < labels; ++l)
    if (!in_output[l]) summed.push_back(l);
  // Per operand, the element stride of each label (repeated labels add up: a diagonal walk;
  // broadcast size-1 axes contribute nothing).
  const std::size_t n_ops = shapes.size();
  std::vector<std::vector<std::int64_t>> label_stride(n_ops, std::vector<std::int64_t>(labels, 0));
  for (std::size_t i = 0; i < n_ops; ++i) {
    const auto st = shapes[i].strides();
    for (std::size_t k = 0; k < spec.operand_axes[i].size(); ++k)
      if (shapes[i][k] != 1) label_stride[i][spec.operand_axes[i][k]] += st[k];
  }
  std::vector<std::int64_t> sum_dims;
  for (auto l : summed) sum_dims.push_back(spec.label_dims[l]);
  const std::int64_t n_sum = product(sum_dims);
  // Offsets of every summed index combination, per operand.
  std::vector<std::vector<std::int64_t>> sum_off(n_ops);
  for (std::size_t i = 0; i < n_ops; ++i) {
    std::vector<std::int64_t> off{0};
    for (std::size_t j = 0; j < summed.size(); ++j) {
      std::vector<std::int64_t> next;
      for (auto o : off)
        for (std::int64_t v = 0; v < sum_dims[j]; ++v) next.push_back(o + v * label_stride[i][summed[j]]);
      off = std::move(next);
    }
    sum_off[i] = std::move(off);
  }
  const auto& out = ctx.outputs[0];
  for (std::size_t i = 0; i < n_ops; ++i)
    if (ctx.inputs[i].info().type != out.info().type)
      throw ctx.fail("all operands and the output must share one element type", "cast the operands first");
  const auto n_out = static_cast<std::size_t>(product(out_dims));
  visit_numeric(out.info().type, ctx, [&]<class T>() {
    using A = acc_t<T>;
    std::vector<const T*> in(n_ops);
    for (std::size_t i = 0; i < n_ops; ++i) in[i] = data_as<T>(ctx.inputs[i]);
    T* o = data_as<T>(out);
    ctx.parallel_for(n_out, [&](std::size_t b, std::size_t e) {
      std::vector<std::int64_t> base(n_ops);
      for (std::size_t p = b; p < e; ++p) {
        std::fill(base.begin(), base.end(), 0);
        auto rest = static_cast<std::int64_t>(p);
        for (std::size_t k = spec.output.size(); k-- > 0;) {
          const std::int64_t idx = rest % out_dims[k];
          rest /= out_dims[k];
          for (std::size_t i = 0; i < n_ops; ++i) base[i] += idx * label_stride[i][spec.output[k]];
        }
        A acc{0};
        for (std::int64_t s = 0; s < n_sum; ++s) {
          A prod{1};
          for (std::size_t i = 0; i < n_ops; ++i)
            prod = acc_mul(prod, static_cast<A>(in[i][base[i] + sum_off[i][static_cast<std::size_t>(s)]]));
          acc = acc_add(acc, prod);
        }
        o[p] = convert<T>(acc);
      }
    });
  });
}

inline void register_einsum(op_registry& r) { r.add({"", "Einsum", einsum_kernel}); }

}  // namespace ipu::detail::tensor_ops
