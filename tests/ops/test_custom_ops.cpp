// Custom ops registered at run time (ipu/ops/custom_ops.hpp): from C++ and from a shared library,
// built with the builder, typed by their shape rules, costed by their cost rules and run on the
// CPU device, against hand-computed results; registrations the library must refuse; and seed
// 4.9.3's attributes of every PopART kind reaching the kernel.
#include "ipu/ops/custom_ops.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/ops/op_cost.hpp"

namespace test_custom_ops {

using ipu::attribute;
using ipu::data_type;
using ipu::host_tensor;
using ipu::tensor_info;

namespace {

// custom.ops::LeakyRelu6: y = min(x >= 0 ? x : alpha * x, 6), alpha a FLOAT attribute (0.01).
std::vector<tensor_info> leaky_shape(const ipu::infer_context& c) {
  if (c.in_type(0) != data_type::F32) throw c.fail("LeakyRelu6 takes F32, not " + std::string(to_string(c.in_type(0))));
  return {c.input(0)};
}
void leaky_kernel(const ipu::kernel_context& c) {
  const auto x = c.input(0).as<float>();
  const auto y = c.outputs[0].as<float>();
  const float alpha = c.attr_float("alpha", 0.01f);
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::min(x[i] >= 0 ? x[i] : alpha * x[i], 6.0f);
}
ipu::op_cost leaky_cost(const ipu::op_cost_context&) {
  ipu::op_cost c;
  c.compute_cycles = 1234;
  c.tiles = 1;
  return c;
}

void register_leaky_relu6() {
  static std::once_flag once;
  std::call_once(once, [] {
    ipu::ops::register_custom_op(
        {.domain = "custom.ops", .type = "LeakyRelu6", .version = 1, .shape = leaky_shape, .kernel = leaky_kernel, .cost = leaky_cost});
  });
}

std::vector<float> run_one(ipu::graph g, const std::vector<float>& x) {
  ipu::cpu::device dev(std::move(g), {.threads = 1});
  const auto out = dev.run({host_tensor::from<float>({static_cast<std::int64_t>(x.size())}, std::span<const float>(x))});
  return {out[0].as<float>().begin(), out[0].as<float>().end()};
}

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const ipu::error& e) {
    return e.what();
  }
  return "no error";
}

void noop_kernel(const ipu::kernel_context&) {}

}  // namespace

TEST_CASE("a C++-registered custom op builds by its shape rule, runs on the CPU device and costs by its rule") {
  register_leaky_relu6();
  CHECK(ipu::ops::custom_op_version("custom.ops", "LeakyRelu6") == 1);
  ipu::builder b("leaky");
  const auto x = b.add_input_tensor({data_type::F32, {5}}, "x");
  const auto y = b.op("LeakyRelu6", {x}, {{"alpha", 0.5f}}, {.opset = 1, .domain = "custom.ops"}).front();
  b.add_output(y);
  const auto g = std::move(b).build();
  CHECK(g.tensor(y).info == tensor_info{data_type::F32, {5}});
  CHECK(run_one(g, {-4, -1, 0, 3, 8}) == std::vector<float>{-2, -0.5f, 0, 3, 6});

  const auto mk2 = ipu::ipu_model<ipu::mk2, 1>::description();
  CHECK(ipu::estimate_op_cost(g, 0, mk2).cycles() == 1234);

  ipu::builder bad("bad");
  const auto i = bad.add_input_tensor({data_type::S32, {2}}, "i");
  CHECK(error_of([&] { (void)bad.op("LeakyRelu6", {i}, {}, {.opset = 1, .domain = "custom.ops"}); })
            .find("LeakyRelu6 takes F32, not S32") != std::string::npos);
}

TEST_CASE("registration refuses taken names and incomplete ops, all or none") {
  register_leaky_relu6();
  const ipu::ops::custom_op ok{.domain = "custom.ops", .type = "Fresh", .shape = leaky_shape, .kernel = noop_kernel};
  auto with = [&](auto edit) {
    auto op = ok;
    edit(op);
    return error_of([&] { ipu::ops::register_custom_op(op); });
  };
  CHECK(with([](auto& op) { op.type = "LeakyRelu6"; }).find("custom op custom.ops::LeakyRelu6 (version 1) is already registered") !=
        std::string::npos);
  CHECK(with([](auto& op) { op.domain = "ai.graphcore", op.type = "Nop"; }).find("already registered") != std::string::npos);
  CHECK(with([](auto& op) { op.domain = "ai.onnx"; }).find("has the ai.onnx domain") != std::string::npos);
  CHECK(with([](auto& op) { op.domain = ""; }).find("has the ai.onnx domain") != std::string::npos);
  CHECK(with([](auto& op) { op.shape = nullptr; }).find("has no shape rule") != std::string::npos);
  CHECK(with([](auto& op) { op.kernel = nullptr; }).find("has no kernel") != std::string::npos);
  CHECK(with([](auto& op) { op.version = 0; }).find("needs a version >= 1") != std::string::npos);
  // Two of the same name in one batch: neither is registered.
  CHECK(error_of([&] { ipu::ops::register_custom_ops({ok, ok}); }).find("already registered") != std::string::npos);
  CHECK(ipu::ops::custom_op_version("custom.ops", "Fresh") == 0);
}

