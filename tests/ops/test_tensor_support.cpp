#include "ipu/ops/kernels/tensor_support.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "ipu/ops/kernels/tensor.hpp"
#include "tensor_kernel_harness.hpp"

const ipu::op_registry& tk::registry() {
  static const ipu::op_registry r = [] {
    ipu::op_registry reg;
    ipu::register_tensor_kernels(reg);
    return reg;
  }();
  return r;
}

namespace test_tensor_support {

using namespace ipu::detail::tensor_ops;

TEST_CASE("tensor support: register_tensor_kernels registers each op of the group once") {
  const auto& r = tk::registry();
  std::set<std::string> types;
  for (const auto& e : r.entries()) {
    const bool has_kernel = e.kernel != nullptr;
    CHECK(has_kernel);
    CHECK(types.insert(std::string(e.type)).second);
  }
  for (const char* op : {"Reshape", "Transpose", "Slice", "Pad", "Gather", "ScatterND", "ReduceLogSumExp", "ArgMin",
                         "TopK", "Einsum", "Resize", "LSTM", "SoftmaxCrossEntropyLoss", "Loop", "Scan", "Cast"})
    CHECK_MESSAGE(r.find("ai.onnx", op) != nullptr, op);
  // The math group owns element-wise arithmetic: none of it is registered here.
  CHECK(r.find("", "Add") == nullptr);
}

TEST_CASE("tensor support: convert follows Cast's rules") {
  CHECK(convert<std::int32_t>(-2.7f) == -2);
  CHECK(convert<std::uint16_t>(70000.0) == 65535);
  CHECK(convert<std::int64_t>(std::numeric_limits<double>::infinity()) == std::numeric_limits<std::int64_t>::max());
  CHECK(convert<std::int8_t>(std::nanf("")) == 0);
  CHECK(convert<bool>(-0.0f) == false);
  CHECK(convert<std::uint8_t>(std::int32_t{-1}) == 255);
  CHECK(convert<float>(ipu::half(0.5f)) == 0.5f);
  CHECK(convert<std::int32_t>(ipu::half(-3.75f)) == -3);
  CHECK(static_cast<float>(convert<ipu::half>(std::int64_t{2049})) == 2048.0f);  // ties to even
  CHECK(static_cast<float>(convert<ipu::half>(std::int64_t{2051})) == 2052.0f);
  CHECK(convert<double>(true) == 1.0);
}

TEST_CASE("tensor support: gather_axes copies runs, walks tables and fills outside entries") {
  // Input 2x3 of int16; output rows reversed, columns (2, outside, 0), fill 9.
  const std::vector<std::int16_t> in{0, 1, 2, 3, 4, 5};
  axis_tables t;
  t.dims = {2, 3};
  t.offsets = {{3, 0}, {2, outside, 0}};
  const std::int16_t fill = 9;
  std::vector<std::int16_t> out(6);
  gather_axes(t, reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out.data()), 2,
              reinterpret_cast<const std::byte*>(&fill));
  CHECK(out == std::vector<std::int16_t>{5, 9, 3, 2, 9, 0});
  // An outside row fills the whole row; contiguous rows are copied as runs.
  t.offsets = {{outside, 3}, {0, 1, 2}};
  gather_axes(t, reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(out.data()), 2,
              reinterpret_cast<const std::byte*>(&fill));
  CHECK(out == std::vector<std::int16_t>{9, 9, 9, 3, 4, 5});
  // A scalar output copies one element.
  axis_tables scalar;
  std::int16_t one = 0;
  gather_axes(scalar, reinterpret_cast<const std::byte*>(in.data() + 4), reinterpret_cast<std::byte*>(&one), 2);
  CHECK(one == 4);
}

TEST_CASE("tensor support: gather_axes merges axes that walk the input as one, against a direct loop") {
  // Output element (o_0, ..., o_3) reads sum_k offsets[k][o_k] (or the fill): checked element by
  // element for tables the mover merges (linear with matching steps, size-1 axes, broadcasts of
  // all element sizes) and ones it must not (reversed, strided, outside entries, axis 0).
  const std::vector<std::vector<std::int64_t>> lin4{{0, 1, 2, 3}, {0, 4, 8, 12}, {0, 0, 0, 0}, {12, 8, 4, 0},
                                                    {1, 3, 5, 7}, {0, outside, 2, 3}, {16, 20, 24, 28}};
  const std::vector<std::vector<std::int64_t>> lin2{{0, 1}, {0, 2}, {0, 0}, {1, 0}, {0, 4}, {0, outside}};
  const std::vector<std::vector<std::int64_t>> lin1{{0}, {3}, {outside}};
  std::vector<std::uint32_t> in(64);
  for (std::size_t i = 0; i < in.size(); ++i) in[i] = static_cast<std::uint32_t>(100 + i);
  const std::uint32_t fill = 7;
  std::size_t cases = 0;
  for (const auto& a : lin2)
    for (const auto& b : lin1)
      for (const auto& c : lin4)
        for (const auto& d : lin2) {
          axis_tables t;
          t.dims = {2, 1, 4, 2};
          t.offsets = {a, b, c, d};
          std::vector<std::uint32_t> want, got(16, 0);
          for (std::size_t i = 0; i < 2; ++i)
            for (std::size_t k = 0; k < 4; ++k)
              for (std::size_t l = 0; l < 2; ++l) {
                const bool out = a[i] == outside || b[0] == outside || c[k] == outside || d[l] == outside;
                want.push_back(out ? fill : in[static_cast<std::size_t>(a[i] + b[0] + c[k] + d[l])]);
              }
          gather_axes(t, reinterpret_cast<const std::byte*>(in.data()), reinterpret_cast<std::byte*>(got.data()), 4,
                      reinterpret_cast<const std::byte*>(&fill));
          CHECK(got == want);
          ++cases;
        }
  CHECK(cases == 6 * 3 * 7 * 6);
  // A broadcast innermost run fills with one element of every size (1, 2, 8 and 3 bytes).
  const std::vector<std::uint8_t> bytes{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  for (const std::size_t es : {std::size_t{1}, std::size_t{2}, std::size_t{8}, std::size_t{3}}) {
    axis_tables t;
    t.dims = {2, 3, 5};
    t.offsets = {{1, 0}, {0, 0, 0}, {0, 0, 0, 0, 0}};
    std::vector<std::uint8_t> got(30 * es, 0), want;
    for (std::size_t i = 0; i < 2; ++i)
      for (std::size_t r = 0; r < 15; ++r)
        for (std::size_t e = 0; e < es; ++e) want.push_back(bytes[(1 - i) * es + e]);
    gather_axes(t, reinterpret_cast<const std::byte*>(bytes.data()), reinterpret_cast<std::byte*>(got.data()), es);
    CAPTURE(es);
    CHECK(got == want);
  }
}

}  // namespace test_tensor_support
