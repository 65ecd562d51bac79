#include "ipu/ops/kernels/text.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ipu/ops/infer.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_text {

using namespace tk;
using ints = std::vector<std::int64_t>;

// The pool: 1-grams [1], [3]; 2-grams [1,2], [2,1], [1,3], writing columns 4, 0, 1, 2, 3.
std::vector<attribute> pool_attrs(const char* mode, std::int64_t min_n, std::int64_t skip) {
  return {attr("mode", mode),
          attr("min_gram_length", min_n),
          attr("max_gram_length", std::int64_t{2}),
          attr("max_skip_count", skip),
          attr("ngram_counts", ints{0, 2}),
          attr("ngram_indexes", ints{4, 0, 1, 2, 3}),
          attr("pool_int64s", ints{1, 3, 1, 2, 2, 1, 1, 3})};
}

std::vector<float> tfidf(const host_tensor& x, std::vector<attribute> attrs, shape out) {
  return values<float>(run1("TfIdfVectorizer", {x}, f32_info(std::move(out)), std::move(attrs)));
}

// X = [1, 2, 1, 3, 2, 1]. 1-grams: 1 at positions 0, 2, 5 (3 times), 3 once. 2-grams with step 1:
// (1,2) (2,1) (1,3) (3,2) (2,1); with step 2 (one skip): (1,1) (2,3) (1,2) (3,1). So with
// max_skip_count 1: [1,2] twice, [2,1] twice, [1,3] once; with 0: [1,2] once.
TEST_CASE("text: TfIdfVectorizer counts n-grams with skips (TF)") {
  const auto x = i64({6}, {1, 2, 1, 3, 2, 1});
  CHECK(tfidf(x, pool_attrs("TF", 1, 1), {5}) == std::vector<float>{1, 2, 2, 1, 3});
  CHECK(tfidf(x, pool_attrs("TF", 1, 0), {5}) == std::vector<float>{1, 1, 2, 1, 3});
  CHECK(tfidf(x, pool_attrs("TF", 2, 1), {5}) == std::vector<float>{0, 2, 2, 1, 0});  // 2-grams only
  // Steps up to 5 span the row: step 3 adds (x0, x3) = [1,3], step 4 (x0, x4) = [1,2] and (x1, x5)
  // = [2,1]. A skip past the row's end finds nothing more, and a huge one neither overflows nor
  // loops for ever.
  CHECK(tfidf(x, pool_attrs("TF", 1, 4), {5}) == std::vector<float>{1, 3, 3, 2, 3});
  CHECK(tfidf(x, pool_attrs("TF", 1, std::numeric_limits<std::int64_t>::max()), {5}) ==
        std::vector<float>{1, 3, 3, 2, 3});
  // INT32 ids count alike.
  CHECK(tfidf(i32({6}, {1, 2, 1, 3, 2, 1}), pool_attrs("TF", 1, 1), {5}) == std::vector<float>{1, 2, 2, 1, 3});
}

