// A compiled model that runs a custom op (ipu/ops/custom_ops.hpp) names it in its PopEF metadata,
// loads and runs in a session while the op is registered (results by hand), and is refused at load,
// naming the op and --custom-op, while it is not.
#include "ipu/popef/compiled_model.hpp"

#include <doctest/doctest.h>

#include <mutex>
#include <string>
#include <vector>

#include "ipu/builder/builder.hpp"
#include "ipu/compile/compile.hpp"
#include "ipu/ops/custom_ops.hpp"
#include "ipu/poptorch/options.hpp"
#include "ipu/runtime/session.hpp"
#include "popef_test_util.hpp"

namespace test_compiled_model {

using namespace ipu;

namespace {
std::vector<tensor_info> same_as_input(const infer_context& c) { return {c.input(0)}; }
void triple(const kernel_context& c) {
  const auto x = c.input(0).as<float>();
  for (std::size_t i = 0; i < x.size(); ++i) c.outputs[0].as<float>()[i] = 3 * x[i];
}
void register_triple() {
  static std::once_flag once;
  std::call_once(once, [] {
    ops::register_custom_op({.domain = "popef.test", .type = "Triple", .shape = same_as_input, .kernel = triple});
  });
}
options two_batches() { return options().device_iterations(2).execution_strategy(strategy_settings::sharded()); }
}  // namespace

TEST_CASE("a PopEF model names its custom ops, runs them in a session, and is refused while one is unregistered") {
  register_triple();
  test_popef::scratch_dir dir("custom");
  {
    builder b("custom");
    const auto x = b.add_input_tensor({data_type::F32, {3}}, "x");
    b.add_output(b.op("Triple", {x}, {}, {.opset = 1, .name = "y", .domain = "popef.test"}).front());
    (void)popef::compile_and_export(std::move(b).build(), two_batches(), device_from_name("mk2", 1), dir / "m.popef");
  }
  const auto loaded = popef::load(dir / "m.popef");
  CHECK(loaded.metadata.custom_ops == std::vector<popef::custom_op_use>{{"popef.test", "Triple", 1}});
  runtime::session s(dir / "m.popef", device_from_name("mk2", 1));
  s.run_load_programs();
  const auto x = host_tensor::from<float>({2, 3}, {1, -2, 0.5f, 4, 0, -1});
  step_io io;
  io.set_input("x", x.view());
  s.run_main_programs(io);
  const auto& y = s.outputs().at("y");
  CHECK(std::vector<float>(y.as<float>().begin(), y.as<float>().end()) == std::vector<float>{3, -6, 1.5f, 12, 0, -3});

  // An op of a domain nobody registered, with its outputs given as PopTorch's example_outputs do.
  {
    builder b("ghost");
    const auto gx = b.add_input_tensor({data_type::F32, {3}}, "x");
    b.add_output(b.custom_op("ghost.ops", "Phantom", 4, {gx}, {{data_type::F32, {3}}}).front());
    (void)popef::compile_and_export(std::move(b).build(), two_batches(), device_from_name("mk2", 1), dir / "ghost.popef");
  }
  try {
    (void)popef::load(dir / "ghost.popef");
    FAIL("a model with an unregistered custom op loaded");
  } catch (const error& e) {
    const std::string what = e.what();
    CHECK(what.find("the model uses custom op ghost.ops::Phantom (version 4), which is not registered") != std::string::npos);
    CHECK(what.find("--custom-op LIB.so") != std::string::npos);
  }
}

}  // namespace test_compiled_model
