// The queue manager: size checks, FIFO order with completion callbacks, timeouts, flush,
// disconnect waking waiters, and 8 client threads whose requests are each answered with a value
// computed from that request.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ipu/runtime/queue_manager.hpp"

namespace test_queue_manager {

using namespace ipu;
using namespace std::chrono_literals;
using runtime::entry_status;

TEST_CASE("an entry of the wrong size names the anchor and both sizes") {
  runtime::queue_manager qm;
  qm.add_input("pixels", 16);
  float v[3] = {};
  try {
    qm.input("pixels").enqueue(v, sizeof v);
    FAIL("no error");
  } catch (const error& e) {
    CHECK(e.category() == error_category::shape);
    const std::string m = e.what();
    CHECK(m.find("pixels") != std::string::npos);
    CHECK(m.find("16") != std::string::npos);
    CHECK(m.find("12") != std::string::npos);
  }
  CHECK(qm.input("pixels").size() == 0);
  CHECK_THROWS_AS((void)qm.input("nope"), error);
  CHECK_THROWS_AS(qm.add_input("pixels", 16), error);
  CHECK_THROWS_AS(qm.input("pixels").enqueue(nullptr, 16), error);
}

TEST_CASE("entries come out in order and their callbacks run once") {
  runtime::queue_manager qm(8);
  auto& q = qm.add_output("y", sizeof(int));
  int values[5] = {10, 11, 12, 13, 14};
  std::vector<int> done;
  for (auto& v : values) q.enqueue(&v, sizeof v, [&done, &v](entry_status s) {
    CHECK(s == entry_status::done);
    done.push_back(v);
  });
  CHECK(q.size() == 5);
  for (int i = 0; i < 5; ++i) {
    auto e = q.try_dequeue();
    REQUIRE(e);
    CHECK(*static_cast<int*>(e->data) == 10 + i);
    e->complete(entry_status::done);
    e->complete(entry_status::done);  // a second call does nothing
  }
  CHECK(done == std::vector<int>{10, 11, 12, 13, 14});
  CHECK_FALSE(q.try_dequeue());
}

TEST_CASE("a full queue times out with a recoverable error and an empty one returns nothing") {
  runtime::queue_manager qm(2);
  auto& q = qm.add_input("x", sizeof(int));
  int a = 1, b = 2, c = 3;
  CHECK(q.try_enqueue(&a, sizeof a));
  q.enqueue(&b, sizeof b, {}, 1ms);
  CHECK_FALSE(q.try_enqueue(&c, sizeof c));
  try {
    q.enqueue(&c, sizeof c, {}, 2ms);
    FAIL("no timeout");
  } catch (const recoverable_error& e) {
    CHECK(e.action() == recovery_action::ipu_reset);
    CHECK(std::string(e.what()).find("'x'") != std::string::npos);
  }
  CHECK(q.size() == 2);
  CHECK(q.dequeue(1ms));
  CHECK(q.dequeue(1ms));
  CHECK_FALSE(q.dequeue(2ms));
}

TEST_CASE("flush_all completes every pending entry as flushed") {
  runtime::queue_manager qm;
  qm.add_input("a", 1);
  qm.add_output("b", 1);
  char bytes[4] = {};
  int flushed = 0;
  auto count = [&flushed](entry_status s) { flushed += s == entry_status::flushed; };
  qm.input("a").enqueue(&bytes[0], 1, count);
  qm.input("a").enqueue(&bytes[1], 1, count);
  qm.output("b").enqueue(&bytes[2], 1, count);
  CHECK(qm.flush_all() == 3);
  CHECK(flushed == 3);
  CHECK(qm.input("a").size() == 0);
  qm.input("a").enqueue(&bytes[3], 1);  // still usable
  CHECK(qm.input("a").size() == 1);
}

TEST_CASE("disconnect_all wakes a waiting consumer with an error and rejects new entries") {
  runtime::queue_manager qm;
  auto& q = qm.add_input("x", sizeof(int));
  std::atomic<bool> woke{false};
  std::string message;
  std::thread consumer([&] {
    try {
      (void)q.dequeue(std::chrono::hours(1));
    } catch (const error& e) {
      message = e.what();
      woke = true;
    }
  });
  std::this_thread::sleep_for(5ms);
  qm.disconnect_all();
  consumer.join();
  CHECK(woke);
  CHECK(message.find("disconnected") != std::string::npos);
  int v = 0;
  CHECK_THROWS_AS(q.enqueue(&v, sizeof v), error);
}

TEST_CASE("disconnect completes pending entries as disconnected") {
  runtime::queue_manager qm;
  auto& q = qm.add_output("y", sizeof(int));
  int v = 0;
  entry_status got = entry_status::done;
  q.enqueue(&v, sizeof v, [&got](entry_status s) { got = s; });
  q.disconnect();
  CHECK(got == entry_status::disconnected);
  CHECK_THROWS_AS(q.try_dequeue(), error);
}

TEST_SUITE("concurrent") {
  TEST_CASE("8 clients and one device thread: every response matches its request") {
    constexpr int clients = 8, per_client = 400;
    runtime::queue_manager qm(16);
    auto& in = qm.add_input("x", sizeof(std::int64_t));
    auto& out = qm.add_output("y", sizeof(std::int64_t));
    std::mutex client_lock;  // a request's two entries go in together, as the model runner does
    std::atomic<bool> stop{false};
    std::atomic<int> served{0};

    std::thread device([&] {
      while (!stop.load()) {
        auto x = in.dequeue(1ms);
        if (!x) continue;
        auto y = out.dequeue(std::chrono::seconds(10));
        REQUIRE(y);
        *static_cast<std::int64_t*>(y->data) = *static_cast<const std::int64_t*>(x->data) * 3 + 1;
        x->complete(entry_status::done);
        y->complete(entry_status::done);
        ++served;
      }
    });

    std::atomic<int> wrong{0}, answered{0};
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c)
      threads.emplace_back([&, c] {
        std::vector<std::int64_t> xs(per_client), ys(per_client, -1);
        std::vector<std::atomic<int>> done(per_client);
        for (int i = 0; i < per_client; ++i) {
          xs[static_cast<std::size_t>(i)] = std::int64_t{c} * 100000 + i;
          std::lock_guard lock(client_lock);
          in.enqueue(&xs[static_cast<std::size_t>(i)], sizeof(std::int64_t));
          out.enqueue(&ys[static_cast<std::size_t>(i)], sizeof(std::int64_t),
                      [&done, i](entry_status s) { done[static_cast<std::size_t>(i)] = s == entry_status::done ? 1 : 2; });
        }
        for (int i = 0; i < per_client; ++i) {
          const auto k = static_cast<std::size_t>(i);
          while (done[k].load() == 0) std::this_thread::yield();
          if (done[k].load() != 1 || ys[k] != xs[k] * 3 + 1) ++wrong;
          ++answered;
        }
      });
    for (auto& t : threads) t.join();
    stop = true;
    device.join();
    CHECK(wrong == 0);
    CHECK(answered == clients * per_client);
    CHECK(served == clients * per_client);
  }
}

}  // namespace test_queue_manager
