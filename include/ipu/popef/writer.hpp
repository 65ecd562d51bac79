#pragma once
// Writes PopEF files: blobs one after another, each streamed through a blob writer that fills in
// the header (sizes, checksums) when it is closed.
//
//   ipu::popef::writer w("model.popef");                       // or open_mode::append, or an ostream
//   { auto b = w.create_tensor_data("w", info); b.write(bytes); b.close(); }
//   w.write_metadata(meta);
//   w.close();                                                  // a new file appears only now
//
// Only one blob writer may be open at a time (opening a second is an ipu::error). A blob writer
// destroyed before close() abandons its blob: a file is cut back to where the blob began; a stream
// keeps a zeroed header that readers report as damage. TensorData payloads start at a multiple of
// 4096 bytes from the start of the file, so readers can map them in place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/log.hpp"
#include "ipu/popef/compression.hpp"
#include "ipu/popef/format.hpp"
#include "ipu/popef/metadata.hpp"
#include "ipu/popef/popef.pb.h"
#include "ipu/tensor_info.hpp"

namespace ipu::popef {

enum class open_mode : std::uint8_t {
  truncate,  // start a new file
  append,    // add blobs after those already in the file (it must end on a blob boundary)
};

namespace detail {

/// Where a writer's bytes go.
class sink {
 public:
  virtual ~sink() = default;
  virtual void write(std::span<const std::byte> b) = 0;
  /// Absolute position of the next byte written.
  [[nodiscard]] virtual std::uint64_t position() const = 0;
  /// Overwrites bytes written earlier (a blob's header).
  virtual void patch(std::uint64_t offset, std::span<const std::byte> b) = 0;
  /// Drops everything from `offset` on, when the sink can (files); returns false otherwise.
  virtual bool truncate(std::uint64_t offset) = 0;
  virtual void flush() = 0;
  /// Finishes the output (a new file is moved into place); `keep` false discards a new file.
  virtual void close(bool keep) = 0;
  [[nodiscard]] virtual const std::string& name() const = 0;
};

/// A file written through a 1 MiB buffer, headers patched with pwrite. A new file is written under
/// a temporary name in the same directory and renamed into place by close(): readers never see half
/// a file, a failed write leaves no file, and overwriting a file that is still memory-mapped (a
/// model loaded from it) leaves the mapping valid instead of truncating it under the reader.
class file_sink final : public sink {
 public:
  file_sink(const std::filesystem::path& path, open_mode mode) : name_("file '" + path.string() + "'") {
    // The temporary name is unique per process (pid) and per writer within it (a process-wide
    // counter, so threads differ too); O_EXCL never shares a file, and a name taken anyway (a
    // crashed process's leftover with a reused pid, another pid namespace) moves to the next one.
    static std::atomic<unsigned> counter{0};
    if (mode == open_mode::truncate) final_ = path;
    for (int attempt = 0;; ++attempt) {
      if (mode == open_mode::truncate) {
        temp_ = path;
        temp_ += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
      }
      const auto& target = mode == open_mode::truncate ? temp_ : path;
      const int flags = O_RDWR | O_CLOEXEC | O_CREAT | (mode == open_mode::truncate ? O_TRUNC | O_EXCL : 0);
      fd_ = ::open(target.c_str(), flags, 0644);
      if (fd_ >= 0 || errno != EEXIST || mode != open_mode::truncate || attempt == 100) break;
    }
    if (fd_ < 0) {
      const int e = errno;
      throw error(error_category::io, std::string("cannot open the PopEF file for writing: ") + std::strerror(e), name_,
                  "check that the directory exists and is writable");
    }
    struct ::stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      discard();
      throw error(error_category::io, "not a regular file", name_, "give the path of a .popef file");
    }
    position_ = initial_size_ = static_cast<std::uint64_t>(st.st_size);
    if (mode == open_mode::append) {
      try {
        check_blob_boundary();
      } catch (...) {
        discard();
        throw;
      }
    }
    buffer_.reserve(buffer_capacity);
  }
  file_sink(const file_sink&) = delete;
  file_sink& operator=(const file_sink&) = delete;
  ~file_sink() override { discard(); }

