#pragma once
// The op table's text family: TfIdfVectorizer (opset 9) and StringNormalizer (opset 10). A row
// holds what the library knows about an op: shape rule, cost rule, flags and the slot for its
// gradient rule; the host kernels sit beside it, in ipu/ops/kernels/text.hpp.
//
// StringNormalizer drops the stopwords of a [C] or [1, C] STRING tensor and changes the case of the
// rest. How many remain depends on the values, so it has no shape rule: the model declares the
// output's shape and the kernel checks it.
//
// TfIdfVectorizer counts, per row of token ids, how often each n-gram of its pool occurs and writes
// the counts (TF), the n-grams' weights where they occur (IDF) or both multiplied (TFIDF) into the
// columns ngram_indexes names. The attributes are read and checked in one place (tfidf_spec), by
// the shape rule at import and by the kernel at run time, so both refuse a bad model alike. A pool
// of strings (pool_strings) is numbered, each distinct word once, and a STRING input looked up by
// those numbers, so both kinds of pool count alike. No gradient rule: the input is token ids or
// words.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace detail::text {

/// The largest output column TfIdfVectorizer may name: far more than any vocabulary, and small
/// enough that batch * columns cannot overflow before the shape checks it.
inline constexpr std::int64_t max_tfidf_index = std::int64_t{1} << 32;

enum class tfidf_mode { tf, idf, tfidf };

/// TfIdfVectorizer's attributes, checked. N-gram j of the pool (counted across the lengths, shorter
/// first) is pool[at[j], at[j] + length[j]) and writes column index[j] with weight weight[j].
struct tfidf_spec {
  std::int64_t min_n = 0, max_n = 0, max_skip = 0;
  tfidf_mode mode = tfidf_mode::tf;
  std::vector<std::int64_t> pool;
  std::vector<std::size_t> at, length;
  std::vector<std::int64_t> index;
  std::vector<float> weight;  // all 1 when the model gives none
  std::int64_t columns = 0;   // max(ngram_indexes) + 1
  /// With pool_strings: the pool's distinct words, word i numbered i in `pool`; X is then STRING.
  std::vector<std::string> words;
  bool strings = false;
};

