#include <doctest/doctest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <latch>
#include <string>
#include <thread>
#include <utility>

#include "ipu/log.hpp"
#include "ipu/runtime/device_manager.hpp"
#include "../captured_log.hpp"

namespace test_device_manager {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

/// A fresh lock directory per test (one simulated system each), removed at the end.
struct temp_lock_dir {
  fs::path path;
  temp_lock_dir() {
    std::string tmpl = (fs::temp_directory_path() / "ipu-devmgr-test-XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_lock_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  temp_lock_dir(const temp_lock_dir&) = delete;
  temp_lock_dir& operator=(const temp_lock_dir&) = delete;
};

const ipu::ipu_system pod16{};

std::string text_of(const std::exception& e) { return e.what(); }

/// Runs `f`, expecting a device_busy_error; returns it.
template <class F>
ipu::device_busy_error expect_busy(F&& f) {
  try {
    (void)f();
  } catch (const ipu::device_busy_error& e) {
    return e;
  }
  FAIL("no device_busy_error was thrown");
  throw std::logic_error("unreachable");
}

/// Runs `f`, expecting an ipu::error of category device (and not a busy error); returns its text.
template <class F>
std::string expect_device_error(F&& f) {
  try {
    (void)f();
  } catch (const ipu::device_busy_error& e) {
    FAIL("unexpected busy error: " << e.what());
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::device);
    return e.what();
  }
  FAIL("no ipu::error was thrown");
  return {};
}

std::vector<std::uint32_t> held_ipus(const ipu::device_manager& dm) {
  std::vector<std::uint32_t> out;
  for (const auto& d : dm.enumerate(1))
    if (!d.is_free()) out.push_back(d.id);
  return out;
}

/// A child process running `body(channel)` and then exiting with its result; the parent talks to it
/// over a socket pair (send() with MSG_NOSIGNAL: a dead child must fail a check, not kill the test).
class child_process {
 public:
  template <class F>
  explicit child_process(F body) {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::close(fds[0]);
      int code = 70;
      try {
        code = body(fds[1]);
      } catch (...) {
        code = 71;
      }
      ::_exit(code);  // never return into the test runner
    }
    ::close(fds[1]);
    fd_ = fds[0];
  }
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  ~child_process() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (fd_ >= 0) ::close(fd_);
  }

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }
  void send(char c) const { REQUIRE(::send(fd_, &c, 1, MSG_NOSIGNAL) == 1); }
  /// The next byte from the child; '\0' when it closed the channel or said nothing for 60 s.
  [[nodiscard]] char receive() const { return receive_byte(fd_); }
  [[nodiscard]] bool running() const { return ::waitpid(pid_, nullptr, WNOHANG) == 0; }
  /// Waits for the child; its exit code, or 128 + signal.
  int wait() {
    int status = 0;
    REQUIRE(::waitpid(pid_, &status, 0) == pid_);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  static char receive_byte(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 60'000) != 1) return '\0';
    char c = '\0';
    return ::recv(fd, &c, 1, 0) == 1 ? c : '\0';
  }
  static void send_byte(int fd, char c) { (void)::send(fd, &c, 1, MSG_NOSIGNAL); }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
};

/// The body of a child that reserves device `id` in `dir`, says 'H' (or 'F' if it could not), then
/// obeys: 'r' release the device and say 'R', 'x' exit. Anything else (or a closed channel) exits.
auto holder(const fs::path& dir, std::uint32_t id) {
  return [dir, id](int fd) {
    ipu::device_manager dm(pod16, dir);
    auto dev = dm.try_acquire_by_id(id);
    if (!dev) {
      child_process::send_byte(fd, 'F');
      return 2;
    }
    child_process::send_byte(fd, 'H');
    for (;;) {
      switch (child_process::receive_byte(fd)) {
        case 'r':
          std::this_thread::sleep_for(50ms);  // let the parent start waiting
          dev->release();
          child_process::send_byte(fd, 'R');
          break;
        case 'x':
          return 0;
        default:
          return 3;
      }
    }
  };
}

}  // namespace

static_assert(ipu::ipus_to_reserve(1, false) == 1);
static_assert(ipu::ipus_to_reserve(64, false) == 64);
static_assert(ipu::ipus_to_reserve(3, true) == 4);
static_assert(ipu::ipus_to_reserve(33, true) == 64);
static_assert(ipu::ipus_to_reserve(16, true) == 16);

