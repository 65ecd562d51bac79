#pragma once
// OS-level locks on simulated IPUs, so that processes, threads and several device managers in one
// process share a simulated system the way they share real IPUs.
//
// Each physical IPU is a file `ipu<N>.lock` in a lock directory (one directory = one simulated
// system); holding the IPU is holding a write lock on the whole file. The locks are Linux
// open-file-description locks (fcntl F_OFD_SETLK), chosen over the alternatives because:
//  - the kernel drops them when the holder closes the file or exits, however it exits, so a crashed
//    process never leaves an IPU held (as with flock);
//  - they belong to an open file, not to a process, so two opens in one process exclude each other
//    (classic fcntl locks would not, and closing any descriptor of the file would drop them);
//  - F_OFD_GETLK tests a lock without taking it, so listing devices never makes a concurrent acquire
//    fail (a flock probe has to take the lock for a moment).
// The holder writes its pid into the file, so that an error can say who holds the IPU.
//
// Files are opened close-on-exec. A process that fork()s while holding an IPU shares the lock with
// its child until both have closed it (the descriptor, not the process, owns the lock).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "ipu/error.hpp"

#if !defined(F_OFD_SETLK) || !defined(F_OFD_GETLK)
#error "ipu: the device manager needs Linux open file description locks (F_OFD_SETLK, Linux >= 3.15)"
#endif

namespace ipu {

/// The environment variable naming the lock directory of the simulated system.
inline constexpr std::string_view device_lock_dir_variable = "IPU_DEVICE_LOCK_DIR";

namespace detail::runtime {

inline std::string os_error_text(int err) { return std::system_category().message(err); }

inline error lock_dir_error(const std::filesystem::path& dir, const std::string& what) {
  return error(error_category::device, what, "device lock directory '" + dir.string() + "'",
               "set IPU_DEVICE_LOCK_DIR to a directory this user can write (each directory is one simulated "
               "IPU system)");
}

/// /tmp/ipu-devices-<uid>: private to the user, and the same for every process whatever its TMPDIR.
inline std::filesystem::path per_user_lock_dir() {
  return std::filesystem::path("/tmp") / ("ipu-devices-" + std::to_string(::getuid()));
}

/// Creates the lock directory if needed and checks that this user can lock files in it. A private
/// directory (the per-user default) is created 0700 and must belong to this user: another user who
/// created it first could otherwise hold or fake our IPUs.
inline void prepare_lock_dir(const std::filesystem::path& dir, bool private_dir) {
  if (dir.empty()) throw lock_dir_error(dir, "the lock directory path is empty");
  if (private_dir) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      throw lock_dir_error(dir, "cannot create it: " + os_error_text(errno));
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) throw lock_dir_error(dir, "cannot inspect it: " + os_error_text(errno));
    if (!S_ISDIR(st.st_mode)) throw lock_dir_error(dir, "it exists and is not a directory");
    if (st.st_uid != ::getuid())
      throw lock_dir_error(dir, "it belongs to user " + std::to_string(st.st_uid) + ", not to this user (" +
                                    std::to_string(::getuid()) + ")");
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (!std::filesystem::is_directory(dir))
      throw lock_dir_error(dir, ec ? "cannot create it: " + ec.message() : std::string("it is not a directory"));
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0) throw lock_dir_error(dir, "this user cannot create files in it");
}

inline std::filesystem::path ipu_lock_path(const std::filesystem::path& dir, std::uint32_t ipu) {
  return dir / ("ipu" + std::to_string(ipu) + ".lock");
}