/// Reads and checks the attributes of `c` (an infer_context or a kernel_context: both have
/// has_attr, attr_* and fail).
template <class Ctx>
tfidf_spec tfidf_attributes(const Ctx& c) {
  const auto num = [](auto v) { return std::to_string(v); };
  for (const char* name : {"mode", "min_gram_length", "max_gram_length", "max_skip_count", "ngram_counts",
                           "ngram_indexes"})
    if (!c.has_attr(name))
      throw c.fail(std::string("the required attribute ") + name + " is missing",
                   "give it as the ONNX TfIdfVectorizer specification says");
  tfidf_spec s;
  s.strings = c.has_attr("pool_strings");
  if (s.strings == c.has_attr("pool_int64s"))
    throw c.fail(s.strings ? "both pool_int64s and pool_strings are given" : "the pool (pool_int64s or pool_strings) is missing",
                 "give the n-grams in one of them: pool_int64s for token ids, pool_strings for words");
  const auto mode = c.attr_string("mode");
  if (mode == "TF") s.mode = tfidf_mode::tf;
  else if (mode == "IDF") s.mode = tfidf_mode::idf;
  else if (mode == "TFIDF") s.mode = tfidf_mode::tfidf;
  else throw c.fail("mode is '" + mode + "'", "use TF, IDF or TFIDF");
  s.min_n = c.attr_int("min_gram_length", 0);
  s.max_n = c.attr_int("max_gram_length", 0);
  s.max_skip = c.attr_int("max_skip_count", 0);
  if (s.min_n < 1 || s.max_n < s.min_n)
    throw c.fail("min_gram_length " + num(s.min_n) + " and max_gram_length " + num(s.max_n) +
                     " do not satisfy 1 <= min <= max",
                 "count n-grams of lengths min_gram_length to max_gram_length, both at least 1");
  if (s.max_skip < 0)
    throw c.fail("max_skip_count is " + num(s.max_skip) + "; it must be at least 0", "give 0 for contiguous n-grams");
  if (s.strings) {
    std::vector<std::string> pool = c.attr_strings("pool_strings");
    std::unordered_map<std::string, std::int64_t> number;
    for (auto& w : pool) {
      const auto [it, added] = number.emplace(w, static_cast<std::int64_t>(s.words.size()));
      if (added) s.words.push_back(w);
      s.pool.push_back(it->second);
    }
  } else {
    s.pool = c.attr_ints("pool_int64s");
  }
  const auto counts = c.attr_ints("ngram_counts");
  const auto pool_size = static_cast<std::int64_t>(s.pool.size());
  if (counts.empty() || counts[0] != 0)
    throw c.fail("ngram_counts must start with 0 (where the 1-grams start in the pool)",
                 "give the start of each n-gram length's part of pool_int64s, 1-grams first");
  if (s.max_n > static_cast<std::int64_t>(counts.size()))
    throw c.fail("max_gram_length is " + num(s.max_n) + " but ngram_counts describes n-grams up to length " +
                     num(counts.size()) + " only",
                 "lower max_gram_length or give the pool's n-grams of every length up to it");
  for (std::size_t k = 0; k < counts.size(); ++k) {
    const auto begin = counts[k], end = k + 1 < counts.size() ? counts[k + 1] : pool_size;
    const auto n = static_cast<std::int64_t>(k) + 1;
    if (begin > end || end > pool_size)
      throw c.fail("ngram_counts[" + num(k) + "] = " + num(begin) + " and the next start " + num(end) +
                       " are not ordered within the pool's " + num(pool_size) + " values",
                   "give non-decreasing starts no greater than the pool's size");
    if ((end - begin) % n != 0)
      throw c.fail("the " + num(n) + "-grams take " + num(end - begin) + " pool values, not a multiple of " + num(n),
                   "give whole n-grams in each part of the pool");
    for (auto p = begin; p < end; p += n) {
      s.at.push_back(static_cast<std::size_t>(p));
      s.length.push_back(static_cast<std::size_t>(n));
    }
  }
  s.index = c.attr_ints("ngram_indexes");
  if (s.index.size() != s.at.size())
    throw c.fail("ngram_indexes has " + num(s.index.size()) + " values but the pool holds " + num(s.at.size()) +
                     " n-grams",
                 "give one output column per n-gram of the pool");
  std::vector<std::int64_t> sorted = s.index;
  std::sort(sorted.begin(), sorted.end());
  if (!sorted.empty() && (sorted.front() < 0 || sorted.back() > max_tfidf_index))
    throw c.fail("ngram_indexes holds " + num(sorted.front() < 0 ? sorted.front() : sorted.back()) +
                     ", outside [0, 2^32]",
                 "number the output columns from 0");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    throw c.fail("two n-grams of the pool write the same output column",
                 "give each n-gram its own entry of ngram_indexes");
  s.columns = sorted.empty() ? 0 : sorted.back() + 1;
  // Two equal n-grams would make a match ambiguous (which column counts it?).
  std::vector<std::size_t> order(s.at.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  const auto gram = [&s](std::size_t j) {
    return std::vector<std::int64_t>(s.pool.begin() + static_cast<std::ptrdiff_t>(s.at[j]),
                                     s.pool.begin() + static_cast<std::ptrdiff_t>(s.at[j] + s.length[j]));
  };
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return gram(a) < gram(b); });
  for (std::size_t j = 1; j < order.size(); ++j)
    if (gram(order[j - 1]) == gram(order[j]))
      throw c.fail("the pool holds the same " + num(s.length[order[j]]) + "-gram twice (n-grams #" +
                       num(std::min(order[j - 1], order[j])) + " and #" + num(std::max(order[j - 1], order[j])) + ")",
                   "list each n-gram once");
  if (c.has_attr("weights")) {
    s.weight = c.attr_floats("weights");
    if (s.weight.size() != s.index.size())
      throw c.fail("weights has " + num(s.weight.size()) + " values but ngram_indexes " + num(s.index.size()),
                   "give one weight per n-gram of the pool");
    for (float w : s.weight)
      if (!std::isfinite(w)) throw c.fail("weights holds a non-finite value", "give finite weights");
  } else {
    s.weight.assign(s.index.size(), 1.0f);
  }
  return s;
}

}  // namespace detail::text