TEST_CASE("enumeration lists every device of the system with its IPUs and children") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  CHECK(dm.lock_dir() == dir.path);
  CHECK(dm.system() == pod16);
  const auto all = dm.enumerate();
  REQUIRE(all.size() == 31);
  for (std::uint32_t id = 0; id < all.size(); ++id) {
    CHECK(all[id].id == id);
    CHECK(all[id].is_free());
    CHECK(all[id].arch.name == "mk2");
    CHECK(all[id].ipus.size() == all[id].num_ipus);
  }
  CHECK(all[5].ipus == std::vector<std::uint32_t>{5});
  CHECK(all[5].children.empty());
  CHECK(all[17].ipus == std::vector<std::uint32_t>{2, 3});
  CHECK(all[17].children == std::vector<std::uint32_t>{2, 3});
  CHECK(all[25].ipus == std::vector<std::uint32_t>{4, 5, 6, 7});
  CHECK(all[25].children == std::vector<std::uint32_t>{18, 19});
  CHECK(all[30].num_ipus == 16);
  CHECK(all[30].children == std::vector<std::uint32_t>{28, 29});
  CHECK(all[30].description() == ipu::make_device_description(ipu::describe_architecture<ipu::mk2>(), 16));

  const auto quads = dm.enumerate(4);
  REQUIRE(quads.size() == 4);
  CHECK(quads[0].id == 24);
  CHECK(quads[3].ipus == std::vector<std::uint32_t>{12, 13, 14, 15});
  CHECK(dm.info(28).ipus.size() == 8);
  CHECK(expect_device_error([&] { return dm.enumerate(3); }).find("power of two") != std::string::npos);
  CHECK(expect_device_error([&] { return dm.info(31); }).find("no device 31; the system's devices are 0-30") !=
        std::string::npos);
}

TEST_CASE("acquire takes the first free device and its release frees the IPUs") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  const pid_t self = ::getpid();
  {
    auto a = dm.acquire(1);
    REQUIRE(a.valid());
    CHECK(a.id() == 0);
    CHECK(a.ipus() == std::vector<std::uint32_t>{0});
    CHECK(a.description().num_ipus == 1);
    auto b = dm.acquire(1);
    CHECK(b.id() == 1);
    // The pair of IPUs 0-1 is busy, so a pair comes from IPUs 2-3.
    auto pair = dm.acquire(2);
    CHECK(pair.id() == 17);
    CHECK(pair.ipus() == std::vector<std::uint32_t>{2, 3});
    CHECK(held_ipus(dm) == std::vector<std::uint32_t>{0, 1, 2, 3});

    const auto d16 = dm.info(16);
    CHECK_FALSE(d16.is_free());
    REQUIRE(d16.holders.size() == 2);
    CHECK(d16.holders[0] == ipu::ipu_holder{0, self});
    CHECK(d16.holders[1] == ipu::ipu_holder{1, self});
    CHECK(dm.info(30).holders.size() == 4);
    CHECK(dm.info(4).is_free());

    // The lock file names the holder.
    std::ifstream f(dir.path / "ipu2.lock");
    std::string pid_text;
    f >> pid_text;
    CHECK(pid_text == std::to_string(self));

    b.release();
    CHECK_FALSE(b.valid());
    b.release();  // idempotent
    CHECK(held_ipus(dm) == std::vector<std::uint32_t>{0, 2, 3});

    // Moving hands the reservation over; the moved-from handle holds nothing.
    ipu::device_handle moved = std::move(a);
    CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): the state after a move is specified
    CHECK(moved.id() == 0);
    CHECK(held_ipus(dm) == std::vector<std::uint32_t>{0, 2, 3});
    moved = dm.acquire(1);  // move-assigning releases the old reservation first
    CHECK(moved.id() == 1);
    CHECK(held_ipus(dm) == std::vector<std::uint32_t>{1, 2, 3});
  }
  CHECK(held_ipus(dm).empty());
  auto all = dm.acquire(16);
  CHECK(all.id() == 30);
  CHECK(all.num_ipus() == 16);
}

TEST_CASE("acquiring a device is logged at INFO with the device and its IPUs") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  const ipu_test::captured_log log(ipu::log::level::info);
  {
    auto a = dm.acquire(1);
    auto pair = dm.acquire(2);
  }
  const auto lines = log.messages();
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].find("acquired device 0 (IPU 0) for 1 IPU") != std::string::npos);
  CHECK(lines[1].find("acquired device 17 (IPUs 2-3) for 2 IPUs") != std::string::npos);
}

