#pragma once
// Text kernels: TfIdfVectorizer (opset 9), as the ONNX operator specification defines it. From
// each position i of a row, an n-gram of length n >= 2 with skip s takes the tokens at i, i + s + 1,
// i + 2 (s + 1), ... (s from 0 to max_skip_count); a 1-gram is counted once per position, whatever
// the skip. The attributes are checked by detail::text::tfidf_attributes (ops/families/text.hpp).
#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "ipu/ops/families/text.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"

namespace ipu::detail::tensor_ops {

/// The pool's n-grams by content, one table per length; each lookup hashes the probe it is given.
class tfidf_pool {
 public:
  explicit tfidf_pool(const text::tfidf_spec& s) : tables_(static_cast<std::size_t>(s.max_n) + 1) {
    for (std::size_t j = 0; j < s.at.size(); ++j) {
      if (s.length[j] >= tables_.size()) continue;  // longer than max_gram_length: never looked up
      const auto* g = s.pool.data() + s.at[j];
      tables_[s.length[j]].emplace(std::vector<std::int64_t>(g, g + s.length[j]), j);
    }
  }
  /// The pool n-gram equal to `probe`, or -1.
  [[nodiscard]] std::ptrdiff_t find(const std::vector<std::int64_t>& probe) const {
    const auto& t = tables_[probe.size()];
    const auto it = t.find(probe);
    return it == t.end() ? -1 : static_cast<std::ptrdiff_t>(it->second);
  }

 private:
  struct hash {
    std::size_t operator()(const std::vector<std::int64_t>& v) const noexcept {
      std::uint64_t h = 0x9E3779B97F4A7C15u;
      for (auto x : v) {  // splitmix64's finaliser over each token, chained
        std::uint64_t z = h ^ static_cast<std::uint64_t>(x);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9u;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBu;
        h = z ^ (z >> 31);
      }
      return static_cast<std::size_t>(h);
    }
  };
  std::vector<std::unordered_map<std::vector<std::int64_t>, std::size_t, hash>> tables_;
};

inline void tfidf_vectorizer_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
                        "ngram_indexes", "pool_int64s", "pool_strings", "weights"});
  const auto s = text::tfidf_attributes(ctx);
  const auto x = ctx.input(0);
  const auto& xs = x.info().shape;
  if ((x.info().type != data_type::S32 && x.info().type != data_type::S64) || xs.rank() < 1 || xs.rank() > 2)
    throw ctx.fail("X is " + to_string(x.info()) + "; it must be INT32 or INT64 token ids shaped [C] or [N, C]",
                   "cast the ids to INT64 and reshape them to one or two axes");
  const std::int64_t rows = xs.rank() == 2 ? xs[0] : 1, width = xs[xs.rank() - 1];
  check_output_shape(ctx, 0, xs.rank() == 2 ? shape{rows, s.columns} : shape{s.columns});
  if (ctx.outputs[0].info().type != data_type::F32)
    throw ctx.fail("the output is " + to_string(ctx.outputs[0].info()) + ", not F32", "declare it FLOAT");
  const auto ids = read_ints(ctx, x, "X");
  const tfidf_pool pool(s);
  float* y = data_as<float>(ctx.outputs[0]);
  const auto cols = static_cast<std::size_t>(s.columns);
  ctx.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    std::vector<std::int64_t> count(s.at.size()), probe;
    for (std::size_t r = begin; r < end; ++r) {
      std::fill(count.begin(), count.end(), 0);
      const auto* row = ids.data() + r * static_cast<std::size_t>(width);
      for (std::int64_t i = 0; i < width; ++i)
        for (auto n = s.min_n; n <= s.max_n && n - 1 < width - i; ++n) {
          // A unigram has no gaps to skip; a longer n-gram's span (n - 1) * step must fit in the row,
          // so steps beyond width are never tried whatever max_skip_count says.
          const std::int64_t last_step = n == 1 ? 1 : std::min(s.max_skip, width - 1) + 1;
          for (std::int64_t step = 1; step <= last_step; ++step) {
            if ((n - 1) * step >= width - i) break;
            probe.clear();
            for (std::int64_t k = 0; k < n; ++k) probe.push_back(row[i + k * step]);
            if (const auto j = pool.find(probe); j >= 0) ++count[static_cast<std::size_t>(j)];
          }
        }
      float* out = y + r * cols;
      std::fill(out, out + cols, 0.0f);
      for (std::size_t j = 0; j < count.size(); ++j) {
        const auto col = static_cast<std::size_t>(s.index[j]);
        const auto tf = static_cast<float>(count[j]);
        switch (s.mode) {
          case text::tfidf_mode::tf: out[col] = tf; break;
          case text::tfidf_mode::idf: out[col] = count[j] > 0 ? s.weight[j] : 0.0f; break;
          case text::tfidf_mode::tfidf: out[col] = tf * s.weight[j]; break;
        }
      }
    }
  });
}

inline void register_text(op_registry& r) { r.add({"", "TfIdfVectorizer", tfidf_vectorizer_kernel, true}); }

}  // namespace ipu::detail::tensor_ops
