// The one registry of remotely invoked names (core/registry.hpp).
#include <gtest/gtest.h>

#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/core/registry.hpp"
#include "rdmx/fabric/job.hpp"

namespace {
using Entry = int (*)();
int one() { return 1; }
struct Named {};
}  // namespace

TEST(Registry, SameNameSameIdAndEntry) {
  auto& r = rdmx::Registry<Entry>::instance();
  const std::uint64_t a = r.add(typeid(Named).name(), &one);
  EXPECT_EQ(r.add(typeid(Named).name(), &one), a);  // registering again is harmless
  EXPECT_EQ(a, rdmx::name_id(typeid(Named).name()));
  EXPECT_NE(a, 0u);
  ASSERT_NE(r.find(a), nullptr);
  EXPECT_EQ(r.find(a)(), 1);
  EXPECT_NE(r.name_of(a).find("Named"), std::string::npos) << r.name_of(a);  // demangled
  EXPECT_EQ(rdmx::registry_conflicts(), "");
}

TEST(Registry, UnknownIdsAreNamedNotFound) {
  auto& r = rdmx::Registry<Entry>::instance();
  EXPECT_EQ(r.find(0x1234), nullptr);
  EXPECT_EQ(r.name_of(0x1234), "unknown id 0x1234");
}

// Last: a conflict is permanent for the process. It stops the job from
// starting, naming both, instead of running one in place of the other.
TEST(Registry, ConflictStopsTheJobFromStarting) {
  rdmx::detail::record_conflict(typeid(Named).name(), typeid(int).name());
  EXPECT_NE(rdmx::registry_conflicts().find("'(anonymous namespace)::Named' and 'int'"), std::string::npos)
      << rdmx::registry_conflicts();
  try {
    rdmx::Job job;
    FAIL() << "a job started with a registry conflict";
  } catch (const rdmx::Error& e) {
    EXPECT_NE(std::string(e.what()).find("share one id"), std::string::npos) << e.what();
  }
}