TEST_CASE("the IPU count is a power of two from 1 to 64 unless auto-rounded") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  const auto three = expect_device_error([&] { return dm.acquire(3); });
  CHECK(three.find("3 IPUs requested; a device has a power of two from 1 to 64 IPUs") != std::string::npos);
  CHECK(three.find("ask for 4 IPUs, or enable auto-rounding") != std::string::npos);
  CHECK(expect_device_error([&] { return dm.acquire(0); }).find("0 IPUs requested") != std::string::npos);
  CHECK(expect_device_error([&] {
          return dm.acquire(65, {.auto_round_num_ipus = true});
        }).find("a device has at most 64 IPUs") != std::string::npos);
  CHECK(expect_device_error([&] { return dm.try_acquire(6); }).find("power of two") != std::string::npos);

  // Auto-rounding reserves the next power of two; the extra IPUs are reserved but idle.
  auto d = dm.acquire(3, {.auto_round_num_ipus = true});
  CHECK(d.num_ipus() == 4);
  CHECK(d.requested_ipus() == 3);
  CHECK(d.ipus() == std::vector<std::uint32_t>{0, 1, 2, 3});
  CHECK(held_ipus(dm) == std::vector<std::uint32_t>{0, 1, 2, 3});
  auto e = dm.try_acquire(5, true);
  REQUIRE(e);
  CHECK(e->num_ipus() == 8);
  CHECK(e->id() == 29);

  // More than the system holds: the error says how to simulate a bigger one.
  const auto big = expect_device_error([&] { return dm.acquire(17, {.auto_round_num_ipus = true}); });
  CHECK(big.find("17 IPUs requested (32 after rounding); the simulated system has 16 IPUs") != std::string::npos);
  CHECK(big.find("IPU_SYSTEM=mk2:32") != std::string::npos);
  const ipu::device_manager six(ipu::make_ipu_system<ipu::mk2>(6), dir.path);
  CHECK(expect_device_error([&] {
          return six.acquire(8);
        }).find("the simulated system has 6 IPUs and its largest device has 4 IPUs") != std::string::npos);
}

TEST_CASE("acquire by id and a busy id") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  auto quad = dm.acquire_by_id(25);
  CHECK(quad.ipus() == std::vector<std::uint32_t>{4, 5, 6, 7});
  CHECK(quad.requested_ipus() == 4);

  const auto e = expect_busy([&] { return dm.acquire_by_id(5); });
  CHECK(e.category() == ipu::error_category::device);
  CHECK(e.waited() == 0ms);
  REQUIRE(e.holders().size() == 1);
  CHECK(e.holders()[0] == ipu::ipu_holder{5, ::getpid()});
  const auto text = text_of(e);
  CHECK(text.find("device 5 (IPU 5) is busy: IPU 5 held by process " + std::to_string(::getpid()) +
                  " (this process)") != std::string::npos);
  CHECK(text.find("device_wait_config::with_timeout") != std::string::npos);
  CHECK(text.find("use a free device of 1 IPU (0, 1, 2, 3, 8, 9, 10, 11, ...)") != std::string::npos);
  CHECK(text.find("IPU_DEVICE_LOCK_DIR") != std::string::npos);

  const auto whole = text_of(expect_busy([&] { return dm.acquire_by_id(30); }));
  CHECK(whole.find("device 30 (IPUs 0-15) is busy: IPUs 4-7 held by process") != std::string::npos);
  CHECK(whole.find("no other device of 16 IPUs is free") != std::string::npos);
  CHECK(whole.find("ask for fewer IPUs (8 IPUs: device 29 is free)") != std::string::npos);

  CHECK(expect_device_error([&] { return dm.acquire_by_id(99); }).find("no device 99") != std::string::npos);
  CHECK(expect_device_error([&] { return dm.try_acquire_by_id(31); }).find("list them with enumerate()") !=
        std::string::npos);
}

