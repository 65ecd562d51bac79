#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "ipu/byte_buffer.hpp"
#include "ipu/error.hpp"

namespace test_byte_buffer {

using ipu::byte_buffer;

namespace {
constexpr byte_buffer make_floats() {
  const std::array<float, 3> v{1.5f, -2.0f, 0.25f};
  return byte_buffer::from_values<float>(v);
}
}  // namespace

// Constant evaluation: building, copying, moving, reading and comparing inline buffers.
static_assert(make_floats().size() == 12);
static_assert(make_floats().load<float>(1) == -2.0f);
static_assert(!make_floats().is_shared());
static_assert([] {
  byte_buffer a = make_floats();
  byte_buffer b = a;             // copy
  byte_buffer c = std::move(a);  // move
  byte_buffer d;
  d = c;
  return b == c && d == b && b.load<float>(2) == 0.25f && d.size() == 12;
}());
static_assert([] {
  const std::array<std::byte, 3> raw{std::byte{1}, std::byte{2}, std::byte{3}};
  auto b = byte_buffer::copy(raw);
  return b.size() == 3 && b.bytes()[2] == std::byte{3} && b.load<std::uint8_t>(0) == 1;
}());
static_assert(byte_buffer().empty());

TEST_CASE("byte_buffer: inline buffers own their bytes, copies are independent equal values") {
  const std::vector<std::int32_t> v{1, -2, 300000};
  auto a = byte_buffer::from_values<std::int32_t>(v);
  CHECK_FALSE(a.is_shared());
  CHECK(a.size() == 12);
  CHECK(a.load<std::int32_t>(2) == 300000);
  const auto b = a;
  CHECK(b == a);
  CHECK(b.data() != a.data());  // inline storage is copied
  CHECK_THROWS_AS((void)a.load<std::int32_t>(3), ipu::error);
  CHECK_THROWS_AS((void)a.load<std::int64_t>(1), ipu::error);  // bytes 8..15 of 12
}

TEST_CASE("byte_buffer: shared buffers refer to external memory and keep its owner alive") {
  auto storage = std::make_shared<std::vector<std::byte>>(64, std::byte{7});
  std::weak_ptr<std::vector<std::byte>> watch = storage;
  const std::byte* region = storage->data() + 8;
  {
    auto a = byte_buffer::share(storage, region, 16);
    storage.reset();  // the buffer is now the only owner
    CHECK_FALSE(watch.expired());
    CHECK(a.is_shared());
    CHECK(a.size() == 16);
    CHECK(a.data() == region);  // no copy
    CHECK(a.load<std::uint8_t>(15) == 7);

    auto b = a;  // copies share the same region
    CHECK(b.data() == region);
    CHECK(b == a);
    byte_buffer c;
    c = b;
    auto d = std::move(b);
    CHECK(d.data() == region);
    CHECK(b.empty());  // NOLINT: moved-from is empty
    CHECK(b.data() == nullptr);
    a = byte_buffer();  // drop one reference
    CHECK_FALSE(watch.expired());
  }
  CHECK(watch.expired());  // last copy gone: owner released
}

TEST_CASE("byte_buffer: equality compares contents across inline and shared") {
  auto owner = std::make_shared<std::array<std::byte, 4>>(std::array<std::byte, 4>{std::byte{1}, std::byte{2}, std::byte{3}, std::byte{4}});
  const auto shared = byte_buffer::share(owner, owner->data(), owner->size());
  const auto owned = byte_buffer::copy(*owner);
  CHECK(shared == owned);
  CHECK_FALSE(owned.is_shared());
  CHECK(owned.data() != shared.data());
  const auto prefix = byte_buffer::share(owner, owner->data(), 3);
  CHECK_FALSE(prefix == owned);
  CHECK(byte_buffer::share(nullptr, nullptr, 0).empty());
  CHECK_THROWS_AS((void)byte_buffer::share(owner, nullptr, 4), ipu::error);
}

TEST_CASE("byte_buffer: copies may be made and dropped from many threads") {
  auto owner = std::make_shared<std::vector<std::byte>>(1024);
  std::weak_ptr<std::vector<std::byte>> watch = owner;
  auto original = byte_buffer::share(owner, owner->data(), owner->size());
  owner.reset();
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&original] {
      for (int i = 0; i < 2000; ++i) {
        byte_buffer copy = original;
        byte_buffer moved = std::move(copy);
        (void)moved.size();
      }
    });
  for (auto& t : threads) t.join();
  CHECK_FALSE(watch.expired());
  original = byte_buffer();
  CHECK(watch.expired());
}

}  // namespace test_byte_buffer
