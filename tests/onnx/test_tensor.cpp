#include "ipu/onnx/tensor.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "onnx_test_util.hpp"

namespace test_tensor {

using namespace ipu;
using test_onnx::scratch_dir;

namespace {

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

void write_file(const std::filesystem::path& p, const std::string& bytes) {
  std::ofstream f(p, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

TEST_CASE("raw_data is shared with the message, not copied, when an owner is given") {
  auto t = std::make_shared<::onnx::TensorProto>(test_onnx::float_tensor("w", {2, 3}, {1, 2, 3, 4, 5, 6}));
  auto c = ipu::onnx::to_constant_tensor(*t, {t, nullptr});
  CHECK(c.info == tensor_info{data_type::F32, shape{2, 3}});
  CHECK(c.data.is_shared());
  CHECK(c.data.data() == reinterpret_cast<const std::byte*>(t->raw_data().data()));
  CHECK(c.data.load<float>(5) == 6.0f);
  // Without an owner the bytes are copied.
  auto copied = ipu::onnx::to_constant_tensor(*t);
  CHECK_FALSE(copied.data.is_shared());
  CHECK(copied == c);
}

TEST_CASE("BOOL tensors hold 0 or 1 whatever byte or integer a file stores for true") {
  // Kernels read BOOL elements as C++ bool, for which any byte but 0 and 1 is undefined (the ONNX
  // fuzzer's find: a byte of 8 reached And). Non-zero means true, as in numpy.
  ::onnx::TensorProto raw;
  raw.set_name("mask");
  raw.set_data_type(::onnx::TensorProto_DataType_BOOL);
  raw.add_dims(4);
  raw.set_raw_data(std::string("\x00\x08\x01\xff", 4));
  auto owner = std::make_shared<::onnx::TensorProto>(raw);
  const auto from_raw = ipu::onnx::to_constant_tensor(*owner, {owner, nullptr});
  REQUIRE(from_raw.data.size() == 4);
  CHECK(from_raw.data.load<std::uint8_t>(0) == 0);
  CHECK(from_raw.data.load<std::uint8_t>(1) == 1);
  CHECK(from_raw.data.load<std::uint8_t>(2) == 1);
  CHECK(from_raw.data.load<std::uint8_t>(3) == 1);
  ::onnx::TensorProto typed = raw;
  typed.clear_raw_data();
  for (const int v : {0, 256, 2, -1}) typed.add_int32_data(v);
  const auto from_typed = ipu::onnx::to_constant_tensor(typed);
  REQUIRE(from_typed.data.size() == 4);
  CHECK(from_typed.data.load<std::uint8_t>(0) == 0);
  CHECK(from_typed.data.load<std::uint8_t>(1) == 1);  // 256's low byte is 0: still true
  CHECK(from_typed.data.load<std::uint8_t>(2) == 1);
  CHECK(from_typed.data.load<std::uint8_t>(3) == 1);
  // Well-formed bytes are still shared, not copied.
  owner->set_raw_data(std::string("\x00\x01\x01\x00", 4));
  CHECK(ipu::onnx::to_constant_tensor(*owner, {owner, nullptr}).data.is_shared());
}

TEST_CASE("typed fields are read for every element type") {
  SUBCASE("float_data and int64_data are shared in place") {
    auto t = std::make_shared<::onnx::TensorProto>();
    t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
    t->add_dims(3);
    for (float f : {1.5f, -2.0f, 3.25f}) t->add_float_data(f);
    auto c = ipu::onnx::to_constant_tensor(*t, {t, nullptr});
    CHECK(c.data.is_shared());
    CHECK(c.data.load<float>(0) == 1.5f);
    CHECK(c.data.load<float>(2) == 3.25f);

    auto i = std::make_shared<::onnx::TensorProto>(test_onnx::int64_tensor("i", {2}, {-7, 1LL << 40}));
    auto ci = ipu::onnx::to_constant_tensor(*i, {i, nullptr});
    CHECK(ci.data.is_shared());
    CHECK(ci.data.load<std::int64_t>(1) == (1LL << 40));
  }
  SUBCASE("narrow types live in int32_data") {
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto_DataType_INT8);
    t.add_dims(3);
    for (int v : {-128, 5, 127}) t.add_int32_data(v);
    auto c = ipu::onnx::to_constant_tensor(t);
    CHECK(c.info.type == data_type::S8);
    CHECK(c.data.size() == 3);
    CHECK(c.data.load<std::int8_t>(0) == -128);
    CHECK(c.data.load<std::int8_t>(2) == 127);

    ::onnx::TensorProto u;
    u.set_data_type(::onnx::TensorProto_DataType_UINT16);
    u.add_dims(2);
    u.add_int32_data(65535);
    u.add_int32_data(1);
    auto cu = ipu::onnx::to_constant_tensor(u);
    CHECK(cu.data.load<std::uint16_t>(0) == 65535);
    CHECK(cu.data.load<std::uint16_t>(1) == 1);
  }
  SUBCASE("FLOAT16 holds its bits in int32_data") {
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto_DataType_FLOAT16);
    t.add_dims(2);
    t.add_int32_data(0x3C00);  // 1.0
    t.add_int32_data(0xC000);  // -2.0
    auto c = ipu::onnx::to_constant_tensor(t);
    CHECK(c.info.type == data_type::F16);
    CHECK(static_cast<float>(half::from_bits(c.data.load<std::uint16_t>(0))) == 1.0f);
    CHECK(static_cast<float>(half::from_bits(c.data.load<std::uint16_t>(1))) == -2.0f);
  }
  SUBCASE("BFLOAT16 holds its bits in int32_data, as FLOAT16 does") {
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto_DataType_BFLOAT16);
    t.add_dims(3);
    t.add_int32_data(0x3F80);  // 1.0
    t.add_int32_data(0xC0C0);  // -6.0
    t.add_int32_data(0x7FC0);  // NaN
    auto c = ipu::onnx::to_constant_tensor(t);
    CHECK(c.info == tensor_info{data_type::BF16, shape{3}});
    CHECK(c.data.size() == 6);
    CHECK(c.data.load<std::uint16_t>(0) == 0x3F80);
    CHECK(ipu::bfloat16::to_float(c.data.load<std::uint16_t>(1)) == -6.0f);
    CHECK(c.data.load<std::uint16_t>(2) == 0x7FC0);
  }
  SUBCASE("BOOL, UINT32 and DOUBLE") {
    ::onnx::TensorProto b;
    b.set_data_type(::onnx::TensorProto_DataType_BOOL);
    b.add_dims(2);
    b.add_int32_data(1);
    b.add_int32_data(0);
    auto cb = ipu::onnx::to_constant_tensor(b);
    CHECK(cb.data.load<std::uint8_t>(0) == 1);
    CHECK(cb.data.load<std::uint8_t>(1) == 0);

    ::onnx::TensorProto u;
    u.set_data_type(::onnx::TensorProto_DataType_UINT32);
    u.add_uint64_data(4000000000ULL);
    auto cu = ipu::onnx::to_constant_tensor(u);
    CHECK(cu.info.shape.rank() == 0);
    CHECK(cu.data.load<std::uint32_t>(0) == 4000000000U);

    ::onnx::TensorProto d;
    d.set_data_type(::onnx::TensorProto_DataType_DOUBLE);
    d.add_double_data(0.1);
    CHECK(ipu::onnx::to_constant_tensor(d).data.load<double>(0) == 0.1);
  }
  SUBCASE("zero-element tensors have no data") {
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto_DataType_FLOAT);
    t.add_dims(0);
    t.add_dims(4);
    auto c = ipu::onnx::to_constant_tensor(t);
    CHECK(c.info.shape == shape{0, 4});
    CHECK(c.data.empty());
  }
}

