#pragma once
// `ipu train`'s data: a model input's samples or the labels, from a .npy or an ONNX TensorProto .pb
// file, converted to the model's type and taken a micro-batch at a time.
//
// A process that runs every replica uses every row, and reads each file whole. One that runs only a
// share of them (a rank under mpirun) reads a .npy file by rows (ipu/io/npy_rows.hpp): at the start
// only its header, whose shape is checked, then at each step just the rows of its own micro-batches.
// A .pb file is read whole even then: protobuf parses the whole message.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>

#include "ipu/error.hpp"
#include "ipu/io/npy_rows.hpp"
#include "ipu/tensor.hpp"
#include "ipu/train/session.hpp"
#include "run.hpp"

namespace ipu_cli::train_detail {

inline ipu::error data_usage(const std::string& what, const std::string& where, const std::string& fix = {}) {
  return ipu::error(ipu::error_category::usage, what, where, fix);
}

/// Data of type `have` can be given for a model tensor of type `want`: the same type, or float64
/// for float32 and int32 for int64 (converted by as_type).
inline void check_type(ipu::data_type have, ipu::data_type want, const std::string& what) {
  if (have == want || (have == ipu::data_type::F64 && want == ipu::data_type::F32) ||
      (have == ipu::data_type::S32 && want == ipu::data_type::S64))
    return;
  throw data_usage(what + " holds " + std::string(ipu::to_string(have)) + " data; the model needs " +
                       std::string(ipu::to_string(want)),
                   what, want == ipu::data_type::S64 ? "give class indices as integers" : "give floating-point data");
}

/// `t` as `type` (float64 data for a float32 model is converted); any other mismatch is an error.
inline ipu::host_tensor as_type(ipu::host_tensor t, ipu::data_type type, const std::string& what) {
  check_type(t.info().type, type, what);
  if (t.info().type == type) return t;
  ipu::host_tensor r(ipu::tensor_info{type, t.info().shape});
  if (t.info().type == ipu::data_type::F64) {
    const auto in = t.as<double>();
    auto out = r.as<float>();
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = static_cast<float>(in[i]);
  } else {
    const auto in = t.as<std::int32_t>();
    auto out = r.as<std::int64_t>();
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = in[i];
  }
  return r;
}

/// Every label of `rows` (class indices, rows `first_row`.. of the labels file) is in [0, classes).
inline void check_classes(const ipu::host_tensor& rows, std::int64_t first_row, std::int64_t classes) {
  const auto labels = rows.as<std::int64_t>();
  const auto n = rows.info().shape.rank() > 0 ? rows.info().shape[0] : 1;
  const auto per_row = n > 0 ? labels.size() / static_cast<std::size_t>(n) : 1;
  for (std::size_t i = 0; i < labels.size(); ++i)
    if (labels[i] < 0 || labels[i] >= classes)
      throw data_usage("label " + std::to_string(labels[i]) + " is not a class index of the output's " +
                           std::to_string(classes) + " classes (row " +
                           std::to_string(first_row + static_cast<std::int64_t>(i / per_row)) + " of the file)",
                       "--labels", "give indices in [0, " + std::to_string(classes) + ")");
}

/// One data file: held whole, or read by rows.
class train_source {
 public:
  /// Opens `file` for a model tensor of type `type`; `what` names it in errors ("--input x").
  /// `by_rows`: a .npy file is read by rows, as they are taken; otherwise it is read whole now.
  train_source(const std::filesystem::path& file, ipu::data_type type, std::string what, bool by_rows)
      : type_(type), what_(std::move(what)) {
    if (by_rows && file.extension() == ".npy") {
      rows_.emplace(file);
      check_type(rows_->info().type, type_, what_);
      info_ = ipu::tensor_info{type_, rows_->info().shape};  // the file's shape, the model's type
    } else {
      whole_ = as_type(read_input_file(file), type_, what_);
      info_ = whole_->info();
      whole_bytes_ = std::filesystem::file_size(file);
    }
  }

  /// The model's type, the file's shape.
  [[nodiscard]] const ipu::tensor_info& info() const noexcept { return info_; }
  /// Bytes read from the file so far: all of it when held whole, else its header and the rows taken.
  [[nodiscard]] std::uint64_t bytes_read() const noexcept { return rows_ ? rows_->bytes_read() : whole_bytes_; }
  /// Rows read from the file so far (every row when held whole).
  [[nodiscard]] std::int64_t rows_read() const noexcept {
    return rows_ ? rows_read_ : info_.shape.rank() > 0 ? info_.shape[0] : 0;
  }

  /// Checks every label of the file, now when it is held whole (naming its row), else as its rows
  /// are read.
  void check_classes(std::int64_t classes) {
    classes_ = classes;
    if (whole_) train_detail::check_classes(*whole_, 0, classes);
  }

  /// `count` rows from row `first` (below the file's rows), wrapping around at the end.
  [[nodiscard]] ipu::host_tensor take(std::int64_t first, std::int64_t count) {
    if (whole_) return ipu::train::take_rows(*whole_, first, count);
    const auto total = info_.shape[0];
    auto dims = info_.shape.dims();
    dims[0] = count;
    ipu::host_tensor t(ipu::tensor_info{type_, ipu::shape(dims)});
    const auto row_bytes = count > 0 ? t.bytes().size() / static_cast<std::size_t>(count) : 0;
    // Up to the end of the file, then from its start again (more than once if count > total).
    for (std::int64_t done = 0, from = first % total; done < count; from = 0) {
      const auto n = std::min(count - done, total - from);
      auto part = as_type(rows_->read(from, n), type_, what_);
      if (classes_) train_detail::check_classes(part, from, *classes_);
      std::memcpy(t.bytes().data() + static_cast<std::size_t>(done) * row_bytes, part.bytes().data(), part.bytes().size());
      done += n;
      rows_read_ += n;
    }
    return t;
  }

 private:
  ipu::data_type type_;
  std::string what_;
  ipu::tensor_info info_;
  std::optional<ipu::host_tensor> whole_;
  std::optional<ipu::io::npy_row_reader> rows_;
  std::uint64_t whole_bytes_ = 0;
  std::int64_t rows_read_ = 0;
  std::optional<std::int64_t> classes_;
};

}  // namespace ipu_cli::train_detail