  void close(bool keep) override {
    if (fd_ < 0) return;
    if (!keep) return discard();
    try {
      flush();
    } catch (...) {
      discard();
      throw;
    }
    ::close(fd_);
    fd_ = -1;
    if (!temp_.empty()) {
      std::error_code ec;
      std::filesystem::rename(temp_, final_, ec);
      if (ec) {
        const auto why = ec.message();  // before remove() reuses the error code
        std::filesystem::remove(temp_, ec);
        throw error(error_category::io, "cannot move the written file into place: " + why, name_,
                    "check that the directory is writable");
      }
      temp_.clear();
    }
  }

  void write(std::span<const std::byte> b) override {
    if (buffer_.size() + b.size() > buffer_capacity) flush();
    if (b.size() >= buffer_capacity) {
      write_all(b, flushed_);
      flushed_ += b.size();
    } else {
      buffer_.insert(buffer_.end(), b.begin(), b.end());
    }
    position_ += b.size();
  }
  [[nodiscard]] std::uint64_t position() const override { return position_; }
  void patch(std::uint64_t offset, std::span<const std::byte> b) override {
    flush();
    write_all(b, offset);
  }
  bool truncate(std::uint64_t offset) override {
    flush();
    if (::ftruncate(fd_, static_cast<off_t>(offset)) != 0) return false;
    position_ = flushed_ = offset;
    return true;
  }
  void flush() override {
    if (buffer_.empty()) return;
    write_all(buffer_, flushed_);
    flushed_ += buffer_.size();
    buffer_.clear();
  }
  [[nodiscard]] const std::string& name() const override { return name_; }

 private:
  static constexpr std::size_t buffer_capacity = std::size_t{1} << 20;

  void write_all(std::span<const std::byte> b, std::uint64_t at) {
    while (!b.empty()) {
      const auto n = ::pwrite(fd_, b.data(), b.size(), static_cast<off_t>(at));
      if (n < 0) {
        if (errno == EINTR) continue;
        const int e = errno;
        throw error(error_category::io, std::string("writing the PopEF file failed: ") + std::strerror(e), name_,
                    e == ENOSPC ? "free some disk space" : "check the file system");
      }
      b = b.subspan(static_cast<std::size_t>(n));
      at += static_cast<std::uint64_t>(n);
    }
  }

  /// Append mode: the existing blobs must end exactly at the end of the file.
  void check_blob_boundary() {
    flushed_ = position_;
    std::uint64_t offset = 0;
    std::array<std::byte, header_size> h{};
    for (std::size_t index = 0; offset < position_; ++index) {
      const auto want = static_cast<std::size_t>(std::min<std::uint64_t>(header_size, position_ - offset));
      if (::pread(fd_, h.data(), want, static_cast<off_t>(offset)) != static_cast<ssize_t>(want))
        throw error(error_category::io, "cannot read the file to append to it", name_);
      const std::string where = name_ + ", blob " + std::to_string(index) + " at offset " + std::to_string(offset);
      const auto parsed = parse_header(std::span<const std::byte>(h.data(), want), position_ - offset, where, index == 0);
      offset += parsed.total_size;
    }
  }

  /// Closes without keeping what this sink wrote: a new file is removed, an appended file is cut
  /// back to its size before.
  void discard() noexcept {
    if (fd_ >= 0 && temp_.empty() && position_ != initial_size_ && ::ftruncate(fd_, static_cast<off_t>(initial_size_)) != 0)
      log::error("popef: cannot cut ", name_, " back to its ", initial_size_, " bytes");
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!temp_.empty()) {
      std::error_code ec;
      std::filesystem::remove(temp_, ec);
      temp_.clear();
    }
  }

  int fd_ = -1;
  std::string name_;
  std::filesystem::path final_, temp_;  // truncate mode: where the file goes, and its temporary name
  std::vector<std::byte> buffer_;
  std::uint64_t position_ = 0;      // logical end
  std::uint64_t flushed_ = 0;       // bytes already in the file
  std::uint64_t initial_size_ = 0;  // append mode: the file's size when opened
};

