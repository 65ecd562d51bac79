#pragma once
// Test helpers: small ONNX models built with ONNX's own protobuf classes (at any opset), Python
// run at test time for independent numbers, and scratch directories.
#include <onnx/onnx_pb.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ipu/graph/graph.hpp"

namespace test_onnx {

/// A dimension: a size or a symbolic name.
using dim = std::variant<std::int64_t, std::string>;

inline ::onnx::ValueInfoProto value(const std::string& name, int elem_type, const std::vector<dim>& dims,
                                    bool with_shape = true) {
  ::onnx::ValueInfoProto v;
  v.set_name(name);
  auto* t = v.mutable_type()->mutable_tensor_type();
  t->set_elem_type(elem_type);
  if (with_shape) {
    auto* s = t->mutable_shape();
    for (const auto& d : dims) {
      auto* p = s->add_dim();
      if (auto* i = std::get_if<std::int64_t>(&d)) p->set_dim_value(*i);
      else p->set_dim_param(std::get<std::string>(d));
    }
  }
  return v;
}

inline ::onnx::AttributeProto attr(const std::string& name, std::int64_t v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_INT);
  a.set_i(v);
  return a;
}
inline ::onnx::AttributeProto attr(const std::string& name, int v) { return attr(name, std::int64_t{v}); }
inline ::onnx::AttributeProto attr(const std::string& name, float v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_FLOAT);
  a.set_f(v);
  return a;
}
inline ::onnx::AttributeProto attr(const std::string& name, const char* v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_STRING);
  a.set_s(v);
  return a;
}
inline ::onnx::AttributeProto attr(const std::string& name, std::initializer_list<std::int64_t> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_INTS);
  for (auto x : v) a.add_ints(x);
  return a;
}
inline ::onnx::AttributeProto attr_floats(const std::string& name, std::initializer_list<float> v) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_FLOATS);
  for (auto x : v) a.add_floats(x);
  return a;
}
inline ::onnx::AttributeProto attr(const std::string& name, const ::onnx::TensorProto& t) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_TENSOR);
  *a.mutable_t() = t;
  return a;
}
inline ::onnx::AttributeProto attr(const std::string& name, const ::onnx::GraphProto& g) {
  ::onnx::AttributeProto a;
  a.set_name(name);
  a.set_type(::onnx::AttributeProto_AttributeType_GRAPH);
  *a.mutable_g() = g;
  return a;
}

inline ::onnx::NodeProto node(const std::string& op, std::initializer_list<std::string> inputs,
                              std::initializer_list<std::string> outputs,
                              std::initializer_list<::onnx::AttributeProto> attrs = {}, const std::string& name = {},
                              const std::string& domain = {}) {
  ::onnx::NodeProto n;
  n.set_op_type(op);
  if (!name.empty()) n.set_name(name);
  if (!domain.empty()) n.set_domain(domain);
  for (const auto& i : inputs) n.add_input(i);
  for (const auto& o : outputs) n.add_output(o);
  for (const auto& a : attrs) *n.add_attribute() = a;
  return n;
}

inline ::onnx::TensorProto float_tensor(const std::string& name, std::vector<std::int64_t> dims, std::vector<float> v) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto_DataType_FLOAT);
  for (auto d : dims) t.add_dims(d);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
  return t;
}
inline ::onnx::TensorProto int64_tensor(const std::string& name, std::vector<std::int64_t> dims, std::vector<std::int64_t> v) {
  ::onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(::onnx::TensorProto_DataType_INT64);
  for (auto d : dims) t.add_dims(d);
  for (auto x : v) t.add_int64_data(x);
  return t;
}

/// A model under construction at a given ai.onnx opset.
struct model {
  ::onnx::ModelProto proto;

