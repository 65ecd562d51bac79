#include "ipu/ops/kernels/signal.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <complex>
#include <cstdint>
#include <limits>
#include <numbers>
#include <random>
#include <vector>

#include "ipu/ops/infer.hpp"
#include "tensor_kernel_harness.hpp"

namespace test_signal {

using namespace tk;

/// The DFT by its definition, in long double, as the reference for the fast transforms.
std::vector<std::complex<double>> naive_dft(const std::vector<std::complex<double>>& x, bool inverse) {
  const auto n = x.size();
  std::vector<std::complex<double>> out(n);
  for (std::size_t k = 0; k < n; ++k) {
    std::complex<long double> s = 0;
    for (std::size_t j = 0; j < n; ++j) {
      const long double angle = (inverse ? 2 : -2) * std::numbers::pi_v<long double> *
                                static_cast<long double>((j * k) % n) / static_cast<long double>(n);
      s += std::complex<long double>(x[j]) * std::polar(1.0L, angle);
    }
    out[k] = std::complex<double>(s) / (inverse ? static_cast<double>(n) : 1.0);
  }
  return out;
}

TEST_CASE("signal: DFT of a real signal, full and onesided, power of two and not") {
  // [1, 2, 3, 4] -> [10, -2 + 2i, -2, -2 - 2i]
  CHECK(values<float>(run1("DFT", {f32({1, 4, 1}, {1, 2, 3, 4})}, f32_info({1, 4, 2}))) ==
        std::vector<float>{10, 0, -2, 2, -2, 0, -2, -2});
  CHECK(values<float>(run1("DFT", {f32({1, 4, 1}, {1, 2, 3, 4})}, f32_info({1, 3, 2}), {attr("onesided", 1)})) ==
        std::vector<float>{10, 0, -2, 2, -2, 0});
  // n = 3 goes through Bluestein: X1 = 1 + 2w + 3w^2 with w = exp(-2 pi i / 3) = -3/2 + i sqrt(3)/2.
  const float h = static_cast<float>(std::sqrt(3.0) / 2);
  check_close(values<float>(run1("DFT", {f32({1, 3, 1}, {1, 2, 3})}, f32_info({1, 3, 2}))),
              {6, 0, -1.5f, h, -1.5f, -h});
  check_close(values<float>(run1("DFT", {f32({1, 3, 1}, {1, 2, 3})}, f32_info({1, 2, 2}), {attr("onesided", 1)})),
              {6, 0, -1.5f, h});
}

TEST_CASE("signal: DFT inverse, complex input, axes and dft_length") {
  // The inverse of [10, -2 + 2i, -2, -2 - 2i] is [1, 2, 3, 4] (scaled by 1 / n).
  check_close(values<float>(run1("DFT", {f32({1, 4, 2}, {10, 0, -2, 2, -2, 0, -2, -2})}, f32_info({1, 4, 2}),
                                 {attr("inverse", 1)})),
              {1, 0, 2, 0, 3, 0, 4, 0});
  // [[1, 2], [3, 4]]: along the rows (axis 2, or -2) [3, -1], [7, -1]; down the columns (axis 1) [4, 6], [-2, -2].
  const auto m = f32({1, 2, 2, 1}, {1, 2, 3, 4});
  for (std::int64_t axis : {2, -2})
    CHECK(values<float>(run1("DFT", {m}, f32_info({1, 2, 2, 2}), {attr("axis", axis)})) ==
          std::vector<float>{3, 0, -1, 0, 7, 0, -1, 0});
  CHECK(values<float>(run1("DFT", {m}, f32_info({1, 2, 2, 2}))) == std::vector<float>{4, 0, 6, 0, -2, 0, -2, 0});
  // dft_length pads with zeros ([1, 2, 0, 0] -> [3, 1 - 2i, -1, 1 + 2i]) or truncates ([1, 2] -> [3, -1]).
  CHECK(values<float>(run1("DFT", {f32({1, 2, 1}, {1, 2}), i64({}, {4})}, f32_info({1, 4, 2}))) ==
        std::vector<float>{3, 0, 1, -2, -1, 0, 1, 2});
  CHECK(values<float>(run1("DFT", {f32({1, 4, 1}, {1, 2, 3, 4}), i32({}, {2})}, f32_info({1, 2, 2}))) ==
        std::vector<float>{3, 0, -1, 0});
  // F64 and F16 run too.
  CHECK(values<double>(run1("DFT", {make<double>({1, 2, 1}, {1, 2})}, info(data_type::F64, {1, 2, 2}))) ==
        std::vector<double>{3, 0, -1, 0});
}

TEST_CASE("signal: the fast transforms agree with the definition (radix-2 and Bluestein lengths)") {
  std::mt19937 gen(7);
  std::uniform_real_distribution<double> u(-1, 1);
  for (std::size_t n : {1u, 2u, 5u, 64u, 97u, 100u, 1000u}) {
    std::vector<std::complex<double>> x(n);
    std::vector<double> flat;
    for (auto& v : x) {
      v = {u(gen), u(gen)};
      flat.push_back(v.real());
      flat.push_back(v.imag());
    }
    const auto len = static_cast<std::int64_t>(n);
    for (bool inverse : {false, true}) {
      const auto got = values<double>(run1("DFT", {make<double>({1, len, 2}, flat)}, info(data_type::F64, {1, len, 2}),
                                           {attr("inverse", inverse ? 1 : 0)}));
      const auto want = naive_dft(x, inverse);
      double worst = 0;
      for (std::size_t k = 0; k < n; ++k)
        worst = std::max(worst, std::abs(std::complex<double>(got[2 * k], got[2 * k + 1]) - want[k]));
      CHECK_MESSAGE(worst < 1e-11 * static_cast<double>(n), "n = " << n << ", inverse = " << inverse << ": " << worst);
    }
  }
}

TEST_CASE("signal: DFT refuses bad attributes, inputs and declared shapes") {
  const auto x = f32({1, 4, 1}, {1, 2, 3, 4});
  CHECK_THROWS_AS(run1("DFT", {x}, f32_info({1, 3, 2}), {attr("onesided", 1), attr("inverse", 1)}), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {f32({1, 2, 2}, {1, 0, 2, 0})}, f32_info({1, 2, 2}), {attr("onesided", 1)}), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {x}, f32_info({1, 4, 2}), {attr("axis", 2)}), ipu::error);  // the complex axis
  CHECK_THROWS_AS(run1("DFT", {x}, f32_info({1, 4, 2}), {attr("axis", -1)}), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {f32({1, 4, 3}, std::vector<float>(12))}, f32_info({1, 4, 2})), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {x, i64({}, {0})}, f32_info({1, 0, 2})), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {x, i64({2}, {4, 4})}, f32_info({1, 4, 2})), ipu::error);
  CHECK_THROWS_AS(run1("DFT", {x}, f32_info({1, 5, 2})), ipu::error);  // the IR's shape is not the values'
  CHECK_THROWS_AS(run1("DFT", {i32({1, 4, 1}, {1, 2, 3, 4})}, info(data_type::S32, {1, 4, 2})), ipu::error);
}