/// A seekable std::ostream; positions are the stream's own.
class stream_sink final : public sink {
 public:
  explicit stream_sink(std::ostream& out, std::string_view name) : out_(out), name_("stream '" + std::string(name) + "'") {
    const auto p = out_.tellp();
    if (p < 0)
      throw error(error_category::usage, "the output stream is not seekable", name_,
                  "write to a file or a std::ostringstream: blob headers are filled in when each blob is closed");
    position_ = static_cast<std::uint64_t>(p);
  }
  void write(std::span<const std::byte> b) override {
    out_.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    check();
    position_ += b.size();
  }
  [[nodiscard]] std::uint64_t position() const override { return position_; }
  void patch(std::uint64_t offset, std::span<const std::byte> b) override {
    out_.seekp(static_cast<std::streamoff>(offset));
    out_.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    out_.seekp(static_cast<std::streamoff>(position_));
    check();
  }
  bool truncate(std::uint64_t) override { return false; }
  void flush() override {
    out_.flush();
    check();
  }
  void close(bool keep) override {
    if (keep) flush();
  }
  [[nodiscard]] const std::string& name() const override { return name_; }

 private:
  void check() {
    if (!out_) throw error(error_category::io, "writing the PopEF stream failed", name_);
  }
  std::ostream& out_;
  std::string name_;
  std::uint64_t position_ = 0;
};

inline std::uint64_t align_up(std::uint64_t v, std::uint64_t a) { return (v + a - 1) / a * a; }

}  // namespace detail

class writer;

/// Streams one blob's payload. Move-only; close() finishes the blob.
class blob_writer {
 public:
  blob_writer(blob_writer&& o) noexcept;
  blob_writer& operator=(blob_writer&&) = delete;
  blob_writer(const blob_writer&) = delete;
  blob_writer& operator=(const blob_writer&) = delete;
  ~blob_writer();

  /// Appends payload bytes. A tensor's payload may not exceed its declared size.
  void write(std::span<const std::byte> bytes);
  template <class T>
    requires std::is_trivially_copyable_v<T>
  void write_values(std::span<const T> values) {
    write(std::as_bytes(values));
  }
  /// Finishes the blob: fills in its header. A tensor must have received exactly its size.
  void close();

  [[nodiscard]] bool is_open() const noexcept { return owner_ != nullptr; }
  /// Payload bytes received so far (before compression).
  [[nodiscard]] std::uint64_t bytes_written() const noexcept { return raw_written_; }

 private:
  friend class writer;
  blob_writer(writer& owner, blob_type type, std::string label, std::optional<std::uint64_t> exact_size, bool compress);
  void abandon() noexcept;
  void emit(std::span<const std::byte> b);  // stored bytes: to the sink and the checksum

  writer* owner_ = nullptr;
  blob_type type_ = blob_type::opaque;
  std::string label_;
  std::uint64_t start_ = 0;
  std::optional<std::uint64_t> exact_size_;
  std::uint64_t raw_written_ = 0;
  std::unique_ptr<detail::checksum_state> checksum_;
  std::unique_ptr<detail::deflater> deflater_;
};

class writer {
 public:
  explicit writer(const std::filesystem::path& file, open_mode mode = open_mode::truncate)
      : sink_(std::make_unique<detail::file_sink>(file, mode)) {}
  explicit writer(std::ostream& out, std::string_view name = "stream")
      : sink_(std::make_unique<detail::stream_sink>(out, name)) {}
  writer(const writer&) = delete;
  writer& operator=(const writer&) = delete;
  /// Closes the writer. Destroyed by an exception, it keeps nothing of a new file.
  ~writer() {
    if (!sink_) return;
    if (active_) active_->abandon();
    try {
      sink_->close(std::uncaught_exceptions() == exceptions_);
    } catch (const std::exception& e) {
      log::error("popef: ", e.what());
    }
  }

  /// Finishes the file: flushes it and, for a new file, moves it into place. A blob writer still
  /// open is abandoned. Errors (a full disk) are thrown here, not lost in the destructor.
  void close() {
    if (!sink_) return;
    if (active_) {
      log::warn("popef: ", active_->label_, " was not closed before the writer; the blob is abandoned");
      active_->abandon();
    }
    auto sink = std::move(sink_);
    sink->close(true);
  }