  explicit model(std::int64_t opset, const std::string& graph_name = "g", std::int64_t ir_version = 7) {
    proto.set_ir_version(ir_version);
    proto.set_producer_name("ipu-tests");
    auto* o = proto.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    proto.mutable_graph()->set_name(graph_name);
  }
  ::onnx::GraphProto& graph() { return *proto.mutable_graph(); }
  model& import_domain(const std::string& domain, std::int64_t version) {
    auto* o = proto.add_opset_import();
    o->set_domain(domain);
    o->set_version(version);
    return *this;
  }
  model& input(const std::string& name, std::vector<dim> dims, int type = ::onnx::TensorProto_DataType_FLOAT) {
    *graph().add_input() = value(name, type, dims);
    return *this;
  }
  /// ONNX's checker wants a shape on main-graph outputs; shape inference checks it against its own.
  model& output(const std::string& name, std::vector<dim> dims, int type = ::onnx::TensorProto_DataType_FLOAT) {
    *graph().add_output() = value(name, type, dims);
    return *this;
  }
  model& add(const ::onnx::NodeProto& n) {
    *graph().add_node() = n;
    return *this;
  }
  model& initializer(const ::onnx::TensorProto& t) {
    *graph().add_initializer() = t;
    return *this;
  }
  [[nodiscard]] std::string bytes() const { return proto.SerializeAsString(); }
  [[nodiscard]] std::shared_ptr<::onnx::ModelProto> shared() const { return std::make_shared<::onnx::ModelProto>(proto); }
};

/// y = If(cond, x + w, -x); final = Loop 4 times: acc += y (branches and body read outer values).
inline model control_flow_model() {
  constexpr int f32 = ::onnx::TensorProto_DataType_FLOAT;
  constexpr int i64 = ::onnx::TensorProto_DataType_INT64;
  constexpr int boolean = ::onnx::TensorProto_DataType_BOOL;
  model m(13);
  m.input("cond", {}, boolean).input("x", {3}).output("y", {3}).output("final", {3});
  m.initializer(test_onnx::float_tensor("w", {3}, {1, 2, 3}));
  ::onnx::GraphProto then_g;
  then_g.set_name("then");
  *then_g.add_output() = test_onnx::value("t_out", f32, {3});
  *then_g.add_node() = node("Add", {"x", "w"}, {"t_out"});
  ::onnx::GraphProto else_g;
  else_g.set_name("else");
  *else_g.add_output() = test_onnx::value("e_out", f32, {3});
  *else_g.add_node() = node("Neg", {"x"}, {"e_out"});
  m.add(node("If", {"cond"}, {"y"}, {attr("then_branch", then_g), attr("else_branch", else_g)}, "branch"));

  // for i in range(4): acc = acc + y   (y is read from the enclosing graph)
  ::onnx::GraphProto body;
  body.set_name("body");
  *body.add_input() = test_onnx::value("i", i64, {});
  *body.add_input() = test_onnx::value("c_in", boolean, {});
  *body.add_input() = test_onnx::value("acc", f32, {3});
  *body.add_output() = test_onnx::value("c_out", boolean, {});
  *body.add_output() = test_onnx::value("acc_out", f32, {3});
  *body.add_node() = node("Identity", {"c_in"}, {"c_out"});
  *body.add_node() = node("Add", {"acc", "y"}, {"acc_out"});
  m.initializer(test_onnx::int64_tensor("trips", {}, {4}));
  m.add(node("Loop", {"trips", "", "x"}, {"final"}, {attr("body", body)}, "loop"));

  return m;
}

/// Runs Python (with onnx / numpy / torch) and returns what it printed; throws on failure.
inline std::string python(const std::string& code) {
  const auto script = std::filesystem::temp_directory_path() / ("ipu_onnx_test_" + std::to_string(::getpid()) + ".py");
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    if (!f) throw std::runtime_error("cannot write " + script.string());
    std::fputs(code.c_str(), f);
    std::fclose(f);
  }
  const std::string cmd = std::string(IPU_PYTHON) + " " + script.string();  // stderr stays visible
  std::FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) throw std::runtime_error("cannot run python");
  std::string out;
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), p)) out.append(buf.data(), n);
  const int rc = ::pclose(p);
  std::filesystem::remove(script);
  if (rc != 0) throw std::runtime_error("python failed: " + out);
  return out;
}

/// A fresh scratch directory, removed at the end of the test.
struct scratch_dir {
  std::filesystem::path path;
  explicit scratch_dir(const std::string& name) {
    path = std::filesystem::temp_directory_path() / ("ipu_onnx_" + name + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~scratch_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
};

/// The op types of a graph in order.
inline std::vector<std::string> op_types(const ipu::graph& g) {
  std::vector<std::string> out;
  for (const auto& op : g.ops()) out.push_back(op.type);
  return out;
}

inline std::filesystem::path test_model(const std::string& name) {
  return std::filesystem::path(IPU_TEST_MODELS) / (name + ".onnx");
}

}  // namespace test_onnx
