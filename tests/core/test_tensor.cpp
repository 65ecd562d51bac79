#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/tensor.hpp"

namespace test_tensor {

using ipu::data_type;

// Everything tensor-like satisfies the concept; other things do not.
static_assert(ipu::tensor<ipu::host_tensor>);
static_assert(ipu::tensor<ipu::tensor_view>);
static_assert(ipu::tensor<ipu::const_tensor_view>);
static_assert(ipu::tensor<const ipu::host_tensor&>);
static_assert(ipu::tensor<ipu::static_tensor<float, 2, 3>>);
static_assert(!ipu::tensor<std::vector<float>>);
static_assert(!ipu::tensor<ipu::tensor_info>);

namespace {
// A user type opting in to the concept.
struct my_tensor {
  using tensor_concept = ipu::tensor_tag;
  std::array<std::int16_t, 2> v{7, -7};
  [[nodiscard]] ipu::tensor_info info() const { return {data_type::S16, {2}}; }
  [[nodiscard]] std::span<const std::byte> bytes() const { return std::as_bytes(std::span(v)); }
};
struct not_opted_in {
  [[nodiscard]] ipu::tensor_info info() const { return {}; }
  [[nodiscard]] std::span<const std::byte> bytes() const { return {}; }
};
}  // namespace
static_assert(ipu::tensor<my_tensor>);
static_assert(!ipu::tensor<not_opted_in>);

TEST_CASE("host_tensor: zero-initialised, aligned, typed access") {
  ipu::host_tensor t({data_type::F32, {2, 3}});
  CHECK(t.info().num_elements() == 6);
  CHECK(t.bytes().size() == 24);
  CHECK(reinterpret_cast<std::uintptr_t>(t.data()) % 64 == 0);
  auto v = t.as<float>();
  REQUIRE(v.size() == 6);
  for (float x : v) CHECK(x == 0.0f);
  v[4] = 2.5f;
  CHECK(std::as_const(t).as<float>()[4] == 2.5f);
  float raw = 0;
  std::memcpy(&raw, t.data() + 16, 4);
  CHECK(raw == 2.5f);

  const ipu::host_tensor d;  // default: an F32 scalar
  CHECK(d.info() == ipu::tensor_info{data_type::F32, {}});
  CHECK(d.bytes().size() == 4);
  CHECK(d.as<float>()[0] == 0.0f);
  const ipu::host_tensor copy = d;  // reading all of a default tensor's bytes is valid
  CHECK(copy.as<float>()[0] == 0.0f);
}

TEST_CASE("host_tensor: from values, wrong count and wrong element type are errors") {
  const auto t = ipu::host_tensor::from<std::int64_t>({2, 2}, {1, 2, 3, 4});
  CHECK(t.info().type == data_type::S64);
  CHECK(t.as<std::int64_t>()[3] == 4);

  try {
    (void)ipu::host_tensor::from<float>({2, 3}, {1.0f, 2.0f});
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message().find("2 values") != std::string::npos);
    CHECK(e.message().find("[2,3]") != std::string::npos);
    CHECK(e.message().find("6 elements") != std::string::npos);
  }
  try {
    (void)t.as<float>();
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
    CHECK(e.message() == "tensor holds S64 elements, not F32");
  }
  CHECK_THROWS_AS((void)t.view().as<std::uint64_t>(), ipu::error);  // same size, different type
  const auto h = ipu::host_tensor::from<ipu::half>({1}, {ipu::half(1.0f)});
  CHECK(h.info().type == data_type::F16);
  const auto q = ipu::host_tensor::from<ipu::float8_143>({2}, {ipu::float8_143(1.0f), ipu::float8_143(-2.0f)});
  CHECK(q.info().type == data_type::F8143);
  CHECK(q.bytes().size() == 2);
  CHECK(static_cast<float>(q.as<ipu::float8_143>()[1]) == -2.0f);
}

TEST_CASE("host_tensor: copies are deep, moves transfer storage") {
  auto a = ipu::host_tensor::from<float>({3}, {1.0f, 2.0f, 3.0f});
  auto b = a;
  b.as<float>()[0] = 10.0f;
  CHECK(a.as<float>()[0] == 1.0f);
  CHECK(b.data() != a.data());
  const std::byte* storage = a.data();
  auto c = std::move(a);
  CHECK(c.data() == storage);
  CHECK(a.bytes().empty());  // NOLINT: a moved-from tensor owns no bytes
  a = c;                     // and can be assigned again
  CHECK(a.as<float>()[2] == 3.0f);
  b = b;  // self-assignment keeps the contents
  CHECK(b.as<float>()[0] == 10.0f);
}