TEST_CASE("try-acquire returns nothing when every device is busy") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  const ipu::device_manager other(pod16, dir.path);  // a second manager of the same system
  auto all = dm.acquire(16);
  CHECK_FALSE(other.try_acquire(1));
  CHECK_FALSE(other.try_acquire(2));
  CHECK_FALSE(other.try_acquire_by_id(7));
  CHECK_FALSE(other.try_acquire_by_id(30));
  const auto e = expect_busy([&] { return other.acquire(4); });
  CHECK(e.holders().size() == 16);
  const auto text = text_of(e);
  CHECK(text.find("every device of 4 IPUs is busy (devices 24-27): IPUs 0-15 held by process") != std::string::npos);
  CHECK(text.find("ask for fewer") == std::string::npos);  // nothing smaller is free either
  CHECK(text_of(expect_busy([&] {
          return other.acquire(16);
        })).find("the only device of 16 IPUs (device 30) is busy") != std::string::npos);
  all.release();
  auto one = other.try_acquire(1);
  REQUIRE(one);
  CHECK(one->id() == 0);
}

TEST_CASE("a multi-IPU acquire that meets a busy IPU rolls back the IPUs it took") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  auto ipu3 = dm.acquire_by_id(3);
  // Device 24 is IPUs 0-3: 0, 1 and 2 are locked first, then IPU 3 is busy.
  CHECK_FALSE(dm.try_acquire_by_id(24));
  CHECK(held_ipus(dm) == std::vector<std::uint32_t>{3});
  const auto e = expect_busy([&] { return dm.acquire_by_id(28); });
  CHECK(e.holders() == std::vector<ipu::ipu_holder>{{3, ::getpid()}});
  CHECK(held_ipus(dm) == std::vector<std::uint32_t>{3});
  // acquire(4) skips the busy quad and rolls back its attempt there.
  auto quad = dm.acquire(4);
  CHECK(quad.id() == 25);
  CHECK(held_ipus(dm) == std::vector<std::uint32_t>{3, 4, 5, 6, 7});
  auto pair = dm.acquire(2);
  CHECK(pair.id() == 16);
}

TEST_CASE("a wait with a timeout expires while the device stays busy") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  auto held = dm.acquire_by_id(24);
  const auto e = expect_busy([&] { return dm.acquire_by_id(24, ipu::device_wait_config::with_timeout(120ms, 10ms)); });
  CHECK(e.waited() >= 120ms);
  CHECK(text_of(e).find("is busy after waiting") != std::string::npos);
  CHECK(text_of(e).find("wait longer") != std::string::npos);
  // A zero timeout tries once, like no_wait.
  CHECK(expect_busy([&] { return dm.acquire(16, {.wait = ipu::device_wait_config::with_timeout(0ms)}); })
            .holders()
            .size() == 4);
  // Other quads were free all along: a wait is only needed when every candidate is busy.
  auto other = dm.acquire(4, {.wait = ipu::device_wait_config::with_timeout(10s)});
  CHECK(other.id() == 25);
}

TEST_CASE("device_wait_config strategies and validation") {
  static_assert(ipu::device_wait_config{}.strategy == ipu::device_wait_strategy::no_wait);
  static_assert(ipu::device_wait_config::with_timeout(5s).timeout == 5000ms);
  static_assert(ipu::device_wait_config::forever(20ms).sleep_time == 20ms);
  static_assert(ipu::to_string(ipu::device_wait_strategy::wait_with_timeout) == "WAIT_WITH_TIMEOUT");
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  CHECK(expect_device_error([&] {
          return dm.acquire(1, {.wait = ipu::device_wait_config::with_timeout(-1ms)});
        }).find("negative device wait timeout") != std::string::npos);
  CHECK(expect_device_error([&] {
          return dm.acquire_by_id(0, ipu::device_wait_config::forever(0ms));
        }).find("sleep time is not positive") != std::string::npos);
  CHECK(held_ipus(dm).empty());
}

TEST_CASE("offline and CPU devices are descriptions that reserve nothing") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  const auto off = ipu::device_manager::offline_device("ipu21", 4);
  CHECK(off.kind == ipu::device_kind::ipu);
  CHECK(off.arch == ipu::describe_architecture<ipu::bow>());
  CHECK(off.num_ipus == 4);
  CHECK(ipu::device_manager::offline_device("mk2", 3, true).num_ipus == 4);
  CHECK(ipu::device_manager::offline_device(ipu::describe_architecture<ipu::mk1>(), 64).num_ipus == 64);
  CHECK(expect_device_error([] { return ipu::device_manager::offline_device("mk2", 3); }).find("power of two") !=
        std::string::npos);
  CHECK(expect_device_error([] {
          return ipu::device_manager::offline_device("ipu9");
        }).find("unknown offline target 'ipu9'") != std::string::npos);
  const auto cpu = ipu::device_manager::cpu_device(2);
  CHECK(cpu.kind == ipu::device_kind::cpu);
  CHECK(cpu.num_ipus == 2);
  CHECK(held_ipus(dm).empty());
  auto all = dm.acquire(16);  // nothing was locked by them
  CHECK(all.valid());
}