  /// An Executable blob; the payload is a serialized pb::Executable (see export.hpp).
  blob_writer create_executable(std::string_view name, bool compress = false) {
    pb::ExecutableInfo info;
    info.set_name(std::string(name));
    check_name(name, "executable");
    return start(blob_type::executable, info, "Executable '" + std::string(name) + "'", std::nullopt, compress, false);
  }
  /// A TensorData blob of exactly info.num_bytes() payload bytes, page-aligned in the file.
  blob_writer create_tensor_data(std::string_view name, const tensor_info& info) {
    return start_tensor(blob_type::tensor_data, name, info);
  }
  /// A FeedData blob (data fed to an input), laid out like TensorData.
  blob_writer create_feed_data(std::string_view name, const tensor_info& info) {
    return start_tensor(blob_type::feed_data, name, info);
  }
  /// Framework-private bytes belonging to `executable`.
  blob_writer create_opaque(std::string_view name, std::string_view executable, bool compress = false) {
    check_name(name, "opaque blob");
    pb::OpaqueInfo info;
    info.set_name(std::string(name));
    info.set_executable(std::string(executable));
    return start(blob_type::opaque, info, "Opaque '" + std::string(name) + "'", std::nullopt, compress, false);
  }
  void write_metadata(const metadata& m) {
    check_name(m.executable, "metadata's executable");
    auto b = start(blob_type::metadata, to_proto(m), "Metadata for '" + m.executable + "'", 0, false, false);
    b.close();
  }

  // One-call forms.
  void write_executable(std::string_view name, std::span<const std::byte> payload, bool compress = false) {
    auto b = create_executable(name, compress);
    b.write(payload);
    b.close();
  }
  void write_tensor_data(std::string_view name, const tensor_info& info, std::span<const std::byte> data) {
    auto b = create_tensor_data(name, info);
    b.write(data);
    b.close();
  }
  void write_feed_data(std::string_view name, const tensor_info& info, std::span<const std::byte> data) {
    auto b = create_feed_data(name, info);
    b.write(data);
    b.close();
  }
  void write_opaque(std::string_view name, std::string_view executable, std::span<const std::byte> data, bool compress = false) {
    auto b = create_opaque(name, executable, compress);
    b.write(data);
    b.close();
  }

  /// Flushes what was written; the writer stays usable.
  void flush() { sink().flush(); }
  /// Absolute position of the next blob.
  [[nodiscard]] std::uint64_t position() const { return sink().position(); }
  [[nodiscard]] const std::string& name() const { return sink().name(); }

 private:
  friend class blob_writer;

  [[nodiscard]] detail::sink& sink() const {
    if (!sink_) throw error(error_category::usage, "the PopEF writer is closed", {}, "open a new writer");
    return *sink_;
  }

  static void check_name(std::string_view name, const char* what) {
    if (name.empty())
      throw error(error_category::usage, std::string("the ") + what + " name is empty", {}, "give it a name");
  }

  blob_writer start_tensor(blob_type type, std::string_view name, const tensor_info& info) {
    check_name(name, "tensor");
    pb::TensorDataInfo m;
    m.set_name(std::string(name));
    detail::to_proto(info, *m.mutable_info());
    const auto bytes = static_cast<std::uint64_t>(info.num_elements()) * size_of(info.type);
    return start(type, m, std::string(to_string(type)) + " '" + std::string(name) + "'", bytes, false, true);
  }

  template <class Message>
  blob_writer start(blob_type type, const Message& info, std::string label, std::optional<std::uint64_t> exact,
                    bool compress, bool aligned) {
    (void)sink();  // throws when closed
    if (active_)
      throw error(error_category::usage,
                  "cannot start " + label + ": the blob writer for " + active_->label_ + " is still open", sink_->name(),
                  "close() the open blob writer first: one blob is written at a time");
    const auto info_bytes = detail::serialize_message(info, "the info message of " + label);
    blob_writer b(*this, type, std::move(label), exact, compress);
    // Header placeholder (zeros: an abandoned blob in a stream reads as damage), prefix, info, padding.
    const std::array<std::byte, header_size> zeros{};
    sink_->write(zeros);
    const std::uint64_t content_start = b.start_ + header_size;
    const std::uint64_t info_end = content_start + content_prefix_size + info_bytes.size();
    const std::uint64_t payload_start = aligned ? detail::align_up(info_end, tensor_alignment) : info_end;
    std::array<std::byte, content_prefix_size> prefix{};
    detail::store(prefix.data(), static_cast<std::uint64_t>(info_bytes.size()));
    detail::store(prefix.data() + 8, payload_start - content_start);
    b.emit(prefix);
    b.emit(std::as_bytes(std::span(info_bytes.data(), info_bytes.size())));
    std::vector<std::byte> pad(static_cast<std::size_t>(payload_start - info_end));
    b.emit(pad);
    return b;
  }