TEST_CASE("inconsistent tensors are refused with the tensor's name") {
  auto t = test_onnx::float_tensor("w", {2, 3}, {1, 2, 3, 4, 5});
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(t); }),
                 "tensor 'w' has 20 bytes of raw_data but F32[2,3] needs 24"));

  ::onnx::TensorProto few;
  few.set_name("few");
  few.set_data_type(::onnx::TensorProto_DataType_INT64);
  few.add_dims(3);
  few.add_int64_data(1);
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(few); }), "1 values in int64_data"));

  ::onnx::TensorProto neg = test_onnx::float_tensor("neg", {2}, {1, 2});
  neg.set_dims(0, -2);
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(neg); }), "negative dimension -2"));

  ::onnx::TensorProto c;
  c.set_name("waves");
  c.set_data_type(::onnx::TensorProto_DataType_COMPLEX64);
  c.add_float_data(1);
  c.add_float_data(0);
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(c); }), "element type COMPLEX64"));

  ::onnx::TensorProto huge;
  huge.set_name("huge");
  huge.set_data_type(::onnx::TensorProto_DataType_FLOAT);
  for (int i = 0; i < 4; ++i) huge.add_dims(1 << 20);
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(huge); }), "impossibly large"));
}

TEST_CASE("external data is mapped from a file next to the model and shared") {
  scratch_dir dir("external");
  std::vector<float> values{1, 2, 3, 4};
  std::string file(8, '\0');  // 8 bytes of padding before the data
  file.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  write_file(dir.path / "weights.bin", file);

  auto make = [](const std::string& location, const std::string& offset, const std::string& length) {
    auto t = std::make_shared<::onnx::TensorProto>();
    t->set_name("w");
    t->set_data_type(::onnx::TensorProto_DataType_FLOAT);
    t->add_dims(4);
    t->set_data_location(::onnx::TensorProto_DataLocation_EXTERNAL);
    auto add = [&](const char* k, const std::string& v) {
      if (v.empty()) return;
      auto* e = t->add_external_data();
      e->set_key(k);
      e->set_value(v);
    };
    add("location", location);
    add("offset", offset);
    add("length", length);
    return t;
  };
  ipu::onnx::external_data_resolver resolver(dir.path);

  auto t = make("weights.bin", "8", "16");
  auto c = ipu::onnx::to_constant_tensor(*t, {t, &resolver});
  CHECK(c.data.is_shared());
  CHECK(c.data.load<float>(0) == 1.0f);
  CHECK(c.data.load<float>(3) == 4.0f);

  // Without "length" the data runs to the end of the file.
  auto rest = make("weights.bin", "8", "");
  CHECK(ipu::onnx::to_constant_tensor(*rest, {rest, &resolver}) == c);

  // A misaligned offset is copied, not shared (kernels read elements in place).
  write_file(dir.path / "odd.bin", std::string(1, '\0') + file.substr(8));
  auto odd = make("odd.bin", "1", "16");
  auto co = ipu::onnx::to_constant_tensor(*odd, {odd, &resolver});
  CHECK_FALSE(co.data.is_shared());
  CHECK(co.data == c.data);

  auto bad_length = make("weights.bin", "8", "12");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*bad_length, {bad_length, &resolver}); }),
                 "needs 16 bytes"));
  auto past_end = make("weights.bin", "100", "");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*past_end, {past_end, &resolver}); }),
                 "starts at offset 100"));
  auto missing = make("nope.bin", "", "");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*missing, {missing, &resolver}); }),
                 "'nope.bin' does not name a file inside the model's directory"));
  auto escape = make("../weights.bin", "", "");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*escape, {escape, &resolver}); }),
                 "leaves the model directory"));
  auto absolute = make((dir.path / "weights.bin").string(), "", "");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*absolute, {absolute, &resolver}); }),
                 "is not a relative path"));
  // No resolver: the caller could not say where the model lives.
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_constant_tensor(*t); }), "cannot be read here"));
  // Each file was opened once for all the tensors above; another spelling of a file is the same file.
  CHECK(resolver.files_opened() == 2);
  auto spelled = make("./weights.bin", "8", "16");
  CHECK(ipu::onnx::to_constant_tensor(*spelled, {spelled, &resolver}) == c);
  CHECK(resolver.files_opened() == 2);
}