TEST_CASE("text: TfIdfVectorizer IDF and TFIDF weights, and batches") {
  const auto x = i64({6}, {1, 2, 1, 3, 2, 1});
  // Weights by pool n-gram: [1] 0.5 (column 4), [3] 2 (column 0), [1,2] 0.25, [2,1] 1.5, [1,3] 4.
  auto weighted = [](const char* mode) {
    auto a = pool_attrs(mode, 1, 1);
    a.push_back(attr("weights", std::vector<float>{0.5f, 2, 0.25f, 1.5f, 4}));
    return a;
  };
  // TFIDF: counts [1, 2, 2, 1, 3] times the columns' weights [2, 0.25, 1.5, 4, 0.5].
  CHECK(tfidf(x, weighted("TFIDF"), {5}) == std::vector<float>{2, 0.5f, 3, 4, 1.5f});
  // IDF: the weight wherever the count is not zero.
  CHECK(tfidf(x, weighted("IDF"), {5}) == std::vector<float>{2, 0.25f, 1.5f, 4, 0.5f});
  CHECK(tfidf(i64({6}, {2, 2, 2, 2, 2, 2}), weighted("IDF"), {5}) == std::vector<float>{0, 0, 0, 0, 0});
  // Rows are counted apart: [1, 2, 1] has [1] twice, [1,2] and [2,1] with step 1, [1,1] with step 2;
  // [3, 2, 1] has [3], [1], [2,1] and [3,1] (not in the pool). Without weights IDF is 0 or 1.
  const auto batch = i64({2, 3}, {1, 2, 1, 3, 2, 1});
  CHECK(tfidf(batch, pool_attrs("TF", 1, 1), {2, 5}) == std::vector<float>{0, 1, 1, 0, 2, 1, 0, 1, 0, 1});
  CHECK(tfidf(batch, pool_attrs("IDF", 1, 1), {2, 5}) == std::vector<float>{0, 1, 1, 0, 1, 1, 0, 1, 0, 1});
  // Columns no n-gram names stay 0.
  auto sparse = pool_attrs("TF", 1, 1);
  sparse[5] = attr("ngram_indexes", ints{9, 0, 1, 2, 3});
  CHECK(tfidf(x, sparse, {10}) == std::vector<float>{1, 2, 2, 1, 0, 0, 0, 0, 0, 3});
}

TEST_CASE("text: TfIdfVectorizer's shape rule") {
  ipu::op_node op;
  op.type = "TfIdfVectorizer";
  op.name = "tfidf";
  op.attributes = pool_attrs("TF", 1, 1);
  const tensor_info x1{data_type::S32, {6}}, x2{data_type::S64, {4, 6}}, xf{data_type::F32, {6}};
  const ipu::infer_input one[] = {{&x1, nullptr}}, two[] = {{&x2, nullptr}}, wrong[] = {{&xf, nullptr}};
  CHECK(ipu::infer_outputs(op, one, 1)[0] == tensor_info{data_type::F32, {5}});
  CHECK(ipu::infer_outputs(op, two, 1)[0] == tensor_info{data_type::F32, {4, 5}});
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, wrong, 1), doctest::Contains("INT32 or INT64"), ipu::error);
  const tensor_info words{data_type::STRING, {6}};
  const ipu::infer_input text_in[] = {{&words, nullptr}};
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, text_in, 1), doctest::Contains("give the pool as pool_strings"), ipu::error);
  // One pool, of the input's kind.
  op.attributes.push_back(attr("pool_strings", std::vector<std::string>{"a", "b"}));
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, one, 1), doctest::Contains("both pool_int64s and pool_strings"), ipu::error);
  op.attributes.erase(op.attributes.begin() + 6);  // pool_int64s
  op.attributes.back() = attr("pool_strings", std::vector<std::string>{"one", "three", "one", "two", "two", "one", "one", "three"});
  CHECK(ipu::infer_outputs(op, text_in, 1)[0] == tensor_info{data_type::F32, {5}});
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, one, 1), doctest::Contains("the words must be STRING"), ipu::error);
}


