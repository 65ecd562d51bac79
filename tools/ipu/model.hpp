#pragma once
// `ipu model --device mk1|mk2|bow [--batch N] [--all-reduce-bytes B] [--json [FILE]]`
//
// Prints the cost model's microbenchmark-level figures for one architecture, the numbers to hold
// against measurements of real IPUs: square GEMM throughput and efficiency per precision (one IPU,
// n = 256..8192), three convolution layers (ResNet stem, a 3x3 64->64, a ResNeXt grouped 3x3), on-chip
// exchange bandwidth, IPU-Link bandwidth per direction, host bandwidth and minimum latency, sync
// latency by IPU count and ring all-reduce time over replicas. Everything comes from the same
// functions `ipu plan` uses (include/ipu/device/). `--batch` is the convolutions' batch size;
// `--all-reduce-bytes` the bytes each replica all-reduces.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "ipu/device/collective_cost.hpp"
#include "ipu/device/compute_cost.hpp"
#include "ipu/device/device_model.hpp"
#include "ipu/device/transfer.hpp"
#include "ipu/error.hpp"
#include "json_output.hpp"

namespace ipu_cli {

struct model_args {
  std::string device = "mk2";
  std::uint64_t batch = 1;
  std::uint64_t all_reduce_bytes = 64ull << 20;
  json_option json;
};

namespace model_detail {

inline const char* precision_name(ipu::precision p) {
  switch (p) {
    case ipu::precision::fp32: return "fp32";
    case ipu::precision::fp16_32: return "fp16.32";
    case ipu::precision::fp16_16: return "fp16.16";
  }
  return "?";
}

inline nlohmann::json amp_figures(const ipu::device_description& d, const ipu::amp_plan& plan, double flops) {
  const double seconds = ipu::cycles_to_seconds(d.arch, plan.total_cycles());
  return {{"cycles", plan.total_cycles()},
          {"seconds", seconds},
          {"tflops", seconds > 0 ? flops / seconds / 1e12 : 0.0},
          {"efficiency", plan.efficiency()},
          {"tiles_used", plan.tiles_used},
          {"fits_memory", plan.fits_temporary_budget()}};
}

inline constexpr ipu::precision precisions[] = {ipu::precision::fp32, ipu::precision::fp16_32,
                                                ipu::precision::fp16_16};

}  // namespace model_detail

/// The figures as JSON (the text output prints the same object).
inline nlohmann::json model_figures(const model_args& args) {
  using nlohmann::json;
  namespace md = model_detail;
  const auto d = ipu::device_from_name(args.device, 1);
  if (d.kind != ipu::device_kind::ipu)
    throw ipu::error(ipu::error_category::usage, "the cost model has no figures for device '" + args.device + "'",
                     "ipu model --device", "use mk1, mk2 or bow");
  const auto& a = d.arch;
  json out;
  out["device"] = std::string(a.name);
  out["clock_hz"] = a.clock_hz;
  out["tiles"] = a.tiles_per_ipu;

  json gemm = json::array();
  for (auto p : md::precisions)
    for (std::uint64_t n = 256; n <= 8192; n *= 2) {
      const auto plan = ipu::plan_matmul(d, ipu::matmul_shape{1, n, n, n}, p);
      auto f = md::amp_figures(d, plan, 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n));
      f["precision"] = md::precision_name(p);
      f["n"] = n;
      f["peak_tflops"] = ipu::peak_flops(a, p) / 1e12;
      gemm.push_back(f);
    }
  out["gemm"] = gemm;

