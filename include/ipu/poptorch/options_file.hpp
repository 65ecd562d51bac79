#pragma once
// Option files in PopTorch's syntax: `ipu::options::load_from_file` / `load_from_string` / `to_config`.
//
// PopTorch runs each line of the file as Python after prefixing it with `options.`. We do not run
// Python; we parse the subset such lines use: one call per line, optionally chained
// (`deviceIterations(2).replicationFactor(4)`), whose arguments are literals (integers, floats,
// 'strings', True/False/None), lists, tuples, dicts, dotted names (`poptorch.OutputMode.All`,
// `torch.half`), constructor calls (`poptorch.ShardedExecution()`, `poptorch.Stage("A").ipu(0)`)
// and keyword arguments. `#` starts a comment; blank lines are skipped. Names are PopTorch's, e.g.
// `deviceIterations(4)`, `Training.gradientAccumulation(8)`, `Precision.setPartialsType(torch.half)`.
//
// Beyond PopTorch (marked "ipu extension" in the table below): `setAvailableMemoryProportion(0.5)`
// with one number for every IPU, `Precision.setFloatType(torch.half)`, string IPU versions in
// `useOfflineIpuTarget("ipu21")`, and `.ipus(...)` on a Phase returning the phase so it can be used
// inline.
#include "ipu/poptorch/options.hpp"  // first: options.hpp includes this header at its end

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <charconv>
#include <exception>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ipu/error.hpp"

namespace ipu::detail::config {

/// A parsed expression. One struct for every kind keeps the tree plain data.
struct expr {
  enum class kind : std::uint8_t { none, boolean, integer, real, string, name, call, list, tuple, dict };
  kind k = kind::none;
  bool boolean = false;
  std::int64_t integer = 0;
  /// integer: the literal's magnitude, which may exceed int64 (random seeds are uint64).
  std::uint64_t magnitude = 0;
  bool negative = false;
  double real = 0;
  /// string: the value; name: the dotted path ("poptorch.OutputMode.All"); call: the function's
  /// dotted path, or the method name when `receiver` is set.
  std::string text;
  /// call: arguments, positional first; list/tuple: elements; dict: key, value, key, value...
  std::vector<expr> items;
  /// call: one name per argument, empty for positional ones.
  std::vector<std::string> keywords;
  /// call: the object a method is called on (zero or one element).
  std::vector<expr> receiver;
  /// The source text of this expression, for messages.
  std::string source;
  int column = 1;

  [[nodiscard]] bool fits_int64() const noexcept {
    return k == kind::integer && magnitude <= static_cast<std::uint64_t>(INT64_MAX) + (negative ? 1 : 0);
  }
  [[nodiscard]] bool is_call() const noexcept { return k == kind::call; }
  [[nodiscard]] bool is_method_call() const noexcept { return k == kind::call && !receiver.empty(); }
  [[nodiscard]] std::size_t positional_count() const noexcept {
    std::size_t n = 0;
    while (n < keywords.size() && keywords[n].empty()) ++n;
    return n;
  }
};

/// Thrown for malformed lines; the loader adds the file and line.
struct syntax_error {
  std::string message;
  int column;
};

class parser {
 public:
  explicit parser(std::string_view line) : s_(line) {}
  static constexpr int max_depth = 64;

  /// Parses a whole statement: an expression followed only by spaces or a comment.
  expr statement() {
    expr e = expression();
    skip_space();
    if (pos_ < s_.size() && s_[pos_] != '#') fail("unexpected '" + std::string(1, s_[pos_]) + "' after the call");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& message) const { throw syntax_error{message, static_cast<int>(pos_) + 1}; }

  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\r')) ++pos_;
  }
  bool peek(char c) {
    skip_space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++pos_;
    return true;
  }
  void expect(char c, std::string_view what) {
    if (!accept(c)) {
      skip_space();
      fail("expected '" + std::string(1, c) + "' " + std::string(what) +
           (pos_ < s_.size() ? ", found '" + std::string(1, s_[pos_]) + "'" : ", found the end of the line"));
    }
  }
  static bool ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
  static bool ident_char(char c) { return ident_start(c) || (c >= '0' && c <= '9'); }
  static bool digit(char c) { return c >= '0' && c <= '9'; }

  std::string identifier() {
    skip_space();
    if (pos_ >= s_.size() || !ident_start(s_[pos_])) fail("expected a name");
    const std::size_t start = pos_;
    while (pos_ < s_.size() && ident_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(start, pos_ - start));
  }

  expr expression() {
    skip_space();
    const std::size_t start = pos_;
    // Nesting (brackets, calls, signs) is bounded: the parser and the tree it builds recurse, and a
    // stranger's file of 20,000 '(' must be an error, not a stack overflow.
    if (depth_ >= max_depth) fail("nested more than " + std::to_string(max_depth) + " levels deep");
    ++depth_;
    struct leave {
      int& depth;
      ~leave() { --depth; }
    } guard{depth_};
    expr e;
    if (accept('-') || accept('+')) {
      const bool negative = s_[pos_ - 1] == '-';
      e = expression();
      if (e.k == expr::kind::integer) {
        if (negative) {
          if (e.magnitude > static_cast<std::uint64_t>(INT64_MAX) + 1) {
            pos_ = start;
            fail("integer too large");
          }
          e.negative = !e.negative;
          e.integer = static_cast<std::int64_t>(0 - e.magnitude);
        }
      } else if (e.k == expr::kind::real) {
        if (negative) e.real = -e.real;
      } else {
        pos_ = start;
        fail("a sign can only precede a number");
      }
    } else {
      e = postfix(primary());
    }
    e.column = static_cast<int>(start) + 1;
    e.source = std::string(s_.substr(start, pos_ - start));
    while (!e.source.empty() && (e.source.back() == ' ' || e.source.back() == '\t')) e.source.pop_back();
    return e;
  }

  expr postfix(expr e) {
    for (;;) {
      if (peek('(')) {
        if (e.k != expr::kind::name) fail("only names can be called");
        ++pos_;
        e.k = expr::kind::call;
        arguments(e);
      } else if (peek('.')) {
        ++pos_;
        const std::string member = identifier();
        if (e.k == expr::kind::name) {
          e.text += "." + member;
        } else if (e.is_call()) {
          // Each method call nests the calls before it: bounded like any other nesting.
          if (++chain_ > max_depth) fail("more than " + std::to_string(max_depth) + " chained calls");
          expr method;
          method.k = expr::kind::name;  // becomes a call when its '(' follows
          method.text = member;
          method.receiver.push_back(std::move(e));
          e = std::move(method);
          if (!peek('(')) fail("'." + member + "' must be called: write ." + member + "(...)");
          ++pos_;
          e.k = expr::kind::call;
          arguments(e);
        } else {
          fail("'." + member + "' cannot follow a literal");
        }
      } else {
        return e;
      }
    }
  }

