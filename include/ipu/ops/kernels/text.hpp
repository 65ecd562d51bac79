#pragma once
// Text kernels: TfIdfVectorizer (opset 9), StringNormalizer (opset 10), and the conversions between
// numbers and strings that Cast and CastLike make.
//
// TfIdfVectorizer, as the ONNX operator specification defines it. From
// each position i of a row, an n-gram of length n >= 2 with skip s takes the tokens at i, i + s + 1,
// i + 2 (s + 1), ... (s from 0 to max_skip_count); a 1-gram is counted once per position, whatever
// the skip. The attributes are checked by detail::text::tfidf_attributes (ops/families/text.hpp).
#include <locale.h>
#include <wctype.h>

#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ipu/ops/families/text.hpp"
#include "ipu/ops/kernels/tensor_support.hpp"
#include "ipu/ops/registry.hpp"
#include "ipu/utf8.hpp"

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
  const bool ids_ok = s.strings ? x.info().type == data_type::STRING
                                : x.info().type == data_type::S32 || x.info().type == data_type::S64;
  if (!ids_ok || xs.rank() < 1 || xs.rank() > 2)
    throw ctx.fail("X is " + to_string(x.info()) + "; it must be " +
                       (s.strings ? "STRING words (the pool is pool_strings)" : "INT32 or INT64 token ids") +
                       " shaped [C] or [N, C]",
                   "feed the tokens with the pool's kind and reshape them to one or two axes");
  const std::int64_t rows = xs.rank() == 2 ? xs[0] : 1, width = xs[xs.rank() - 1];
  check_output_shape(ctx, 0, xs.rank() == 2 ? shape{rows, s.columns} : shape{s.columns});
  if (ctx.outputs[0].info().type != data_type::F32)
    throw ctx.fail("the output is " + to_string(ctx.outputs[0].info()) + ", not F32", "declare it FLOAT");
  // Words become their numbers in the pool; a word the pool lacks is -1, which no n-gram holds.
  std::vector<std::int64_t> ids;
  if (s.strings) {
    std::unordered_map<std::string_view, std::int64_t> number;
    for (std::size_t i = 0; i < s.words.size(); ++i) number.emplace(s.words[i], static_cast<std::int64_t>(i));
    const auto* words = data_as<string_ref>(x);
    ids.resize(static_cast<std::size_t>(xs.num_elements()));
    for (std::size_t i = 0; i < ids.size(); ++i) {
      const auto it = number.find(words[i].view());
      ids[i] = it == number.end() ? -1 : it->second;
    }
  } else {
    ids = read_ints(ctx, x, "X");
  }
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

// --- numbers <-> strings ----------------------------------------------------------------------------
/// A float or double as numpy's str() writes it, which ONNX's reference Cast and its test data
/// use: the shortest decimal that reads back as `v`, positional for 1e-4 <= |v| < 1e16 (with ".0"
/// on whole numbers), scientific otherwise. NaN and the infinities are spelled as Cast reads them.
template <class F>
std::string format_float(F v) {
  static_assert(std::is_same_v<F, float> || std::is_same_v<F, double>);
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "INF" : "-INF";
  const F a = std::fabs(v);
  const bool positional = a == 0 || (a >= F(1e-4) && a < F(1e16));
  char buf[400];  // a fixed-format double below 1e16 needs < 40 characters; scientific < 30
  const auto r = std::to_chars(buf, buf + sizeof buf, v, positional ? std::chars_format::fixed : std::chars_format::scientific);
  std::string s(buf, r.ptr);
  if (positional && s.find('.') == std::string::npos) s += ".0";
  return s;
}

/// An element as Cast writes it into a STRING tensor.
template <class T>
std::string format_element(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "True" : "False";  // numpy's spelling
  } else if constexpr (std::is_integral_v<T>) {
    char buf[24];
    return {buf, std::to_chars(buf, buf + sizeof buf, v).ptr};
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    return format_float(v);
  } else {  // half, bfloat16, float8: the fewest digits that read back as the same value of T
    const float f = static_cast<float>(v);
    if (!std::isfinite(f)) return format_float(f);
    char buf[48];
    for (int digits = 1; digits < 9; ++digits) {
      const auto end = std::to_chars(buf, buf + sizeof buf, f, std::chars_format::general, digits).ptr;
      double d = 0;
      std::from_chars(buf, end, d);
      const T back = convert<T>(d);
      if (std::memcmp(&back, &v, sizeof v) == 0) return format_float(d);
    }
    return format_float(f);
  }
}

