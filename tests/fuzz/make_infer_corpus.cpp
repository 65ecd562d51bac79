// Writes the seed corpus of fuzz_infer_request into a directory (run by CTest as a fixture): valid
// KServe v2 requests of each kind the target reads (its first byte picks the kind, see
// fuzz_infer_request.cpp): HTTP JSON bodies, JSON with binary tensors after an
// Inference-Header-Content-Length, and ModelInferRequest messages with typed or raw contents, for
// the fuzzer's batched and fixed signatures, plus a few near misses (a wrong shape, a wrong type).
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "ipu/serve/kserve_v2.pb.h"

namespace {

std::filesystem::path dir;

void write(const std::string& name, std::uint8_t mode, const std::string& payload) {
  std::ofstream out(dir / name, std::ios::binary);
  out.put(static_cast<char>(mode));
  out << payload;
}

/// An HTTP body with its JSON header length in front (the target's bit 1).
void write_binary(const std::string& name, std::uint8_t mode, const std::string& json, const std::string& tail) {
  std::string p;
  const auto n = static_cast<std::uint32_t>(json.size());
  for (int i = 0; i < 4; ++i) p += static_cast<char>((n >> (8 * i)) & 0xff);
  write(name, mode | 2, p + json + tail);
}

template <class T>
std::string bytes_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

void write_grpc(const std::string& name, std::uint8_t mode, const inference::ModelInferRequest& m) {
  std::string s;
  if (!m.SerializeToString(&s)) throw std::runtime_error("cannot serialize " + name);
  write(name, mode | 1, s);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_infer_corpus DIR\n");
    return 2;
  }
  dir = argv[1];
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  constexpr std::uint8_t batched = 4, fixed = 0;