TEST_CASE("IPU_DEVICE_LOCK_DIR and IPU_SYSTEM configure a default-constructed manager") {
  temp_lock_dir dir;
  const auto locks = dir.path / "nested" / "locks";
  ::setenv("IPU_DEVICE_LOCK_DIR", locks.c_str(), 1);
  ::setenv("IPU_SYSTEM", "bow:8", 1);
  {
    const ipu::device_manager dm;
    CHECK(dm.lock_dir() == locks);
    CHECK(fs::is_directory(locks));
    CHECK(dm.system().arch.name == "bow");
    CHECK(dm.enumerate().size() == 8 + 4 + 2 + 1);
    auto d = dm.acquire(8);
    CHECK(d.description().arch.name == "bow");
    CHECK(fs::exists(locks / "ipu7.lock"));
  }
  ::unsetenv("IPU_SYSTEM");
  ::unsetenv("IPU_DEVICE_LOCK_DIR");
  CHECK(ipu::default_device_lock_dir() == fs::path("/tmp/ipu-devices-" + std::to_string(::getuid())));
}

TEST_CASE("an unusable lock directory is a device error naming IPU_DEVICE_LOCK_DIR") {
  temp_lock_dir dir;
  const auto file = dir.path / "a-file";
  std::ofstream(file) << "x";
  const auto text = expect_device_error([&] { return ipu::device_manager(pod16, file / "locks"); });
  CHECK(text.find("device lock directory '" + (file / "locks").string() + "'") != std::string::npos);
  CHECK(text.find("IPU_DEVICE_LOCK_DIR") != std::string::npos);
  CHECK(expect_device_error([&] { return ipu::device_manager(pod16, ""); }).find("path is empty") != std::string::npos);
}

TEST_CASE("to_string of a device lists its IPUs children and holders") {
  temp_lock_dir dir;
  const ipu::device_manager dm(pod16, dir.path);
  auto d = dm.acquire_by_id(2);
  CHECK(ipu::to_string(dm.info(24)) ==
        "device 24: 4 x mk2 (GC200), IPUs 0-3, children 16 17, held: IPU 2 held by process " +
            std::to_string(::getpid()) + " (this process)");
  CHECK(ipu::to_string(dm.info(9)) == "device 9: 1 x mk2 (GC200), IPU 9, free");
}

