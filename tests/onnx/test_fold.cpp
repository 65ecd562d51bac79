// Shape computations are folded into constants so that every shape is static after import.
#include "ipu/onnx/fold.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/onnx/checker.hpp"
#include "ipu/onnx/import.hpp"
#include "onnx_test_util.hpp"

namespace test_fold {

using namespace ipu;
using test_onnx::attr;
using test_onnx::model;
using test_onnx::node;
using test_onnx::op_types;

namespace {

constexpr int i64 = ::onnx::TensorProto_DataType_INT64;

graph import(const model& m) {
  ipu::onnx::import_options o;
  o.check_supported = false;
  return ipu::onnx::load_model_from_bytes(m.bytes(), o);
}

std::vector<std::int64_t> int_values(const graph& g, std::string_view name) {
  const auto& t = g.tensor(g.tensor_id_of(name));
  REQUIRE(t.kind == tensor_kind::constant);
  std::vector<std::int64_t> v;
  for (std::size_t i = 0; i < static_cast<std::size_t>(t.info.num_elements()); ++i) {
    if (t.info.type == data_type::S64) v.push_back(t.data.load<std::int64_t>(i));
    else if (t.info.type == data_type::S32) v.push_back(t.data.load<std::int32_t>(i));
    else if (t.info.type == data_type::BOOL) v.push_back(t.data.load<std::uint8_t>(i));
    else FAIL("unexpected type ", to_string(t.info.type));
  }
  return v;
}

}  // namespace

TEST_CASE("a Slice bound computed from Shape is folded and the slice gets a static shape") {
  // PyTorch's attention heads: ends = ((dim + 1) / 3) * 1, computed at run time.
  model m(13);
  m.input("x", {2, 12}).output("y", {2, "n"});
  m.add(node("Constant", {}, {"one_idx"}, {attr("value", test_onnx::int64_tensor("", {1}, {1}))}));
  m.add(node("Constant", {}, {"c1"}, {attr("value", test_onnx::int64_tensor("", {1}, {1}))}));
  m.add(node("Constant", {}, {"c3"}, {attr("value", test_onnx::int64_tensor("", {1}, {3}))}));
  m.add(node("Constant", {}, {"zero"}, {attr("value", test_onnx::int64_tensor("", {1}, {0}))}));
  m.add(node("Shape", {"x"}, {"shape"}, {}, "shape"));
  m.add(node("Gather", {"shape", "one_idx"}, {"dim"}, {attr("axis", 0)}));
  m.add(node("Add", {"dim", "c1"}, {"dim1"}));
  m.add(node("Div", {"dim1", "c3"}, {"third"}));
  m.add(node("Mul", {"third", "c1"}, {"end"}));
  m.add(node("Slice", {"x", "zero", "end", "one_idx"}, {"y"}));

  // ONNX's own shape inference leaves the slice's width unknown...
  auto proto = m.proto;
  ipu::onnx::infer_shapes(proto);
  ipu::onnx::detail::type_scope before(proto.graph(), nullptr);
  CHECK_FALSE(before.static_shape("y"));
  // ...folding resolves the bound (Shape, Gather, Add, Div, Mul) and inference finishes the job.
  CHECK(ipu::onnx::fold_constants(proto) == 5);
  ipu::onnx::infer_shapes(proto);
  ipu::onnx::detail::type_scope after(proto.graph(), nullptr);
  REQUIRE(after.static_shape("y"));
  CHECK(*after.static_shape("y") == std::vector<std::int64_t>{2, 4});

  auto g = import(m);
  CHECK(op_types(g) == std::vector<std::string>{"Slice"});
  CHECK(int_values(g, "end") == std::vector<std::int64_t>{4});  // (12 + 1) / 3 truncates
  CHECK(g.tensor(g.tensor_id_of("y")).info.shape == shape{2, 4});
  CHECK(g.tensor(g.tensor_id_of("shape")).kind == tensor_kind::constant);
}

TEST_CASE("a Reshape target built from Shape, Gather, Unsqueeze and Concat is folded") {
  model m(13);
  m.input("x", {2, 6}).output("y", {"a", "b"});
  m.add(node("Constant", {}, {"i0"}, {attr("value", test_onnx::int64_tensor("", {}, {0}))}));
  m.add(node("Constant", {}, {"i1"}, {attr("value", test_onnx::int64_tensor("", {}, {1}))}));
  m.add(node("Constant", {}, {"two"}, {attr("value", test_onnx::int64_tensor("", {}, {2}))}));
  m.add(node("Constant", {}, {"axes"}, {attr("value", test_onnx::int64_tensor("", {1}, {0}))}));
  m.add(node("Shape", {"x"}, {"s"}));
  m.add(node("Gather", {"s", "i0"}, {"d0"}));
  m.add(node("Gather", {"s", "i1"}, {"d1"}));
  m.add(node("Mul", {"d0", "two"}, {"rows"}));
  m.add(node("Div", {"d1", "two"}, {"cols"}));
  m.add(node("Unsqueeze", {"rows", "axes"}, {"rows1"}));
  m.add(node("Unsqueeze", {"cols", "axes"}, {"cols1"}));
  m.add(node("Concat", {"rows1", "cols1"}, {"target"}, {attr("axis", 0)}));
  m.add(node("Reshape", {"x", "target"}, {"y"}));
  auto g = import(m);
  CHECK(op_types(g) == std::vector<std::string>{"Reshape"});
  CHECK(int_values(g, "target") == std::vector<std::int64_t>{4, 3});
  CHECK(g.tensor(g.tensor_id_of("y")).info.shape == shape{4, 3});
}

TEST_CASE("folding evaluates integer ops like ONNX Runtime") {
  model m(15);  // Shape's start / end
  m.input("x", {2, 3, 4}).output("range", {4}, i64).output("mod", {2}, i64).output("fmod", {2}, i64);
  m.output("where", {3}, i64).output("expand", {2, 3}, i64).output("slice", {2}, i64).output("gather2", {2, 1}, i64);
  m.output("size", {}, i64).output("cos", {2}, i64).output("tail", {2}, i64);
  auto c = [&](const std::string& name, std::vector<std::int64_t> dims, std::vector<std::int64_t> v) {
    m.add(node("Constant", {}, {name}, {attr("value", test_onnx::int64_tensor("", std::move(dims), std::move(v)))}));
  };
  c("start", {}, {0});
  c("limit", {}, {10});
  c("delta", {}, {3});
  c("a", {2}, {-7, 7});
  c("b", {2}, {3, -3});
  c("cond_src", {3}, {1, 0, 1});
  c("yes", {3}, {10, 20, 30});
  c("no", {1}, {-1});
  c("row", {3}, {1, 2, 3});
  c("dims23", {2}, {2, 3});
  c("table", {2, 3}, {1, 2, 3, 4, 5, 6});
  c("idx", {1}, {-1});
  c("starts", {1}, {-1});
  c("ends", {1}, {-100});
  c("axes0", {1}, {0});
  c("steps", {1}, {-2});
  c("shape_of_two", {1}, {2});
  m.add(node("Range", {"start", "limit", "delta"}, {"range"}));
  m.add(node("Mod", {"a", "b"}, {"mod"}));
  m.add(node("Mod", {"a", "b"}, {"fmod"}, {attr("fmod", 1)}));
  m.add(node("Cast", {"cond_src"}, {"cond"}, {attr("to", ::onnx::TensorProto_DataType_BOOL)}));
  m.add(node("Where", {"cond", "yes", "no"}, {"where"}));
  m.add(node("Expand", {"row", "dims23"}, {"expand"}));
  m.add(node("Slice", {"range", "starts", "ends", "axes0", "steps"}, {"slice"}));
  m.add(node("Gather", {"table", "idx"}, {"gather2"}, {attr("axis", 1)}));
  m.add(node("Size", {"x"}, {"size"}));
  m.add(node("ConstantOfShape", {"shape_of_two"}, {"cos"},
             {attr("value", test_onnx::int64_tensor("", {1}, {9}))}));
  m.add(node("Shape", {"x"}, {"tail"}, {attr("start", -2)}));
  auto g = import(m);
  CHECK(g.num_ops() == 0);  // everything folded
  CHECK(int_values(g, "range") == std::vector<std::int64_t>{0, 3, 6, 9});
  CHECK(int_values(g, "mod") == std::vector<std::int64_t>{2, -2});   // sign of the divisor
  CHECK(int_values(g, "fmod") == std::vector<std::int64_t>{-1, 1});  // sign of the dividend
  CHECK(int_values(g, "where") == std::vector<std::int64_t>{10, -1, 30});
  CHECK(int_values(g, "expand") == std::vector<std::int64_t>{1, 2, 3, 1, 2, 3});
  CHECK(int_values(g, "slice") == std::vector<std::int64_t>{9, 3});
  CHECK(int_values(g, "gather2") == std::vector<std::int64_t>{3, 6});
  CHECK(g.tensor(g.tensor_id_of("gather2")).info.shape == shape{2, 1});
  CHECK(int_values(g, "size") == std::vector<std::int64_t>{24});
  CHECK(int_values(g, "cos") == std::vector<std::int64_t>{9, 9});
  CHECK(int_values(g, "tail") == std::vector<std::int64_t>{3, 4});
}

TEST_CASE("float arithmetic and division by zero are left to run time") {
  model m(13);
  m.input("x", {2}).output("y", {2}).output("q", {1}, i64);
  m.add(node("Constant", {}, {"f"}, {attr("value", test_onnx::float_tensor("", {2}, {1.0f, 2.0f}))}));
  m.add(node("Add", {"f", "f"}, {"ff"}));
  m.add(node("Add", {"x", "ff"}, {"y"}));
  m.add(node("Constant", {}, {"n"}, {attr("value", test_onnx::int64_tensor("", {1}, {5}))}));
  m.add(node("Constant", {}, {"z"}, {attr("value", test_onnx::int64_tensor("", {1}, {0}))}));
  m.add(node("Div", {"n", "z"}, {"q"}));
  auto g = import(m);
  CHECK(op_types(g) == std::vector<std::string>{"Add", "Add", "Div"});
}

TEST_CASE("a Cast of known integers to FLOAT or DOUBLE folds, so a Range of a computed size is static") {
  // The window functions' expansions: Range(0.0, float(size), 1.0).
  model m(13);
  m.output("r", {"n"}).output("d", {2}, ::onnx::TensorProto_DataType_DOUBLE).output("u", {1}, ::onnx::TensorProto_DataType_FLOAT);
  m.add(node("Constant", {}, {"size"}, {attr("value", test_onnx::int64_tensor("", {}, {5}))}));
  m.add(node("Cast", {"size"}, {"size_f"}, {attr("to", ::onnx::TensorProto_DataType_FLOAT)}));
  m.add(node("Constant", {}, {"zero"}, {attr("value", test_onnx::float_tensor("", {}, {0}))}));
  m.add(node("Constant", {}, {"one"}, {attr("value", test_onnx::float_tensor("", {}, {1}))}));
  m.add(node("Range", {"zero", "size_f", "one"}, {"r"}));
  // Beyond 2^53 a double rounds to nearest, as the Cast kernel's conversion does.
  m.add(node("Constant", {}, {"big"}, {attr("value", test_onnx::int64_tensor("", {2}, {-3, (std::int64_t{1} << 53) + 1}))}));
  m.add(node("Cast", {"big"}, {"d"}, {attr("to", ::onnx::TensorProto_DataType_DOUBLE)}));
  // UINT64 past 2^63 is held wrapped by the folder, so that Cast is left to the kernel.
  ::onnx::TensorProto u64;
  u64.set_data_type(::onnx::TensorProto_DataType_UINT64);
  u64.add_dims(1);
  u64.add_uint64_data(std::uint64_t{1} << 63);
  m.add(node("Constant", {}, {"wide"}, {attr("value", u64)}));
  m.add(node("Cast", {"wide"}, {"u"}, {attr("to", ::onnx::TensorProto_DataType_FLOAT)}));
  auto g = import(m);
  CHECK(op_types(g) == std::vector<std::string>{"Range", "Cast"});
  CHECK(g.tensor(g.tensor_id_of("r")).info.shape == shape{5});
  const auto& size_f = g.tensor(g.tensor_id_of("size_f"));
  REQUIRE(size_f.kind == tensor_kind::constant);
  CHECK(size_f.info.type == data_type::F32);
  CHECK(size_f.data.load<float>(0) == 5.0f);
  const auto& d = g.tensor(g.tensor_id_of("d"));
  REQUIRE(d.kind == tensor_kind::constant);
  CHECK(d.data.load<double>(0) == -3.0);
  CHECK(d.data.load<double>(1) == 9007199254740992.0);  // 2^53 + 1 rounds to even
}

TEST_CASE("views keep their input's values: Identity and Flatten fold through the op flags") {
  model m(17);
  m.output("same", {2, 3}, i64).output("flat", {2, 3}, i64).output("flat0", {1, 6}, i64);
  m.add(node("Constant", {}, {"t"}, {attr("value", test_onnx::int64_tensor("", {2, 3}, {1, 2, 3, 4, 5, 6}))}));
  m.add(node("Identity", {"t"}, {"same"}));
  m.add(node("Flatten", {"t"}, {"flat"}));
  m.add(node("Flatten", {"t"}, {"flat0"}, {attr("axis", 0)}));
  auto g = import(m);
  CHECK(g.num_ops() == 0);
  CHECK(int_values(g, "same") == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(int_values(g, "flat") == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
  CHECK(g.tensor(g.tensor_id_of("flat")).info.shape == shape{2, 3});
  CHECK(g.tensor(g.tensor_id_of("flat0")).info.shape == shape{1, 6});
}

}  // namespace test_fold