TEST_CASE("text: TfIdfVectorizer refuses bad attributes") {
  const auto x = i64({6}, {1, 2, 1, 3, 2, 1});
  auto with = [](std::size_t at, attribute a) {
    auto attrs = pool_attrs("TF", 1, 1);
    if (at < attrs.size()) attrs[at] = std::move(a);
    else attrs.push_back(std::move(a));
    return attrs;
  };
  auto refused = [&](std::vector<attribute> attrs, const char* says) {
    CHECK_THROWS_WITH_AS(tfidf(x, std::move(attrs), {5}), doctest::Contains(says), ipu::error);
  };
  refused(with(0, attr("mode", "BM25")), "use TF, IDF or TFIDF");
  refused(with(1, attr("min_gram_length", std::int64_t{3})), "1 <= min <= max");
  refused(with(1, attr("min_gram_length", std::int64_t{0})), "1 <= min <= max");
  refused(with(2, attr("max_gram_length", std::int64_t{3})), "n-grams up to length 2 only");
  refused(with(3, attr("max_skip_count", std::int64_t{-1})), "max_skip_count is -1");
  refused(with(4, attr("ngram_counts", ints{1, 2})), "must start with 0");
  refused(with(4, attr("ngram_counts", ints{0, 9})), "not ordered");
  refused(with(4, attr("ngram_counts", ints{0, 3})), "not a multiple of 2");
  refused(with(5, attr("ngram_indexes", ints{0, 1, 2, 3})), "the pool holds 5 n-grams");
  refused(with(5, attr("ngram_indexes", ints{0, 1, 2, 3, -1})), "outside [0, 2^32]");
  refused(with(5, attr("ngram_indexes", ints{0, 1, 2, 3, std::int64_t{1} << 40})), "outside [0, 2^32]");
  refused(with(5, attr("ngram_indexes", ints{0, 1, 2, 3, 3})), "the same output column");
  refused(with(6, attr("pool_int64s", ints{1, 3, 1, 2, 2, 1, 1, 2})), "the same 2-gram twice");
  refused(with(7, attr("weights", std::vector<float>{1, 2})), "weights has 2 values");
  refused(with(7, attr("weights", std::vector<float>{1, 2, 3, 4, std::numeric_limits<float>::infinity()})),
          "non-finite");
  auto missing = pool_attrs("TF", 1, 1);
  missing.erase(missing.begin() + 6);
  refused(missing, "the pool (pool_int64s or pool_strings) is missing");
  // The output must be what the attributes say.
  CHECK_THROWS_AS(tfidf(x, pool_attrs("TF", 1, 1), {6}), ipu::error);
}


// --- strings ---------------------------------------------------------------------------------------
using strings = std::vector<std::string>;

host_tensor text(shape s, const strings& v) {
  std::vector<std::string_view> views(v.begin(), v.end());
  return host_tensor::from_strings(std::move(s), views);
}
strings read(const host_tensor& t) {
  strings out;
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.info().num_elements()); ++i) out.emplace_back(t.string_at(i));
  return out;
}
host_tensor normalize(const host_tensor& x, shape out, std::vector<attribute> attrs) {
  return run1("StringNormalizer", {x}, info(data_type::STRING, std::move(out)), std::move(attrs));
}

TEST_CASE("text: StringNormalizer drops stopwords, with or without case, then changes case") {
  const auto x = text({6}, {"Monday", "tuesday", "wednesday", "monday", "MONDAY", "Thursday"});
  // Case-insensitive by default: every spelling of monday goes.
  CHECK(read(normalize(x, {3}, {attr("stopwords", strings{"monday"})})) == strings{"tuesday", "wednesday", "Thursday"});
  CHECK(read(normalize(x, {5}, {attr("stopwords", strings{"monday"}), attr("is_case_sensitive", 1)})) ==
        strings{"Monday", "tuesday", "wednesday", "MONDAY", "Thursday"});
  CHECK(read(normalize(x, {3}, {attr("stopwords", strings{"MONDAY"}), attr("case_change_action", "UPPER")})) ==
        strings{"TUESDAY", "WEDNESDAY", "THURSDAY"});
  CHECK(read(normalize(x, {6}, {attr("case_change_action", "LOWER")})) ==
        strings{"monday", "tuesday", "wednesday", "monday", "monday", "thursday"});
  // [1, C] stays two-dimensional; nothing left is one empty string, [1] or [1, 1].
  const auto row = text({1, 2}, {"a", "A"});
  CHECK(normalize(row, {1, 1}, {attr("stopwords", strings{"a"})}).info().shape == shape{1, 1});
  CHECK(read(normalize(text({2}, {"a", "A"}), {1}, {attr("stopwords", strings{"a"})})) == strings{""});
}

