// The plan codec's schedule kind: the typed identity of the strategy that planned an executable
// (the engine is chosen from it), so it must survive a round trip and refuse kinds it does not know.
#include <doctest/doctest.h>

#include <string>

#include "ipu/popef/plan_codec.hpp"
#include "ipu/sched/schedule.hpp"

namespace test_plan_codec {

namespace {

std::string decode_error(const ipu::popef::pb::Plan& p) {
  ipu::executable e;
  try {
    ipu::popef::plan_from_proto(p, e, "plan 'test'");
  } catch (const ipu::error& err) {
    CHECK(err.category() == ipu::error_category::popef);
    return err.what();
  }
  return {};
}

}  // namespace

TEST_CASE("plan codec: the schedule kind round-trips and picks the same schedule type") {
  for (auto kind : {ipu::schedule_kind::sequential, ipu::schedule_kind::pipelined, ipu::schedule_kind::phased}) {
    ipu::executable e;
    e.strategy = "any name";  // display only: identity is the kind
    e.schedule = kind;
    ipu::executable back;
    ipu::popef::plan_from_proto(ipu::popef::plan_to_proto(e), back, "plan 'test'");
    CHECK(back.schedule == kind);
    CHECK(back.strategy == "any name");
    CHECK(ipu::schedule_for(back.schedule).index() == static_cast<std::size_t>(kind));
  }
}

TEST_CASE("plan codec: a schedule kind this build does not know is an ipu::error, not a cast") {
  auto p = ipu::popef::plan_to_proto(ipu::executable{});
  p.set_schedule(static_cast<ipu::popef::pb::ScheduleKind>(3));
  const auto msg = decode_error(p);
  CHECK(msg.find("unknown schedule kind 3") != std::string::npos);
  CHECK(msg.find("plan 'test'") != std::string::npos);
  p.set_schedule(static_cast<ipu::popef::pb::ScheduleKind>(-1));
  CHECK(decode_error(p).find("unknown schedule kind -1") != std::string::npos);
}

}  // namespace test_plan_codec