  // HTTP, all JSON.
  write("http_batched.json", batched,
        R"({"id":"a","inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[[1,2,3],[4.5,-5,6e2]]},)"
        R"({"name":"mask","shape":[2],"datatype":"BOOL","data":[true,false]}],"outputs":[{"name":"y"}]})");
  write("http_fixed.json", fixed,
        R"({"inputs":[{"name":"x","shape":[4,3],"datatype":"FP32","data":[1,2,3,4,5,6,7,8,9,10,11,12]},)"
        R"({"name":"ids","shape":[2],"datatype":"INT64","data":[-9223372036854775808,9223372036854775807]}],)"
        R"("parameters":{"binary_data_output":true}})");
  write("http_types.json", fixed,
        R"({"inputs":[{"name":"a","shape":[1],"datatype":"UINT8","data":[255]},{"name":"b","shape":[1],"datatype":"INT8","data":[-128]},)"
        R"({"name":"c","shape":[1],"datatype":"UINT16","data":[65535]},{"name":"d","shape":[1],"datatype":"INT16","data":[-1]},)"
        R"({"name":"e","shape":[1],"datatype":"UINT32","data":[4294967295]},{"name":"f","shape":[1],"datatype":"INT32","data":[7]},)"
        R"({"name":"g","shape":[1],"datatype":"UINT64","data":[18446744073709551615]},{"name":"h","shape":[2],"datatype":"FP16","data":[0.5,65504]},)"
        R"({"name":"i","shape":[1,1],"datatype":"FP64","data":[[1e300]]},{"name":"j","shape":[0,3],"datatype":"FP32","data":[]}]})");
  write("http_wrong_shape.json", batched,
        R"({"inputs":[{"name":"x","shape":[5,3],"datatype":"FP32","data":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]},)"
        R"({"name":"mask","shape":[5],"datatype":"BOOL","data":[true,true,true,true,true]}]})");

  // HTTP with binary tensors after the JSON header.
  const std::vector<float> x6{1, 2, 3, 4, 5, 6}, x12{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  write_binary("http_binary_batched", batched,
               R"({"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","parameters":{"binary_data_size":24}},)"
               R"({"name":"mask","shape":[2],"datatype":"BOOL","parameters":{"binary_data_size":2}}],)"
               R"("outputs":[{"name":"y","parameters":{"binary_data":true}}]})",
               bytes_of(x6) + std::string("\x01\x07", 2));
  write_binary("http_binary_fixed", fixed,
               R"({"inputs":[{"name":"x","shape":[4,3],"datatype":"FP32","parameters":{"binary_data_size":48}},)"
               R"({"name":"ids","shape":[2],"datatype":"INT64","data":[3,4]}]})",
               bytes_of(x12));

  // gRPC, typed contents.
  {
    inference::ModelInferRequest m;
    m.set_model_name("rows");
    m.set_id("g1");
    auto* x = m.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(2);
    x->add_shape(3);
    for (float v : x6) x->mutable_contents()->add_fp32_contents(v);
    auto* mask = m.add_inputs();
    mask->set_name("mask");
    mask->set_datatype("BOOL");
    mask->add_shape(2);
    mask->mutable_contents()->add_bool_contents(true);
    mask->mutable_contents()->add_bool_contents(false);
    m.add_outputs()->set_name("z");
    write_grpc("grpc_typed_batched.pb", batched, m);
  }
  {
    inference::ModelInferRequest m;
    m.set_model_name("rows");
    auto* x = m.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(4);
    x->add_shape(3);
    for (float v : x12) x->mutable_contents()->add_fp32_contents(v);
    auto* ids = m.add_inputs();
    ids->set_name("ids");
    ids->set_datatype("INT64");
    ids->add_shape(2);
    ids->mutable_contents()->add_int64_contents(-1);
    ids->mutable_contents()->add_int64_contents(1);
    write_grpc("grpc_typed_fixed.pb", fixed, m);
  }
  {
    inference::ModelInferRequest m;  // each typed field once
    const char* types[] = {"INT8", "INT16", "INT32", "UINT8", "UINT16", "UINT32", "UINT64", "FP64"};
    for (const char* t : types) {
      auto* in = m.add_inputs();
      in->set_name(t);
      in->set_datatype(t);
      in->add_shape(1);
      auto* c = in->mutable_contents();
      const std::string s = t;
      if (s == "UINT64") c->add_uint64_contents(~std::uint64_t{0});
      else if (s == "FP64") c->add_fp64_contents(-2.5);
      else if (s[0] == 'U') c->add_uint_contents(200);
      else c->add_int_contents(-100);
    }
    write_grpc("grpc_typed_types.pb", fixed, m);
  }
  // gRPC, raw contents (the only way FP16 travels).
  {
    inference::ModelInferRequest m;
    m.set_model_name("rows");
    auto* x = m.add_inputs();
    x->set_name("x");
    x->set_datatype("FP32");
    x->add_shape(2);
    x->add_shape(3);
    auto* mask = m.add_inputs();
    mask->set_name("mask");
    mask->set_datatype("BOOL");
    mask->add_shape(2);
    m.add_raw_input_contents(bytes_of(x6));
    m.add_raw_input_contents(std::string("\x00\x05", 2));
    write_grpc("grpc_raw_batched.pb", batched, m);
  }
  {
    inference::ModelInferRequest m;
    auto* h = m.add_inputs();
    h->set_name("h");
    h->set_datatype("FP16");
    h->add_shape(2);
    m.add_raw_input_contents(std::string("\x00\x3c\x00\xbc", 4));
    write_grpc("grpc_raw_fp16.pb", fixed, m);
  }
  {
    inference::ModelInferRequest m;  // a wrong type for the signature
    auto* x = m.add_inputs();
    x->set_name("x");
    x->set_datatype("FP64");
    x->add_shape(4);
    x->add_shape(3);
    m.add_raw_input_contents(std::string(96, '\0'));
    write_grpc("grpc_raw_wrong_type.pb", fixed, m);
  }
  std::printf("wrote %zu seeds to %s\n",
              static_cast<std::size_t>(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator())),
              dir.c_str());
  return 0;
}
