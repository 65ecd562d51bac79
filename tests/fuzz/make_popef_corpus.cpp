// Writes the seed corpus for the PopEF reader's fuzz target into the directory given: small files
// with every blob type (compressed and not), a compiled two-op model, a training step's file, and a file with a blob of an
// unknown type. Run as a CTest fixture before the fuzz tests.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../popef/popef_test_util.hpp"
#include "ipu/graph/graph.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/popef/training_state.hpp"
#include "ipu/popef/writer.hpp"

namespace {

ipu::graph tiny_model() {
  using namespace ipu;
  graph g("tiny");
  g.set_opset_imports({{"", 17}});
  const auto x = g.add_tensor("x", {data_type::F32, shape{2, 3}}, tensor_kind::input);
  const std::vector<float> wv{1, -2, 3, -4, 5, -6, 7, -8, 9, -10, 11, -12};
  const auto w = g.add_tensor("w", {data_type::F32, shape{3, 4}}, tensor_kind::variable,
                              byte_buffer::from_values(std::span<const float>(wv)));
  const auto y = g.add_tensor("y", {data_type::F32, shape{2, 4}});
  const auto z = g.add_tensor("z", {data_type::F32, shape{2, 4}});
  g.add_op(op_node{"MatMul", "", 17, "mm", {x, w}, {y}, {}, {}});
  g.add_op(op_node{"Relu", "", 17, "relu", {y}, {z}, {}, {}});
  g.mark_output(z);
  return g;
}

/// tiny_model with a loss: the mean of z, a scalar.
ipu::graph tiny_loss_model() {
  using namespace ipu;
  graph g = tiny_model();
  const auto loss = g.add_tensor("loss", {data_type::F32, shape{}});
  g.add_op(op_node{"ReduceMean", "", 17, "mean", {*g.find_tensor("z")}, {loss}, {attribute{"keepdims", std::int64_t{0}}}, {}});
  g.mark_output(loss);
  return g;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_popef_corpus DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  for (const bool compress : {true, false}) {
    const std::string suffix = compress ? "" : "_uncompressed";
    {
      ipu::popef::writer w(dir / ("sample" + suffix + ".popef"));
      test_popef::write_sample(w, compress);
    }
    const auto m = ipu::popef::compile(tiny_model(), ipu::options().execution_strategy(ipu::strategy_settings::sharded()),
                                       ipu::device_from_name("mk2", 1));
    ipu::popef::export_model(m, dir / ("tiny" + suffix + ".popef"), compress);
  }
  {
    // A training step's file: the tiny model compiled stands in for the step; its training state
    // (Adam with every setting) and the value of its weight.
    ipu::popef::training_state state;
    state.model = tiny_loss_model();
    state.loss = "loss";
    ipu::train::adam opt{.lr = 0.01};
    opt.first_order_momentum_accum_type = ipu::data_type::F32;
    state.opt = opt;
    state.gradient_accumulation = 2;
    state.updates = 7;
    const auto step = ipu::popef::compile(tiny_model(), ipu::options(), ipu::device_from_name("mk2", 1));
    ipu::popef::writer w(dir / "training.popef");
    ipu::popef::write_training(w, step, state, {{"w/exp_avg", ipu::host_tensor(ipu::tensor_info{ipu::data_type::F32, {3, 4}})}});
    w.close();
  }
  {
    // A blob of type 99 between two known ones.
    ipu::popef::writer w(dir / "unknown.popef");
    w.write_opaque("first", "exe", test_popef::pattern(20));
  }
  ipu::popef::blob_header h;
  h.type = 99;
  const auto content = test_popef::pattern(40);
  h.content_size = content.size();
  h.total_size = ipu::popef::header_size + content.size();
  h.content_checksum = ipu::popef::checksum(content);
  const auto header = ipu::popef::encode_header(h);
  {
    std::ofstream out(dir / "unknown.popef", std::ios::binary | std::ios::app);
    out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(content.data()), static_cast<std::streamsize>(content.size()));
  }
  {
    ipu::popef::writer w(dir / "unknown.popef", ipu::popef::open_mode::append);
    w.write_opaque("second", "exe", test_popef::pattern(30));
  }
  std::printf("wrote the PopEF seed corpus to %s\n", dir.string().c_str());
  return 0;
}