TEST_CASE("signal: STFT frames, windows and onesided spectra") {
  // [1, 2, 3, 4] in frames of 2 every 2: [1, 2] -> [3, -1], [3, 4] -> [7, -1].
  const auto x = f32({1, 4, 1}, {1, 2, 3, 4});
  CHECK(values<float>(run1("STFT", {x, i64({}, {2}), std::nullopt, i64({}, {2})}, f32_info({1, 2, 2, 2}))) ==
        std::vector<float>{3, 0, -1, 0, 7, 0, -1, 0});
  // Window [1, 0.5]: [1, 1] -> [2, 0], [3, 2] -> [5, 1]; frame_length may be given too if it agrees.
  const auto w = f32({2}, {1, 0.5f});
  CHECK(values<float>(run1("STFT", {x, i64({}, {2}), w}, f32_info({1, 2, 2, 2}))) ==
        std::vector<float>{2, 0, 0, 0, 5, 0, 1, 0});
  CHECK(values<float>(run1("STFT", {x, i64({}, {2}), w, i64({}, {2})}, f32_info({1, 2, 2, 2}))) ==
        std::vector<float>{2, 0, 0, 0, 5, 0, 1, 0});
  // Step 1 overlaps the frames: [1, 2, 3] -> onesided [6, -1.5 - 0.866i]; [2, 3, 4] -> [9, -1.5 - 0.866i].
  const float h = static_cast<float>(std::sqrt(3.0) / 2);
  check_close(values<float>(run1("STFT", {x, i64({}, {1}), std::nullopt, i64({}, {3})}, f32_info({1, 2, 2, 2}))),
              {6, 0, -1.5f, h, 9, 0, -1.5f, h});
  // A complex signal needs onesided = 0: [1 + i, 2] -> [3 + i, -1 + i].
  CHECK(values<float>(run1("STFT", {f32({1, 2, 2}, {1, 1, 2, 0}), i64({}, {1}), std::nullopt, i64({}, {2})},
                           f32_info({1, 1, 2, 2}), {attr("onesided", 0)})) == std::vector<float>{3, 1, -1, 1});
}