/// The number `s` spells, for Cast from STRING: decimal or scientific, with an optional sign,
/// "INF", "-INF", "+INF" and "NaN" in any case, and ASCII blanks around it; nullopt otherwise. An
/// integer target reads a whole number exactly and truncates any other (ONNX: "100.5" may give
/// 100); BOOL also reads "true" / "false".
template <class T>
std::optional<T> parse_element(std::string_view s) {
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (!s.empty() && blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && blank(s.back())) s.remove_suffix(1);
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  if (s.empty() || s.front() == '+') return std::nullopt;
  const char* const b = s.data();
  const char* const e = b + s.size();
  auto whole = [&](auto& value) {
    const auto r = std::from_chars(b, e, value);
    return r.ec == std::errc() && r.ptr == e;
  };
  if constexpr (std::is_same_v<T, bool>) {
    auto lower = std::string(s);
    for (auto& c : lower) c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower == "true") return true;
    if (lower == "false") return false;
  }
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    std::conditional_t<std::is_signed_v<T>, std::int64_t, std::uint64_t> i{};
    if (whole(i)) return convert<T>(i);
  }
  if constexpr (std::is_same_v<T, float>) {  // read to float directly: one rounding, not two
    float f = 0;
    if (whole(f)) return f;
    return std::nullopt;
  }
  double d = 0;
  if (!whole(d)) return std::nullopt;
  return convert<T>(d);
}

/// Cast and CastLike where the input or the output is STRING.
inline void cast_strings(const kernel_context& ctx) {
  const auto x = ctx.input(0);
  const auto& out = ctx.outputs[0];
  const auto n = static_cast<std::size_t>(x.info().num_elements());
  if (out.info().type == data_type::STRING) {
    string_ref* dst = data_as<string_ref>(out);
    visit_castable_type(x.info().type, ctx, [&]<class From>() {
      const From* src = data_as<From>(x);
      ctx.parallel_for(n, [&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) dst[i] = ctx.keep_string(format_element(src[i]));
      });
    });
    return;
  }
  const string_ref* src = data_as<string_ref>(x);
  visit_castable_type(out.info().type, ctx, [&]<class To>() {
    To* dst = data_as<To>(out);
    for (std::size_t i = 0; i < n; ++i) {  // serial: the first bad element is the one reported
      const auto v = parse_element<To>(src[i].view());
      if (!v) {
        const auto text = src[i].view();
        throw ctx.fail("element " + std::to_string(i) + " of the input, \"" +
                           std::string(text.substr(0, 40)) + (text.size() > 40 ? "..." : "") + "\", is not a number",
                       "give decimal or scientific numbers, INF, -INF or NaN");
      }
      dst[i] = *v;
    }
  });
}

// --- StringNormalizer ---------------------------------------------------------------------------------
/// Changes the case of UTF-8 text by a C library locale's wide-character tables (towupper_l).
class utf8_case_map {
 public:
  /// `name` as StringNormalizer's locale attribute gives it. Empty (the attribute's absence) and
  /// ONNX's default en_US take C.UTF-8, which every glibc has: glibc's en_US and C.UTF-8 change
  /// case by the same Unicode tables. Another name must be installed, as given or with ".UTF-8".
  utf8_case_map(const kernel_context& ctx, const std::string& name) {
    if (name.empty() || name == "en_US" || name == "en_US.UTF-8" || name == "en_US.utf8") {
      loc_ = newlocale(LC_CTYPE_MASK, "C.UTF-8", nullptr);
    } else {
      loc_ = newlocale(LC_CTYPE_MASK, (name + ".UTF-8").c_str(), nullptr);
      if (!loc_) loc_ = newlocale(LC_CTYPE_MASK, name.c_str(), nullptr);
    }
    if (!loc_)
      throw ctx.fail("locale '" + name + "' is not installed on this machine",
                     "install it (locale-gen), or leave the locale attribute out for en_US / C.UTF-8");
  }
  utf8_case_map(const utf8_case_map&) = delete;
  utf8_case_map& operator=(const utf8_case_map&) = delete;
  ~utf8_case_map() { freelocale(loc_); }