TEST_CASE("save_tensor and load_tensor round-trip") {
  scratch_dir dir("roundtrip");
  auto h = host_tensor::from<std::int32_t>(shape{2, 2}, {1, -2, 3, -4});
  ipu::onnx::save_tensor(h, dir.path / "t.pb", "t");
  auto back = ipu::onnx::load_tensor(dir.path / "t.pb");
  CHECK(back.info() == h.info());
  CHECK(std::memcmp(back.data(), h.data(), h.bytes().size()) == 0);
}

TEST_CASE("STRING tensors round-trip through string_data, and a tensor keeps its strings after the message goes") {
  scratch_dir dir("strings");
  auto h = host_tensor::from_strings(shape{3}, {"monday", "", std::string_view("nul\0inside", 10)});
  ipu::onnx::save_tensor(h, dir.path / "s.pb", "s");
  ::onnx::TensorProto proto;
  ipu::onnx::read_proto_file(proto, dir.path / "s.pb", "ONNX tensor");
  CHECK(proto.data_type() == ::onnx::TensorProto_DataType_STRING);
  REQUIRE(proto.string_data_size() == 3);
  CHECK(proto.string_data(2) == std::string("nul\0inside", 10));
  CHECK_FALSE(proto.has_raw_data());  // never the elements' addresses
  auto back = ipu::onnx::load_tensor(dir.path / "s.pb");
  CHECK(back.info() == h.info());
  for (std::size_t i = 0; i < 3; ++i) CHECK(back.string_at(i) == h.string_at(i));
  host_tensor copied;
  {
    const auto message = ipu::onnx::to_tensor_proto(h, "s");
    copied = ipu::onnx::to_host_tensor(message);
  }
  CHECK(copied.string_at(0) == "monday");
}