/// An IPU's lock file, open; closing it (destruction) drops the lock it holds.
class ipu_lock_file {
 public:
  ipu_lock_file() = default;
  /// Opens (creating if needed) the lock file of `ipu` in `dir`. Throws ipu::error (device).
  ipu_lock_file(const std::filesystem::path& dir, std::uint32_t ipu) : ipu_(ipu) {
    const auto path = ipu_lock_path(dir, ipu);
    // O_NOFOLLOW: a symlink planted in a shared directory must not redirect our writes.
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd_ < 0)
      throw error(error_category::device,
                  "cannot open the lock file of IPU " + std::to_string(ipu) + ": " + os_error_text(errno),
                  path.string(), "set IPU_DEVICE_LOCK_DIR to a directory this user can write");
  }
  ipu_lock_file(ipu_lock_file&& o) noexcept
      : fd_(std::exchange(o.fd_, -1)), ipu_(o.ipu_), locked_(std::exchange(o.locked_, false)) {}
  ipu_lock_file& operator=(ipu_lock_file&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      ipu_ = o.ipu_;
      locked_ = std::exchange(o.locked_, false);
    }
    return *this;
  }
  ipu_lock_file(const ipu_lock_file&) = delete;
  ipu_lock_file& operator=(const ipu_lock_file&) = delete;
  ~ipu_lock_file() { close(); }

  [[nodiscard]] std::uint32_t ipu() const noexcept { return ipu_; }
  [[nodiscard]] bool locked() const noexcept { return locked_; }

  /// Takes the write lock without waiting; false when another open file holds it.
  [[nodiscard]] bool try_lock() {
    struct flock fl = whole_file(F_WRLCK);
    if (::fcntl(fd_, F_OFD_SETLK, &fl) == 0) {
      locked_ = true;
      return true;
    }
    if (errno == EAGAIN || errno == EACCES) return false;
    throw error(error_category::device, "cannot lock IPU " + std::to_string(ipu_) + ": " + os_error_text(errno),
                "device lock file", "the lock directory must be on a local file system with fcntl locks");
  }

  /// True when another open file holds a lock on this IPU. Takes no lock.
  [[nodiscard]] bool held_elsewhere() const {
    struct flock fl = whole_file(F_WRLCK);
    if (::fcntl(fd_, F_OFD_GETLK, &fl) != 0)
      throw error(error_category::device,
                  "cannot test the lock of IPU " + std::to_string(ipu_) + ": " + os_error_text(errno),
                  "device lock file", "the lock directory must be on a local file system with fcntl locks");
    return fl.l_type != F_UNLCK;
  }

  /// Records `pid` as the holder (call with the lock held).
  void write_holder(pid_t pid) noexcept {
    const std::string text = std::to_string(pid) + "\n";
    if (::ftruncate(fd_, 0) != 0) return;  // the record is informative only: a failure costs the pid
    [[maybe_unused]] const auto written = ::pwrite(fd_, text.data(), text.size(), 0);
  }

  /// The recorded holder, or nullopt when none is recorded or it has exited: between taking the
  /// lock and writing its pid the new holder is unknown, and the file still names the last one.
  [[nodiscard]] std::optional<pid_t> read_holder() const {
    char buf[32]{};
    const auto n = ::pread(fd_, buf, sizeof buf - 1, 0);
    if (n <= 0) return std::nullopt;
    long long pid = 0;
    bool any = false;
    for (ssize_t i = 0; i < n && buf[i] >= '0' && buf[i] <= '9' && pid < 1'000'000'000; ++i) {
      pid = pid * 10 + (buf[i] - '0');
      any = true;
    }
    if (!any || pid <= 0) return std::nullopt;
    const auto p = static_cast<pid_t>(pid);
    if (::kill(p, 0) != 0 && errno == ESRCH) return std::nullopt;
    return p;
  }

 private:
  static struct flock whole_file(short type) noexcept {
    struct flock fl {};
    fl.l_type = type;
    fl.l_whence = SEEK_SET;
    fl.l_start = 0;
    fl.l_len = 0;  // to the end of the file, however long it grows
    fl.l_pid = 0;  // must be 0 for OFD locks
    return fl;
  }

  void close() noexcept {
    if (fd_ < 0) return;
    // Clear the record while still holding the lock, so nobody reads our pid after we let go.
    if (locked_ && ::ftruncate(fd_, 0) != 0) {
    }
    ::close(fd_);
    fd_ = -1;
    locked_ = false;
  }

  int fd_ = -1;
  std::uint32_t ipu_ = 0;
  bool locked_ = false;
};

}  // namespace detail::runtime

/// The lock directory IPU_DEVICE_LOCK_DIR names, else the per-user default /tmp/ipu-devices-<uid>.
inline std::filesystem::path default_device_lock_dir() {
  const char* v = std::getenv(std::string(device_lock_dir_variable).c_str());
  if (v != nullptr && *v != '\0') return v;
  return detail::runtime::per_user_lock_dir();
}

}  // namespace ipu
