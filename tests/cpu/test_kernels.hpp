#pragma once
// Small kernels for the CPU device tests, so the plan and executor are tested independently of
// the library's kernel groups. Results are checked against hand-computed values.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "ipu/graph/graph.hpp"
#include "ipu/ops/kernel.hpp"
#include "ipu/ops/registry.hpp"

namespace test_kernels {

inline void relu(const ipu::kernel_context& c) {
  auto in = c.input(0).as<float>();
  auto out = c.outputs[0].as<float>();
  c.parallel_for(in.size(), [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) out[i] = in[i] > 0 ? in[i] : 0.0f;
  });
}
inline void neg(const ipu::kernel_context& c) {
  auto in = c.input(0).as<float>();
  auto out = c.outputs[0].as<float>();
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = -in[i];
}
// Add with scalar / same-shape broadcasting only: enough for the tests.
inline void add(const ipu::kernel_context& c) {
  auto a = c.input(0).as<float>();
  auto b = c.input(1).as<float>();
  auto out = c.outputs[0].as<float>();
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = a[a.size() == 1 ? 0 : i] + b[b.size() == 1 ? 0 : i];
}
inline void sum(const ipu::kernel_context& c) {  // variadic, same shapes
  auto out = c.outputs[0].as<float>();
  for (std::size_t i = 0; i < out.size(); ++i) {
    float s = 0;
    for (std::size_t k = 0; k < c.inputs.size(); ++k) s += c.input(k).as<float>()[i];
    out[i] = s;
  }
}
inline void copy(const ipu::kernel_context& c) {  // Reshape / Identity
  auto in = c.input(0).bytes();
  if (!in.empty()) std::memcpy(c.outputs[0].data(), in.data(), in.size());
}
// Sum of all elements with per-chunk partials: the rounding depends on the chunking only.
inline void reduce_sum(const ipu::kernel_context& c) {
  auto in = c.input(0).as<float>();
  std::vector<float> partial(in.size(), 0.0f);
  c.parallel_for(in.size(), [&](std::size_t b, std::size_t e) {
    float s = 0;
    for (std::size_t i = b; i < e; ++i) s += in[i];
    partial[b] = s;
  });
  float total = 0;
  for (float p : partial) total += p;
  c.outputs[0].as<float>()[0] = total;
}
inline void throws(const ipu::kernel_context&) { throw std::runtime_error("kernel exploded"); }
// Under StringNormalizer's name (a row that takes strings): each string with "!" appended, its
// characters kept in the runner's heap.
inline void shout(const ipu::kernel_context& c) {
  auto in = c.input(0).as<ipu::string_ref>();
  auto out = c.outputs[0].as<ipu::string_ref>();
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = c.keep_string(std::string(in[i].view()) + "!");
}

// "If": runs then_branch or else_branch (no inputs) and copies its single output.
inline void if_op(const ipu::kernel_context& c) {
  const bool cond = c.input(0).as<bool>()[0];
  const auto* a = c.op.find_attribute(cond ? "then_branch" : "else_branch");
  const auto& body = *std::get<ipu::subgraph>(a->value).body;
  auto outs = c.subgraphs->run(body, {});
  std::memcpy(c.outputs[0].data(), outs.at(0).data(), outs.at(0).bytes().size());
}

inline const ipu::op_registry& registry() {
  static const ipu::op_registry r = [] {
    ipu::op_registry reg;
    reg.add({"", "Relu", relu});
    reg.add({"", "Neg", neg});
    reg.add({"", "Add", add});
    reg.add({"", "Sum", sum});
    reg.add({"", "Reshape", copy});
    reg.add({"", "Identity", copy});
    reg.add({"", "Dropout", copy});
    reg.add({"", "ReduceSum", reduce_sum});
    reg.add({"", "Throw", throws});
    reg.add({"", "StringNormalizer", shout});
    reg.add({"", "If", if_op});
    return reg;
  }();
  return r;
}

inline ipu::tensor_info f32(std::initializer_list<std::int64_t> dims) { return {ipu::data_type::F32, ipu::shape(dims)}; }

/// Adds op `type` reading `inputs` and writing a new intermediate `out` of `info`.
inline ipu::tensor_id op(ipu::graph& g, const char* type, std::vector<ipu::tensor_id> inputs, const char* out,
                         ipu::tensor_info info, std::vector<ipu::attribute> attrs = {}) {
  const auto t = g.add_tensor(out, std::move(info));
  ipu::op_node n;
  n.type = type;
  n.name = out;
  n.inputs = std::move(inputs);
  n.outputs = {t};
  n.attributes = std::move(attrs);
  g.add_op(std::move(n));
  return t;
}

}  // namespace test_kernels