TEST_CASE("STRING tensors with raw data or the wrong count are refused") {
  ::onnx::TensorProto t;
  t.set_name("words");
  t.set_data_type(::onnx::TensorProto_DataType_STRING);
  t.add_dims(2);
  t.add_string_data("one");
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_host_tensor(t); }), "1 values in string_data but STRING[2] has 2"));
  t.add_string_data("two");
  t.set_raw_data(std::string(32, '\0'));
  CHECK(contains(message_of([&] { (void)ipu::onnx::to_host_tensor(t); }), "is STRING but has raw or external data"));
}

TEST_CASE("load_tensor reads strings written by ONNX's Python numpy_helper") {
  scratch_dir dir("numpy_strings");
  test_onnx::python(
      "import numpy as np\n"
      "from onnx import numpy_helper\n"
      "a = np.array(['caf\\u00e9', 'x', ''], dtype=object)\n"
      "open('" + dir.path.string() + "/s.pb', 'wb').write(numpy_helper.from_array(a, 's').SerializeToString())\n");
  const auto s = ipu::onnx::load_tensor(dir.path / "s.pb");
  CHECK(s.info() == tensor_info{data_type::STRING, shape{3}});
  CHECK(s.string_at(0) == "caf\xc3\xa9");
  CHECK(s.string_at(1) == "x");
  CHECK(s.string_at(2).empty());
}

TEST_CASE("BF16 tensors round-trip through raw_data as BFLOAT16") {
  scratch_dir dir("bf16");
  const std::vector<std::uint16_t> bits = {0x3F80, 0x8000, 0x0001, 0x7F80, 0xFF7F, 0x7FC1};
  host_tensor h(tensor_info{data_type::BF16, shape{2, 3}});
  std::memcpy(h.data(), bits.data(), bits.size() * 2);
  const auto proto = ipu::onnx::to_tensor_proto(h, "b");
  CHECK(proto.data_type() == ::onnx::TensorProto_DataType_BFLOAT16);
  CHECK(proto.raw_data().size() == 12);
  ipu::onnx::save_tensor(h, dir.path / "b.pb", "b");
  auto back = ipu::onnx::load_tensor(dir.path / "b.pb");
  CHECK(back.info() == h.info());
  CHECK(std::memcmp(back.data(), bits.data(), 12) == 0);  // bit for bit, NaN payload and -0 too
}

TEST_CASE("load_tensor reads BFLOAT16 that ONNX's Python helper rounded from floats") {
  // onnx.helper.make_tensor rounds each float to nearest even by its own formula and stores the
  // bits in int32_data: an independent reference for ipu::bfloat16's rounding.
  scratch_dir dir("bf16_helper");
  const std::vector<float> floats = {1.0f, 0.1f, 1.00390625f, 1.01171875f, -3.0e38f, 1e-40f, 3.14159265f};
  std::string list;  // exact: hexadecimal floats
  for (float f : floats) {
    char hex[64];
    std::snprintf(hex, sizeof hex, "%a", static_cast<double>(f));
    list += (list.empty() ? "float.fromhex('" : ", float.fromhex('") + std::string(hex) + "')";
  }
  test_onnx::python(
      "import onnx\n"
      "t = onnx.helper.make_tensor('b', onnx.TensorProto.BFLOAT16, [" + std::to_string(floats.size()) + "], [" + list +
      "])\n"
      "assert len(t.int32_data) == " + std::to_string(floats.size()) + "\n"
      "open('" + (dir.path / "b.pb").string() + "', 'wb').write(t.SerializeToString())\n");
  auto b = ipu::onnx::load_tensor(dir.path / "b.pb");
  REQUIRE(b.info() == tensor_info{data_type::BF16, shape{static_cast<std::int64_t>(floats.size())}});
  for (std::size_t i = 0; i < floats.size(); ++i)
    CHECK(b.as<ipu::bfloat16>()[i].bits() == ipu::bfloat16(floats[i]).bits());
  CHECK(b.as<ipu::bfloat16>()[2].bits() == 0x3F80);  // 1 + 2^-8: the tie, to even
  CHECK(b.as<ipu::bfloat16>()[3].bits() == 0x3F82);  // 1 + 3 * 2^-8: the tie, to even (up)
}

