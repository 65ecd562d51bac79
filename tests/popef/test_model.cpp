// The model builder: blobs linked by name into a model, and a clear error for each dangling or
// duplicate link.
#include <doctest/doctest.h>

#include <sstream>

#include "ipu/popef/model.hpp"
#include "ipu/popef/writer.hpp"
#include "popef_test_util.hpp"

namespace test_model {

using namespace ipu;
using namespace ipu::popef;
using test_popef::pattern;

namespace {

/// A reader over the blobs `write` puts in one stream.
template <class Write>
reader read(Write write) {
  std::stringstream s;
  {
    writer w(s);
    write(w);
  }
  reader r;
  r.parse_stream(s, "test");
  return r;
}

std::string link_error(const reader& r) {
  try {
    (void)model_builder(r).create_model();
  } catch (const ipu::error& e) {
    CHECK(e.category() == error_category::popef);
    return e.what();
  }
  FAIL("no error");
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

const tensor_info w_info{data_type::S32, shape{3, 5}};
const tensor_info x_info{data_type::F32, shape{2, 3}};

}  // namespace

TEST_CASE("a model links its executable, metadata, tensors, feeds and opaque blobs") {
  const auto r = read([](writer& w) { test_popef::write_sample(w); });
  const auto m = model_builder(r).create_model();
  CHECK(m.executable.name == "exe");
  CHECK(m.metadata.value.executable == "exe");
  REQUIRE(m.tensors.size() == 1);
  CHECK(m.find_tensor("w"));
  CHECK(m.find_feed("x"));
  CHECK(m.find_opaque("popart"));
  CHECK_FALSE(m.find_tensor("x"));
}

TEST_CASE("two models in one file are chosen by name") {
  const auto r = read([](writer& w) {
    test_popef::write_sample(w);
    w.write_executable("other", pattern(10));
    auto meta = test_popef::sample_metadata("other");
    meta.anchors.resize(1);
    w.write_metadata(meta);
  });
  const model_builder b(r);
  CHECK(b.model_names() == std::vector<std::string>{"exe", "other"});
  CHECK(contains(link_error(r), "holds 2 models"));
  const auto m = b.create_model("other");
  CHECK(m.executable.name == "other");
  CHECK(m.tensors.empty());  // w is an anchor of "exe" only
  CHECK(m.opaque.empty());
  CHECK(contains([&] {
    try {
      (void)b.create_model("nope");
    } catch (const ipu::error& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), "no metadata for executable 'nope'"));
}

TEST_CASE("dangling links") {
  SUBCASE("metadata naming a missing executable") {
    const auto r = read([](writer& w) { w.write_metadata(test_popef::sample_metadata("ghost")); });
    const auto e = link_error(r);
    CHECK(contains(e, "names executable 'ghost', which no Executable blob defines"));
    CHECK(contains(e, "blob 0 (Metadata 'ghost')"));
  }
  SUBCASE("tensor data matching no anchor") {
    const auto r = read([](writer& w) {
      test_popef::write_sample(w);
      w.write_tensor_data("stray", w_info, pattern(60));
    });
    const auto e = link_error(r);
    CHECK(contains(e, "TensorData 'stray' matches no anchor"));
    CHECK(contains(e, "blob 5"));
  }
  SUBCASE("tensor data of another shape than its anchor") {
    const auto r = read([](writer& w) {
      w.write_executable("exe", pattern(10));
      w.write_metadata(test_popef::sample_metadata());
      w.write_tensor_data("w", {data_type::S32, shape{15}}, pattern(60));
    });
    CHECK(contains(link_error(r), "TensorData 'w' is S32[15] but its anchor"));
  }
  SUBCASE("feed data matching no anchor") {
    const auto r = read([](writer& w) {
      test_popef::write_sample(w);
      w.write_feed_data("q", x_info, pattern(24));
    });
    CHECK(contains(link_error(r), "FeedData 'q' matches no anchor"));
  }
  SUBCASE("opaque blob naming a missing executable") {
    const auto r = read([](writer& w) {
      test_popef::write_sample(w);
      w.write_opaque("poptorch", "ghost", pattern(3));
    });
    CHECK(contains(link_error(r), "opaque blob 'poptorch' names executable 'ghost'"));
  }
  SUBCASE("no metadata at all") {
    const auto r = read([](writer& w) { w.write_executable("exe", pattern(10)); });
    CHECK(contains(link_error(r), "no Metadata blob"));
  }
}

TEST_CASE("duplicates") {
  SUBCASE("two executables of one name") {
    const auto r = read([](writer& w) {
      test_popef::write_sample(w);
      w.write_executable("exe", pattern(5));
    });
    const auto e = link_error(r);
    CHECK(contains(e, "executable 'exe' is defined twice"));
    CHECK(contains(e, "blob 0 (Executable 'exe')"));  // where the first one is
  }
  SUBCASE("two metadata for one executable") {
    const auto r = read([](writer& w) {
      test_popef::write_sample(w);
      w.write_metadata(test_popef::sample_metadata());
    });
    CHECK(contains(link_error(r), "executable 'exe' has two metadata blobs"));
  }
  SUBCASE("two tensors of one name, across files") {
    std::stringstream a, b;
    {
      writer w(a);
      test_popef::write_sample(w);
    }
    {
      writer w(b);
      w.write_tensor_data("w", w_info, pattern(60));
    }
    reader r;
    r.parse_stream(a, "a").parse_stream(b, "b");
    const auto e = link_error(r);
    CHECK(contains(e, "TensorData 'w' is defined twice"));
    CHECK(contains(e, "stream 'b'"));
    CHECK(contains(e, "stream 'a'"));
  }
}

TEST_CASE("a model split over several files links across them") {
  std::stringstream exe, weights;
  {
    writer w(exe);
    w.write_executable("exe", pattern(10));
    w.write_metadata(test_popef::sample_metadata());
  }
  {
    writer w(weights);
    w.write_tensor_data("w", w_info, pattern(60));
  }
  reader r;
  r.parse_stream(exe, "exe").parse_stream(weights, "weights");
  const auto m = model_builder(r).create_model();
  REQUIRE(m.find_tensor("w"));
  CHECK(m.find_tensor("w")->blob.source == 1);
}

}  // namespace test_model