TEST_CASE("seed 4.9.3: attributes of every PopART kind reach the custom op's kernel") {
  // What the kernel saw, written by it and read back here.
  static std::vector<std::string> seen;
  static std::once_flag once;
  std::call_once(once, [] {
    ipu::ops::register_custom_op(
        {.domain = "test.poptorch",
         .type = "ManyAttributeOp",
         .shape = leaky_shape,
         .kernel = [](const ipu::kernel_context& c) {
           auto list = [](const auto& v) {
             std::string s;
             for (const auto& e : v) {
               if constexpr (std::is_same_v<std::decay_t<decltype(e)>, std::string>) s += e + ";";
               else s += std::to_string(e) + ";";
             }
             return s;
           };
           seen = {std::to_string(c.attr_float("float_one", 0)), std::to_string(c.attr_float("float_minus_two", 0)),
                   std::to_string(c.attr_int("int_zero", 9)), std::to_string(c.attr_int("int_minus_five", 0)),
                   list(c.attr_floats("floats_one_two_three")), list(c.attr_floats("floats_minus_one_two_three")),
                   list(c.attr_ints("ints_one_two_three")), list(c.attr_ints("ints_minus_one_two_three")),
                   c.attr_string("a_string"), list(c.attr_strings("strs"))};
           const auto x = c.input(0).as<float>();
           for (std::size_t i = 0; i < x.size(); ++i) c.outputs[0].as<float>()[i] = x[i] + c.attr_float("float_minus_two", 0);
         }});
  });
  // As PopTorch's custom_op gives it: the outputs' infos from example_outputs, no inference.
  ipu::builder b("poptorch");
  const auto x = b.add_input_tensor({data_type::F32, {2}}, "x");
  const std::vector<attribute> attributes{
      {"float_one", 1.0f},
      {"float_minus_two", -2.0f},
      {"int_zero", std::int64_t{0}},
      {"int_minus_five", std::int64_t{-5}},
      {"floats_one_two_three", std::vector<float>{1, 2, 3}},
      {"floats_minus_one_two_three", std::vector<float>{-1, -2, -3}},
      {"ints_one_two_three", std::vector<std::int64_t>{1, 2, 3}},
      {"ints_minus_one_two_three", std::vector<std::int64_t>{-1, -2, -3}},
      {"a_string", std::string("string with quotes and slash \" ' \\ end")},
      {"strs", std::vector<std::string>{"abc", "def", "ghi"}}};
  b.add_output(b.custom_op("test.poptorch", "ManyAttributeOp", 1, {x}, {{data_type::F32, {2}}}, attributes).front());
  CHECK(run_one(std::move(b).build(), {1, 5}) == std::vector<float>{-1, 3});
  CHECK(seen == std::vector<std::string>{"1.000000", "-2.000000", "0", "-5", "1.000000;2.000000;3.000000;",
                                         "-1.000000;-2.000000;-3.000000;", "1;2;3;", "-1;-2;-3;",
                                         "string with quotes and slash \" ' \\ end", "abc;def;ghi;"});
}

TEST_CASE("load_custom_ops: a shared library's ops register and run; bad libraries are refused by name") {
  CHECK(error_of([] { (void)ipu::ops::load_custom_ops("/nonexistent/libnothing.so"); })
            .find("custom-op library /nonexistent/libnothing.so") != std::string::npos);
  const auto no_entry = error_of([] { (void)ipu::ops::load_custom_ops(IPU_TEST_NO_ENTRY_LIB); });
  CHECK(no_entry.find("the library defines no ipu_register_custom_ops") != std::string::npos);
  CHECK(no_entry.find(IPU_TEST_NO_ENTRY_LIB) != std::string::npos);

  static std::vector<std::string> loaded;
  static std::once_flag once;
  std::call_once(once, [] { loaded = ipu::ops::load_custom_ops(IPU_TEST_CUSTOM_OP_LIB); });
  CHECK(loaded == std::vector<std::string>{"plugin.ops::SquarePlus (version 2)"});
  ipu::builder b("plugin");
  const auto x = b.add_input_tensor({data_type::F32, {3}}, "x");
  b.add_output(b.op("SquarePlus", {x}, {{"offset", 0.5f}}, {.opset = 2, .domain = "plugin.ops"}).front());
  CHECK(run_one(std::move(b).build(), {1, 2, -3}) == std::vector<float>{1.5f, 4.5f, 9.5f});
  // Loading it again would register its op twice.
  const auto twice = error_of([] { (void)ipu::ops::load_custom_ops(IPU_TEST_CUSTOM_OP_LIB); });
  CHECK(twice.find("plugin.ops::SquarePlus (version 2) is already registered") != std::string::npos);
}

}  // namespace test_custom_ops
