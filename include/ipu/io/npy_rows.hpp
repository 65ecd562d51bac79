#pragma once
// Rows of a .npy file, read without reading the rest: a process that trains on some of a data set's
// samples (one MPI rank of several) reads only those.
//
// The header is parsed and checked as parse_npy does (the same errors), and the file's size must be
// the header's plus the array's data exactly, so a row's place in the file is known. Rows are read
// with positioned reads (pread) of just their bytes; a file that shrinks or grows under the reader
// is an error, never rows of garbage. A rank-0 array has no rows and is refused.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ipu/error.hpp"
#include "ipu/file.hpp"
#include "ipu/io/npy.hpp"
#include "ipu/tensor.hpp"

namespace ipu::io {

/// A .npy file opened to read ranges of its rows (its first axis).
class npy_row_reader {
 public:
  /// Opens `path` (a regular file, never blocking on a FIFO) and reads its header.
  explicit npy_row_reader(const std::filesystem::path& path)
      : npy_row_reader(open_regular_file(path, ".npy file"), "file '" + path.string() + "'") {}

  /// Reads the header of an open file; `where` names it in errors.
  npy_row_reader(regular_file file, std::string where) : file_(std::move(file)), where_(std::move(where)) {
    const auto size = file_.size();
    std::vector<std::byte> head(static_cast<std::size_t>(std::min<std::uint64_t>(size, detail::npy_preamble_bytes)));
    pread_exact(head, 0);
    const auto p = detail::read_npy_preamble(head, size, where_);
    // The text, which read_npy_preamble checked the file holds; a version 1 header's first bytes
    // came with the preamble, and are not read twice.
    std::string text(p.text_size, '\0');
    const auto have = std::min(p.text_size, head.size() - std::min(head.size(), p.text_offset));
    if (have) std::memcpy(text.data(), head.data() + p.text_offset, have);
    pread_exact(std::as_writable_bytes(std::span(text)).subspan(have), p.text_offset + have);
    layout_ = detail::read_npy_header(text, p, size, where_);
    if (layout_.info.shape.rank() == 0)
      throw detail::npy_error("the file holds a single value (" + to_string(layout_.info) + "), which has no rows to read",
                              where_, "save the samples stacked along a first axis, shape (N, ...)");
    rows_ = layout_.info.shape[0];
    // The data is exactly rows_ rows (read_npy_header checked the size), each the same size.
    row_bytes_ = rows_ > 0 ? layout_.data_bytes / static_cast<std::uint64_t>(rows_) : 0;
  }

  /// The whole array's type and shape.
  [[nodiscard]] const tensor_info& info() const noexcept { return layout_.info; }
  [[nodiscard]] std::int64_t rows() const noexcept { return rows_; }
  [[nodiscard]] std::uint64_t row_bytes() const noexcept { return row_bytes_; }
  /// Every byte read from the file so far, its header included.
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return bytes_read_; }

  /// Rows [first, first + count) as a tensor of `count` rows; bools are 0 or 1 as parse_npy gives them.
  [[nodiscard]] host_tensor read(std::int64_t first, std::int64_t count) {
    if (first < 0 || count < 0 || first > rows_ || count > rows_ - first)
      throw error(error_category::usage,
                  "cannot read " + std::to_string(count) + " rows from row " + std::to_string(first) + " of " +
                      to_string(layout_.info),
                  where_, "read rows within [0, " + std::to_string(rows_) + ")");
    auto dims = layout_.info.shape.dims();
    dims[0] = count;
    const auto offset = layout_.data_offset + static_cast<std::uint64_t>(first) * row_bytes_;
    if (layout_.info.type == data_type::STRING) {  // the file's fixed-width strings, decoded
      std::vector<std::byte> raw(static_cast<std::size_t>(row_bytes_ * static_cast<std::uint64_t>(count)));
      pread_exact(raw, offset);
      return detail::npy_strings(tensor_info{data_type::STRING, shape(dims)}, raw, layout_.strings, where_);
    }
    host_tensor t(tensor_info{layout_.info.type, shape(dims)});
    pread_exact(t.bytes(), offset);
    if (layout_.info.type == data_type::BOOL) detail::normalize_npy_bools(t.bytes());
    return t;
  }

 private:
  /// Fills `into` from `offset`; a short read means the file changed since it was opened.
  void pread_exact(std::span<std::byte> into, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < into.size()) {
      const auto n = ::pread(file_.fd(), into.data() + done, into.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) throw error(error_category::io, "reading the .npy file failed: " + std::string(std::strerror(errno)), where_);
      if (n == 0)
        throw error(error_category::io,
                    "the file changed while it was read: it ended at byte " + std::to_string(offset + done) + ", but held " +
                        std::to_string(file_.size()) + " bytes when opened",
                    where_, "do not rewrite a data file while it is being read");
      done += static_cast<std::size_t>(n);
      bytes_read_ += static_cast<std::uint64_t>(n);
    }
    // A file that grew may have been rewritten: what was read may not be the rows the header describes.
    struct ::stat st {};
    if (::fstat(file_.fd(), &st) == 0 && static_cast<std::uint64_t>(st.st_size) != file_.size())
      throw error(error_category::io,
                  "the file changed while it was read: it holds " + std::to_string(st.st_size) + " bytes, " +
                      std::to_string(file_.size()) + " when opened",
                  where_, "do not rewrite a data file while it is being read");
  }

  regular_file file_;
  std::string where_;
  detail::npy_layout layout_;
  std::int64_t rows_ = 0;
  std::uint64_t row_bytes_ = 0;
  std::uint64_t bytes_read_ = 0;
};

}  // namespace ipu::io
