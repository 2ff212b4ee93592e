#include "rdmx/core/token_table.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace {

using rdmx::TokenTable;

TEST(TokenTable, TokensFindTheirEntryAndNothingElse) {
  TokenTable<std::string> table;
  auto a = table.add();
  a.value = "a";
  auto b = table.add();
  b.value = "b";
  EXPECT_NE(a.token, 0u);
  EXPECT_NE(a.token, b.token);
  ASSERT_NE(table.find(a.token), nullptr);
  EXPECT_EQ(*table.find(a.token), "a");
  EXPECT_EQ(*table.find(b.token), "b");
  EXPECT_EQ(table.find(0), nullptr);
  EXPECT_EQ(table.find(a.token + 1000), nullptr);                       // an index never made
  EXPECT_EQ(table.find(a.token ^ (std::uint64_t{7} << 32)), nullptr);   // a forged generation
  EXPECT_EQ(table.in_use(), 2u);
}

TEST(TokenTable, AFreedEntryReusedByALaterOneIsNotFoundByTheOldToken) {
  TokenTable<std::unique_ptr<int>> table;
  auto first = table.add();
  first.value = std::make_unique<int>(1);
  const std::uint64_t stale = first.token;
  EXPECT_TRUE(table.erase(stale));
  EXPECT_FALSE(table.erase(stale));  // a repeated answer
  auto second = table.add();         // takes the same slot
  EXPECT_EQ(second.value, nullptr);  // value-initialized, not the old one
  second.value = std::make_unique<int>(2);
  EXPECT_NE(second.token, stale);
  EXPECT_EQ(table.find(stale), nullptr);
  ASSERT_NE(table.find(second.token), nullptr);
  EXPECT_EQ(**table.find(second.token), 2);
  EXPECT_EQ(table.in_use(), 1u);
}

TEST(TokenTable, ReferencesSurviveGrowthAndForEachMayErase) {
  TokenTable<int> table;
  auto kept = table.add();
  int& ref = kept.value;
  std::vector<std::uint64_t> tokens{kept.token};
  for (int i = 1; i < 10000; ++i) {
    auto added = table.add();
    added.value = i;
    tokens.push_back(added.token);
  }
  ref = 42;  // still the first entry
  EXPECT_EQ(*table.find(kept.token), 42);
  int visited = 0;
  table.for_each([&](std::uint64_t token, int& value) {
    ++visited;
    if (value % 2 == 1) table.erase(token);
  });
  EXPECT_EQ(visited, 10000);
  EXPECT_EQ(table.in_use(), 5000u);
  for (std::size_t i = 0; i < tokens.size(); ++i) EXPECT_EQ(table.find(tokens[i]) != nullptr, i % 2 == 0) << i;
}

}  // namespace
