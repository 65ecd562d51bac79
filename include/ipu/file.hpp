#pragma once
// Files a stranger hands us: opened without blocking, refused unless regular, read with a cap.
//
// A FIFO or a character device given as a model, a PopEF file or an options file would block
// `open` or read without end; O_NONBLOCK makes `open` return at once, fstat then refuses anything
// but a regular file, and only then is the descriptor made blocking again. Every reader of a file
// goes through open_regular_file, so none of them can hang on what the path names. Files we write
// are written whole or not at all (write_file_atomically).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ipu/error.hpp"

namespace ipu {

/// An open regular file: the descriptor (closed on destruction) and its size when opened.
class regular_file {
 public:
  regular_file() = default;
  regular_file(int fd, std::uint64_t size) noexcept : fd_(fd), size_(size) {}
  regular_file(regular_file&& o) noexcept : fd_(std::exchange(o.fd_, -1)), size_(o.size_) {}
  regular_file& operator=(regular_file&& o) noexcept {
    if (this != &o) {
      close();
      fd_ = std::exchange(o.fd_, -1);
      size_ = o.size_;
    }
    return *this;
  }
  regular_file(const regular_file&) = delete;
  regular_file& operator=(const regular_file&) = delete;
  ~regular_file() { close(); }

  [[nodiscard]] int fd() const noexcept { return fd_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  /// Hands the descriptor over (the caller closes it).
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

 private:
  void close() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

struct open_file_options {
  /// Refuse a path whose last component is a symbolic link (external data resolves its links first
  /// and then opens what they name with this set, so a link swapped in afterwards is not followed).
  bool no_follow = false;
  /// Refuse files larger than this many bytes, before anything is read.
  std::uint64_t max_bytes = UINT64_MAX;
};

/// Opens `path` for reading if it is a regular file, without ever blocking on it. `what` names the
/// file in errors ("PopEF file", "options file").
inline regular_file open_regular_file(const std::filesystem::path& path, std::string_view what,
                                      open_file_options options = {}) {
  const std::string where = path.string();
  const std::string the = "the " + std::string(what);
  const int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY | (options.no_follow ? O_NOFOLLOW : 0);
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) {
    const int e = errno;
    throw error(error_category::io,
                e == ENOENT                       ? the + " does not exist"
                : e == ELOOP && options.no_follow ? the + " is a symbolic link"
                                                  : "cannot open " + the + ": " + std::strerror(e),
                where,
                e == ENOENT   ? "the file does not exist; check the path"
                : e == EACCES ? "check the file's permissions"
                              : "give the path of a regular file");
  }
  regular_file file(fd, 0);
  struct ::stat st {};
  if (::fstat(fd, &st) != 0)
    throw error(error_category::io, "cannot read the file's status: " + std::string(std::strerror(errno)), where);
  if (!S_ISREG(st.st_mode))
    throw error(error_category::io,
                the + (S_ISDIR(st.st_mode)    ? " is a directory, not a regular file"
                       : S_ISFIFO(st.st_mode) ? " is a pipe (FIFO), not a regular file"
                       : S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) ? " is a device, not a regular file"
                                                                    : " is not a regular file"),
                where, "give the path of a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (size > options.max_bytes)
    throw error(error_category::io,
                the + " holds " + std::to_string(size) + " bytes, more than the " + std::to_string(options.max_bytes) +
                    " accepted",
                where, "check that this is the right file");
  // Regular files never block, but reads should not see EAGAIN either: blocking again.
  if (const int fl = ::fcntl(fd, F_GETFL); fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
    throw error(error_category::io, "cannot set the file's mode: " + std::string(std::strerror(errno)), where);
  return regular_file(file.release(), size);
}

/// The whole of a regular file (at most `max_bytes`), read without blocking on a FIFO or a device.
inline std::string read_regular_file(const std::filesystem::path& path, std::string_view what,
                                     std::uint64_t max_bytes) {
  auto file = open_regular_file(path, what, {.max_bytes = max_bytes});
  std::string bytes(static_cast<std::size_t>(file.size()), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const auto n = ::read(file.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      throw error(error_category::io, "reading the " + std::string(what) + " failed: " + std::strerror(errno),
                  path.string());
    if (n == 0) break;  // it shrank while we read: what is there is what we have
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

/// Writes `bytes` as the file `path`, atomically: into a new file beside it, then renamed over it,
/// so a reader never sees half a file and a failure leaves what was there before.
inline void write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                                  std::string_view what) {
  const std::string where = path.string();
  static std::atomic<unsigned> counter{0};  // unique per writer in this process; the pid across processes
  std::filesystem::path temp;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < 100; ++attempt) {
    temp = path;
    temp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0)
    throw error(error_category::io, "cannot create the " + std::string(what) + ": " + std::strerror(errno), where,
                "check that the directory exists and is writable");
  regular_file file(fd, 0);
  auto fail = [&](const std::string& message, const char* hint) {
    const int e = errno;
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    return error(error_category::io, message + " (" + std::string(what) + "): " + std::strerror(e), where, hint);
  };
  for (std::size_t done = 0; done < bytes.size();) {
    const auto n = ::write(file.fd(), bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw fail("writing the file failed", "check free disk space");
    done += static_cast<std::size_t>(n);
  }
  if (::close(file.release()) != 0) throw fail("writing the file failed", "check free disk space");
  if (::rename(temp.c_str(), path.c_str()) != 0) throw fail("cannot move the written file into place", "check that the path is not a directory");
}

/// Whether `a` and `b` name the same existing file (the same device and inode), whatever the paths
/// look like: hard links, symbolic links, `./x` and `x`. False when either does not exist.
inline bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) noexcept {
  struct ::stat sa {}, sb {};
  if (::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0) return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

}  // namespace ipu
