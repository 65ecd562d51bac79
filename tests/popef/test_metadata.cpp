// PopEF metadata's random seed (the engine option ipu compile writes for PopTorch's randomSeed):
// read back exactly, absent when unset, and a damaged value refused when the metadata is decoded,
// not at the first run.
#include "ipu/popef/metadata.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>

namespace test_metadata {

using namespace ipu;

TEST_CASE("the random seed engine option: a decimal number below 2^64, or none") {
  popef::metadata m;
  CHECK_FALSE(popef::random_seed(m).has_value());
  m.engine_options[std::string(popef::random_seed_option)] = "42";
  CHECK(popef::random_seed(m) == 42u);
  m.engine_options[std::string(popef::random_seed_option)] = "18446744073709551615";
  CHECK(popef::random_seed(m) == 18446744073709551615ull);
  for (const char* bad : {"18446744073709551616", "99999999999999999999", "-1", "", " 4", "4x", "0x10", "1e3"}) {
    CAPTURE(bad);
    m.engine_options[std::string(popef::random_seed_option)] = bad;
    CHECK_THROWS_WITH_AS(popef::random_seed(m), doctest::Contains("not a seed"), ipu::error);
  }
}

TEST_CASE("metadata with a damaged random seed is refused when it is decoded") {
  popef::metadata m;
  m.executable = "e";
  m.engine_options[std::string(popef::random_seed_option)] = "7";
  auto p = popef::to_proto(m);
  CHECK(popef::random_seed(popef::metadata_from_proto(p, "test")) == 7u);
  for (auto& o : *p.mutable_engine_options())
    if (o.key() == popef::random_seed_option) o.set_value("seven");
  CHECK_THROWS_WITH_AS(popef::metadata_from_proto(p, "test"), doctest::Contains("is 'seven', not a seed"),
                       ipu::error);
}

}  // namespace test_metadata