  struct layer {
    const char* name;
    ipu::conv_shape shape;
  };
  const std::uint64_t b = args.batch;
  const layer layers[] = {
      {"resnet_stem_7x7s2_224_3to64", {b, 3, 64, 1, {224, 224}, {7, 7}, {2, 2}, {3, 3}, {3, 3}, {}}},
      {"conv3x3_56_64to64", {b, 64, 64, 1, {56, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {}}},
      {"resnext_grouped3x3_56_128to128_g32", {b, 128, 128, 32, {56, 56}, {3, 3}, {1, 1}, {1, 1}, {1, 1}, {}}},
  };
  json conv = json::array();
  for (const auto& l : layers)
    for (auto p : md::precisions) {
      const auto plan = ipu::plan_conv(d, l.shape, p);
      auto f = md::amp_figures(d, plan, 2.0 * static_cast<double>(l.shape.macs()));
      f["layer"] = l.name;
      f["batch"] = b;
      f["precision"] = md::precision_name(p);
      conv.push_back(f);
    }
  out["conv"] = conv;

  const double clock = static_cast<double>(a.clock_hz);
  out["exchange"] = {{"tile_pair_bytes_per_second", a.exchange_bytes_per_cycle * clock},
                     {"all_tiles_bytes_per_second", a.exchange_bytes_per_cycle * clock * a.tiles_per_ipu},
                     {"setup_cycles", a.exchange_setup_cycles}};

  // A board: a C2 card holds 2 Mk1 IPUs, an IPU-M2000 / Bow-2000 4. "Across boards" is the first IPU
  // of the next board from its neighbour on this one.
  const std::uint32_t board = a.ipu_version == "ipu1" ? 2 : 4;
  const auto sys = ipu::make_device_description(a, 2 * board);
  const double link = ipu::link_bytes_per_second(a);
  const auto partner = ipu::ipu_link_route(sys, 0, 1), across = ipu::ipu_link_route(sys, board - 2, board);
  out["ipu_link"] = {{"link_bytes_per_second", link},
                     {"board_partner_links", partner.links},
                     {"board_partner_bytes_per_second", partner.links * link},
                     {"across_boards_links", across.links},
                     {"across_boards_bytes_per_second", across.links * link}};

  out["host"] = {{"bytes_per_second", a.host_bytes_per_second},
                 {"min_latency_seconds", ipu::host_transfer_min_seconds(a)},
                 {"read_bytes_per_second", ipu::host_read_bytes_per_second(a)},
                 {"read_min_latency_seconds", ipu::host_read_min_seconds(a)}};

  json sync = json::array();
  for (std::uint32_t n : {1u, 2u, 4u, 8u, 16u, 64u}) {
    const auto c = ipu::sync_cycles(a, n);
    sync.push_back({{"ipus", n}, {"cycles", c}, {"seconds", ipu::cycles_to_seconds(a, c)}});
  }
  out["sync"] = sync;

  json ar = json::array();
  for (std::uint32_t r : {2u, 4u, 8u, 16u, 64u}) {
    const auto c = ipu::ring_all_reduce_cost(a, 1, r, args.all_reduce_bytes);
    const double s = ipu::cycles_to_seconds(a, c.cycles);
    ar.push_back({{"replicas", r},
                  {"bytes", args.all_reduce_bytes},
                  {"seconds", s},
                  {"algorithm_bytes_per_second", s > 0 ? static_cast<double>(args.all_reduce_bytes) / s : 0.0}});
  }
  out["all_reduce"] = ar;
  return out;
}

inline void print_model_text(const nlohmann::json& f) {
  auto line = [](const char* fmt, auto... v) {
    char buf[256];
    std::snprintf(buf, sizeof buf, fmt, v...);
    std::cout << buf << '\n';
  };
  line("device %s: %u tiles at %.3f GHz", f["device"].get<std::string>().c_str(), f["tiles"].get<unsigned>(),
       f["clock_hz"].get<double>() / 1e9);
  std::cout << "\nsquare GEMM n x n x n on one IPU\n";
  line("  %-8s %6s %10s %8s %10s %6s", "prec", "n", "TFLOP/s", "eff", "peak", "tiles");
  for (const auto& g : f["gemm"])
    line("  %-8s %6llu %10.2f %7.1f%% %10.2f %6u%s", g["precision"].get<std::string>().c_str(),
         static_cast<unsigned long long>(g["n"].get<std::uint64_t>()), g["tflops"].get<double>(),
         100 * g["efficiency"].get<double>(), g["peak_tflops"].get<double>(), g["tiles_used"].get<unsigned>(),
         g["fits_memory"].get<bool>() ? "" : "  (does not fit: operands exceed the IPU's memory)");
  line("\nconvolutions (batch %llu)", static_cast<unsigned long long>(f["conv"][0]["batch"].get<std::uint64_t>()));
  for (const auto& c : f["conv"])
    line("  %-36s %-8s %10.2f TFLOP/s %6.1f%% %10.1f us", c["layer"].get<std::string>().c_str(),
         c["precision"].get<std::string>().c_str(), c["tflops"].get<double>(), 100 * c["efficiency"].get<double>(),
         c["seconds"].get<double>() * 1e6);
  const auto& x = f["exchange"];
  line("\non-chip exchange: %.2f GB/s per tile pair, %.1f TB/s all tiles",
       x["tile_pair_bytes_per_second"].get<double>() / 1e9, x["all_tiles_bytes_per_second"].get<double>() / 1e12);
  const auto& l = f["ipu_link"];
  line("IPU-Link per direction: %.2f GB/s per link; board partner %u links %.2f GB/s; across boards %u links %.2f GB/s",
       l["link_bytes_per_second"].get<double>() / 1e9, l["board_partner_links"].get<unsigned>(),
       l["board_partner_bytes_per_second"].get<double>() / 1e9, l["across_boards_links"].get<unsigned>(),
       l["across_boards_bytes_per_second"].get<double>() / 1e9);
  line("IPU -> host (writes): %.3f GB/s, minimum latency %.3f us", f["host"]["bytes_per_second"].get<double>() / 1e9,
       f["host"]["min_latency_seconds"].get<double>() * 1e6);
  line("host -> IPU (reads): %.3f GB/s, minimum latency %.3f us",
       f["host"]["read_bytes_per_second"].get<double>() / 1e9, f["host"]["read_min_latency_seconds"].get<double>() * 1e6);
  std::cout << "sync latency:\n";
  for (const auto& s : f["sync"])
    line("  %2u IPUs %6llu cycles %8.1f ns", s["ipus"].get<unsigned>(),
         static_cast<unsigned long long>(s["cycles"].get<std::uint64_t>()), s["seconds"].get<double>() * 1e9);
  line("all-reduce of %llu bytes per replica (1 IPU each):",
       static_cast<unsigned long long>(f["all_reduce"][0]["bytes"].get<std::uint64_t>()));
  for (const auto& r : f["all_reduce"])
    line("  %3u replicas %10.1f us  %.2f GB/s", r["replicas"].get<unsigned>(), r["seconds"].get<double>() * 1e6,
         r["algorithm_bytes_per_second"].get<double>() / 1e9);
}

inline void add_model_command(CLI::App& app) {
  auto args = std::make_shared<model_args>();
  auto* cmd = app.add_subcommand("model", "print the cost model's figures for one IPU architecture");
  cmd->add_option("--device", args->device, "mk1, mk2 or bow")->capture_default_str();
  cmd->add_option("--batch", args->batch, "batch size of the convolution layers")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 16));
  cmd->add_option("--all-reduce-bytes", args->all_reduce_bytes, "bytes each replica all-reduces")
      ->capture_default_str()
      ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1} << 40));
  add_json_option(*cmd, args->json);
  cmd->callback([args] {
    report r(args->json);
    r.json = model_figures(*args);
    if (r.text_on()) print_model_text(r.json);
    r.finish();
  });
}

}  // namespace ipu_cli
