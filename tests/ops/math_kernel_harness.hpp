#pragma once
// Runs one numeric kernel (register_math_kernels) on host tensors for the tests of
// ipu/ops/kernels/{elementwise,activation,gemm,conv,pool,norm,softmax,...}.hpp. Kernels see a
// parallel_for that splits work into uneven chunks run out of order, so chunk-boundary bugs show.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "ipu/ops/kernel.hpp"
#include "ipu/ops/kernels/math.hpp"
#include "ipu/ops/registry.hpp"
#include "ipu/tensor.hpp"

namespace mk {

using ipu::attribute;
using ipu::data_type;
using ipu::half;
using ipu::host_tensor;
using ipu::shape;
using ipu::tensor_info;
using ints = std::vector<std::int64_t>;

/// register_math_kernels' registry. Defined here, not in test_math.cpp: the ThreadSanitizer build
/// compiles only the files with concurrent suites (test_conv.cpp), and the sanitizer builds compile
/// the area as one translation unit anyway.
inline const ipu::op_registry& registry() {
  static const ipu::op_registry r = [] {
    ipu::op_registry reg;
    ipu::register_math_kernels(reg);
    return reg;
  }();
  return r;
}

/// Splits [0, n) into three uneven chunks, run in reverse order.
inline void chunked_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t a = n / 3, b = n - n / 4;
  if (b < n) body(b, n);
  if (a < b) body(a, b);
  if (0 < a) body(0, a);
}

/// An input: a tensor, or std::nullopt for an omitted optional input.
using input = std::optional<host_tensor>;

/// Runs op `type` of `domain` and returns its outputs, allocated with `outputs` (the IR's output
/// infos).
inline std::vector<host_tensor> run_in(const std::string& domain, const std::string& type, std::vector<input> inputs,
                                       std::vector<tensor_info> outputs, std::vector<attribute> attrs = {},
                                       ipu::parallel_for_fn pf = chunked_for) {
  const auto* entry = registry().find(domain, type);
  REQUIRE_MESSAGE(entry, "no kernel for " << domain << "::" << type);
  ipu::op_node op;
  op.domain = domain;
  op.type = type;
  op.opset = domain.empty() ? 17 : 1;
  op.name = "test";
  op.attributes = std::move(attrs);
  std::vector<ipu::const_tensor_view> in;
  for (const auto& i : inputs) in.push_back(i ? i->view() : ipu::const_tensor_view{});
  std::vector<host_tensor> out;
  for (auto& info : outputs) out.emplace_back(std::move(info));
  std::vector<ipu::tensor_view> out_views;
  for (auto& o : out) out_views.push_back(o.view());
  ipu::kernel_context ctx{op, in, out_views, std::move(pf), nullptr};
  entry->kernel(ctx);
  return out;
}

/// Runs op `type` of the default domain.
inline std::vector<host_tensor> run(const std::string& type, std::vector<input> inputs, std::vector<tensor_info> outputs,
                                    std::vector<attribute> attrs = {}, ipu::parallel_for_fn pf = chunked_for) {
  return run_in("", type, std::move(inputs), std::move(outputs), std::move(attrs), std::move(pf));
}

/// One-output convenience.
inline host_tensor run1(const std::string& type, std::vector<input> inputs, tensor_info output,
                        std::vector<attribute> attrs = {}, ipu::parallel_for_fn pf = chunked_for) {
  return std::move(run(type, std::move(inputs), {std::move(output)}, std::move(attrs), std::move(pf))[0]);
}

template <class T>
host_tensor make(shape s, std::vector<T> v) {
  return host_tensor::from<T>(std::move(s), std::span<const T>(v));
}
inline host_tensor f32(shape s, std::vector<float> v) { return make<float>(std::move(s), std::move(v)); }
inline host_tensor f64(shape s, std::vector<double> v) { return make<double>(std::move(s), std::move(v)); }
inline host_tensor f16(shape s, const std::vector<float>& v) {
  std::vector<half> h;
  for (float f : v) h.push_back(half(f));
  return make<half>(std::move(s), std::move(h));
}
inline host_tensor i64(shape s, std::vector<std::int64_t> v) { return make<std::int64_t>(std::move(s), std::move(v)); }
inline host_tensor i32(shape s, std::vector<std::int32_t> v) { return make<std::int32_t>(std::move(s), std::move(v)); }
inline host_tensor boolean(shape s, std::vector<int> v) {
  host_tensor t({data_type::BOOL, std::move(s)});
  auto o = t.as<bool>();
  for (std::size_t i = 0; i < v.size(); ++i) o[i] = v[i] != 0;
  return t;
}

/// Uniform random floats in [lo, hi), reproducible from `seed`.
inline std::vector<float> random_floats(std::size_t n, unsigned seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(gen);
  return v;
}

template <class T>
std::vector<T> values(const host_tensor& t) {
  auto s = t.as<T>();
  return {s.begin(), s.end()};
}
inline std::vector<float> floats(const host_tensor& t) {
  std::vector<float> r;
  if (t.info().type == data_type::F16)
    for (half h : t.as<half>()) r.push_back(static_cast<float>(h));
  else if (t.info().type == data_type::F64)
    for (double d : t.as<double>()) r.push_back(static_cast<float>(d));
  else
    r = values<float>(t);
  return r;
}
inline std::vector<int> bools(const host_tensor& t) {
  std::vector<int> r;
  for (bool b : t.as<bool>()) r.push_back(b ? 1 : 0);
  return r;
}

/// Element-wise |a - b| <= atol + rtol * |b|, with the first mismatch reported.
inline void check_close(const std::vector<float>& got, const std::vector<float>& want, float rtol = 1e-5f,
                        float atol = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      CHECK_MESSAGE(std::isnan(got[i]), "element " << i);
      continue;
    }
    const bool ok = std::isinf(want[i]) ? got[i] == want[i] : std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]);
    if (!ok) {
      CHECK_MESSAGE(ok, "element " << i << ": got " << got[i] << ", want " << want[i]);
      return;
    }
  }
}

}  // namespace mk
