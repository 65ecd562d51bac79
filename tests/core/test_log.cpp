#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ipu/log.hpp"

namespace test_log {

namespace ilog = ipu::log;

namespace {
// Collects what the logger emits; restores the logger's state when done.
struct capture {
  std::mutex m;
  std::vector<std::pair<ilog::level, std::string>> lines;
  capture() {
    ilog::set_sink([this](ilog::level l, std::string_view msg) {
      const std::lock_guard lock(m);
      lines.emplace_back(l, std::string(msg));
    });
  }
  ~capture() {
    ilog::set_sink({});
    ilog::set_level(ilog::default_level);
  }
  capture(const capture&) = delete;
  capture& operator=(const capture&) = delete;
};

// Makes the next use of the logger read IPU_LOG_LEVEL = value (unset for nullptr).
void reread_environment(const char* value) {
  if (value)
    ::setenv("IPU_LOG_LEVEL", value, 1);
  else
    ::unsetenv("IPU_LOG_LEVEL");
  ilog::detail::reset_for_testing();
}
}  // namespace

TEST_CASE("log: level names parse case-insensitively, unknown names do not") {
  for (auto l : {ilog::level::off, ilog::level::err, ilog::level::warn, ilog::level::info, ilog::level::debug, ilog::level::trace})
    CHECK(ilog::parse_level(ilog::to_string(l)) == l);
  CHECK(ilog::parse_level("debug") == ilog::level::debug);
  CHECK(ilog::parse_level("Trace") == ilog::level::trace);
  CHECK(ilog::parse_level("ERROR") == ilog::level::err);
  CHECK(ilog::parse_level("warning") == ilog::level::warn);
  CHECK_FALSE(ilog::parse_level("LOUD").has_value());
  CHECK_FALSE(ilog::parse_level("").has_value());
  CHECK_FALSE(ilog::parse_level("3").has_value());
  static_assert(ilog::parse_level("info") == ilog::level::info);
}

TEST_CASE("log: messages at or below the level reach the sink, others do not") {
  capture c;
  ilog::set_level(ilog::level::info);
  CHECK(ilog::get_level() == ilog::level::info);
  ilog::error("disk ", 3, " failed");
  ilog::warn("low memory: ", 12.5, " MiB");
  ilog::info("compiled");
  ilog::debug("not shown");
  ilog::trace("not shown");
  REQUIRE(c.lines.size() == 3);
  CHECK(c.lines[0] == std::pair{ilog::level::err, std::string("disk 3 failed")});
  CHECK(c.lines[1] == std::pair{ilog::level::warn, std::string("low memory: 12.5 MiB")});
  CHECK(c.lines[2].second == "compiled");
  CHECK(ilog::enabled(ilog::level::info));
  CHECK_FALSE(ilog::enabled(ilog::level::debug));
  CHECK_FALSE(ilog::enabled(ilog::level::off));  // "off" is never a message level

  ilog::set_level(ilog::level::off);
  ilog::error("silent");
  CHECK(c.lines.size() == 3);
  ilog::set_level(ilog::level::trace);
  ilog::write(ilog::level::off, "never written");
  ilog::trace("t");
  CHECK(c.lines.size() == 4);
}

TEST_CASE("log: a callable message is only called when its level is enabled") {
  capture c;
  ilog::set_level(ilog::level::warn);
  int calls = 0;
  auto expensive = [&calls] {
    ++calls;
    return std::string("summary of 10000 tensors");
  };
  ilog::debug(expensive);
  CHECK(calls == 0);
  ilog::warn(expensive);
  CHECK(calls == 1);
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0].second == "summary of 10000 tensors");
}