TEST_CASE("signal: STFT refuses inconsistent frames") {
  const auto x = f32({1, 4, 1}, {1, 2, 3, 4});
  CHECK_THROWS_AS(run1("STFT", {x, i64({}, {2})}, f32_info({1, 2, 2, 2})), ipu::error);  // no frame length
  CHECK_THROWS_AS(run1("STFT", {x, i64({}, {0}), std::nullopt, i64({}, {2})}, f32_info({1, 2, 2, 2})), ipu::error);
  CHECK_THROWS_AS(run1("STFT", {x, i64({}, {1}), std::nullopt, i64({}, {5})}, f32_info({1, 0, 3, 2})), ipu::error);
  CHECK_THROWS_AS(run1("STFT", {x, i64({}, {2}), f32({3}, {1, 1, 1}), i64({}, {2})}, f32_info({1, 2, 2, 2})),
                  ipu::error);
  CHECK_THROWS_AS(run1("STFT", {f32({1, 2, 2}, {1, 1, 2, 0}), i64({}, {1}), std::nullopt, i64({}, {2})},
                       f32_info({1, 1, 2, 2})),
                  ipu::error);  // complex and onesided
  CHECK_THROWS_AS(run1("STFT", {x, i64({}, {2}), std::nullopt, i64({}, {2})}, f32_info({1, 3, 2, 2})), ipu::error);
}

TEST_CASE("signal: Hann, Hamming and Blackman windows, periodic and symmetric, in any numeric type") {
  // Periodic Hann of 4: 0.5 - 0.5 cos(pi k / 2); symmetric Hann of 3: 0.5 - 0.5 cos(pi k).
  check_close(values<float>(run1("HannWindow", {i32({}, {4})}, f32_info({4}))), {0, 0.5f, 1, 0.5f});
  check_close(values<float>(run1("HannWindow", {i64({}, {3})}, f32_info({3}), {attr("periodic", 0)})), {0, 1, 0});
  // Hamming: 25/46 - 21/46 cos(2 pi k / N); N = 2 gives 4/46 and 1.
  check_close(values<float>(run1("HammingWindow", {i32({}, {2})}, f32_info({2}))), {4.0f / 46, 1});
  // Blackman: 0.42 - 0.5 cos(x) + 0.08 cos(2x); symmetric of 3 gives 0, 1, 0.
  const auto b = values<double>(
      run1("BlackmanWindow", {i32({}, {3})}, info(data_type::F64, {3}), {attr("periodic", 0), attr("output_datatype", 11)}));
  CHECK(std::fabs(b[0]) < 1e-15);
  CHECK(b[1] == doctest::Approx(1.0));
  CHECK(std::fabs(b[2]) < 1e-15);
  // An integer output truncates, as Cast does.
  CHECK(values<std::int64_t>(run1("HannWindow", {i32({}, {4})}, info(data_type::S64, {4}), {attr("output_datatype", 7)})) ==
        std::vector<std::int64_t>{0, 0, 1, 0});
  // A symmetric window of one point divides by zero, as ONNX's function body does.
  CHECK(std::isnan(values<float>(run1("HannWindow", {i32({}, {1})}, f32_info({1}), {attr("periodic", 0)}))[0]));
  CHECK_THROWS_AS(run1("HannWindow", {i32({}, {0})}, f32_info({0})), ipu::error);
  CHECK_THROWS_AS(run1("HannWindow", {i32({}, {4})}, f32_info({5})), ipu::error);
  CHECK_THROWS_AS(run1("HannWindow", {i32({}, {4})}, f32_info({4}), {attr("output_datatype", 9)}), ipu::error);
  CHECK_THROWS_AS(run1("HannWindow", {f32({}, {4})}, f32_info({4})), ipu::error);
}

