#include "ipu/cpu/device.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <cmath>
#include <cstring>
#include <thread>
#include <memory>
#include <utility>
#include <vector>

#include "test_kernels.hpp"

namespace test_device {

using namespace test_kernels;

namespace {
ipu::cpu::device_options opts(std::size_t threads = 1) { return {.threads = threads, .registry = &registry()}; }

// y = Relu(x + w) ; z = Neg(y) ; outputs (z, y)
ipu::graph small_model() {
  ipu::graph g("small");
  auto x = g.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  const float wv[] = {1, -2, 3, -4};
  auto w = g.add_tensor("w", f32({4}), ipu::tensor_kind::variable, ipu::byte_buffer::from_values<float>(wv));
  auto s = op(g, "Add", {x, w}, "s", f32({4}));
  auto y = op(g, "Relu", {s}, "y", f32({4}));
  auto z = op(g, "Neg", {y}, "z", f32({4}));
  g.mark_output(z);
  g.mark_output(y);
  return g;
}

std::vector<float> values(const ipu::host_tensor& t) {
  auto s = t.as<float>();
  return {s.begin(), s.end()};
}
}  // namespace

TEST_CASE("cpu device: runs a graph and returns every output, by position or by name") {
  ipu::cpu::device dev(small_model(), opts());
  auto x = ipu::host_tensor::from<float>({4}, {0.5f, 0.5f, -1.0f, 10.0f});
  auto out = dev.run(std::vector<ipu::host_tensor>{x});
  REQUIRE(out.size() == 2);
  CHECK(values(out[0]) == std::vector<float>{-1.5f, 0.0f, -2.0f, -6.0f});
  CHECK(values(out[1]) == std::vector<float>{1.5f, 0.0f, 2.0f, 6.0f});
  CHECK(out[0].info() == f32({4}));

  auto named = dev.run(ipu::cpu::named_tensors{{"x", x.view()}});
  CHECK(values(named[0]) == values(out[0]));
  CHECK(values(named[1]) == values(out[1]));
  // Repeated runs reuse the arena and give the same answer.
  for (int i = 0; i < 3; ++i) CHECK(values(dev.run(std::vector<ipu::host_tensor>{x})[0]) == values(out[0]));
}

TEST_CASE("cpu device: weights are read in place from the graph's byte_buffer") {
  static const std::byte* seen = nullptr;
  ipu::op_registry reg;
  reg.add({"", "Peek", [](const ipu::kernel_context& c) {
             seen = c.input(0).data();
             std::memcpy(c.outputs[0].data(), c.input(0).data(), 16);
           }});
  auto storage = std::make_shared<std::vector<float>>(std::vector<float>{1, 2, 3, 4});
  auto buf = ipu::byte_buffer::share(storage, reinterpret_cast<const std::byte*>(storage->data()), 16);
  ipu::graph g("weights");
  auto w = g.add_tensor("w", f32({4}), ipu::tensor_kind::constant, buf);
  g.mark_output(op(g, "Peek", {w}, "y", f32({4})));
  ipu::cpu::device dev(std::move(g), {.threads = 1, .registry = &reg});
  auto out = dev.run(std::vector<ipu::host_tensor>{});
  CHECK(seen == reinterpret_cast<const std::byte*>(storage->data()));
  CHECK(values(out[0]) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("cpu device: kernels see which inputs are constants and keep what they prepare between runs") {
  // Each Prep op counts the times it found its cache empty; its output is that count.
  struct seen_inputs {
    bool input_constant = true, weight_constant = false, cached = false;
  };
  static seen_inputs seen[2];
  ipu::op_registry reg;
  reg.add({"", "Prep", [](const ipu::kernel_context& c) {
             const auto which = static_cast<std::size_t>(c.input(1).as<float>()[0]);
             seen[which] = {c.input_is_constant(0), c.input_is_constant(1), c.cache != nullptr};
             auto count = std::static_pointer_cast<int>(c.cache->prepared);
             if (!count) c.cache->prepared = count = std::make_shared<int>(0);
             c.outputs[0].as<float>()[0] = static_cast<float>(++*count);
           }});
  ipu::graph g("prepared");
  auto x = g.add_tensor("x", f32({1}), ipu::tensor_kind::input);
  const float zero[] = {0}, one[] = {1};
  auto w0 = g.add_tensor("w0", f32({1}), ipu::tensor_kind::constant, ipu::byte_buffer::from_values<float>(zero));
  auto w1 = g.add_tensor("w1", f32({1}), ipu::tensor_kind::constant, ipu::byte_buffer::from_values<float>(one));
  g.mark_output(op(g, "Prep", {x, w0}, "a", f32({1})));
  g.mark_output(op(g, "Prep", {x, w1}, "b", f32({1})));
  ipu::cpu::device dev(std::move(g), {.threads = 1, .registry = &reg});
  const auto in = ipu::host_tensor::from<float>({1}, {0.0f});
  for (int run = 1; run <= 3; ++run) {
    const auto out = dev.run(std::vector<ipu::host_tensor>{in});
    // One cache per op, kept across runs: each op counts its own runs.
    CHECK(values(out[0]) == std::vector<float>{static_cast<float>(run)});
    CHECK(values(out[1]) == std::vector<float>{static_cast<float>(run)});
  }
  for (const auto& s : seen) {
    CHECK_FALSE(s.input_constant);
    CHECK(s.weight_constant);
    CHECK(s.cached);
  }
}

TEST_CASE("cpu device: a Conv whose weights are constants gives the bits of one whose weights are inputs") {
  // oneDNN's Conv keeps its constant weights reordered after the first run; a weight given as an
  // input is reordered on every run. Both must compute the same thing, run after run.
  const auto x_info = f32({2, 8, 9, 9}), w_info = f32({16, 8, 3, 3}), y_info = f32({2, 16, 9, 9});
  std::vector<float> xv(static_cast<std::size_t>(x_info.num_elements())), wv(static_cast<std::size_t>(w_info.num_elements()));
  for (std::size_t i = 0; i < xv.size(); ++i) xv[i] = std::sin(0.37f * static_cast<float>(i));
  for (std::size_t i = 0; i < wv.size(); ++i) wv[i] = std::cos(0.11f * static_cast<float>(i));
  const std::vector<ipu::attribute> attrs{{"pads", std::vector<std::int64_t>{1, 1, 1, 1}}};
  ipu::graph constant("constant_weights"), input("input_weights");
  {
    auto x = constant.add_tensor("x", x_info, ipu::tensor_kind::input);
    auto w = constant.add_tensor("w", w_info, ipu::tensor_kind::constant,
                                 ipu::byte_buffer::from_values<float>(std::span<const float>(wv)));
    constant.mark_output(op(constant, "Conv", {x, w}, "y", y_info, attrs));
  }
  {
    auto x = input.add_tensor("x", x_info, ipu::tensor_kind::input);
    auto w = input.add_tensor("w", w_info, ipu::tensor_kind::input);
    input.mark_output(op(input, "Conv", {x, w}, "y", y_info, attrs));
  }
  ipu::cpu::device with_constant(std::move(constant), {.threads = 1}), with_input(std::move(input), {.threads = 1});
  const auto x = ipu::host_tensor::from<float>({2, 8, 9, 9}, xv);
  const auto w = ipu::host_tensor::from<float>({16, 8, 3, 3}, wv);
  const auto expected = values(with_input.run(std::vector<ipu::host_tensor>{x, w})[0]);
  for (int run = 0; run < 3; ++run) {
    const auto got = values(with_constant.run(std::vector<ipu::host_tensor>{x})[0]);
    CHECK(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
  }
  // And the value itself: output channel 0 at the centre of image 0, summed by hand.
  double centre = 0;
  for (int c = 0; c < 8; ++c)
    for (int a = 0; a < 3; ++a)
      for (int b = 0; b < 3; ++b) centre += double(wv[static_cast<std::size_t>((c * 3 + a) * 3 + b)]) *
                                            xv[static_cast<std::size_t>((c * 9 + 3 + a) * 9 + 3 + b)];
  CHECK(expected[4 * 9 + 4] == doctest::Approx(centre).epsilon(1e-5));
}

TEST_CASE("cpu device: a wrong input is an error naming the input, what was expected and what came") {
  ipu::cpu::device dev(small_model(), opts());
  auto wrong_shape = ipu::host_tensor::from<float>({5}, {1, 2, 3, 4, 5});
  CHECK_THROWS_WITH_AS(dev.run(std::vector<ipu::host_tensor>{wrong_shape}),
                       doctest::Contains("input 'x' expects F32[4] but received F32[5]"), ipu::error);
  auto wrong_type = ipu::host_tensor::from<std::int32_t>({4}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(dev.run(std::vector<ipu::host_tensor>{wrong_type}),
                       doctest::Contains("input 'x' expects F32[4] but received S32[4]"), ipu::error);
  CHECK_THROWS_WITH_AS(dev.run(std::vector<ipu::host_tensor>{}),
                       doctest::Contains("the graph has 1 input (x F32[4]) but 0 were given"), ipu::error);
  auto x = ipu::host_tensor::from<float>({4}, {1, 2, 3, 4});
  CHECK_THROWS_WITH_AS(dev.run(ipu::cpu::named_tensors{{"nope", x.view()}}),
                       doctest::Contains("no graph input named 'nope'"), ipu::error);
  CHECK_THROWS_WITH_AS(dev.run(ipu::cpu::named_tensors{{"y", x.view()}}),
                       doctest::Contains("'y' is an intermediate, not a graph input"), ipu::error);
  CHECK_THROWS_WITH_AS(dev.run(ipu::cpu::named_tensors{{"w", x.view()}}),
                       doctest::Contains("'w' is a variable, not a graph input"), ipu::error);
  CHECK_THROWS_WITH_AS(dev.run(ipu::cpu::named_tensors{}), doctest::Contains("input 'x' is not given"), ipu::error);
  CHECK_THROWS_WITH_AS(dev.run(ipu::cpu::named_tensors{{"x", x.view()}, {"x", x.view()}}),
                       doctest::Contains("input 'x' is given twice"), ipu::error);
  try {
    (void)dev.run(std::vector<ipu::host_tensor>{wrong_shape});
  } catch (const ipu::error& e) {
    CHECK(e.category() == ipu::error_category::shape);
  }
}

TEST_CASE("cpu device: misaligned caller memory is accepted (copied, not read through a bad pointer)") {
  ipu::cpu::device dev(small_model(), opts());
  alignas(16) std::byte raw[4 * sizeof(float) + 1];
  const float xs[] = {0.5f, 0.5f, -1.0f, 10.0f};
  std::memcpy(raw + 1, xs, sizeof xs);
  auto out = dev.run(std::vector<ipu::const_tensor_view>{ipu::const_tensor_view(f32({4}), raw + 1)});
  CHECK(values(out[1]) == std::vector<float>{1.5f, 0.0f, 2.0f, 6.0f});
}

TEST_CASE("cpu device: a missing kernel fails at construction, listing the ops") {
  ipu::graph g("m");
  auto x = g.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  g.mark_output(op(g, "Softmax", {x}, "y", f32({4})));
  CHECK_THROWS_WITH_AS(ipu::cpu::device(std::move(g), opts()), doctest::Contains("without a host kernel: Softmax"),
                       ipu::error);
}

TEST_CASE("cpu device: a kernel's own exception becomes an error naming the op") {
  ipu::graph g("t");
  auto x = g.add_tensor("x", f32({1}), ipu::tensor_kind::input);
  g.mark_output(op(g, "Throw", {x}, "boom", f32({1})));
  ipu::cpu::device dev(std::move(g), opts());
  auto in = ipu::host_tensor::from<float>({1}, {1.0f});
  CHECK_THROWS_WITH_AS(dev.run(std::vector<ipu::host_tensor>{in}), doctest::Contains("op Throw 'boom'"), ipu::error);
}

TEST_CASE("cpu device: results are identical across runs with the same thread count") {
  ipu::graph g("sum");
  auto x = g.add_tensor("x", f32({10001}), ipu::tensor_kind::input);
  g.mark_output(op(g, "ReduceSum", {op(g, "Relu", {x}, "r", f32({10001}))}, "s", f32({1})));
  std::vector<float> xs(10001);
  for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = 1.0f / static_cast<float>(i % 977 + 1) + 1e-3f * static_cast<float>(i);
  auto in = ipu::host_tensor::from<float>({10001}, std::span<const float>(xs));
  for (std::size_t threads : {1u, 2u, 3u}) {
    ipu::cpu::device dev(ipu::graph(g), opts(threads));
    CHECK(dev.threads() == threads);
    const float first = dev.run(std::vector<ipu::host_tensor>{in})[0].as<float>()[0];
    for (int i = 0; i < 10; ++i) CHECK(dev.run(std::vector<ipu::host_tensor>{in})[0].as<float>()[0] == first);
    ipu::cpu::device again(ipu::graph(g), opts(threads));
    CHECK(again.run(std::vector<ipu::host_tensor>{in})[0].as<float>()[0] == first);
    double exact = 0;
    for (float v : xs) exact += v;
    CHECK(first == doctest::Approx(exact).epsilon(1e-5));
  }
}

TEST_CASE("cpu device: If bodies run through the subgraph runner and read enclosing tensors") {
  ipu::graph then_body("then");
  then_body.mark_output(op(then_body, "Relu", {then_body.add_tensor("a", f32({3}))}, "then_out", f32({3})));
  ipu::graph else_body("else");
  else_body.mark_output(op(else_body, "Neg", {else_body.add_tensor("a", f32({3}))}, "else_out", f32({3})));

  ipu::graph g("if");
  auto x = g.add_tensor("x", f32({3}), ipu::tensor_kind::input);
  auto cond = g.add_tensor("cond", {ipu::data_type::BOOL, {}}, ipu::tensor_kind::input);
  auto a = op(g, "Add", {x, x}, "a", f32({3}));
  auto b = op(g, "Neg", {a}, "b", f32({3}));
  auto c = op(g, "If", {cond}, "c", f32({3}),
              {{"then_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(then_body)}},
               {"else_branch", ipu::subgraph{ipu::detail::box<ipu::graph>(else_body)}}});
  g.mark_output(op(g, "Add", {b, c}, "out", f32({3})));
  ipu::cpu::device dev(std::move(g), opts(2));
  auto xs = ipu::host_tensor::from<float>({3}, {1.0f, -2.0f, 3.0f});
  auto yes = ipu::host_tensor::from<bool>({}, {true});
  auto no = ipu::host_tensor::from<bool>({}, {false});
  // a = 2x = {2,-4,6}; b = -a; then: relu(a) = {2,0,6}; else: -a.
  CHECK(values(dev.run(std::vector<ipu::host_tensor>{xs, yes})[0]) == std::vector<float>{0, 4, 0});
  CHECK(values(dev.run(std::vector<ipu::host_tensor>{xs, no})[0]) == std::vector<float>{-4, 8, -12});
}

TEST_CASE("cpu device: outputs that are inputs or weights are copies") {
  ipu::graph g("passthrough");
  auto x = g.add_tensor("x", f32({2}), ipu::tensor_kind::input);
  const float cv[] = {7, 8};
  auto k = g.add_tensor("k", f32({2}), ipu::tensor_kind::constant, ipu::byte_buffer::from_values<float>(cv));
  auto y = op(g, "Relu", {x}, "y", f32({2}));
  g.mark_output(x);
  g.mark_output(k);
  g.mark_output(y);
  ipu::cpu::device dev(std::move(g), opts());
  auto in = ipu::host_tensor::from<float>({2}, {-1.0f, 2.0f});
  auto out = dev.run(std::vector<ipu::host_tensor>{in});
  REQUIRE(out.size() == 3);
  CHECK(values(out[0]) == std::vector<float>{-1, 2});
  CHECK(out[0].data() != in.data());
  CHECK(values(out[1]) == std::vector<float>{7, 8});
  CHECK(values(out[2]) == std::vector<float>{0, 2});
}

TEST_CASE("cpu device: STRING outputs own their characters, written in place or copied") {
  const ipu::tensor_info text{ipu::data_type::STRING, {2}};
  ipu::graph g("strings");
  auto x = g.add_tensor("x", text, ipu::tensor_kind::input);
  auto a = op(g, "StringNormalizer", {x}, "a", text);  // the test kernel: appends "!"
  auto b = op(g, "StringNormalizer", {a}, "b", text);
  auto c = op(g, "Identity", {a}, "c", text);           // a view of an arena tensor
  g.mark_output(b);
  g.mark_output(c);
  std::vector<ipu::host_tensor> out;
  {
    ipu::cpu::device dev(std::move(g), opts());
    auto in = ipu::host_tensor::from_strings({2}, {"hi", ""});
    out = dev.run(std::vector<ipu::host_tensor>{in});
    auto again = dev.run(std::vector<ipu::host_tensor>{ipu::host_tensor::from_strings({2}, {"x", "y"})});
    CHECK(again[0].string_at(0) == "x!!");
  }  // the device, its arenas and its runs' heaps are gone
  REQUIRE(out.size() == 2);
  CHECK(out[0].string_at(0) == "hi!!");
  CHECK(out[0].string_at(1) == "!!");
  CHECK(out[1].string_at(0) == "hi!");
  CHECK(out[1].string_at(1) == "!");
}

TEST_CASE("cpu device: an op that does not take strings is refused one, naming it") {
  const ipu::tensor_info text{ipu::data_type::STRING, {2}};
  ipu::graph g("strings");
  auto x = g.add_tensor("x", text, ipu::tensor_kind::input);
  g.mark_output(op(g, "Relu", {x}, "y", text));
  CHECK_THROWS_WITH_AS(ipu::cpu::device(std::move(g), opts()),
                       doctest::Contains("is given STRING tensor 'x', which it does not take"), ipu::error);
}

TEST_CASE("cpu device: in-place and view-only steps give the same results as fresh buffers") {
  ipu::graph g("views");
  auto x = g.add_tensor("x", f32({2, 3}), ipu::tensor_kind::input);
  auto a = op(g, "Relu", {x}, "a", f32({2, 3}));
  auto r = op(g, "Reshape", {a}, "r", f32({6}));
  auto n = op(g, "Neg", {r}, "n", f32({6}));
  g.mark_output(op(g, "Add", {n, n}, "out", f32({6})));
  auto in = ipu::host_tensor::from<float>({2, 3}, {1, -2, 3, -4, 5, -6});
  ipu::cpu::device fast(ipu::graph(g), opts());
  ipu::cpu::device plain(ipu::graph(g), {.threads = 1, .registry = &registry(), .plan = {.reuse_memory = false, .in_place = false}});
  CHECK(fast.plan().num_in_place() == 2);
  CHECK(plain.plan().num_in_place() == 0);
  const std::vector<float> expect{-2, 0, -6, 0, -10, 0};
  CHECK(values(fast.run(std::vector<ipu::host_tensor>{in})[0]) == expect);
  CHECK(values(plain.run(std::vector<ipu::host_tensor>{in})[0]) == expect);
}

namespace {
// Adds its input into its output, so it reads what the output held before the kernel ran.
void add_into(const ipu::kernel_context& c) {
  auto x = c.input(0).as<float>();
  auto y = c.outputs[0].as<float>();
  for (std::size_t i = 0; i < x.size(); ++i) y[i] += x[i];
}
}  // namespace

TEST_CASE("cpu device: recycled tensors become later outputs of the same type and shape, zeroed first") {
  ipu::op_registry reg = registry();
  reg.add({"", "AddInto", &add_into});
  ipu::graph g("recycle");
  auto x = g.add_tensor("x", f32({4}), ipu::tensor_kind::input);
  g.mark_output(op(g, "AddInto", {x}, "y", f32({4})));
  ipu::cpu::device dev(std::move(g), {.threads = 1, .registry = &reg});
  auto in = ipu::host_tensor::from<float>({4}, {1, 2, 3, 4});
  auto out = dev.run(std::vector<ipu::host_tensor>{in});
  REQUIRE(out.size() == 1);
  CHECK(values(out[0]) == std::vector<float>{1, 2, 3, 4});
  for (auto& v : out[0].as<float>()) v = 100;  // the holder's last use: zeroing must not be skipped
  const std::byte* storage = out[0].data();
  dev.recycle(std::move(out[0]));
  dev.recycle(ipu::host_tensor(f32({3})));  // another shape: never handed out as this output
  auto again = dev.run(std::vector<ipu::host_tensor>{in});
  CHECK(again[0].data() == storage);
  CHECK(again[0].info() == f32({4}));
  CHECK(values(again[0]) == std::vector<float>{1, 2, 3, 4});
  auto third = dev.run(std::vector<ipu::host_tensor>{in});  // nothing of its shape recycled: fresh
  CHECK(third[0].info() == f32({4}));
  CHECK(values(third[0]) == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("cpu device: arena outputs are zeroed unless the kernel says it writes every element") {
  auto model = [] {
    ipu::graph g("accumulate");
    auto x = g.add_tensor("x", f32({3}), ipu::tensor_kind::input);
    auto y = op(g, "AddInto", {x}, "y", f32({3}));
    g.mark_output(op(g, "Neg", {y}, "z", f32({3})));  // y lives in the arena
    return g;
  };
  auto in = ipu::host_tensor::from<float>({3}, {1, -2, 3});
  ipu::op_registry honest = registry();
  honest.add({"", "AddInto", &add_into});
  ipu::cpu::device dev(model(), {.threads = 1, .registry = &honest});
  for (int run = 0; run < 3; ++run)  // the arena is reused: stale sums must not leak into the next run
    CHECK(values(dev.run(std::vector<ipu::host_tensor>{in})[0]) == std::vector<float>{-1, 2, -3});
#ifndef NDEBUG
  // A kernel that claims to write every element but reads its output sees the debug build's NaN
  // fill, so the built-in kernels' claims are checked by every test that runs them.
  ipu::op_registry lying = registry();
  lying.add({"", "AddInto", &add_into, true});
  ipu::cpu::device liar(model(), {.threads = 1, .registry = &lying});
  for (float v : values(liar.run(std::vector<ipu::host_tensor>{in})[0])) CHECK(std::isnan(v));
#endif
}

TEST_SUITE("concurrent") {
  TEST_CASE("cpu device: concurrent runs from several threads on a multi-threaded device") {
    ipu::graph g("sum");
    auto x = g.add_tensor("x", f32({4096}), ipu::tensor_kind::input);
    auto r = op(g, "Relu", {x}, "r", f32({4096}));
    g.mark_output(op(g, "ReduceSum", {op(g, "Neg", {r}, "n", f32({4096}))}, "s", f32({1})));
    ipu::cpu::device dev(std::move(g), opts(3));
    std::vector<float> xs(4096);
    for (std::size_t i = 0; i < xs.size(); ++i) xs[i] = static_cast<float>(i % 13) - 4.0f;
    auto in = ipu::host_tensor::from<float>({4096}, std::span<const float>(xs));
    const float expect = dev.run(std::vector<ipu::host_tensor>{in})[0].as<float>()[0];
    float exact = 0;
    for (float v : xs) exact -= v > 0 ? v : 0;
    CHECK(expect == exact);  // small integers: exact in float whatever the order
    std::atomic<int> mismatches{0};
    std::vector<std::thread> callers;
    for (int t = 0; t < 3; ++t)
      callers.emplace_back([&] {
        for (int i = 0; i < 20; ++i)
          if (dev.run(std::vector<ipu::host_tensor>{in})[0].as<float>()[0] != expect) mismatches.fetch_add(1);
      });
    for (auto& t : callers) t.join();
    CHECK(mismatches.load() == 0);
  }
}

TEST_CASE("cpu device: random ops draw from the device's seed, afresh each run, alike for alike seeds") {
  ipu::graph g("noise");
  g.mark_output(op(g, "RandomNormal", {}, "r", f32({64}), {{"shape", std::vector<std::int64_t>{64}}}));
  auto runs = [&](std::uint64_t seed) {
    ipu::cpu::device dev(g, {.threads = 2, .random_seed = seed});  // the default registry
    CHECK(dev.random_seed() == seed);
    const auto first = values(dev.run(std::vector<ipu::host_tensor>{})[0]);
    const auto second = values(dev.run(std::vector<ipu::host_tensor>{})[0]);
    CHECK(first != second);  // a fresh draw each run
    dev.reseed(seed);        // starts over
    CHECK(values(dev.run(std::vector<ipu::host_tensor>{})[0]) == first);
    return std::pair{first, second};
  };
  const auto a = runs(11), b = runs(11), c = runs(12);
  CHECK(a == b);
  CHECK(a.first != c.first);
  CHECK(ipu::cpu::device_options{}.random_seed == ipu::random_source::default_seed);
}

}  // namespace test_device
