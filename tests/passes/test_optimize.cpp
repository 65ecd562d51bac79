// The optimisation stage: pass lists as users write them, and the passes run in the order given.
#include "ipu/passes/optimize.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/cpu/device.hpp"
#include "ipu/graph/validate.hpp"

namespace test_optimize {

TEST_CASE("pass lists: default, none, names in order; unknown and empty names refused with the list") {
  const auto all = ipu::passes::default_passes();
  CHECK(all == std::vector<std::string>{"eliminate-dead-code", "fold-constants", "fold-batch-normalization",
                                        "fuse-conv-activation", "fuse-layer-normalization", "fuse-swish",
                                        "nchwc-layout"});
  CHECK(ipu::passes::parse_pass_list("default") == all);
  CHECK(ipu::passes::parse_pass_list("none").empty());
  CHECK(ipu::passes::parse_pass_list("fold-constants,eliminate-dead-code") ==
        std::vector<std::string>{"fold-constants", "eliminate-dead-code"});
  try {
    (void)ipu::passes::parse_pass_list("fold-constants,fold-everything");
    FAIL("an unknown pass was accepted");
  } catch (const ipu::error& e) {
    CHECK(std::string(e.what()).find("no graph pass 'fold-everything'") != std::string::npos);
    CHECK(std::string(e.what()).find("fuse-layer-normalization") != std::string::npos);  // the known ones are listed
  }
  for (const char* bad : {"", ",fold-constants", "fold-constants,", "fold-constants,,eliminate-dead-code"})
    CHECK_THROWS_WITH_AS((void)ipu::passes::parse_pass_list(bad), doctest::Contains("empty name"), ipu::error);
}

TEST_CASE("optimize runs the passes in order and reports what each did") {
  ipu::builder b("m", 17);
  const auto x = b.add_input_tensor({ipu::data_type::F32, {3}}, "x");
  const auto c = b.add_constant(ipu::make_constant<float>({3}, {1, 2, 3}));
  b.add_output(b.op("Mul", {x, b.op("Neg", {c})[0]})[0]);
  (void)b.op("Sigmoid", {x});  // dead
  const auto g = std::move(b).build();
  std::vector<ipu::passes::pass_report> report;
  const auto opt = ipu::passes::optimize(g, ipu::passes::default_passes(), &report);
  CHECK_NOTHROW(ipu::validate(opt));
  CHECK(opt.num_ops() == 1);
  REQUIRE(report.size() == 7);
  CHECK(report[0].name == "eliminate-dead-code");
  CHECK(report[0].ops_before == 3);
  CHECK(report[0].ops_after == 2);
  CHECK(report[1].ops_after == 1);  // Neg folded
  CHECK(report[5].name == "fuse-swish");
  CHECK(report[5].ops_after == 1);
  CHECK(report[6].name == "nchwc-layout");
  CHECK(report[6].ops_after == 1);  // no convolutions to block
  const auto in = ipu::host_tensor::from<float>({3}, {1, -1, 0.5f});
  const auto got = ipu::cpu::device(opt).run({in}), want = ipu::cpu::device(g).run({in});
  const auto o = got[0].as<float>(), w = want[0].as<float>();
  CHECK(std::vector<float>(o.begin(), o.end()) == std::vector<float>(w.begin(), w.end()));
  // An empty list is the graph as it is.
  CHECK(ipu::passes::optimize(g, {}) == g);
}

}  // namespace test_optimize