TEST_CASE("signal: MelWeightMatrix, ONNX's example and bands past the Nyquist frequency") {
  // 8 bands over [0, 4096] Hz of a 16-point DFT at 8192 Hz: the edges fall in bins 0 0 0 1 1 2 3 4 5 6,
  // so each filter is a spike of 1 at its centre bin.
  std::vector<float> want(9 * 8, 0.0f);
  for (auto [row, col] : {std::pair{0, 0}, {0, 1}, {1, 2}, {1, 3}, {2, 4}, {3, 5}, {4, 6}, {5, 7}}) want[row * 8 + col] = 1;
  const auto got = run1("MelWeightMatrix", {i32({}, {8}), i32({}, {16}), i32({}, {8192}), f32({}, {0}), f32({}, {4096})},
                        f32_info({9, 8}));
  CHECK(values<float>(got) == want);
  // Ramps: one band over [0, 12] Hz of a 16-point DFT at 32 Hz has edges in bins 0, 2 and 4
  // (floor(17 f / 32) of 0, 3.98 and 7.98 Hz): up through 0.5 to 1 in bin 2, then down.
  CHECK(values<float>(run1("MelWeightMatrix", {i64({}, {1}), i64({}, {16}), i64({}, {32}), f32({}, {0}), f32({}, {12})},
                           f32_info({9, 1}))) == std::vector<float>{0, 0.5f, 1, 0.5f, 0, 0, 0, 0, 0});
  CHECK_THROWS_AS(run1("MelWeightMatrix", {i32({}, {8}), i32({}, {16}), i32({}, {8192}), f32({}, {0}), f32({}, {8192})},
                       f32_info({9, 8})),
                  ipu::error);  // edges past the 9 bins
  CHECK_THROWS_AS(run1("MelWeightMatrix", {i32({}, {8}), i32({}, {16}), i32({}, {8192}), f32({}, {100}), f32({}, {50})},
                       f32_info({9, 8})),
                  ipu::error);
  CHECK_THROWS_AS(run1("MelWeightMatrix", {i32({}, {0}), i32({}, {16}), i32({}, {8192}), f32({}, {0}), f32({}, {4096})},
                       f32_info({9, 0})),
                  ipu::error);
}

TEST_CASE("signal: shape rules read constant lengths and leave run-time ones to the declared shapes") {
  ipu::op_node op;
  op.type = "DFT";
  const ipu::tensor_info x{data_type::F32, {2, 6, 3, 1}}, len{data_type::S64, {}};
  const std::int64_t eight = 8;
  const auto eight_bytes = ipu::byte_buffer::from_values(std::span(&eight, 1));
  op.attributes = {attr("onesided", 1)};
  const ipu::infer_input with_length[] = {{&x, nullptr}, {&len, &eight_bytes}};
  CHECK(ipu::infer_outputs(op, with_length, 1)[0] == tensor_info{data_type::F32, {2, 5, 3, 2}});
  const ipu::infer_input unknown_length[] = {{&x, nullptr}, {&len, nullptr}};
  CHECK_THROWS_AS(ipu::infer_outputs(op, unknown_length, 1), ipu::error);
  op.type = "HammingWindow";
  op.attributes = {attr("output_datatype", 10)};
  const ipu::infer_input size[] = {{&len, &eight_bytes}};
  CHECK(ipu::infer_outputs(op, size, 1)[0] == tensor_info{data_type::F16, {8}});
  op.type = "STFT";
  op.attributes = {};
  const ipu::tensor_info signal{data_type::F32, {1, 128, 1}}, window{data_type::F32, {16}};
  const ipu::infer_input stft[] = {{&signal, nullptr}, {&len, &eight_bytes}, {&window, nullptr}};
  CHECK(ipu::infer_outputs(op, stft, 1)[0] == tensor_info{data_type::F32, {1, 15, 9, 2}});
  op.type = "MelWeightMatrix";
  const ipu::tensor_info hz{data_type::F32, {}};
  const ipu::infer_input mel[] = {{&len, &eight_bytes}, {&len, &eight_bytes}, {&len, nullptr}, {&hz, nullptr}, {&hz, nullptr}};
  CHECK(ipu::infer_outputs(op, mel, 1)[0] == tensor_info{data_type::F32, {5, 8}});
}

}  // namespace test_signal