namespace detail::infer {

/// TfIdfVectorizer: X [C] or [N, C] of INT32 / INT64 token ids (pool_int64s) or STRING words
/// (pool_strings) -> F32 [columns] or [N, columns].
inline std::vector<tensor_info> tfidf_vectorizer(const infer_context& c) {
  const auto s = text::tfidf_attributes(c);
  const auto& x = c.input(0);
  if (s.strings && x.type != data_type::STRING)
    throw c.fail("X is " + to_string(x) + " but the pool is pool_strings: the words must be STRING",
                 "feed the words as a STRING tensor, or give the pool as pool_int64s token ids");
  if (!s.strings && x.type != data_type::S32 && x.type != data_type::S64)
    throw c.fail("X is " + to_string(x) + "; with pool_int64s TfIdfVectorizer takes INT32 or INT64 token ids",
                 x.type == data_type::STRING ? "give the pool as pool_strings to count words"
                                             : "cast the ids to INT64");
  if (x.shape.rank() == 1) return {tensor_info{data_type::F32, shape{s.columns}}};
  if (x.shape.rank() == 2) return {tensor_info{data_type::F32, shape{x.shape[0], s.columns}}};
  throw c.fail("X is " + to_string(x) + "; it must be [C] or [N, C]", "reshape the token ids to one or two axes");
}

}  // namespace detail::infer

namespace detail::cost_rules {

/// TfIdfVectorizer: from each position of a row, one lookup per n-gram length and skip that fits
/// (a unigram once, whatever the skip), each hashing and comparing its n tokens at the scalar
/// rate; a row's n-grams span it, so each row sits on one tile and the tiles receive their share
/// of X. Then one write per output column.
constexpr op_cost tfidf_vectorizer(const op_cost_context& c) {
  const auto& x = c.input(0);
  const auto row = dim(x, -1);
  const auto min_n = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("min_gram_length", 1), 1));
  const auto max_n = static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("max_gram_length", 1), 1));
  const auto skips = std::min<std::uint64_t>(
      static_cast<std::uint64_t>(std::max<std::int64_t>(c.int_attr("max_skip_count", 0), 0)) + 1, std::max<std::uint64_t>(row, 1));
  std::uint64_t per_position = 0;
  for (auto n = min_n; n <= max_n && n <= 64; ++n) per_position += (n == 1 ? 1 : skips) * (n + 2);
  const auto ops = std::min<std::uint64_t>(mul_sat(per_position, scalar_rate_ops(c, data_type::S32)), 1u << 16);
  op_cost r = vector_pass(c, data_type::S32, c.input_elements(0), 1, static_cast<std::uint32_t>(ops),
                          ceil_div(costed_bytes(x, c.options), c.tiles()));
  r += vector_pass(c, data_type::F32, c.output_elements(), 1, 1);
  return r;
}

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def text[] = {
    // domain, type, shape rule, cost rule, flags
    {"", "TfIdfVectorizer", detail::infer::tfidf_vectorizer, detail::cost_rules::tfidf_vectorizer, string_op},
    {"", "StringNormalizer", {}, detail::cost_rules::data_movement, string_op},
};

}  // namespace op_families

}  // namespace ipu
