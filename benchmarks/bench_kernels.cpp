// GEMM and convolution kernels, through the op registry as the CPU device calls them, reported in
// GFLOP/s and as a fraction of this machine's FP32 peak (measured in the same run by fp32_peak).
// Goal (host-execution issue): MatMul 512x512x512 at >= 70% of the peak on one thread.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "baseline_main.hpp"
#include "fma_peak.hpp"
#include "ipu/ops/all.hpp"

namespace {

ipu::host_tensor random_tensor(ipu::shape s, std::uint32_t seed) {
  ipu::host_tensor t({ipu::data_type::F32, std::move(s)});
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (auto& v : t.as<float>()) v = dist(gen);
  return t;
}

/// Runs one op's kernel repeatedly on fixed inputs; `flops` per run gives the GFLOP/s counter.
void run_kernel(benchmark::State& state, const ipu::op_node& op, std::vector<ipu::host_tensor> inputs,
                ipu::tensor_info out_info, double flops) {
  const auto* entry = ipu::default_op_registry().find(op.domain, op.type);
  if (!entry) {
    state.SkipWithError(("no kernel for " + op.type).c_str());
    return;
  }
  ipu::host_tensor out(std::move(out_info));
  std::vector<ipu::const_tensor_view> in_views;
  for (const auto& t : inputs) in_views.push_back(t.view());
  std::vector<ipu::tensor_view> out_views{out.view()};
  const ipu::kernel_context ctx{op, in_views, out_views};
  for (auto _ : state) {
    entry->kernel(ctx);
    benchmark::ClobberMemory();
  }
  state.counters["gflops"] = benchmark::Counter(flops * static_cast<double>(state.iterations()) / 1e9,
                                                benchmark::Counter::kIsRate);
}

void matmul(benchmark::State& state) {
  const auto n = state.range(0);
  ipu::op_node op{"MatMul", "", 13, "matmul", {0, 1}, {2}, {}, {}};
  run_kernel(state, op, {random_tensor({n, n}, 1), random_tensor({n, n}, 2)}, {ipu::data_type::F32, {n, n}},
             2.0 * static_cast<double>(n * n * n));
}

/// Conv with N=4; `group` = C for depthwise.
void conv(benchmark::State& state, std::int64_t c, std::int64_t hw, std::int64_t m, std::int64_t k, std::int64_t stride,
          std::int64_t pad, std::int64_t group) {
  const std::int64_t n = 4;
  const std::int64_t out_hw = (hw + 2 * pad - k) / stride + 1;
  ipu::op_node op{"Conv", "", 13, "conv", {0, 1}, {2},
                  {{"kernel_shape", std::vector<std::int64_t>{k, k}},
                   {"strides", std::vector<std::int64_t>{stride, stride}},
                   {"pads", std::vector<std::int64_t>{pad, pad, pad, pad}},
                   {"group", group}},
                  {}};
  const double flops = 2.0 * static_cast<double>(n * m * out_hw * out_hw * (c / group) * k * k);
  run_kernel(state, op, {random_tensor({n, c, hw, hw}, 3), random_tensor({m, c / group, k, k}, 4)},
             {ipu::data_type::F32, {n, m, out_hw, out_hw}}, flops);
}

/// ConvTranspose with N=4 as Conv's input gradient runs it: X is dY [N, C, hw, hw], W is the forward
/// Conv's [C, M, k, k], output_padding restores the forward input's size (ResNet-18's shapes).
void conv_transpose(benchmark::State& state, std::int64_t c, std::int64_t hw, std::int64_t m, std::int64_t k,
                    std::int64_t stride, std::int64_t pad) {
  const std::int64_t n = 4;
  const std::int64_t out_hw = hw * stride;
  const std::int64_t out_pad = out_hw - ((hw - 1) * stride + k - 2 * pad);
  ipu::op_node op{"ConvTranspose", "", 13, "conv_transpose", {0, 1}, {2},
                  {{"kernel_shape", std::vector<std::int64_t>{k, k}},
                   {"strides", std::vector<std::int64_t>{stride, stride}},
                   {"pads", std::vector<std::int64_t>{pad, pad, pad, pad}},
                   {"output_padding", std::vector<std::int64_t>{out_pad, out_pad}}},
                  {}};
  const double flops = 2.0 * static_cast<double>(n * c * hw * hw * m * k * k);
  run_kernel(state, op, {random_tensor({n, c, hw, hw}, 5), random_tensor({c, m, k, k}, 6)},
             {ipu::data_type::F32, {n, m, out_hw, out_hw}}, flops);
}

}  // namespace

BENCHMARK(ipu::bench::fp32_peak)->Name("fp32_peak")->UseRealTime();
BENCHMARK(matmul)->Name("matmul_f32/512")->Arg(512)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(matmul)->Name("matmul_f32/1024")->Arg(1024)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, alexnet_conv1_11x11s4, 3, 224, 64, 11, 4, 2, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, alexnet_conv3_3x3, 192, 13, 384, 3, 1, 1, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, mobilenet_pointwise_1x1, 96, 56, 24, 1, 1, 0, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, mobilenet_depthwise_3x3, 144, 56, 144, 3, 1, 1, 144)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, mobilenet_depthwise_3x3s2, 144, 56, 144, 3, 2, 1, 144)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, efficientnet_depthwise_5x5, 240, 28, 240, 5, 1, 2, 240)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv, resnet_layer1_3x3, 64, 56, 64, 3, 1, 1, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv_transpose, resnet_layer1_3x3, 64, 56, 64, 3, 1, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv_transpose, resnet_layer2_3x3s2, 128, 28, 64, 3, 2, 1)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(conv_transpose, resnet_layer4_3x3, 512, 7, 512, 3, 1, 1)->UseRealTime()->Unit(benchmark::kMillisecond);

static const int ratios = [] {
  for (const char* name : {"matmul_f32/512", "matmul_f32/1024", "conv/alexnet_conv1_11x11s4", "conv/alexnet_conv3_3x3",
                           "conv/mobilenet_pointwise_1x1", "conv/mobilenet_depthwise_3x3", "conv/mobilenet_depthwise_3x3s2",
                           "conv/efficientnet_depthwise_5x5", "conv/resnet_layer1_3x3",
                           "conv_transpose/resnet_layer1_3x3", "conv_transpose/resnet_layer2_3x3s2",
                           "conv_transpose/resnet_layer4_3x3"})
    ipu::bench::compare(name, "fp32_peak", "gflops");
  return 0;
}();

int main(int argc, char** argv) { return ipu::bench::run_main(argc, argv); }