  void arguments(expr& call) {
    bool keyword_seen = false;
    while (!accept(')')) {
      if (pos_ >= s_.size()) fail("missing ')' at the end of the line");
      skip_space();
      // keyword argument: name '=' expression (but not '==')
      std::string keyword;
      const std::size_t save = pos_;
      if (pos_ < s_.size() && ident_start(s_[pos_])) {
        keyword = identifier();
        skip_space();
        if (pos_ < s_.size() && s_[pos_] == '=' && !(pos_ + 1 < s_.size() && s_[pos_ + 1] == '=')) {
          ++pos_;
          keyword_seen = true;
        } else {
          keyword.clear();
          pos_ = save;
        }
      }
      if (keyword.empty() && keyword_seen) fail("a positional argument cannot follow keyword arguments");
      call.items.push_back(expression());
      call.keywords.push_back(std::move(keyword));
      if (!accept(',')) {
        expect(')', "to close the argument list");
        break;
      }
    }
  }

  expr primary() {
    skip_space();
    if (pos_ >= s_.size()) fail("expected a value, found the end of the line");
    const char c = s_[pos_];
    expr e;
    if (c == '"' || c == '\'') {
      e.k = expr::kind::string;
      e.text = string_literal();
    } else if (digit(c) || (c == '.' && pos_ + 1 < s_.size() && digit(s_[pos_ + 1]))) {
      number(e);
    } else if (ident_start(c)) {
      const std::string id = identifier();
      if (id == "True" || id == "False") {
        e.k = expr::kind::boolean;
        e.boolean = id == "True";
      } else if (id == "None") {
        e.k = expr::kind::none;
      } else {
        e.k = expr::kind::name;
        e.text = id;
      }
    } else if (c == '[' || c == '(') {
      ++pos_;
      const char close = c == '[' ? ']' : ')';
      e.k = c == '[' ? expr::kind::list : expr::kind::tuple;
      bool comma = false;
      while (!accept(close)) {
        if (pos_ >= s_.size()) fail(std::string("missing '") + close + "'");
        e.items.push_back(expression());
        comma = accept(',');
        if (!comma) {
          expect(close, "to close the list");
          break;
        }
      }
      if (c == '(' && e.items.size() == 1 && !comma) return std::move(e.items.front());  // parentheses
    } else if (c == '{') {
      ++pos_;
      e.k = expr::kind::dict;
      while (!accept('}')) {
        if (pos_ >= s_.size()) fail("missing '}'");
        e.items.push_back(expression());
        expect(':', "between a dictionary key and its value");
        e.items.push_back(expression());
        if (!accept(',')) {
          expect('}', "to close the dictionary");
          break;
        }
      }
    } else {
      fail("unexpected '" + std::string(1, c) + "'");
    }
    return e;
  }

