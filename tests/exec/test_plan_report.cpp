// The plan report draws what the plan holds: a Gantt row per stage, a box per stage and micro-batch,
// an arrow per IPU-Link copy and host stream, every tile of every IPU; model-supplied names come out
// escaped. The predicted Chrome trace carries the same copies as flow arrows and the memory as counters.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <sstream>
#include <string>

#include "ipu/exec/plan_report.hpp"
#include "ipu/sched/pipelined_execution.hpp"
#include "../sched/plan_test_models.hpp"

namespace test_plan_report {

namespace {
const auto mk2x4 = ipu::ipu_model<ipu::mk2, 4>::description();

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (auto p = s.find(what); p != std::string::npos; p = s.find(what, p + what.size())) ++n;
  return n;
}

const char* const hostile = "<script>alert('x')</script>&\"";

// Four layers on four IPUs, six micro-batches per step; the model, layer 0's weight and its MatMul
// carry a hostile name.
ipu::executable hostile_plan() {
  auto g = plan_test::pipelined_mlp(4, 64, 8);
  g.set_name(hostile);
  g.op(0).name = hostile;
  for (ipu::tensor_id t = 0; t < g.num_tensors(); ++t)
    if (g.tensor(t).name == "w0") g.tensor(t).name = hostile;
  return ipu::pipelined_execution{}.plan(g, mk2x4, plan_test::with_bps(6));
}
}  // namespace

TEST_CASE("the HTML report has a row per stage, a box per micro-batch run, arrows and every tile") {
  const auto e = hostile_plan();
  REQUIRE(e.stages.size() == 4);
  const auto html = ipu::plan_report_html(e);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(count(html, "class=\"stage-row\"") == 4);
  CHECK(count(html, "<rect class=\"mb\"") == 4 * 6);
  // Stage s > 0 receives its input over IPU-Links for every micro-batch: 3 x 6 copies; the host
  // streams x into stage 0 and takes the output from stage 3 for every micro-batch.
  CHECK(count(html, "class=\"arrow ipu_copy\"") == 3 * 6);
  CHECK(count(html, "class=\"arrow host_to_device\"") == 6);
  CHECK(count(html, "class=\"arrow device_to_host\"") == 6);
  CHECK(count(html, "<svg class=\"tiles\"") == 4);
  CHECK(count(html, "<rect class=\"tile\"") == 4 * 1472);
  CHECK(count(html, "class=\"stage-bar\"") == 4);
  // Nothing fetched from elsewhere.
  CHECK(count(html, "src=") == 0);
  CHECK(count(html, "href=") == 0);
  CHECK(count(html, "@import") == 0);
  // The hostile names appear escaped only.
  CHECK(count(html, "<script>alert") == 0);
  CHECK(count(html, "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;&quot;") >= 2);  // title and heading
  CHECK(count(html, "<script>") == 1);                                                    // the page's own
}

TEST_CASE("the tile map adds up the placed tensors and names each worst tile's largest ones") {
  const auto e = hostile_plan();
  const auto p = ipu::describe_plan(e, 4, 2);
  REQUIRE(p.tiles.size() == 4);
  // Independent sum: each IPU's placed (non-view) tensors' bytes, as the model declares their types.
  for (const auto& map : p.tiles) {
    std::uint64_t want = 0;
    for (const auto& pl : e.placement) {
      if (pl.ipu != map.ipu || pl.in_streaming_memory) continue;
      const auto& t = e.model.tensor(pl.tensor);
      if (t.producer != ipu::no_op && ipu::is_view(e.model, e.model.op(t.producer))) continue;
      want += t.info.num_bytes();
    }
    std::uint64_t got = 0;
    for (auto b : map.bytes) got += b;
    CHECK(got == want);
    REQUIRE(!map.worst.empty());
    CHECK(map.worst.size() <= 4);
    for (std::size_t k = 1; k < map.worst.size(); ++k) CHECK(map.worst[k - 1].bytes >= map.worst[k].bytes);
    for (const auto& wt : map.worst) {
      CHECK(wt.bytes == map.bytes[wt.tile]);
      CHECK(wt.by_kind.total() == wt.bytes);
      CHECK(!wt.tensors.empty());
      CHECK(wt.tensors.size() <= 2);
    }
  }
  // A 64 x 64 FP32 weight (16 KiB) is on IPU 0 with the hostile name.
  bool named = false;
  for (const auto& wt : p.tiles[0].worst)
    for (const auto& [n, b] : wt.tensors)
      if (n == hostile) {
        named = true;
        CHECK(wt.by_kind.bytes(ipu::memory_kind::variable) >= b);
      }
  CHECK(named);
  // Per-stage cycles add up to the stage's predicted cycles.
  REQUIRE(p.stages.size() == 4);
  for (const auto& s : p.stages) {
    CHECK(s.compute + s.exchange + s.sync + s.host == e.stages[s.stage].cycles);
    CHECK(s.compute > 0);
    CHECK((s.stage == 0 ? s.exchange == 0 : s.exchange > 0));
  }
}

TEST_CASE("the predicted Chrome trace has flow arrows between stages and memory counters") {
  const auto e = hostile_plan();
  std::ostringstream os;
  ipu::write_predicted_chrome_trace(os, e);
  const auto j = nlohmann::json::parse(os.str());
  std::size_t starts = 0, finishes = 0, slices = 0, counters = 0, hostile_names = 0;
  for (const auto& ev : j.at("traceEvents")) {
    const auto ph = ev.at("ph").get<std::string>();
    if (ph == "s") {
      ++starts;
      CHECK(ev.at("tid").get<int>() + 1 == std::stoi(ev.at("name").get<std::string>().substr(ev.at("name").get<std::string>().size() - 1)));
    }
    finishes += ph == "f";
    slices += ph == "X";
    if (ph == "X" && ev.at("name").get<std::string>().find(hostile) != std::string::npos) ++hostile_names;
    if (ph == "C") {
      ++counters;
      const auto ipu = std::stoul(ev.at("name").get<std::string>().substr(11));
      CHECK(ev.at("args").at("total_bytes").get<std::uint64_t>() == e.memory.at(ipu).total_bytes);
      CHECK(ev.at("args").at("worst_tile_bytes").get<std::uint64_t>() == e.memory.at(ipu).worst_tile_bytes);
    }
  }
  CHECK(starts == 3 * 6);
  CHECK(finishes == 3 * 6);
  CHECK(slices == 6 * e.programs[5].steps.size());
  CHECK(counters == 2 * 4);
  // The hostile op name comes back intact through JSON's escaping: once per micro-batch.
  CHECK(hostile_names == 6);
}

}  // namespace test_plan_report
