// 8-bit float compilation (--precision fp8_weight / fp8): the scale rule, a Gemm whose rounded
// weights and activations are worked out by hand, a small conv net against its F32 run, and the
// PopEF file it makes.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/compile/precision.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/popef/compiled_model.hpp"
#include "../runtime/small_model.hpp"
#include "../popef/popef_test_util.hpp"

namespace test_precision {

using namespace ipu;
namespace fs = std::filesystem;

namespace {

constant_tensor f32(const std::vector<float>& v, shape s) {
  return {{data_type::F32, std::move(s)}, byte_buffer::from_values(std::span<const float>(v))};
}

std::vector<float> run(const graph& g, const std::vector<float>& x, const shape& s) {
  cpu::device dev(g, {.threads = 2});
  const auto t = host_tensor::from<float>(s, std::span<const float>(x));
  const auto out = dev.run(cpu::named_tensors{{g.tensor(g.inputs()[0]).name, t.view()}});
  const auto v = out.at(0).as<float>();
  return {v.begin(), v.end()};
}

/// y = x W for x: F32[1, 2] and W = [[1, 0.3], [-0.55, 0.1]].
graph tiny_gemm() {
  builder b("tiny");
  const auto x = b.add_input_tensor({data_type::F32, {1, 2}}, "x");
  const auto w = b.add_initialized_input(f32({1.0f, 0.3f, -0.55f, 0.1f}, {2, 2}), "W");
  b.add_output(b.gemm(x, w, no_tensor, {}, "y"));
  return std::move(b).build();
}

graph to_float8(const graph& g, popef::float8_mode m) {
  return popef::convert_float8(popef::convert_precision(g, data_type::F16), m);
}

/// Conv(3 -> 32, 3x3) Relu Conv(32 -> 64, 3x3, stride 2) Relu GlobalAveragePool Flatten
/// Gemm(64 -> 10): weights from a fixed sequence in about [-0.5, 0.5], scaled as He's rule would.
graph small_conv_net() {
  std::uint32_t state = 12345;
  auto values = [&](std::size_t n, float range) {
    std::vector<float> v(n);
    for (auto& e : v) {
      state = state * 1664525u + 1013904223u;
      e = range * (static_cast<float>(state >> 8) / 16777216.0f - 0.5f);
    }
    return v;
  };
  builder b("convnet");
  const auto x = b.add_input_tensor({data_type::F32, {2, 3, 12, 12}}, "image");
  const auto w1 = b.add_initialized_input(f32(values(32 * 3 * 9, 1.6f), {32, 3, 3, 3}), "w1");
  const auto b1 = b.add_initialized_input(f32(values(32, 0.2f), {32}), "b1");
  const auto w2 = b.add_initialized_input(f32(values(64 * 32 * 9, 0.35f), {64, 32, 3, 3}), "w2");
  const auto b2 = b.add_initialized_input(f32(values(64, 0.2f), {64}), "b2");
  const auto w3 = b.add_initialized_input(f32(values(64 * 10, 0.7f), {64, 10}), "w3");
  const auto b3 = b.add_initialized_input(f32(values(10, 0.2f), {10}), "b3");
  auto h = b.relu(b.conv(x, w1, b1, {.pads = {1, 1, 1, 1}}));
  h = b.relu(b.conv(h, w2, b2, {.strides = {2, 2}, .pads = {1, 1, 1, 1}}));
  h = b.flatten(b.global_average_pool(h));
  b.add_output(b.gemm(h, w3, b3, {}, "logits"));
  return std::move(b).build();
}

std::vector<float> image(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(0.37f * static_cast<float>(i)) * 1.5f;
  return v;
}

}  // namespace

TEST_CASE("the weight scale puts the largest magnitude in F8143's top binade, at most 240") {
  using popef::float8_scale_exponent;
  CHECK(float8_scale_exponent(1.0f) == 7);     // 128 <= 240 < 256
  CHECK(float8_scale_exponent(240.0f) == 0);
  CHECK(float8_scale_exponent(241.0f) == -1);  // 120.5
  CHECK(float8_scale_exponent(0.3f) == 9);     // 153.6
  CHECK(float8_scale_exponent(65504.0f) == -9);
  CHECK(float8_scale_exponent(1e-9f) == 24);   // clamped: 2^-24 is the smallest F16 scale
  CHECK(float8_scale_exponent(0.0f) == 0);
  CHECK(float8_scale_exponent(INFINITY) == 0);
}

TEST_CASE("fp8_weight stores a Gemm's weight as F8143 with its scale and rounds it as worked out by hand") {
  const auto g = to_float8(tiny_gemm(), popef::float8_mode::weights);
  const auto w = g.tensor(g.tensor_id_of("W"));
  REQUIRE(w.info.type == data_type::F8143);
  CHECK(w.kind == tensor_kind::variable);
  REQUIRE(w.data.size() == 4);  // one byte an element
  // max |W| = 1 so k = 7: W * 128 = [128, 38.4, -70.4, 12.8] (F16 first: 0.300049, -0.550049,
  // 0.099976) rounds in F8143 to [128, 40, -72, 13] (steps of 16, 4, 8 and 1 in those binades).
  const std::vector<float> stored{128, 40, -72, 13};
  for (std::size_t i = 0; i < 4; ++i) CHECK(float8_143::to_float(w.data.load<std::uint8_t>(i)) == stored[i]);
  CHECK(w.data.load<std::uint8_t>(0) == 0x78);  // 2^7: exponent code 7 + 8 = 15, mantissa 0
  // The device sees W = [[1, 0.3125], [-0.5625, 0.1015625]]: for x = [2, 4],
  // y = [2 - 2.25, 0.625 + 0.40625], exact in F16.
  const auto y = run(g, {2.0f, 4.0f}, {1, 2});
  REQUIRE(y.size() == 2);
  CHECK(y[0] == -0.25f);
  CHECK(y[1] == 1.03125f);
  // The model is fed and read in F32 as before.
  CHECK(g.tensor(g.inputs()[0]).info.type == data_type::F32);
  CHECK(g.tensor(g.outputs()[0]).info.type == data_type::F32);
}

TEST_CASE("fp8 also rounds the activations entering the product through F8143, saturating at 240") {
  const auto g = to_float8(tiny_gemm(), popef::float8_mode::weights_and_activations);
  // x = [2.6, 300] becomes [2.5, 240] (2.6 is in the binade of step 0.25; 300 is clipped), so
  // y = [2.5 - 135, 0.78125 + 24.375].
  const auto y = run(g, {2.6f, 300.0f}, {1, 2});
  REQUIRE(y.size() == 2);
  CHECK(y[0] == -132.5f);
  CHECK(y[1] == 25.15625f);
  // fp8_weight leaves the activation alone: 2.6 (F16 2.5996) and 300.
  const auto yw = run(to_float8(tiny_gemm(), popef::float8_mode::weights), {2.6f, 300.0f}, {1, 2});
  CHECK(yw[0] == doctest::Approx(2.6 - 300 * 0.5625).epsilon(1e-3));
}

TEST_CASE("a weight that also feeds another op stays F16, and so does a bias") {
  builder b("shared");
  const auto x = b.add_input_tensor({data_type::F32, {1, 2}}, "x");
  const auto w = b.add_initialized_input(f32({1.0f, 0.3f, -0.55f, 0.1f}, {2, 2}), "W");
  const auto c = b.add_initialized_input(f32({0.5f, 0.25f}, {2}), "C");
  b.add_output(b.gemm(x, w, c));
  b.add_output(b.add(w, w));
  const auto g = to_float8(std::move(b).build(), popef::float8_mode::weights_and_activations);
  CHECK(g.tensor(g.tensor_id_of("W")).info.type == data_type::F16);
  CHECK(g.tensor(g.tensor_id_of("C")).info.type == data_type::F16);
}

TEST_CASE("a model without Conv, MatMul or Gemm compiles under fp8 unchanged from fp16") {
  const auto g = runtime_test::small_model();
  const auto h = popef::convert_precision(g, data_type::F16);
  const auto f = popef::convert_float8(h, popef::float8_mode::weights_and_activations);
  REQUIRE(f.num_tensors() == h.num_tensors());
  REQUIRE(f.num_ops() == h.num_ops());
  for (tensor_id t = 0; t < f.num_tensors(); ++t) CHECK(f.tensor(t).info == h.tensor(t).info);
  popef::compile_options co;
  co.float8 = popef::float8_mode::weights_and_activations;
  const auto m = popef::compile(g, options().precision(data_type::F16), device_from_name("mk2", 1), co);
  CHECK(m.plan.precision == data_type::F16);
}

TEST_CASE("fp8 without the options' precision F16 is refused, saying how to fix it") {
  popef::compile_options co;
  co.float8 = popef::float8_mode::weights;
  const auto g = tiny_gemm();
  for (const auto& o : {options(), options().precision(data_type::F32)}) {
    try {
      (void)popef::compile(g, o, device_from_name("mk2", 1), co);
      FAIL("compiled");
    } catch (const error& e) {
      CHECK(std::string(e.what()).find("needs the options' precision F16") != std::string::npos);
      CHECK(std::string(e.what()).find("precision(data_type::F16)") != std::string::npos);
    }
  }
}

TEST_CASE("an fp8 conv net stays within a few percent of F32, and its PopEF weights take half fp16's bytes") {
  test_popef::scratch_dir dir("fp8");
  const auto g = small_conv_net();
  const auto x = image(2 * 3 * 12 * 12);
  const auto want = run(g, x, {2, 3, 12, 12});
  auto compiled_run = [&](popef::float8_mode m, const fs::path& file) {
    popef::compile_options co;
    co.float8 = m;
    (void)popef::compile_and_export(g, options().precision(data_type::F16), device_from_name("mk2", 1), file, co);
    return run(popef::load(file).model(), x, {2, 3, 12, 12});
  };
  const auto fp16 = compiled_run(popef::float8_mode::none, dir / "h.popef");
  const auto weights = compiled_run(popef::float8_mode::weights, dir / "w.popef");
  const auto both = compiled_run(popef::float8_mode::weights_and_activations, dir / "a.popef");
  const auto err16 = runtime_test::relative_difference(fp16, want);
  const auto err_w = runtime_test::relative_difference(weights, want);
  const auto err_a = runtime_test::relative_difference(both, want);
  MESSAGE("max error over max |F32 output|: fp16 ", err16, ", fp8_weight ", err_w, ", fp8 ", err_a);
  // F8143 keeps 4 significant bits (relative rounding error up to 1/16); through two convolutions
  // and a Gemm the errors largely average out over the sums.
  CHECK(err_w < 0.08);
  CHECK(err_a < 0.12);
  CHECK(err_w > err16);  // and the weights really were rounded
  CHECK(err_a != err_w);

  std::uint64_t bytes16 = 0, bytes8 = 0;
  const popef::reader r16(dir / "h.popef"), r8(dir / "w.popef");
  for (const auto& t : r16.tensors()) bytes16 += t.info.num_bytes();
  std::size_t f8 = 0;
  for (const auto& t : r8.tensors()) {
    bytes8 += t.info.num_bytes();
    f8 += t.info.type == data_type::F8143;
  }
  CHECK(f8 == 3);  // w1, w2, w3; the biases stay F16
  CHECK(static_cast<double>(bytes8) < 0.55 * static_cast<double>(bytes16));
  const auto size16 = fs::file_size(dir / "h.popef"), size8 = fs::file_size(dir / "w.popef");
  MESSAGE("PopEF file: fp16 ", size16, " bytes, fp8_weight ", size8, " bytes");
  CHECK(static_cast<double>(size8) < 0.75 * static_cast<double>(size16));
}

}  // namespace test_precision