  std::string string_literal() {
    const char quote = s_[pos_++];
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != quote) {
      char c = s_[pos_++];
      if (c == '\\' && pos_ < s_.size()) {
        const char n = s_[pos_++];
        switch (n) {
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case '\\':
          case '\'':
          case '"': c = n; break;
          default: out += '\\'; c = n;
        }
      }
      out += c;
    }
    if (pos_ >= s_.size()) fail("unterminated string");
    ++pos_;
    return out;
  }

  void number(expr& e) {
    const std::size_t start = pos_;
    // Errors point at the number's first character.
    auto fail_here = [&](const std::string& m) {
      pos_ = start;
      fail(m);
    };
    std::string digits;
    if (s_[pos_] == '0' && pos_ + 1 < s_.size() && (s_[pos_ + 1] == 'x' || s_[pos_ + 1] == 'X')) {
      pos_ += 2;
      std::uint64_t v = 0;
      bool any = false;
      while (pos_ < s_.size() && (std::isxdigit(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_')) {
        if (s_[pos_] != '_') {
          const char h = s_[pos_];
          const unsigned d = h <= '9' ? unsigned(h - '0') : unsigned((h | 0x20) - 'a' + 10);
          if (v > (UINT64_MAX >> 4)) fail_here("integer too large");
          v = v * 16 + d;
          any = true;
        }
        ++pos_;
      }
      if (!any) fail_here("expected hexadecimal digits after 0x");
      e.k = expr::kind::integer;
      e.magnitude = v;
      e.integer = static_cast<std::int64_t>(v);
      return;
    }
    bool is_real = false;
    auto take_digits = [&] {
      while (pos_ < s_.size() && (digit(s_[pos_]) || s_[pos_] == '_')) {
        if (s_[pos_] != '_') digits += s_[pos_];
        ++pos_;
      }
    };
    take_digits();
    if (pos_ < s_.size() && s_[pos_] == '.') {
      is_real = true;
      digits += s_[pos_++];
      take_digits();
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_real = true;
      digits += s_[pos_++];
      if (pos_ < s_.size() && (s_[pos_] == '+' || s_[pos_] == '-')) digits += s_[pos_++];
      const std::size_t before = digits.size();
      take_digits();
      if (digits.size() == before) fail_here("expected digits in the exponent");
    }
    if (pos_ < s_.size() && ident_char(s_[pos_])) fail_here("malformed number '" + std::string(s_.substr(start, pos_ - start + 1)) + "'");
    if (is_real) {
      e.k = expr::kind::real;
      std::size_t used = 0;
      try {
        e.real = std::stod(digits, &used);
      } catch (const std::exception&) {
        fail_here("number out of range");
      }
    } else {
      e.k = expr::kind::integer;
      std::uint64_t v = 0;
      for (char d : digits) {
        if (v > (UINT64_MAX - static_cast<std::uint64_t>(d - '0')) / 10) fail_here("integer too large");
        v = v * 10 + static_cast<std::uint64_t>(d - '0');
      }
      e.magnitude = v;
      e.integer = static_cast<std::int64_t>(v);
    }
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  int depth_ = 0;  // expressions being parsed, one inside the other
  int chain_ = 0;  // method calls chained so far
};

/// Strips a line; empty for blank lines and comments.
inline std::string_view trim(std::string_view line) {
  std::size_t b = 0, e = line.size();
  while (b < e && (line[b] == ' ' || line[b] == '\t' || line[b] == '\r')) ++b;
  while (e > b && (line[e - 1] == ' ' || line[e - 1] == '\t' || line[e - 1] == '\r')) --e;
  line = line.substr(b, e - b);
  if (!line.empty() && line.front() == '#') return {};
  return line;
}

/// The edit distance between two names, for "did you mean" hints.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      const auto lower = [](char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; };
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// --- giving calls their meaning ----------------------------------------------------------------------

/// One call being applied: its expression, its full name, where it is, and what it accepts.
struct call_site {
  const expr& call;
  std::string name;  // "Training.gradientAccumulation"
  std::string_view signature;
  const std::string& location;  // "file:line"
};

[[noreturn]] inline void fail(const call_site& c, const std::string& what) {
  throw error(error_category::options, c.name + ": " + what, c.location, "usage: " + std::string(c.signature));
}

/// `prefix.` spelled PopTorch's two ways: poptorch.enums.X is poptorch.X.
inline std::string normalized_name(std::string_view name) {
  constexpr std::string_view enums = "poptorch.enums.";
  if (name.substr(0, enums.size()) == enums) return "poptorch." + std::string(name.substr(enums.size()));
  return std::string(name);
}

/// Checks positional count and keyword names against `params` (PopTorch's parameter names in
/// order); the first `required` must be given.
inline void check_arguments(const call_site& c, std::initializer_list<std::string_view> params, std::size_t required) {
  const auto& e = c.call;
  const std::size_t positional = e.positional_count();
  if (positional > params.size())
    fail(c, "takes at most " + std::to_string(params.size()) + " argument" + (params.size() == 1 ? "" : "s") + ", got " +
                std::to_string(positional));
  std::vector<bool> given(params.size(), false);
  for (std::size_t i = 0; i < positional; ++i) given[i] = true;
  for (std::size_t i = positional; i < e.keywords.size(); ++i) {
    const auto it = std::find(params.begin(), params.end(), e.keywords[i]);
    if (it == params.end()) fail(c, "unknown keyword argument '" + e.keywords[i] + "'");
    const auto index = static_cast<std::size_t>(it - params.begin());
    if (given[index]) fail(c, "argument '" + e.keywords[i] + "' given twice");
    given[index] = true;
  }
  for (std::size_t i = 0; i < required; ++i)
    if (!given[i]) fail(c, "missing argument '" + std::string(*(params.begin() + i)) + "'");
}

/// The argument at `index` or named `keyword`; nullptr when absent.
inline const expr* argument(const call_site& c, std::size_t index, std::string_view keyword) {
  const auto& e = c.call;
  if (index < e.positional_count()) return &e.items[index];
  for (std::size_t i = 0; i < e.keywords.size(); ++i)
    if (e.keywords[i] == keyword) return &e.items[i];
  return nullptr;
}

inline std::string shown(const expr& e) { return "'" + e.source + "'"; }

inline std::int64_t to_int(const call_site& c, const expr& e, std::string_view what) {
  if (e.k != expr::kind::integer) fail(c, std::string(what) + " must be an integer, got " + shown(e));
  if (!e.fits_int64()) fail(c, std::string(what) + " " + shown(e) + " is too large");
  return e.integer;
}
inline bool to_bool(const call_site& c, const expr& e, std::string_view what) {
  if (e.k != expr::kind::boolean) fail(c, std::string(what) + " must be True or False, got " + shown(e));
  return e.boolean;
}
inline double to_real(const call_site& c, const expr& e, std::string_view what) {
  if (e.k == expr::kind::real) return e.real;
  if (e.k == expr::kind::integer && e.fits_int64()) return static_cast<double>(e.integer);
  fail(c, std::string(what) + " must be a number, got " + shown(e));
}
inline std::string to_str(const call_site& c, const expr& e, std::string_view what) {
  if (e.k != expr::kind::string) fail(c, std::string(what) + " must be a string, got " + shown(e));
  return e.text;
}
/// An optional boolean parameter that defaults to True (e.g. autoRoundNumIPUs()).
inline bool flag_or_true(const call_site& c, std::string_view keyword) {
  const expr* a = argument(c, 0, keyword);
  return a ? to_bool(c, *a, keyword) : true;
}

template <class E>
E to_enum(const call_site& c, const expr& e) {
  using names = enum_names<E>;
  std::string accepted;
  for (std::size_t i = 0; i < names::names.size(); ++i) {
    const std::string full = std::string(names::python) + "." + std::string(names::names[i]);
    if (e.k == expr::kind::name && normalized_name(e.text) == full) return static_cast<E>(i);
    accepted += (i ? ", " : "") + full;
  }
  fail(c, "expected one of " + accepted + "; got " + shown(e));
}

/// torch.float / torch.float32 -> F32, torch.half / torch.float16 -> F16.
inline data_type to_float_type(const call_site& c, const expr& e) {
  if (e.k == expr::kind::name) {
    if (e.text == "torch.float" || e.text == "torch.float32") return data_type::F32;
    if (e.text == "torch.half" || e.text == "torch.float16") return data_type::F16;
  }
  fail(c, "expected torch.float or torch.half, got " + shown(e));
}

// Execution strategies: poptorch.Stage / Phase / *Execution objects, with their methods.

/// The constructor at the root of a method chain: "poptorch.Stage" for poptorch.Stage("A").ipu(0).
inline std::string constructor_of(const expr& e) {
  const expr* r = &e;
  while (r->is_method_call()) r = &r->receiver.front();
  return r->is_call() ? normalized_name(r->text) : std::string();
}

inline void no_keywords(const call_site& c, const expr& e) {
  for (const auto& k : e.keywords)
    if (!k.empty()) fail(c, "unexpected keyword argument '" + k + "' in " + shown(e));
}

inline std::vector<std::string> block_ids(const call_site& c, const std::vector<expr>& items) {
  std::vector<std::string> ids;
  for (const auto& i : items) ids.push_back(to_str(c, i, "a block id"));
  return ids;
}

/// poptorch.Stage("A", "B").ipu(1), or a block id "A", or a list of block ids ["A", "B"].
inline stage to_stage(const call_site& c, const expr& e) {
  if (e.k == expr::kind::string) return stage{{e.text}, std::nullopt};
  if (e.k == expr::kind::list || e.k == expr::kind::tuple) return stage{block_ids(c, e.items), std::nullopt};
  if (e.is_method_call()) {
    stage s = to_stage(c, e.receiver.front());
    if (e.text != "ipu") fail(c, "a Stage has no method '" + e.text + "' (it has ipu(n))");
    no_keywords(c, e);
    if (e.items.size() != 1) fail(c, "Stage.ipu takes one IPU number, in " + shown(e));
    s.ipu = to_int(c, e.items.front(), "an IPU number");
    return s;
  }
  if (e.is_call() && normalized_name(e.text) == "poptorch.Stage") {
    no_keywords(c, e);
    return stage{block_ids(c, e.items), std::nullopt};
  }
  fail(c, "expected a stage: poptorch.Stage(\"block\", ...), a block id or a list of block ids; got " + shown(e));
}

/// poptorch.Phase(stages...) or Phase("A", "B") (one stage of those blocks); `.ipus(...)` assigns
/// one IPU per stage.
inline phase to_phase(const call_site& c, const expr& e);

inline phase phase_of(const call_site& c, const std::vector<expr>& args, const expr& whole) {
  phase p;
  const bool all_strings =
      std::all_of(args.begin(), args.end(), [](const expr& a) { return a.k == expr::kind::string; });
  if (!args.empty() && all_strings) {
    p.stages.push_back(stage{block_ids(c, args), std::nullopt});
    return p;
  }
  for (const auto& a : args) {
    if (constructor_of(a) != "poptorch.Stage")
      fail(c, "a Phase holds poptorch.Stage objects or block ids, not " + shown(a) + " (in " + shown(whole) + ")");
    p.stages.push_back(to_stage(c, a));
  }
  return p;
}

inline phase to_phase(const call_site& c, const expr& e) {
  if (e.is_method_call()) {
    phase p = to_phase(c, e.receiver.front());
    if (e.text != "ipus") fail(c, "a Phase has no method '" + e.text + "' (it has ipus(...))");
    no_keywords(c, e);
    if (e.items.size() != p.stages.size())
      fail(c, "the phase has " + std::to_string(p.stages.size()) + " stages but " + std::to_string(e.items.size()) +
                  " IPUs were given, in " + shown(e));
    for (std::size_t i = 0; i < e.items.size(); ++i) p.stages[i].ipu = to_int(c, e.items[i], "an IPU number");
    return p;
  }
  if (e.is_call() && normalized_name(e.text) == "poptorch.Phase") {
    no_keywords(c, e);
    return phase_of(c, e.items, e);
  }
  if (e.k == expr::kind::list || e.k == expr::kind::tuple) return phase_of(c, e.items, e);
  if (constructor_of(e) == "poptorch.Stage" || e.k == expr::kind::string) return phase{{to_stage(c, e)}};
  fail(c, "expected a phase: poptorch.Phase(...), a list of stages or block ids; got " + shown(e));
}

inline strategy_settings to_strategy(const call_site& c, const expr& e) {
  if (e.is_method_call()) {
    strategy_settings s = to_strategy(c, e.receiver.front());
    const std::string& m = e.text;
    no_keywords(c, e);
    if (!s.is_phased()) fail(c, std::string(to_string(s.mode)) + " has no method '" + m + "'");
    if (m == "setTensorsLiveness") {
      if (e.items.size() != 1) fail(c, "setTensorsLiveness takes one poptorch.Liveness value");
      s.tensors_liveness = to_enum<liveness>(c, e.items.front());
    } else if (m == "sendTensorsOffChipAfterFwd" || m == "useSeparateBackwardPhase") {
      if (e.items.size() > 1) fail(c, m + " takes at most one argument");
      const bool on = e.items.empty() || to_bool(c, e.items.front(), m);
      if (m == "useSeparateBackwardPhase")
        s.separate_backward_phase = on;
      else
        s.tensors_liveness = on ? liveness::off_chip_after_fwd : liveness::always_live;
    } else {
      fail(c, "phased execution has no method '" + m + "' (it has setTensorsLiveness, sendTensorsOffChipAfterFwd, "
              "useSeparateBackwardPhase)");
    }
    return s;
  }
  const std::string name = e.is_call() ? normalized_name(e.text) : std::string();
  std::optional<execution_mode> mode;
  for (std::size_t i = 0; i < enum_names<execution_mode>::names.size(); ++i)
    if (name == "poptorch." + std::string(enum_names<execution_mode>::names[i])) mode = static_cast<execution_mode>(i);
  if (!mode)
    fail(c, "expected poptorch.PipelinedExecution(...), poptorch.ShardedExecution(...), "
            "poptorch.SerialPhasedExecution(...) or poptorch.ParallelPhasedExecution(...); got " + shown(e));
  no_keywords(c, e);
  const auto& args = e.items;
  strategy_settings s;
  s.mode = *mode;
  if (!s.is_phased()) {
    if (args.size() == 1 && args.front().k == expr::kind::name &&
        normalized_name(args.front().text).starts_with("poptorch.AutoStage."))
      s.auto_stage = to_enum<auto_stage>(c, args.front());
    else
      for (const auto& a : args) s.stages.push_back(to_stage(c, a));
  } else if (args.size() == 1 && args.front().k == expr::kind::list &&
             std::all_of(args.front().items.begin(), args.front().items.end(),
                         [](const expr& a) { return constructor_of(a) == "poptorch.Phase"; })) {
    for (const auto& p : args.front().items) s.phases.push_back(to_phase(c, p));  // a list of Phases
  } else {
    for (const auto& a : args) s.phases.push_back(to_phase(c, a));
  }
  return s;
}

/// poptorch.TensorLocationSettings().useOnChipStorage(False).minElementsForOffChip(1024)...
inline tensor_location to_location(const call_site& c, const expr& e) {
  if (e.is_call() && !e.is_method_call() && normalized_name(e.text) == "poptorch.TensorLocationSettings") {
    if (!e.items.empty()) fail(c, "poptorch.TensorLocationSettings() takes no arguments; set fields with its methods");
    return {};
  }
  if (!e.is_method_call())
    fail(c, "expected poptorch.TensorLocationSettings() with its methods, got " + shown(e));
  tensor_location l = to_location(c, e.receiver.front());
  no_keywords(c, e);
  const std::string& m = e.text;
  if (e.items.size() > 1) fail(c, "TensorLocationSettings." + m + " takes one argument");
  const expr* a = e.items.empty() ? nullptr : &e.items.front();
  auto flag = [&] { return a ? to_bool(c, *a, m) : true; };
  auto count = [&] {
    if (!a) fail(c, "TensorLocationSettings." + m + " needs a number of elements");
    const auto n = to_int(c, *a, m);
    if (n < 0) fail(c, m + " must be at least 0, got " + std::to_string(n));
    return n;
  };
  if (m == "useOnChipStorage") {
    if (a && a->k == expr::kind::none)
      l.on_chip.reset();
    else
      l.on_chip = flag();
  } else if (m == "useReplicatedTensorSharding") {
    l.replicated_tensor_sharding = flag();
  } else if (m == "useIOTilesToLoad") {
    l.io_tiles_to_load = flag();
  } else if (m == "useIOTilesToStore") {
    l.io_tiles_to_store = flag();
  } else if (m == "minElementsForOffChip") {
    l.min_elements_for_off_chip = count();
  } else if (m == "minElementsForReplicatedTensorSharding") {
    l.min_elements_for_replicated_tensor_sharding = count();
  } else {
    fail(c, "TensorLocationSettings has no method '" + m +
                "' (it has useOnChipStorage, useReplicatedTensorSharding, useIOTilesToLoad, useIOTilesToStore, "
                "minElementsForOffChip, minElementsForReplicatedTensorSharding)");
  }
  return l;
}

// The table of option calls.

struct entry {
  std::string_view name;
  std::string_view signature;
  void (*apply)(options&, const call_site&);
};

inline const std::vector<entry>& entries() {
  using k = std::initializer_list<std::string_view>;
  static const std::vector<entry> table = {
      {"deviceIterations", "deviceIterations(device_iterations: int >= 1)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"device_iterations"}, 1);
         o.device_iterations(to_int(c, *argument(c, 0, "device_iterations"), "device_iterations"));
       }},
      {"replicationFactor", "replicationFactor(replication_factor: int >= 1)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"replication_factor"}, 1);
         o.replication_factor(to_int(c, *argument(c, 0, "replication_factor"), "replication_factor"));
       }},
      {"inputReplicaGrouping", "inputReplicaGrouping(input_group_size: int >= 1, input_group_type: poptorch.CommGroupType)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"input_group_size", "input_group_type"}, 2);
         o.input_replica_grouping(to_int(c, *argument(c, 0, "input_group_size"), "input_group_size"),
                                  to_enum<comm_group_type>(c, *argument(c, 1, "input_group_type")));
       }},
      {"outputMode", "outputMode(output_mode: poptorch.OutputMode, output_return_period: int >= 1 for EveryN)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"output_mode", "output_return_period"}, 1);
         const auto mode = to_enum<output_mode>(c, *argument(c, 0, "output_mode"));
         const expr* period = argument(c, 1, "output_return_period");
         o.output_mode(mode, period && period->k != expr::kind::none ? to_int(c, *period, "output_return_period") : 0);
       }},
      {"setExecutionStrategy",
       "setExecutionStrategy(strategy: poptorch.PipelinedExecution(...) | poptorch.ShardedExecution(...) | "
       "poptorch.SerialPhasedExecution(...) | poptorch.ParallelPhasedExecution(...))",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"strategy"}, 1);
         o.execution_strategy(to_strategy(c, *argument(c, 0, "strategy")));
       }},
      {"autoRoundNumIPUs", "autoRoundNumIPUs(auto_round_num_ipus: bool = True)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"auto_round_num_ipus"}, 0);
         o.auto_round_num_ipus(flag_or_true(c, "auto_round_num_ipus"));
       }},
      {"enableExecutableCaching", "enableExecutableCaching(path: str | None)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"path"}, 1);
         const expr& p = *argument(c, 0, "path");
         if (p.k == expr::kind::none)
           o.disable_executable_caching();
         else
           o.enable_executable_caching(to_str(c, p, "path"));
       }},
      {"useIpuModel", "useIpuModel(use_model: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"use_model"}, 1);
         o.use_ipu_model(to_bool(c, *argument(c, 0, "use_model"), "use_model"));
       }},
      {"useOfflineIpuTarget", "useOfflineIpuTarget(ipu_version: 1 | 2 | 21 | \"ipu1\" | \"ipu2\" | \"ipu21\" = 2)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"ipu_version"}, 0);
         const expr* v = argument(c, 0, "ipu_version");
         std::string version = "ipu2";
         if (v && v->k == expr::kind::integer) {
           const auto n = to_int(c, *v, "ipu_version");
           if (n != 1 && n != 2 && n != 21) fail(c, "unknown IPU version " + std::to_string(n));
           version = "ipu" + std::to_string(n);
         } else if (v) {
           version = to_str(c, *v, "ipu_version");
         }
         o.use_offline_ipu_target(version);
       }},
      {"useIpuId", "useIpuId(ipu_id: int >= 0)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"ipu_id"}, 1);
         o.use_ipu_id(to_int(c, *argument(c, 0, "ipu_id"), "ipu_id"));
       }},
      {"randomSeed", "randomSeed(random_seed: int >= 0)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"random_seed"}, 1);
         const expr& s = *argument(c, 0, "random_seed");
         if (s.k != expr::kind::integer) fail(c, "random_seed must be an integer, got " + shown(s));
         if (s.negative && s.magnitude != 0) fail(c, "random_seed must be at least 0, got " + s.source);
         o.random_seed(s.magnitude);
       }},
      {"setAvailableMemoryProportion",
       "setAvailableMemoryProportion(available_memory_proportion: {\"IPU0\": 0.6, ...} | 0.6 for every IPU (ipu extension))",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"available_memory_proportion"}, 1);
         const expr& m = *argument(c, 0, "available_memory_proportion");
         if (m.k != expr::kind::dict) {
           o.available_memory_proportion(to_real(c, m, "available_memory_proportion"));
           return;
         }
         for (std::size_t i = 0; i + 1 < m.items.size(); i += 2) {
           const std::string key = to_str(c, m.items[i], "a key");
           std::int64_t ipu = -1;
           const bool digits = key.size() > 3 && key.size() < 12 &&
                               std::all_of(key.begin() + 3, key.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
           if (key.starts_with("IPU") && digits) ipu = std::stoll(key.substr(3));
           if (ipu < 0) fail(c, "keys are IPU names like \"IPU0\", got '" + key + "'");
           o.available_memory_proportion(ipu, to_real(c, m.items[i + 1], "a proportion"));
         }
       }},
      {"enableSyntheticData", "enableSyntheticData(enabled: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"enabled"}, 1);
         o.enable_synthetic_data(to_bool(c, *argument(c, 0, "enabled"), "enabled"));
       }},
      {"connectionType", "connectionType(connection_type: poptorch.ConnectionType)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"connection_type"}, 1);
         o.connection_type(to_enum<connection_type>(c, *argument(c, 0, "connection_type")));
       }},
      {"syncPattern", "syncPattern(sync_pattern: poptorch.SyncPattern)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"sync_pattern"}, 1);
         o.sync_pattern(to_enum<sync_pattern>(c, *argument(c, 0, "sync_pattern")));
       }},
      {"logDir", "logDir(log_dir: str)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"log_dir"}, 1);
         o.log_dir(to_str(c, *argument(c, 0, "log_dir"), "log_dir"));
       }},
      {"enableProfiling", "enableProfiling(profile_dir: str | None)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"profile_dir"}, 1);
         const expr& p = *argument(c, 0, "profile_dir");
         if (p.k == expr::kind::none)
           o.disable_profiling();
         else
           o.enable_profiling(to_str(c, p, "profile_dir"));
       }},
      {"enableStableNorm", "enableStableNorm(enabled: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"enabled"}, 1);
         o.enable_stable_norm(to_bool(c, *argument(c, 0, "enabled"), "enabled"));
       }},
      {"logCycleCount", "logCycleCount(log_cycle_count: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"log_cycle_count"}, 1);
         o.log_cycle_count(to_bool(c, *argument(c, 0, "log_cycle_count"), "log_cycle_count"));
       }},
      {"broadcastBuffers", "broadcastBuffers(broadcast_buffers: bool = True)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"broadcast_buffers"}, 0);
         o.broadcast_buffers(flag_or_true(c, "broadcast_buffers"));
       }},
      {"showCompilationProgressBar", "showCompilationProgressBar(show: bool = True)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"show"}, 0);
         o.show_compilation_progress_bar(flag_or_true(c, "show"));
       }},
      {"Training.gradientAccumulation", "Training.gradientAccumulation(gradient_accumulation: int >= 1)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"gradient_accumulation"}, 1);
         o.gradient_accumulation(to_int(c, *argument(c, 0, "gradient_accumulation"), "gradient_accumulation"));
       }},
      {"Training.accumulationAndReplicationReductionType",
       "Training.accumulationAndReplicationReductionType(reduction_type: poptorch.ReductionType.Mean | .Sum)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"reduction_type"}, 1);
         o.accumulation_and_replication_reduction_type(to_enum<reduction_type>(c, *argument(c, 0, "reduction_type")));
       }},
      {"Training.meanReductionStrategy", "Training.meanReductionStrategy(mean_reduction_strategy: poptorch.MeanReductionStrategy)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"mean_reduction_strategy"}, 1);
         o.mean_reduction_strategy(to_enum<mean_reduction_strategy>(c, *argument(c, 0, "mean_reduction_strategy")));
       }},
      {"Training.setAutomaticLossScaling", "Training.setAutomaticLossScaling(enabled: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"enabled"}, 1);
         o.automatic_loss_scaling(to_bool(c, *argument(c, 0, "enabled"), "enabled"));
       }},
      {"_Popart.set", "_Popart.set(key: \"autoRecomputation\", value: 0..4 | \"None\" | \"Standard\" | \"NormOnly\" | "
                      "\"RecomputeAll\" | \"Pipeline\" | popart.RecomputationType.X)",
       [](options& o, const call_site& c) {
         // PopTorch passes any PopART session option through; only those with an effect here are taken.
         check_arguments(c, k{"key", "value"}, 2);
         const expr* key_arg = argument(c, 0, "key");
         const expr* value_arg = argument(c, 1, "value");
         if (!key_arg || !value_arg) fail(c, "give the PopART option's key and value");
         const auto key = to_str(c, *key_arg, "key");
         if (key != "autoRecomputation")
           fail(c, "PopART option '" + key + "' is not supported; the only _Popart option applied is autoRecomputation");
         const expr& v = *value_arg;
         std::string name;
         if (v.k == expr::kind::integer) name = std::to_string(to_int(c, v, "value"));
         else if (v.k == expr::kind::string || v.k == expr::kind::name) name = v.text;
         else fail(c, "autoRecomputation must be a RecomputationType value, name or popart.RecomputationType.X, got " + shown(v));
         try {
           o.auto_recomputation(recomputation_from(name));
         } catch (const error& e) {
           fail(c, e.message() + "; " + e.hint());
         }
       }},
      {"Precision.setPartialsType", "Precision.setPartialsType(dtype: torch.float | torch.half)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"dtype"}, 1);
         o.partials_type(to_float_type(c, *argument(c, 0, "dtype")));
       }},
      {"Precision.setFloatType", "Precision.setFloatType(dtype: torch.float | torch.half) (ipu extension)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"dtype"}, 1);
         o.precision(to_float_type(c, *argument(c, 0, "dtype")));
       }},
      {"Precision.halfFloatCasting", "Precision.halfFloatCasting(half_float_casting: poptorch.HalfFloatCastingBehavior)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"half_float_casting"}, 1);
         o.half_float_casting(to_enum<half_float_casting>(c, *argument(c, 0, "half_float_casting")));
       }},
      {"Precision.enableStochasticRounding", "Precision.enableStochasticRounding(enabled: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"enabled"}, 1);
         o.enable_stochastic_rounding(to_bool(c, *argument(c, 0, "enabled"), "enabled"));
       }},
      {"Precision.enableFloatingPointExceptions", "Precision.enableFloatingPointExceptions(enabled: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"enabled"}, 1);
         o.enable_floating_point_exceptions(to_bool(c, *argument(c, 0, "enabled"), "enabled"));
       }},
      {"Precision.runningStatisticsAlwaysFloat", "Precision.runningStatisticsAlwaysFloat(value: bool)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"value"}, 1);
         o.running_statistics_always_float(to_bool(c, *argument(c, 0, "value"), "value"));
       }},
      {"TensorLocations.setActivationLocation", "TensorLocations.setActivationLocation(location: poptorch.TensorLocationSettings)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"location"}, 1);
         o.activation_location(to_location(c, *argument(c, 0, "location")));
       }},
      {"TensorLocations.setWeightLocation", "TensorLocations.setWeightLocation(location: poptorch.TensorLocationSettings)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"location"}, 1);
         o.weight_location(to_location(c, *argument(c, 0, "location")));
       }},
      {"TensorLocations.setOptimizerLocation", "TensorLocations.setOptimizerLocation(location: poptorch.TensorLocationSettings)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"location"}, 1);
         o.optimizer_location(to_location(c, *argument(c, 0, "location")));
       }},
      {"TensorLocations.setAccumulatorLocation",
       "TensorLocations.setAccumulatorLocation(location: poptorch.TensorLocationSettings)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"location"}, 1);
         o.accumulator_location(to_location(c, *argument(c, 0, "location")));
       }},
      {"Distributed.configureProcessId", "Distributed.configureProcessId(process_id: int, num_processes: int)",
       [](options& o, const call_site& c) {
         check_arguments(c, k{"process_id", "num_processes"}, 2);
         o.distributed_process(to_int(c, *argument(c, 0, "process_id"), "process_id"),
                               to_int(c, *argument(c, 1, "num_processes"), "num_processes"));
       }},
      {"Distributed.disable", "Distributed.disable()",
       [](options& o, const call_site& c) {
         check_arguments(c, k{}, 0);
         o.distributed_process(0, 1);
       }},
  };
  return table;
}

