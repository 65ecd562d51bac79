#include "ipu/ops/kernels/text.hpp"

#include <doctest/doctest.h>

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
  // A pool of strings is refused when the model is imported, saying what to do instead.
  op.attributes.push_back(attr("pool_strings", std::vector<std::string>{"a", "b"}));
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, one, 1), doctest::Contains("string n-grams are unsupported"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::infer_outputs(op, one, 1), doctest::Contains("pool_int64s"), ipu::error);
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
  refused(missing, "pool_int64s is missing");
  // The output must be what the attributes say.
  CHECK_THROWS_AS(tfidf(x, pool_attrs("TF", 1, 1), {6}), ipu::error);
}

}  // namespace test_text