TEST_CASE("text: StringNormalizer changes the case of UTF-8 beyond ASCII") {
  // é (U+00E9) <-> É (U+00C9), σ (U+03C3) <-> Σ (U+03A3); CJK has no case.
  const auto x = text({3}, {"caf\u00e9", "\u03c3\u03a3", "\u65e5\u672c"});
  CHECK(read(normalize(x, {3}, {attr("case_change_action", "UPPER")})) ==
        strings{"CAF\u00c9", "\u03a3\u03a3", "\u65e5\u672c"});
  CHECK(read(normalize(x, {3}, {attr("case_change_action", "LOWER"), attr("locale", "en_US")})) ==
        strings{"caf\u00e9", "\u03c3\u03c3", "\u65e5\u672c"});
  // Stopwords match without case beyond ASCII too.
  CHECK(read(normalize(x, {2}, {attr("stopwords", strings{"CAF\u00c9"})})) == strings{"\u03c3\u03a3", "\u65e5\u672c"});
}

TEST_CASE("text: StringNormalizer refuses bad input and attributes, saying which") {
  auto refusal = [](const host_tensor& x, shape out, std::vector<attribute> attrs) {
    try {
      (void)normalize(x, std::move(out), std::move(attrs));
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const auto x = text({2}, {"a", "b"});
  CHECK(refusal(x, {2}, {attr("case_change_action", "TITLE")}).find("case_change_action is 'TITLE'") != std::string::npos);
  CHECK(refusal(x, {2}, {attr("locale", "xx_NOWHERE")}).find("locale 'xx_NOWHERE' is not installed") != std::string::npos);
  CHECK(refusal(x, {2}, {attr("stop_words", strings{"a"})}).find("attribute 'stop_words' is not one of") !=
        std::string::npos);
  CHECK(refusal(text({2, 2}, {"a", "b", "c", "d"}), {2, 2}, {}).find("takes [C] or [1, C]") != std::string::npos);
  // The count depends on the values: a declared shape they contradict is refused.
  CHECK(refusal(x, {2}, {attr("stopwords", strings{"a"})}).find("the input values give [1]") != std::string::npos);
  CHECK(refusal(text({1}, {"ab\xff"}), {1}, {attr("case_change_action", "UPPER")}).find("element 0 of the input is not valid UTF-8") !=
        std::string::npos);
}

TEST_CASE("text: Cast writes numbers as numpy's str() does, and reads them back") {
  const auto f = f32({9}, {0.5f, 1.0f, 0.039187793f, 1e-5f, 1.5e20f, -0.0f, std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
  const auto s = run1("Cast", {f}, info(data_type::STRING, {9}), {attr("to", std::int64_t{8})});
  CHECK(read(s) == strings{"0.5", "1.0", "0.039187793", "1e-05", "1.5e+20", "-0.0", "NaN", "INF", "-INF"});
  const auto back = run1("Cast", {s}, f32_info({9}), {attr("to", std::int64_t{1})});
  const auto v = values<float>(back);
  for (std::size_t i : {0u, 1u, 2u, 3u, 4u, 5u, 7u, 8u}) CHECK(v[i] == values<float>(f)[i]);
  CHECK(std::signbit(v[5]));
  CHECK(std::isnan(v[6]));
  // Integers and bools; half keeps its own shortest digits (0.1 is 0.0999755859375 in F16).
  CHECK(read(run1("Cast", {i64({2}, {-7, 9007199254740993})}, info(data_type::STRING, {2}), {attr("to", std::int64_t{8})})) ==
        strings{"-7", "9007199254740993"});
  CHECK(read(run1("Cast", {boolean({2}, {1, 0})}, info(data_type::STRING, {2}), {attr("to", std::int64_t{8})})) ==
        strings{"True", "False"});
  CHECK(read(run1("Cast", {make<half>({1}, {half(0.1f)})}, info(data_type::STRING, {1}), {attr("to", std::int64_t{8})})) ==
        strings{"0.1"});
}

TEST_CASE("text: Cast reads the spellings ONNX allows, and refuses what is not a number") {
  const auto s = text({7}, {" 3.25 ", "+INF", "-inf", "1E8", "nan", "-2.5e-3", "+7"});
  const auto v = values<float>(run1("Cast", {s}, f32_info({7}), {attr("to", std::int64_t{1})}));
  CHECK(v[0] == 3.25f);
  CHECK(v[1] == std::numeric_limits<float>::infinity());
  CHECK(v[2] == -std::numeric_limits<float>::infinity());
  CHECK(v[3] == 1e8f);
  CHECK(std::isnan(v[4]));
  CHECK(v[5] == -2.5e-3f);
  CHECK(v[6] == 7.0f);
  // Integers: whole numbers exactly (past 2^53 too), others truncated ("100.5" gives 100).
  const auto ints64 = values<std::int64_t>(run1("Cast", {text({3}, {"9007199254740993", "100.5", "-3.9"})},
                                                info(data_type::S64, {3}), {attr("to", std::int64_t{7})}));
  CHECK(ints64 == std::vector<std::int64_t>{9007199254740993, 100, -3});
  CHECK(values<bool>(run1("Cast", {text({3}, {"true", "False", "2"})}, info(data_type::BOOL, {3}),
                          {attr("to", std::int64_t{9})})) == std::vector<bool>{true, false, true});
  for (const char* bad : {"Hello", "", "1.5x", "++1", "0x10"}) {
    CAPTURE(bad);
    CHECK_THROWS_WITH_AS(run1("Cast", {text({2}, {"1", bad})}, f32_info({2}), {attr("to", std::int64_t{1})}),
                         doctest::Contains("element 1 of the input"), ipu::error);
  }
}

TEST_CASE("text: strings move through Transpose, Gather, Concat and Slice as whole elements") {
  const auto x = text({2, 2}, {"a", "bb", "ccc", ""});
  CHECK(read(run1("Transpose", {x}, info(data_type::STRING, {2, 2}))) == strings{"a", "ccc", "bb", ""});
  CHECK(read(run1("Gather", {x, i64({1}, {1})}, info(data_type::STRING, {1, 2}))) == strings{"ccc", ""});
  CHECK(read(run1("Concat", {x, text({1, 2}, {"d", "e"})}, info(data_type::STRING, {3, 2}), {attr("axis", 0)})) ==
        strings{"a", "bb", "ccc", "", "d", "e"});
  CHECK(read(run1("Slice", {x, i64({1}, {1}), i64({1}, {2}), i64({1}, {1})}, info(data_type::STRING, {2, 1}))) ==
        strings{"bb", ""});
}

TEST_CASE("text: TfIdfVectorizer counts n-grams of words as it counts token ids") {
  // The TF case above with 1 -> "one", 2 -> "two", 3 -> "three"; words the pool lacks match nothing.
  auto attrs = pool_attrs("TF", 1, 1);
  attrs[6] = attr("pool_strings", std::vector<std::string>{"one", "three", "one", "two", "two", "one", "one", "three"});
  const auto words = text({6}, {"one", "two", "one", "three", "two", "one"});
  CHECK(tfidf(words, attrs, {5}) == std::vector<float>{1, 2, 2, 1, 3});
  const auto rows = text({2, 3}, {"one", "two", "zero", "three", "One", "three"});
  // Row 0: the 1-gram one (column 4), the 2-gram (one, two) (column 1). Row 1: three twice
  // (column 0); "One" is not "one": words are matched with their case.
  CHECK(tfidf(rows, attrs, {2, 5}) == std::vector<float>{0, 1, 0, 0, 1, 2, 0, 0, 0, 0});
  attrs[0] = attr("mode", "IDF");
  attrs.push_back(attr("weights", std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, 4.5f}));
  // Every n-gram occurs, so each column holds its n-gram's weight: n-gram j writes ngram_indexes[j].
  CHECK(tfidf(words, attrs, {5}) == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f, 0.5f});
  CHECK_THROWS_WITH_AS(tfidf(i64({6}, {1, 2, 1, 3, 2, 1}), attrs, {5}), doctest::Contains("STRING words"), ipu::error);
}

}  // namespace test_text
