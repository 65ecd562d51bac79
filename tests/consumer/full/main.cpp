// Builds a small model with the installed headers, compiles it for two pipelined Mk2 IPUs into a
// PopEF file, loads the file into a fresh Model Runtime and runs it; the outputs must equal the
// CPU device's bit for bit.
#include <ipu/builder/builder.hpp>
#include <ipu/compile/compile.hpp>
#include <ipu/cpu/device.hpp>
#include <ipu/poptorch/options.hpp>
#include <ipu/runtime/model_runner.hpp>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

int main() {
  ipu::builder b("consumer");
  auto x = b.add_input_tensor({ipu::data_type::F32, {4, 8}}, "x");
  for (std::int64_t i = 0; i < 2; ++i) {
    auto scope = b.block(std::string("layer") + static_cast<char>('0' + i), i);
    std::vector<float> w(8 * 8);
    for (std::size_t k = 0; k < w.size(); ++k) w[k] = 0.05f * static_cast<float>(static_cast<int>(k % 7) - 3);
    x = b.relu(b.matmul(x, b.add_initialized_input(ipu::make_constant<float>({8, 8}, w), "w" + std::to_string(i))));
  }
  b.add_output(x);
  const ipu::graph g = std::move(b).build();

  const auto file = std::filesystem::temp_directory_path() / "ipu_consumer.popef";
  const auto opts = ipu::options().device_iterations(4).execution_strategy(ipu::strategy_settings::pipelined());
  ipu::popef::compile_and_export(g, opts, ipu::device_from_name("mk2", 2), file);

  ipu::runtime::model_runner runner(file, {});
  std::vector<float> input(4 * 8);
  for (std::size_t k = 0; k < input.size(); ++k) input[k] = 0.1f * static_cast<float>(k % 11) - 0.4f;
  ipu::host_tensor in({ipu::data_type::F32, {4, 8}});
  std::memcpy(in.as<float>().data(), input.data(), input.size() * sizeof(float));
  const auto& in_name = runner.layout().inputs.front().name;
  const auto& out_name = runner.layout().anchors.front().name;
  auto outputs = runner.execute_async({{in_name, in.view()}});
  const ipu::host_tensor got = outputs.at(out_name).get();

  ipu::cpu::device reference(g);
  const auto want = reference.run({{"x", in.view()}});
  const auto a = got.as<float>();
  const auto e = want.front().as<float>();
  const bool same = a.size() == e.size() && std::memcmp(a.data(), e.data(), a.size_bytes()) == 0;
  std::printf("consumer (ipu::ipu): compiled, exported, loaded and ran %s: outputs %s the CPU device's\n",
              file.filename().string().c_str(), same ? "equal" : "DIFFER FROM");
  std::filesystem::remove(file);
  return same ? 0 : 1;
}