  /// `s` with every character upper- (or lower-) cased; nullopt if `s` is not valid UTF-8.
  [[nodiscard]] std::optional<std::string> apply(std::string_view s, bool upper) const {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
      const auto d = utf8::decode(s, i);
      if (d.length == 0) return std::nullopt;
      const auto cp = static_cast<wint_t>(d.code_point);
      const auto mapped = static_cast<char32_t>(upper ? towupper_l(cp, loc_) : towlower_l(cp, loc_));
      utf8::append(out, utf8::is_scalar_value(mapped) ? mapped : d.code_point);
      i += d.length;
    }
    return out;
  }

 private:
  locale_t loc_ = nullptr;
};

/// StringNormalizer: drops the stopwords of a [C] or [1, C] STRING tensor (matched with or without
/// case), then upper- or lower-cases what remains, or leaves it. With nothing left, the output is
/// one empty string, [1] or [1, 1].
inline void string_normalizer_kernel(const kernel_context& ctx) {
  only_attributes(ctx, {"case_change_action", "is_case_sensitive", "locale", "stopwords"});
  const auto x = ctx.input(0);
  const auto& s = x.info().shape;
  if (x.info().type != data_type::STRING || ctx.outputs[0].info().type != data_type::STRING)
    throw ctx.fail("StringNormalizer takes and gives STRING tensors, not " + std::string(to_string(x.info().type)),
                   "fix the model's types");
  const bool rows = s.rank() == 2;
  if (!(s.rank() == 1 || (rows && s[0] == 1)))
    throw ctx.fail("the input has shape " + to_string(s) + "; StringNormalizer takes [C] or [1, C]",
                   "reshape the strings to one row first");
  const auto action = ctx.attr_string("case_change_action", "NONE");
  if (action != "NONE" && action != "LOWER" && action != "UPPER")
    throw ctx.fail("case_change_action is '" + action + "'", "use LOWER, UPPER or NONE");
  const bool case_sensitive = ctx.attr_int("is_case_sensitive", 0) != 0;
  // The locale is read (and refused if missing) whether or not a case change needs it.
  const utf8_case_map map(ctx, ctx.attr_string("locale"));
  auto changed = [&](std::string_view v, bool upper, const auto& what) {
    auto r = map.apply(v, upper);
    if (!r) throw ctx.fail(what() + " is not valid UTF-8", "give UTF-8 text");
    return std::move(*r);
  };
  std::unordered_set<std::string> stop;
  for (const auto& w : ctx.attr_strings("stopwords"))
    stop.insert(case_sensitive ? w : changed(w, false, [&] { return "stopword '" + w + "'"; }));
  const auto* in = data_as<string_ref>(x);
  const auto n = static_cast<std::size_t>(s.num_elements());
  std::vector<std::string> kept;
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = in[i].view();
    auto element = [i] { return "element " + std::to_string(i) + " of the input"; };
    if (!stop.empty() && stop.contains(case_sensitive ? std::string(v) : changed(v, false, element))) continue;
    kept.push_back(action == "NONE" ? std::string(v) : changed(v, action == "UPPER", element));
  }
  const auto count = static_cast<std::int64_t>(std::max<std::size_t>(kept.size(), 1));
  check_output_shape(ctx, 0, rows ? shape{1, count} : shape{count});
  auto* out = data_as<string_ref>(ctx.outputs[0]);
  out[0] = {};
  for (std::size_t i = 0; i < kept.size(); ++i) out[i] = ctx.keep_string(kept[i]);
}

inline void register_text(op_registry& r) {
  r.add({"", "TfIdfVectorizer", tfidf_vectorizer_kernel, true});
  r.add({"", "StringNormalizer", string_normalizer_kernel, true});
}

}  // namespace ipu::detail::tensor_ops