TEST_CASE("views: read and write someone else's bytes, convert to const, copy into host tensors") {
  std::array<float, 4> storage{1, 2, 3, 4};
  const ipu::tensor_view w({data_type::F32, {2, 2}}, reinterpret_cast<std::byte*>(storage.data()));
  w.as<float>()[3] = 40.0f;
  CHECK(storage[3] == 40.0f);
  const ipu::const_tensor_view r = w;
  CHECK(r.as<float>()[3] == 40.0f);
  CHECK(r.bytes().size() == 16);
  CHECK(r.data() == w.data());
  CHECK_THROWS_AS((void)r.as<std::int32_t>(), ipu::error);

  const auto copy = ipu::host_tensor::copy_of(r);
  storage[0] = -1.0f;
  CHECK(copy.as<float>()[0] == 1.0f);
  CHECK(copy.info() == r.info());

  const auto from_user = ipu::host_tensor::copy_of(my_tensor{});
  CHECK(from_user.as<std::int16_t>()[1] == -7);

  const ipu::const_tensor_view empty;
  CHECK(empty.empty());
  CHECK(empty.bytes().empty());
  CHECK(empty.as<float>().empty());  // no elements to read through a null view
}

TEST_CASE("views: misaligned element access is an error, byte access is fine") {
  alignas(8) std::array<std::byte, 12> raw{};
  const ipu::const_tensor_view v({data_type::F32, {2}}, raw.data() + 1);
  CHECK(v.bytes().size() == 8);
  try {
    (void)v.as<float>();
    FAIL("expected an error");
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::usage);
    CHECK(e.message().find("aligned") != std::string::npos);
  }
  const ipu::const_tensor_view bytes_ok({data_type::U8, {4}}, raw.data() + 1);
  CHECK(bytes_ok.as<std::uint8_t>().size() == 4);
}

TEST_CASE("static_tensor: type and shape in the type, usable in constant expressions") {
  using t23 = ipu::static_tensor<float, 2, 3>;
  static_assert(t23::rank == 2);
  static_assert(t23::size == 6);
  static_assert(t23::shape() == ipu::shape{2, 3});
  static_assert(t23{}.info().num_bytes() == 24);
  static_assert(ipu::static_tensor<ipu::half>::size == 1);  // rank 0: a scalar
  static_assert(ipu::static_tensor<std::int8_t, 4, 0>::size == 0);
  constexpr auto sum = [] {
    ipu::static_tensor<std::int32_t, 3> t{{1, 2, 3}};
    t[1] = 20;
    return t[0] + t[1] + t[2];
  }();
  static_assert(sum == 24);

  t23 t{{0, 1, 2, 3, 4, 5}};
  CHECK(t.bytes().size() == 24);
  const auto h = ipu::host_tensor::copy_of(t);
  CHECK(h.info() == ipu::tensor_info{data_type::F32, {2, 3}});
  CHECK(h.as<float>()[5] == 5.0f);
}

TEST_CASE("host_tensor: STRING elements are empty when fresh, and owned by the tensor") {
  ipu::host_tensor fresh({data_type::STRING, {2}});
  CHECK(fresh.string_at(0).empty());
  CHECK(fresh.string_at(1).empty());
  CHECK(fresh.info().num_bytes() == 2 * sizeof(ipu::string_ref));

  const std::string long_one(5000, 'x');  // longer than a heap block: a block of its own
  auto t = ipu::host_tensor::from_strings({3}, {"alpha", "", long_one});
  CHECK(t.as<ipu::string_ref>()[0].view() == "alpha");
  CHECK(t.string_at(2) == long_one);
  // A copy has characters of its own: the source may change or go.
  auto copy = t;
  t.set_string(0, "changed");
  CHECK(copy.string_at(0) == "alpha");
  CHECK(copy.as<ipu::string_ref>()[0].data != t.as<ipu::string_ref>()[0].data);
  { const auto gone = std::move(t); }
  CHECK(copy.string_at(2) == long_one);
  // copy_of a view reads the strings through whatever the view points at, aligned or not.
  std::vector<std::byte> raw(1 + sizeof(ipu::string_ref));
  const ipu::string_ref r{"view", 4};
  std::memcpy(raw.data() + 1, &r, sizeof r);
  const auto from_view = ipu::host_tensor::copy_of(ipu::const_tensor_view({data_type::STRING, {1}}, raw.data() + 1));
  CHECK(from_view.string_at(0) == "view");
  CHECK(from_view.as<ipu::string_ref>()[0].data != r.data);
}

TEST_CASE("host_tensor: string access refuses other types, indices and counts") {
  auto f = ipu::host_tensor::from<float>({1}, {1.0f});
  CHECK_THROWS_WITH_AS(f.set_string(0, "x"), doctest::Contains("holds F32 elements, not STRING"), ipu::error);
  auto t = ipu::host_tensor::from_strings({2}, {"a", "b"});
  CHECK_THROWS_WITH_AS((void)t.string_at(2), doctest::Contains("string element 2 of a tensor of 2 elements"), ipu::error);
  CHECK_THROWS_WITH_AS(ipu::host_tensor::from_strings({3}, {"a"}), doctest::Contains("1 strings given for shape [3]"),
                       ipu::error);
}

}  // namespace test_tensor