[[noreturn]] inline void unknown_option(const std::string& name, const std::string& location) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(3, name.size() / 3) + 1;
  std::string accepted;
  for (const auto& e : entries()) {
    // Compare with the full name and with its last part: gradientAccumulation is Training's.
    const auto dot = e.name.rfind('.');
    auto d = edit_distance(name, e.name);
    if (dot != std::string_view::npos) d = std::min(d, edit_distance(name, e.name.substr(dot + 1)));
    if (d < best_distance) {
      best_distance = d;
      best = std::string(e.name);
    }
    accepted += (accepted.empty() ? "" : ", ") + std::string(e.name);
  }
  std::string hint;
  if (name.starts_with("options.")) hint = "omit the 'options.' prefix: write " + name.substr(8) + "(...); ";
  else if (!best.empty()) hint = "did you mean " + best + "? ";
  throw error(error_category::options, "unknown option '" + name + "'", location, hint + "accepted: " + accepted);
}

/// Applies one parsed line (a call, or a chain of calls on the same options group).
inline void apply(options& o, const expr& statement, const std::string& location) {
  if (!statement.is_call())
    throw error(error_category::options, "expected an option call, got '" + statement.source + "'", location,
                "write one call per line, e.g. deviceIterations(4)");
  std::vector<const expr*> chain;
  for (const expr* e = &statement; e; e = e->is_method_call() ? &e->receiver.front() : nullptr) {
    if (!e->is_call())
      throw error(error_category::options, "expected an option call, got '" + e->source + "'", location,
                  "write one call per line, e.g. deviceIterations(4)");
    chain.push_back(e);
  }
  std::reverse(chain.begin(), chain.end());
  std::string group;  // calls chained after Training.x(...) are Training's too, as in Python
  for (std::size_t i = 0; i < chain.size(); ++i) {
    std::string name = chain[i]->text;
    if (i == 0) {
      const auto dot = name.rfind('.');
      group = dot == std::string::npos ? "" : name.substr(0, dot);
    } else if (!group.empty()) {
      name = group + "." + name;
    }
    const auto& table = entries();
    const auto it = std::find_if(table.begin(), table.end(), [&](const entry& e) { return e.name == name; });
    if (it == table.end()) unknown_option(name, location);
    const call_site site{*chain[i], name, it->signature, location};
    try {
      it->apply(o, site);
    } catch (const error& e) {
      if (e.location() == location) throw;
      // A setter's or strategy's own check: say which option and line it came from.
      throw error(e.category(), name + ": " + (e.location().empty() ? "" : e.location() + ": ") + e.message(), location,
                  e.hint());
    }
  }
}