  std::unique_ptr<detail::sink> sink_;
  blob_writer* active_ = nullptr;
  int exceptions_ = std::uncaught_exceptions();
};

// --- blob_writer ------------------------------------------------------------------------------

inline blob_writer::blob_writer(writer& owner, blob_type type, std::string label, std::optional<std::uint64_t> exact_size,
                                bool compress)
    : owner_(&owner),
      type_(type),
      label_(std::move(label)),
      start_(owner.sink_->position()),
      exact_size_(exact_size),
      checksum_(std::make_unique<detail::checksum_state>()) {
  if (compress) deflater_ = std::make_unique<detail::deflater>([this](std::span<const std::byte> b) { emit(b); });
  owner.active_ = this;
}

inline blob_writer::blob_writer(blob_writer&& o) noexcept
    : owner_(std::exchange(o.owner_, nullptr)),
      type_(o.type_),
      label_(std::move(o.label_)),
      start_(o.start_),
      exact_size_(o.exact_size_),
      raw_written_(o.raw_written_),
      checksum_(std::move(o.checksum_)),
      deflater_(std::move(o.deflater_)) {
  if (owner_) owner_->active_ = this;
  // The deflater's output went to the moved-from object: point it here.
  if (deflater_) deflater_->set_output([this](std::span<const std::byte> b) { emit(b); });
}

inline blob_writer::~blob_writer() {
  if (owner_) {
    log::warn("popef: ", label_, " was not closed; the blob is abandoned");
    abandon();
  }
}

inline void blob_writer::emit(std::span<const std::byte> b) {
  owner_->sink_->write(b);
  checksum_->update(b);
}

inline void blob_writer::write(std::span<const std::byte> bytes) {
  if (!owner_)
    throw error(error_category::usage, "write to a closed blob writer", label_, "create a new blob writer");
  if (exact_size_ && bytes.size() > *exact_size_ - raw_written_)
    throw error(error_category::usage,
                label_ + " holds " + std::to_string(*exact_size_) + " bytes; writing " + std::to_string(bytes.size()) +
                    " more after " + std::to_string(raw_written_) + " overflows it",
                owner_->sink_->name(), "write exactly the tensor's size");
  if (deflater_) deflater_->write(bytes);
  else emit(bytes);
  raw_written_ += bytes.size();
}

inline void blob_writer::close() {
  if (!owner_) throw error(error_category::usage, "close of a closed blob writer", label_);
  if (exact_size_ && raw_written_ != *exact_size_)
    throw error(error_category::usage,
                label_ + " holds " + std::to_string(*exact_size_) + " bytes but " + std::to_string(raw_written_) +
                    " were written",
                owner_->sink_->name(), "write exactly the tensor's size before close()");
  if (deflater_) deflater_->finish();
  auto& sink = *owner_->sink_;
  blob_header h;
  h.type = static_cast<std::uint16_t>(type_);
  h.content_size = sink.position() - start_ - header_size;
  h.total_size = header_size + h.content_size;
  h.flags = deflater_ ? blob_flags::compressed : 0;
  h.content_checksum = checksum_->digest();
  h.payload_raw_size = raw_written_;
  const auto bytes = encode_header(h);
  sink.patch(start_, bytes);
  owner_->active_ = nullptr;
  owner_ = nullptr;
}

inline void blob_writer::abandon() noexcept {
  if (!owner_) return;
  try {
    owner_->sink_->truncate(start_);
  } catch (...) {
  }
  owner_->active_ = nullptr;
  owner_ = nullptr;
}

}  // namespace ipu::popef
