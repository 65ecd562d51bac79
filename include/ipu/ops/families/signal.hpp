#pragma once
// The op table's signal family: DFT, STFT, the cosine-sum windows (HannWindow, HammingWindow,
// BlackmanWindow) and MelWeightMatrix (opset 17). The shape and cost rules are here, beside the
// rows; the host kernels are in ipu/ops/kernels/signal.hpp.
//
// Several outputs are sized by input values (a window's size, DFT's dft_length, STFT's frame_step
// and frame_length, MelWeightMatrix's bin counts). The rules read them when they are constants;
// otherwise the importer's declared shapes stand and the kernels check them against the values.
// The geometry below is shared by rule and kernel, so both say the same thing about bad inputs.
//
// Cost: a radix-2 FFT of n complex points is about 5 n log2(n) flops, i.e. 2.5 log2(n) per real
// value; a length that is not a power of two goes through Bluestein's algorithm (three FFTs of a
// power of two m >= 2n - 1 plus chirp multiplies), about 15 log2(m) per value. Each transformed
// line must sit on one tile, so the op also pays one exchange of its output.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipu/ops/op_def.hpp"

namespace ipu {
namespace detail::signal {

/// The longest transform the host kernels take: Bluestein pads to a power of two >= 2n - 1, and
/// far below this the buffers would not fit in memory anyway.
inline constexpr std::int64_t max_transform_length = std::int64_t{1} << 40;

inline std::string num(std::int64_t v) { return std::to_string(v); }

struct dft_geometry {
  std::size_t axis = 1;
  std::int64_t n = 0;      // transform length: dft_length, or the axis' size
  std::int64_t out_n = 0;  // n, or n / 2 + 1 when onesided
  bool complex_input = false;
  shape out;
};

/// DFT of `x` ([batch, signal dims..., 1 or 2]) along `axis` (negative counts from the back).
/// `fail(what, fix)` makes the error to throw (the shape rule's or the kernel's).
template <class Fail>
constexpr dft_geometry dft_shape(const shape& x, std::int64_t axis, std::optional<std::int64_t> length, bool onesided,
                                 bool inverse, const Fail& fail) {
  const auto r = static_cast<std::int64_t>(x.rank());
  if (r < 2 || (x[x.rank() - 1] != 1 && x[x.rank() - 1] != 2))
    throw fail("input " + to_string(x) + " must end in a dimension of 1 (real) or 2 (real, imaginary)",
               "give the signal as [batch, signal dims..., 1] or [batch, signal dims..., 2]");
  if (onesided && inverse)
    throw fail("onesided and inverse cannot both be set", "take the inverse of the full spectrum (onesided = 0)");
  const std::int64_t a = axis < 0 ? axis + r : axis;
  if (a < 0 || a > r - 2)
    throw fail("axis " + num(axis) + " is out of range for input " + to_string(x) + ": the last dimension holds the "
                   "real and imaginary parts",
               "use an axis in [" + num(-r) + ", -2] or [0, " + num(r - 2) + "]");
  dft_geometry g;
  g.axis = static_cast<std::size_t>(a);
  g.complex_input = x[x.rank() - 1] == 2;
  if (onesided && g.complex_input)
    throw fail("onesided is set but the input is complex: a complex signal's spectrum has no redundant half",
               "set onesided = 0, or give a real input (last dimension 1)");
  g.n = length ? *length : x[g.axis];
  if (g.n < 1 || g.n > max_transform_length)
    throw fail("the transform length " + num(g.n) + (length ? " (dft_length)" : " (the axis' size)") +
                   " is outside [1, 2^40]",
               "give a positive dft_length");
  g.out_n = onesided ? g.n / 2 + 1 : g.n;
  auto dims = x.dims();
  dims[g.axis] = g.out_n;
  dims.back() = 2;
  g.out = shape(std::move(dims));
  return g;
}

struct stft_geometry {
  std::int64_t batch = 0, length = 0, frames = 0, frame_length = 0, step = 0, bins = 0;
  bool complex_input = false;
  shape out;
};

/// STFT of `signal` ([batch, length, 1 or 2]) with the optional window's shape and frame_length.
template <class Fail>
constexpr stft_geometry stft_shape(const shape& signal, std::int64_t step, const shape* window,
                                   std::optional<std::int64_t> frame_length, bool onesided, const Fail& fail) {
  if (signal.rank() != 3 || (signal[2] != 1 && signal[2] != 2))
    throw fail("signal " + to_string(signal) + " must be [batch, length, 1] (real) or [batch, length, 2] (complex)",
               "reshape the signal");
  stft_geometry g;
  g.batch = signal[0];
  g.length = signal[1];
  g.complex_input = signal[2] == 2;
  if (onesided && g.complex_input)
    throw fail("onesided is set (its default is 1) but the signal is complex", "set onesided = 0 for a complex signal");
  if (step < 1) throw fail("frame_step is " + num(step) + "; it must be positive", "give a frame_step of at least 1");
  if (window && window->rank() != 1)
    throw fail("window " + to_string(*window) + " must be 1-D", "give the window as [frame_length]");
  if (window && frame_length && (*window)[0] != *frame_length)
    throw fail("the window has " + num((*window)[0]) + " values but frame_length is " + num(*frame_length),
               "give a window of frame_length values, or omit one of them");
  if (!window && !frame_length)
    throw fail("neither window nor frame_length is given, so the frame length is unknown", "give one of them");
  g.frame_length = frame_length ? *frame_length : (*window)[0];
  if (g.frame_length < 1 || g.frame_length > g.length)
    throw fail("the frame length " + num(g.frame_length) + " is outside [1, " + num(g.length) +
                   "] (the signal's length)",
               "use frames no longer than the signal");
  g.step = step;
  g.frames = (g.length - g.frame_length) / step + 1;
  g.bins = onesided ? g.frame_length / 2 + 1 : g.frame_length;
  g.out = shape{g.batch, g.frames, g.bins, 2};
  return g;
}

/// The element type `output_datatype` names, for the windows and MelWeightMatrix (numbers only).
template <class Fail>
constexpr data_type output_datatype(std::int64_t code, const Fail& fail) {
  const auto t = data_type_from_onnx_code(code);
  if (!t || *t == data_type::BOOL || *t == data_type::F8143 || *t == data_type::F8152 || *t == data_type::BF16)
    throw fail("output_datatype " + num(code) + " is not a numeric type this library supports",
               "use an ONNX TensorProto.DataType code such as 1 (FLOAT), 10 (FLOAT16), 11 (DOUBLE) or 7 (INT64)");
  return *t;
}

template <class Fail>
constexpr shape window_shape(std::int64_t size, const Fail& fail) {
  if (size < 1) throw fail("the window size is " + num(size) + "; it must be positive", "give a size of at least 1");
  return shape{size};
}

template <class Fail>
constexpr shape mel_shape(std::int64_t mel_bins, std::int64_t dft_length, const Fail& fail) {
  if (mel_bins < 1)
    throw fail("num_mel_bins is " + num(mel_bins) + "; it must be positive", "ask for at least one band");
  if (dft_length < 1)
    throw fail("dft_length is " + num(dft_length) + "; it must be positive", "give the length of the DFT");
  return shape{dft_length / 2 + 1, mel_bins};
}

}  // namespace detail::signal

/// STFT's output shape by the spec, for readers outside the op table (the ONNX importer corrects
/// ONNX 1.12's STFT inference with it); `fail(what, fix)` makes the error to throw.
template <class Fail>
constexpr shape stft_output_shape(const shape& signal, std::int64_t frame_step, const shape* window,
                                  std::optional<std::int64_t> frame_length, bool onesided, const Fail& fail) {
  return detail::signal::stft_shape(signal, frame_step, window, frame_length, onesided, fail).out;
}

namespace detail::infer {

constexpr auto signal_fail(const infer_context& c) {
  return [&c](const std::string& what, const std::string& fix) { return c.fail(what, fix); };
}

/// The one value of a scalar integer input (a size or length), which must be known.
constexpr std::int64_t signal_scalar(const infer_context& c, std::size_t i, std::string_view what) {
  const auto v = c.int_values(i, what);
  if (v.size() != 1)
    throw c.fail(std::string(what) + " must be a scalar, got " + to_string(c.input(i)), "give one value");
  return v[0];
}

constexpr void need_signal_float(const infer_context& c, std::size_t i, std::string_view what) {
  const auto t = c.in_type(i);
  if (t != data_type::F16 && t != data_type::F32 && t != data_type::F64)
    throw c.fail(std::string(what) + " is " + std::string(to_string(t)) + "; FLOAT16, FLOAT or DOUBLE expected",
                 "cast it to a floating-point type");
}

constexpr std::vector<tensor_info> dft(const infer_context& c) {
  need_signal_float(c, 0, "input");
  std::optional<std::int64_t> length;
  if (c.has_input(1)) length = signal_scalar(c, 1, "dft_length");
  const auto g = signal::dft_shape(c.in_shape(0), c.attr_int("axis", 1), length, c.attr_int("onesided", 0) != 0,
                                   c.attr_int("inverse", 0) != 0, signal_fail(c));
  return {tensor_info{c.in_type(0), g.out}};
}

constexpr std::vector<tensor_info> stft(const infer_context& c) {
  need_signal_float(c, 0, "signal");
  if (c.has_input(2) && c.in_type(2) != c.in_type(0))
    throw c.fail("the window's type differs from the signal's (" + c.describe_inputs() + ")", "give both one type");
  const auto step = signal_scalar(c, 1, "frame_step");
  std::optional<std::int64_t> frame_length;
  if (c.has_input(3)) frame_length = signal_scalar(c, 3, "frame_length");
  const auto g = signal::stft_shape(c.in_shape(0), step, c.has_input(2) ? &c.in_shape(2) : nullptr, frame_length,
                                    c.attr_int("onesided", 1) != 0, signal_fail(c));
  return {tensor_info{c.in_type(0), g.out}};
}

constexpr std::vector<tensor_info> cosine_window(const infer_context& c) {
  const auto t = signal::output_datatype(c.attr_int("output_datatype", 1), signal_fail(c));
  return {tensor_info{t, signal::window_shape(signal_scalar(c, 0, "size"), signal_fail(c))}};
}

constexpr std::vector<tensor_info> mel_weight_matrix(const infer_context& c) {
  const auto t = signal::output_datatype(c.attr_int("output_datatype", 1), signal_fail(c));
  need_signal_float(c, 3, "lower_edge_hertz");
  need_signal_float(c, 4, "upper_edge_hertz");
  const auto bins = signal_scalar(c, 0, "num_mel_bins");
  return {tensor_info{t, signal::mel_shape(bins, signal_scalar(c, 1, "dft_length"), signal_fail(c))}};
}

}  // namespace detail::infer

namespace detail::cost_rules {

constexpr std::uint64_t fft_log2_ceil(std::uint64_t n) {
  std::uint64_t l = 0;
  while (l < 63 && (std::uint64_t{1} << l) < n) ++l;
  return l;
}

/// About n from a onesided output's n / 2 + 1 values.
constexpr std::uint64_t onesided_full_length(std::uint64_t half) { return half > 1 ? 2 * (half - 1) : 1; }

/// Vector instructions per real output value of one complex transform of length n (file comment).
constexpr std::uint32_t fft_ops(std::uint64_t n) {
  if (n <= 1) return 1;
  const auto l = fft_log2_ceil(n);
  if ((std::uint64_t{1} << l) == n) return static_cast<std::uint32_t>(std::max<std::uint64_t>(1, (5 * l + 1) / 2));
  return static_cast<std::uint32_t>(15 * fft_log2_ceil(2 * n - 1) + 6);
}

/// `lines` transforms of length n whose outputs are the op's output: the butterflies, plus one
/// exchange bringing each line's values onto its tile.
constexpr op_cost fft_transforms(const op_cost_context& c, std::uint64_t lines, std::uint64_t n,
                                 std::uint32_t extra_ops) {
  op_cost r = vector_pass(c, c.type(c.output()), mul_sat(mul_sat(lines, n), 2), 1, fft_ops(n) + extra_ops);
  r += data_movement(c);
  return r;
}

constexpr op_cost dft(const op_cost_context& c) {
  const auto& out = c.output();
  const auto rank = static_cast<std::int64_t>(out.shape.rank());
  std::int64_t axis = c.int_attr("axis", 1);
  if (axis < 0) axis += rank;
  const auto axis_len = dim(out, axis);
  // The transform length is the output's along the axis, or about twice it when onesided.
  const auto n = c.int_attr("onesided", 0) ? onesided_full_length(axis_len) : axis_len;
  const auto lines = product(out, 0, axis) * product(out, axis + 1, rank - 1);
  return fft_transforms(c, lines, n, 0);
}

constexpr op_cost stft(const op_cost_context& c) {
  const auto& out = c.output();
  const auto frame = c.has_input(2) ? dim(c.input(2), 0)
                                    : (c.int_attr("onesided", 1) ? onesided_full_length(dim(out, 2)) : dim(out, 2));
  return fft_transforms(c, product(out, 0, 2), frame, c.has_input(2) ? 1 : 0);  // + the window's multiply
}

/// One cosine per element (two for Blackman's second term) at the scalar rate, plus the sums.
constexpr op_cost cosine_window(const op_cost_context& c) {
  const std::uint32_t cosines = c.op->type == "BlackmanWindow" ? 2 : 1;
  return elementwise(c, cosines * scalar_rate_ops(c, c.type(c.output())) + 3);
}

/// A subtract, a divide and a select per element of the triangular filters.
constexpr op_cost mel_weight_matrix(const op_cost_context& c) { return elementwise(c, 3); }

}  // namespace detail::cost_rules

namespace op_families {

inline constexpr op_def signal[] = {
    // domain, type, shape rule, cost rule, flags (no gradient)
    {"", "DFT", detail::infer::dft, detail::cost_rules::dft, {}},
    {"", "STFT", detail::infer::stft, detail::cost_rules::stft, {}},
    {"", "HannWindow", detail::infer::cosine_window, detail::cost_rules::cosine_window, {}},
    {"", "HammingWindow", detail::infer::cosine_window, detail::cost_rules::cosine_window, {}},
    {"", "BlackmanWindow", detail::infer::cosine_window, detail::cost_rules::cosine_window, {}},
    {"", "MelWeightMatrix", detail::infer::mel_weight_matrix, detail::cost_rules::mel_weight_matrix, {}},
};

}  // namespace op_families
}  // namespace ipu