TEST_CASE("load_tensor reads .pb files written by ONNX's Python numpy_helper") {
  scratch_dir dir("numpy");
  test_onnx::python(
      "import numpy as np, onnx\n"
      "from onnx import numpy_helper\n"
      "d = '" + dir.path.string() + "'\n"
      "def save(name, a):\n"
      "    open(d + '/' + name + '.pb', 'wb').write(numpy_helper.from_array(a, name).SerializeToString())\n"
      "save('f32', np.arange(6, dtype=np.float32).reshape(2, 3) / 4)\n"
      "save('i64', np.array([[-1, 2**40]], dtype=np.int64))\n"
      "save('f16', np.array([0.5, -65504, 1e-7], dtype=np.float16))\n"
      "save('b', np.array([True, False, True]))\n"
      "save('u8', np.array([0, 200, 255], dtype=np.uint8))\n"
      "t = onnx.helper.make_tensor('typed', onnx.TensorProto.FLOAT, [2], [1.5, -3.0])\n"
      "open(d + '/typed.pb', 'wb').write(t.SerializeToString())\n");
  auto f = ipu::onnx::load_tensor(dir.path / "f32.pb");
  CHECK(f.info() == tensor_info{data_type::F32, shape{2, 3}});
  CHECK(f.as<float>()[5] == 1.25f);
  auto i = ipu::onnx::load_tensor(dir.path / "i64.pb");
  CHECK(i.info() == tensor_info{data_type::S64, shape{1, 2}});
  CHECK(i.as<std::int64_t>()[1] == (1LL << 40));
  auto h = ipu::onnx::load_tensor(dir.path / "f16.pb");
  CHECK(h.info().type == data_type::F16);
  CHECK(static_cast<float>(h.as<half>()[0]) == 0.5f);
  CHECK(static_cast<float>(h.as<half>()[1]) == -65504.0f);
  CHECK(static_cast<float>(h.as<half>()[2]) == static_cast<float>(half(1e-7f)));
  auto b = ipu::onnx::load_tensor(dir.path / "b.pb");
  CHECK(b.info() == tensor_info{data_type::BOOL, shape{3}});
  CHECK(b.as<bool>()[0]);
  CHECK_FALSE(b.as<bool>()[1]);
  auto u = ipu::onnx::load_tensor(dir.path / "u8.pb");
  CHECK(u.as<std::uint8_t>()[1] == 200);
  auto typed = ipu::onnx::load_tensor(dir.path / "typed.pb");
  CHECK(typed.as<float>()[1] == -3.0f);
}

TEST_CASE("load_tensor refuses missing, empty, truncated and foreign files with one clear error") {
  scratch_dir dir("bad_tensors");
  auto good = ipu::onnx::to_tensor_proto(host_tensor::from<float>(shape{64}, std::vector<float>(64, 1.0f)), "x");
  const auto bytes = good.SerializeAsString();

  CHECK(contains(message_of([&] { (void)ipu::onnx::load_tensor(dir.path / "missing.pb"); }), "does not exist"));

  write_file(dir.path / "empty.pb", "");
  CHECK(contains(message_of([&] { (void)ipu::onnx::load_tensor(dir.path / "empty.pb"); }), "file is empty"));

  write_file(dir.path / "truncated.pb", bytes.substr(0, bytes.size() / 2));
  const auto truncated = message_of([&] { (void)ipu::onnx::load_tensor(dir.path / "truncated.pb"); });
  CHECK(contains(truncated, "truncated"));
  CHECK(contains(truncated, "truncated.pb"));

  std::string garbage;
  for (int i = 0; i < 4096; ++i) garbage += static_cast<char>((i * 7919 + 13) % 251);
  write_file(dir.path / "garbage.pb", garbage);
  const auto g = message_of([&] { (void)ipu::onnx::load_tensor(dir.path / "garbage.pb"); });
  CHECK(g.rfind("ipu ", 0) == 0);
  CHECK(contains(g, "garbage.pb"));

  // A model is a valid protobuf but not a tensor.
  test_onnx::model m(13);
  m.input("x", {1}).output("y", {1}).add(test_onnx::node("Relu", {"x"}, {"y"}));
  write_file(dir.path / "model.pb", m.bytes());
  const auto foreign = message_of([&] { (void)ipu::onnx::load_tensor(dir.path / "model.pb"); });
  CHECK(foreign.rfind("ipu ", 0) == 0);
  CHECK(contains(foreign, "model.pb"));
}

}  // namespace test_tensor