// Writing options back as a file.

inline std::string python_string(std::string_view s) {
  std::string r = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') r += '\\';
    if (ch == '\n') {
      r += "\\n";
      continue;
    }
    r += ch;
  }
  return r + "\"";
}

inline std::string python_bool(bool b) { return b ? "True" : "False"; }

inline std::string python_float(double v) {
  std::array<char, 32> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  std::string s(buf.data(), end);
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

template <class E>
std::string python_enum(E e) {
  return std::string(enum_names<E>::python) + "." + std::string(to_string(e));
}

inline std::string python_dtype(data_type t) { return t == data_type::F16 ? "torch.half" : "torch.float"; }

inline std::string python_stage(const stage& s) {
  std::string r = "poptorch.Stage(";
  for (std::size_t i = 0; i < s.blocks.size(); ++i) r += (i ? ", " : "") + python_string(s.blocks[i]);
  r += ")";
  if (s.ipu) r += ".ipu(" + std::to_string(*s.ipu) + ")";
  return r;
}

inline std::string python_strategy(const strategy_settings& s) {
  std::string r = "poptorch." + std::string(to_string(s.mode)) + "(";
  if (!s.is_phased()) {
    if (s.stages.empty() && s.auto_stage != auto_stage::same_as_ipu) r += python_enum(s.auto_stage);
    for (std::size_t i = 0; i < s.stages.size(); ++i) r += (i ? ", " : "") + python_stage(s.stages[i]);
    return r + ")";
  }
  for (std::size_t p = 0; p < s.phases.size(); ++p) {
    r += p ? ", poptorch.Phase(" : "poptorch.Phase(";
    for (std::size_t i = 0; i < s.phases[p].stages.size(); ++i) r += (i ? ", " : "") + python_stage(s.phases[p].stages[i]);
    r += ")";
  }
  r += ")";
  if (s.tensors_liveness != liveness::always_live) r += ".setTensorsLiveness(" + python_enum(s.tensors_liveness) + ")";
  if (s.separate_backward_phase) r += ".useSeparateBackwardPhase(True)";
  return r;
}

inline std::string python_location(const tensor_location& l) {
  std::string r = "poptorch.TensorLocationSettings()";
  if (l.on_chip) r += ".useOnChipStorage(" + python_bool(*l.on_chip) + ")";
  if (l.replicated_tensor_sharding) r += ".useReplicatedTensorSharding(True)";
  if (l.min_elements_for_off_chip) r += ".minElementsForOffChip(" + std::to_string(*l.min_elements_for_off_chip) + ")";
  if (l.min_elements_for_replicated_tensor_sharding)
    r += ".minElementsForReplicatedTensorSharding(" + std::to_string(*l.min_elements_for_replicated_tensor_sharding) + ")";
  if (l.io_tiles_to_load) r += ".useIOTilesToLoad(True)";
  if (l.io_tiles_to_store) r += ".useIOTilesToStore(True)";
  return r;
}

}  // namespace ipu::detail::config