TEST_SUITE("concurrent") {
  TEST_CASE("two threads race for overlapping devices and exactly one wins") {
    temp_lock_dir dir;
    // Pairs of overlapping devices: the same one, nested, and overlapping only past their first IPU.
    const std::pair<std::uint32_t, std::uint32_t> races[] = {{30, 30}, {24, 28}, {25, 28}, {19, 25}, {7, 25}};
    for (int round = 0; round < 20; ++round) {
      for (const auto& [first, second] : races) {
        std::latch start(2), done(2);
        std::atomic<int> wins{0};
        auto contender = [&](std::uint32_t id) {
          const ipu::device_manager dm(pod16, dir.path);
          start.arrive_and_wait();
          auto h = dm.try_acquire_by_id(id);
          if (h) wins.fetch_add(1);
          done.arrive_and_wait();  // hold it until both have tried
        };
        std::thread a(contender, first), b(contender, second);
        a.join();
        b.join();
        CHECK(wins.load() == 1);
      }
    }
    const ipu::device_manager dm(pod16, dir.path);
    CHECK(held_ipus(dm).empty());
  }

  TEST_CASE("a waiting acquire succeeds when another thread releases the device") {
    temp_lock_dir dir;
    const ipu::device_manager dm(pod16, dir.path);
    auto held = dm.acquire(16);
    std::latch waiting(1);
    std::thread releaser([&] {
      waiting.wait();
      std::this_thread::sleep_for(50ms);
      held.release();
    });
    CHECK_FALSE(dm.try_acquire_by_id(26));
    waiting.count_down();
    auto d = dm.acquire_by_id(26, ipu::device_wait_config::with_timeout(60s, 5ms));
    releaser.join();
    CHECK(d.ipus() == std::vector<std::uint32_t>{8, 9, 10, 11});
  }

  TEST_CASE("a device held by another process blocks acquire until that process releases it") {
    temp_lock_dir dir;
    child_process child(holder(dir.path, 24));
    REQUIRE(child.receive() == 'H');
    const ipu::device_manager dm(pod16, dir.path);

    // Enumeration names the other process as the holder of IPUs 0-3.
    const auto d24 = dm.info(24);
    REQUIRE(d24.holders.size() == 4);
    for (std::uint32_t i = 0; i < 4; ++i) CHECK(d24.holders[i] == ipu::ipu_holder{i, child.pid()});
    CHECK(dm.info(28).holders.size() == 4);
    CHECK(dm.info(25).is_free());

    CHECK_FALSE(dm.try_acquire_by_id(24));
    CHECK_FALSE(dm.try_acquire_by_id(2));
    const auto now = expect_busy([&] { return dm.acquire(16); });
    CHECK(text_of(now).find("IPUs 0-3 held by process " + std::to_string(child.pid())) != std::string::npos);
    CHECK(text_of(now).find("(this process)") == std::string::npos);
    const auto later =
        expect_busy([&] { return dm.acquire_by_id(24, ipu::device_wait_config::with_timeout(150ms, 10ms)); });
    CHECK(later.waited() >= 150ms);
    CHECK(later.holders().size() == 4);
    CHECK(later.holders()[0].pid == child.pid());

    // Devices elsewhere are not blocked.
    auto other = dm.acquire(4);
    CHECK(other.id() == 25);

    // The child releases its handle (and stays alive): a waiting acquire gets the device.
    child.send('r');
    auto mine = dm.acquire_by_id(24, ipu::device_wait_config::with_timeout(60s, 5ms));
    CHECK(mine.ipus() == std::vector<std::uint32_t>{0, 1, 2, 3});
    CHECK(child.receive() == 'R');
    CHECK(child.running());
    child.send('x');
    CHECK(child.wait() == 0);
  }

  TEST_CASE("a wait forever ends when the holding process exits") {
    temp_lock_dir dir;
    child_process child([path = dir.path](int fd) {
      ipu::device_manager dm(pod16, path);
      auto all = dm.acquire(16);
      child_process::send_byte(fd, 'H');
      (void)child_process::receive_byte(fd);
      std::this_thread::sleep_for(50ms);
      ::_exit(0);  // exits holding the device (no destructor runs): the kernel drops the locks
      return 1;
    });
    REQUIRE(child.receive() == 'H');
    const ipu::device_manager dm(pod16, dir.path);
    CHECK_FALSE(dm.try_acquire(1));
    child.send('x');
    auto d = dm.acquire(8, {.wait = ipu::device_wait_config::forever(5ms)});
    // Either 8-IPU device: the exiting process's locks are dropped one file at a time, so a poll
    // can find IPUs 8-15 (device 29) free before 0-7 (device 28).
    CHECK((d.id() == 28 || d.id() == 29));
    CHECK(d.ipus().size() == 8);
    CHECK(child.wait() == 0);
  }

  TEST_CASE("a killed holder process frees its IPUs") {
    temp_lock_dir dir;
    child_process child(holder(dir.path, 29));
    REQUIRE(child.receive() == 'H');
    const ipu::device_manager dm(pod16, dir.path);
    CHECK(held_ipus(dm) == std::vector<std::uint32_t>{8, 9, 10, 11, 12, 13, 14, 15});
    ::kill(child.pid(), SIGKILL);
    CHECK(child.wait() == 128 + SIGKILL);
    CHECK(held_ipus(dm).empty());
    auto all = dm.try_acquire_by_id(30);
    CHECK(all);
  }

  TEST_CASE("two processes racing for one device never both get it") {
    temp_lock_dir dir;
    // Each child tries device 30 repeatedly; whoever holds it checks the other does not.
    for (int round = 0; round < 10; ++round) {
      child_process a(holder(dir.path, 30));
      child_process b(holder(dir.path, 30));
      const char ra = a.receive(), rb = b.receive();
      CHECK(((ra == 'H' && rb == 'F') || (ra == 'F' && rb == 'H')));
      if (ra == 'H') a.send('x');
      if (rb == 'H') b.send('x');
      CHECK(a.wait() == (ra == 'H' ? 0 : 2));
      CHECK(b.wait() == (rb == 'H' ? 0 : 2));
    }
  }
}

}  // namespace test_device_manager
