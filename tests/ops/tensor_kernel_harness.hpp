#pragma once
// Runs one tensor-group kernel on host tensors, for the tests of ipu/ops/kernels/*.hpp owned by
// register_tensor_kernels. Kernels see a parallel_for that really splits work into uneven chunks,
// so chunk-boundary bugs show up.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ipu/ops/kernel.hpp"
#include "ipu/ops/registry.hpp"
#include "ipu/tensor.hpp"

namespace tk {

using ipu::attribute;
using ipu::data_type;
using ipu::half;
using ipu::host_tensor;
using ipu::shape;
using ipu::tensor_info;

/// A registry holding register_tensor_kernels' kernels. Defined once, in test_tensor_support.cpp,
/// so that only one translation unit instantiates every kernel.
const ipu::op_registry& registry();

/// Splits [0, n) into three uneven chunks, run in reverse order.
inline void chunked_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& body) {
  const std::size_t a = n / 3, b = n - n / 4;
  if (b < n) body(b, n);
  if (a < b) body(a, b);
  if (0 < a) body(0, a);
}

/// An input: a tensor, or std::nullopt for an omitted optional input.
using input = std::optional<host_tensor>;

/// Runs op `type` of `domain` ("" is ai.onnx) and returns its outputs, allocated with `outputs`
/// (the IR's output infos).
inline std::vector<host_tensor> run_in(const std::string& domain, const std::string& type, std::vector<input> inputs,
                                       std::vector<tensor_info> outputs, std::vector<attribute> attrs = {},
                                       ipu::subgraph_runner* subgraphs = nullptr) {
  const auto* entry = registry().find(domain, type);
  REQUIRE_MESSAGE(entry, "no kernel for " << (domain.empty() ? "" : domain + " ") << type);
  ipu::op_node op;
  op.type = type;
  op.domain = domain;
  op.name = "test";
  op.attributes = std::move(attrs);
  std::vector<ipu::const_tensor_view> in;
  for (const auto& i : inputs) in.push_back(i ? i->view() : ipu::const_tensor_view{});
  std::vector<host_tensor> out;
  for (auto& info : outputs) out.emplace_back(std::move(info));
  std::vector<ipu::tensor_view> out_views;
  for (auto& o : out) out_views.push_back(o.view());
  ipu::kernel_context ctx{op, in, out_views, chunked_for, subgraphs};
  ipu::string_heap strings;  // the run's strings: copied into each STRING output before it ends
  ctx.strings = &strings;
  entry->kernel(ctx);
  for (auto& o : out)
    if (o.info().type == data_type::STRING) o = host_tensor::copy_of(o);
  return out;
}

/// Runs op `type` of the default domain.
inline std::vector<host_tensor> run(const std::string& type, std::vector<input> inputs, std::vector<tensor_info> outputs,
                                    std::vector<attribute> attrs = {}, ipu::subgraph_runner* subgraphs = nullptr) {
  return run_in("", type, std::move(inputs), std::move(outputs), std::move(attrs), subgraphs);
}

/// One-output convenience.
inline host_tensor run1(const std::string& type, std::vector<input> inputs, tensor_info output,
                        std::vector<attribute> attrs = {}) {
  return std::move(run(type, std::move(inputs), {std::move(output)}, std::move(attrs))[0]);
}

template <class T>
host_tensor make(shape s, std::vector<T> v) {
  return host_tensor::from<T>(std::move(s), std::span<const T>(v));
}
inline host_tensor f32(shape s, std::vector<float> v) { return make<float>(std::move(s), std::move(v)); }
inline host_tensor i64(shape s, std::vector<std::int64_t> v) { return make<std::int64_t>(std::move(s), std::move(v)); }
inline host_tensor i32(shape s, std::vector<std::int32_t> v) { return make<std::int32_t>(std::move(s), std::move(v)); }
inline host_tensor boolean(shape s, std::vector<std::uint8_t> v) {
  host_tensor t({data_type::BOOL, std::move(s)});
  auto o = t.as<bool>();
  REQUIRE(o.size() == v.size());
  for (std::size_t i = 0; i < o.size(); ++i) o[i] = v[i] != 0;
  return t;
}
/// `n` values 0, 1, 2, ... as floats.
inline host_tensor iota_f32(shape s) {
  std::vector<float> v(static_cast<std::size_t>(s.num_elements()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(std::move(s), std::move(v));
}

template <class T>
std::vector<T> values(const host_tensor& t) {
  auto s = t.as<T>();
  return {s.begin(), s.end()};
}

inline tensor_info info(data_type t, shape s) { return {t, std::move(s)}; }
inline tensor_info f32_info(shape s) { return {data_type::F32, std::move(s)}; }

inline attribute attr(std::string name, std::int64_t v) { return {std::move(name), v}; }
inline attribute attr(std::string name, int v) { return {std::move(name), std::int64_t{v}}; }
inline attribute attr(std::string name, float v) { return {std::move(name), v}; }
inline attribute attr(std::string name, const char* v) { return {std::move(name), std::string(v)}; }
inline attribute attr(std::string name, std::vector<std::int64_t> v) { return {std::move(name), std::move(v)}; }
inline attribute attr(std::string name, std::vector<float> v) { return {std::move(name), std::move(v)}; }
inline attribute attr(std::string name, std::vector<std::string> v) { return {std::move(name), std::move(v)}; }

/// Element-wise closeness with a relative and absolute tolerance.
inline void check_close(const std::vector<float>& got, const std::vector<float>& want, float rtol = 1e-5f,
                        float atol = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]),
                  "element " << i << ": got " << got[i] << ", want " << want[i]);
}

}  // namespace tk