TEST_CASE("log: IPU_LOG_LEVEL is read once, at first use") {
  capture c;
  reread_environment("debug");
  CHECK(ilog::get_level() == ilog::level::debug);
  ::setenv("IPU_LOG_LEVEL", "TRACE", 1);  // later changes are not seen
  CHECK(ilog::get_level() == ilog::level::debug);
  ilog::debug("seen");
  CHECK(c.lines.size() == 1);

  reread_environment(nullptr);
  CHECK(ilog::get_level() == ilog::default_level);
  reread_environment("");
  CHECK(ilog::get_level() == ilog::level::warn);
  reread_environment("OFF");
  CHECK_FALSE(ilog::enabled(ilog::level::err));
  reread_environment(nullptr);
}

TEST_CASE("log: PopTorch's POPTORCH_LOG_LEVEL is read when IPU_LOG_LEVEL is unset, and loses to it") {
  capture c;
  ::setenv("POPTORCH_LOG_LEVEL", "DEBUG", 1);
  reread_environment(nullptr);
  CHECK(ilog::get_level() == ilog::level::debug);
  reread_environment("ERR");
  CHECK(ilog::get_level() == ilog::level::err);
  ::setenv("POPTORCH_LOG_LEVEL", "noisy", 1);
  reread_environment(nullptr);
  CHECK(ilog::get_level() == ilog::level::warn);
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0].second.find("POPTORCH_LOG_LEVEL='noisy'") != std::string::npos);
  ::unsetenv("POPTORCH_LOG_LEVEL");
  reread_environment(nullptr);
}

TEST_CASE("log: set_level before first use wins over IPU_LOG_LEVEL") {
  capture c;
  reread_environment("TRACE");
  ilog::set_level(ilog::level::err);
  CHECK(ilog::get_level() == ilog::level::err);
  CHECK(c.lines.empty());
  reread_environment(nullptr);
}

TEST_CASE("log: a bad IPU_LOG_LEVEL warns, names the accepted values, and uses WARN") {
  capture c;
  reread_environment("verbose");
  CHECK(ilog::get_level() == ilog::level::warn);
  REQUIRE(c.lines.size() == 1);
  CHECK(c.lines[0].first == ilog::level::warn);
  CHECK(c.lines[0].second.find("IPU_LOG_LEVEL='verbose'") != std::string::npos);
  CHECK(c.lines[0].second.find("OFF, ERR, WARN, INFO, DEBUG, TRACE") != std::string::npos);
  CHECK(ilog::get_level() == ilog::level::warn);
  CHECK(c.lines.size() == 1);  // warned once
  reread_environment(nullptr);
}

TEST_CASE("log: lines from many threads arrive whole") {
  capture c;
  ilog::set_level(ilog::level::info);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([t] {
      for (int i = 0; i < 250; ++i) ilog::info("thread ", t, " message ", i, " end");
    });
  for (auto& th : threads) th.join();
  REQUIRE(c.lines.size() == 1000);
  int counts[4] = {};
  for (const auto& [l, msg] : c.lines) {
    std::istringstream in(msg);
    std::string w1, w3, w5;
    int t = -1, i = -1;
    in >> w1 >> t >> w3 >> i >> w5;
    CHECK((w1 == "thread" && w3 == "message" && w5 == "end" && t >= 0 && t < 4 && i >= 0 && i < 250));
    if (t >= 0 && t < 4) ++counts[t];
  }
  for (int n : counts) CHECK(n == 250);
}

TEST_CASE("log: without a sink, lines go to stderr with time, tag and level") {
  ilog::set_sink({});
  ilog::set_level(ilog::level::info);
  std::fflush(stderr);
  char path[] = "/tmp/ipu_log_test_XXXXXX";
  const int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  ilog::info("to stderr");
  ilog::debug("hidden");
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(path);
  ilog::set_level(ilog::default_level);
  // "[12:34:56.789] [ipu] [INFO] to stderr\n"
  REQUIRE(all.size() == std::string("[12:34:56.789] [ipu] [INFO] to stderr\n").size());
  CHECK(all.front() == '[');
  CHECK(all.substr(13) == "] [ipu] [INFO] to stderr\n");
}

}  // namespace test_log