namespace ipu {

inline options& options::load_from_string(std::string_view text, std::string_view source) {
  options result = *this;  // all or nothing
  int line_number = 0;
  while (!text.empty() || line_number == 0) {
    const auto newline = text.find('\n');
    const std::string_view raw = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view() : text.substr(newline + 1);
    ++line_number;
    const std::string_view line = detail::config::trim(raw);
    if (line.empty()) continue;
    const std::string location = std::string(source) + ":" + std::to_string(line_number);
    detail::config::expr statement;
    try {
      statement = detail::config::parser(line).statement();
    } catch (const detail::config::syntax_error& e) {
      const auto indent = static_cast<int>(line.data() - raw.data());
      throw error(error_category::options, "syntax error: " + e.message + " in '" + std::string(line) + "'",
                  location + ":" + std::to_string(indent + e.column),
                  "write one call per line in PopTorch's syntax, e.g. deviceIterations(4)");
    }
    detail::config::apply(result, statement, location);
  }
  *this = std::move(result);
  return *this;
}

inline std::string options::to_config() const {
  using namespace detail::config;
  const options d;
  std::string out;
  auto line = [&out](const std::string& l) { out += l + "\n"; };
  if (device_iterations_ != d.device_iterations_) line("deviceIterations(" + std::to_string(device_iterations_) + ")");
  if (replication_factor_ != d.replication_factor_) line("replicationFactor(" + std::to_string(replication_factor_) + ")");
  if (input_group_size_ != d.input_group_size_ || input_group_type_ != d.input_group_type_)
    line("inputReplicaGrouping(" + std::to_string(input_group_size_) + ", " + python_enum(input_group_type_) + ")");
  if (output_mode_ != d.output_mode_)
    line("outputMode(" + python_enum(output_mode_) +
         (output_mode_ == ipu::output_mode::every_n ? ", " + std::to_string(output_return_period_) : "") + ")");
  if (strategy_ != d.strategy_) line("setExecutionStrategy(" + python_strategy(strategy_) + ")");
  if (auto_round_num_ipus_ != d.auto_round_num_ipus_) line("autoRoundNumIPUs(" + python_bool(auto_round_num_ipus_) + ")");
  if (cache_dir_) line("enableExecutableCaching(" + python_string(*cache_dir_) + ")");
  if (use_ipu_model_ != d.use_ipu_model_) line("useIpuModel(" + python_bool(use_ipu_model_) + ")");
  if (offline_ipu_target_) line("useOfflineIpuTarget(" + python_string(*offline_ipu_target_) + ")");
  if (ipu_id_) line("useIpuId(" + std::to_string(*ipu_id_) + ")");
  if (random_seed_) line("randomSeed(" + std::to_string(*random_seed_) + ")");
  if (default_memory_proportion_) line("setAvailableMemoryProportion(" + python_float(*default_memory_proportion_) + ")");
  if (!memory_proportion_.empty()) {
    std::string m;
    for (const auto& [ipu, p] : memory_proportion_)
      m += (m.empty() ? "" : ", ") + python_string("IPU" + std::to_string(ipu)) + ": " + python_float(p);
    line("setAvailableMemoryProportion({" + m + "})");
  }
  if (synthetic_data_ != d.synthetic_data_) line("enableSyntheticData(" + python_bool(synthetic_data_) + ")");
  // An offline target implies ConnectionType.Never; write it only when it says more.
  if (connection_type_ != d.connection_type_ &&
      !(offline_ipu_target_ && connection_type_ == ipu::connection_type::never))
    line("connectionType(" + python_enum(connection_type_) + ")");
  if (sync_pattern_ != d.sync_pattern_) line("syncPattern(" + python_enum(sync_pattern_) + ")");
  if (log_dir_ != d.log_dir_) line("logDir(" + python_string(log_dir_) + ")");
  if (profile_dir_) line("enableProfiling(" + python_string(*profile_dir_) + ")");
  if (stable_norm_ != d.stable_norm_) line("enableStableNorm(" + python_bool(stable_norm_) + ")");
  if (log_cycle_count_ != d.log_cycle_count_) line("logCycleCount(" + python_bool(log_cycle_count_) + ")");
  if (broadcast_buffers_ != d.broadcast_buffers_) line("broadcastBuffers(" + python_bool(broadcast_buffers_) + ")");
  if (progress_bar_ != d.progress_bar_) line("showCompilationProgressBar(" + python_bool(progress_bar_) + ")");
  if (gradient_accumulation_ != d.gradient_accumulation_)
    line("Training.gradientAccumulation(" + std::to_string(gradient_accumulation_) + ")");
  if (reduction_type_ != d.reduction_type_)
    line("Training.accumulationAndReplicationReductionType(" + python_enum(reduction_type_) + ")");
  if (mean_reduction_strategy_ != d.mean_reduction_strategy_)
    line("Training.meanReductionStrategy(" + python_enum(mean_reduction_strategy_) + ")");
  if (automatic_loss_scaling_ != d.automatic_loss_scaling_)
    line("Training.setAutomaticLossScaling(" + python_bool(automatic_loss_scaling_) + ")");
  if (recomputation_)  // even None when set: the file said so (a command line must not contradict it)
    line("_Popart.set(\"autoRecomputation\", " + std::to_string(popart_value(*recomputation_)) + ")");
  if (precision_) line("Precision.setFloatType(" + python_dtype(*precision_) + ")");
  if (partials_type_ != d.partials_type_) line("Precision.setPartialsType(" + python_dtype(partials_type_) + ")");
  if (half_float_casting_ != d.half_float_casting_) line("Precision.halfFloatCasting(" + python_enum(half_float_casting_) + ")");
  if (stochastic_rounding_ != d.stochastic_rounding_)
    line("Precision.enableStochasticRounding(" + python_bool(stochastic_rounding_) + ")");
  if (floating_point_exceptions_ != d.floating_point_exceptions_)
    line("Precision.enableFloatingPointExceptions(" + python_bool(floating_point_exceptions_) + ")");
  if (running_statistics_always_float_ != d.running_statistics_always_float_)
    line("Precision.runningStatisticsAlwaysFloat(" + python_bool(running_statistics_always_float_) + ")");
  const std::pair<const char*, const tensor_location*> locations[] = {
      {"Activation", &activation_location_}, {"Weight", &weight_location_}, {"Optimizer", &optimizer_location_},
      {"Accumulator", &accumulator_location_}};
  for (const auto& [kind, l] : locations)
    if (*l != tensor_location{}) line(std::string("TensorLocations.set") + kind + "Location(" + python_location(*l) + ")");
  if (process_id_ != d.process_id_ || num_processes_ != d.num_processes_)
    line("Distributed.configureProcessId(" + std::to_string(process_id_) + ", " + std::to_string(num_processes_) + ")");
  return out;
}

/// The settings of `o` (to_config()'s lines) that no prefix in `applied` names: what a caller
/// that applies only those must refuse, so that no option is accepted and ignored.
inline std::vector<std::string> settings_not_applied(const options& o, std::span<const std::string_view> applied) {
  std::vector<std::string> out;
  const std::string config = o.to_config();
  for (std::size_t at = 0; at < config.size();) {
    const auto end = config.find('\n', at);
    auto line = config.substr(at, end - at);
    at = end == std::string::npos ? config.size() : end + 1;
    if (line.empty()) continue;
    // An explicit autoRecomputation None asks for what a caller that never recomputes does anyway.
    if (line == "_Popart.set(\"autoRecomputation\", 0)") continue;
    if (std::none_of(applied.begin(), applied.end(), [&](std::string_view p) { return line.starts_with(p); }))
      out.push_back(std::move(line));
  }
  return out;
}

}  // namespace ipu
