// Every supported type, alone and nested, survives a round trip, with zero
// copy off (everything inline) and with the smallest threshold (every run of
// 64 bytes or more becomes a pointer chunk).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "rdmx/serial/serial.hpp"
#include "support.hpp"

namespace app {

enum class Color : std::uint8_t { red, green, blue };
enum Plain { first = 1, second = 1000 };

// A member serialize shared by both directions.
struct Particle {
  std::uint64_t id = 0;
  std::string name;
  std::vector<double> position;
  Color color = Color::red;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(id, name, position, color);
  }
  friend bool operator==(const Particle&, const Particle&) = default;
};

// A type that cannot change gets a free serialize next to it (found by ADL).
struct Legacy {
  int a = 0;
  std::map<std::string, int> counts;
  friend bool operator==(const Legacy&, const Legacy&) = default;
};
template <class Archive>
void serialize(Archive& ar, Legacy& value) {
  ar(value.a, value.counts);
}

// Opted into the bitwise fast path.
struct Point {
  double x, y, z;
  friend bool operator==(const Point&, const Point&) = default;
};

// A C array member and a large bitwise member.
struct Grid {
  int cells[4] = {};
  std::array<double, 16> weights{};  // 128 bytes: a pointer chunk at the smallest threshold
  std::string labels[2];
  template <class Archive>
  void serialize(Archive& ar) {
    ar(cells, weights, labels);
  }
  friend bool operator==(const Grid&, const Grid&) = default;
};

// Recursive through a container.
struct Tree {
  int value = 0;
  std::vector<Tree> children;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(value, children);
  }
  friend bool operator==(const Tree&, const Tree&) = default;
};

}  // namespace app

template <>
struct rdmx::serial::is_bitwise_serializable<app::Point> : std::true_type {};

namespace rdmx::serial {
namespace {

using testing::round_trip;

class RoundTrip : public ::testing::TestWithParam<std::size_t> {
 protected:
  template <class T>
  void check(const T& value) {
    EXPECT_EQ(round_trip(value, GetParam()), value);
  }
};

TEST_P(RoundTrip, Arithmetic) {
  check(std::int8_t{-5});
  check(std::uint8_t{250});
  check(std::int16_t{-30000});
  check(std::uint16_t{60000});
  check(std::int32_t{std::numeric_limits<std::int32_t>::min()});
  check(std::uint32_t{4000000000u});
  check(std::int64_t{std::numeric_limits<std::int64_t>::min()});
  check(std::uint64_t{std::numeric_limits<std::uint64_t>::max()});
  check(3.25f);
  check(-2.5e300);
  check('x');
  check(char16_t{0x263a});
  check(true);
  check(false);
  check(app::Color::blue);
  check(app::second);
}

TEST_P(RoundTrip, Strings) {
  check(std::string());
  check(std::string("hello"));
  check(std::string(100, 'a'));
  check(std::string(10000, 'b'));
  check(std::u16string(u"wide text"));
  check(std::u32string(200, U'z'));
}

TEST_P(RoundTrip, Vectors) {
  check(std::vector<int>{});
  check(std::vector<int>{1, 2, 3});
  std::vector<double> big(5000);
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = 0.5 * static_cast<double>(i);
  check(big);
  check(std::vector<std::string>{"a", "", std::string(300, 'c')});
  check(std::vector<bool>{true, false, true, true});
  check(std::vector<bool>{});
  check(std::vector<std::vector<int>>{{1}, {}, {2, 3}});
  check(std::vector<app::Point>{{1, 2, 3}, {4, 5, 6}});
}

TEST_P(RoundTrip, Arrays) {
  check(std::array<int, 3>{7, 8, 9});
  check(std::array<std::string, 2>{"x", "yz"});
  check(std::array<app::Point, 1>{{{1, 2, 3}}});
  app::Grid grid;
  grid.cells[2] = 5;
  grid.weights[15] = 1.5;
  grid.labels[1] = "label";
  check(grid);
}

TEST_P(RoundTrip, Associative) {
  check(std::map<int, std::string>{{1, "one"}, {2, "two"}, {-7, ""}});
  check(std::unordered_map<std::string, std::vector<double>>{{"a", {1.0, 2.0}}, {"b", {}}});
  check(std::set<std::string>{"x", "y", "z"});
  check(std::unordered_set<int>{5, 6, 7});
  check(std::map<int, int>{});
}

TEST_P(RoundTrip, OptionalVariantTuple) {
  check(std::optional<int>{});
  check(std::optional<std::string>{"present"});
  using V = std::variant<std::monostate, int, std::string, std::vector<double>>;
  check(V{});
  check(V{42});
  check(V{std::string("text")});
  check(V{std::vector<double>(100, 1.0)});
  check(std::tuple<int, std::string, double>{1, "two", 3.0});
  check(std::tuple<>{});
  check(std::pair<std::string, int>{"k", 9});
}

TEST_P(RoundTrip, SmartPointersHaveValueSemantics) {
  const auto unique = round_trip(std::make_unique<std::string>("owned"), GetParam());
  ASSERT_NE(unique, nullptr);
  EXPECT_EQ(*unique, "owned");
  EXPECT_EQ(round_trip(std::unique_ptr<int>{}, GetParam()), nullptr);
  const auto shared = round_trip(std::make_shared<std::vector<int>>(3, 4), GetParam());
  ASSERT_NE(shared, nullptr);
  EXPECT_EQ(*shared, std::vector<int>(3, 4));
  EXPECT_EQ(round_trip(std::shared_ptr<double>{}, GetParam()), nullptr);
}

TEST_P(RoundTrip, UserTypes) {
  check(app::Particle{7, "proton", {1.0, 2.0, 3.0}, app::Color::green});
  check(app::Legacy{3, {{"a", 1}, {"b", 2}}});
  check(app::Point{1.5, -2.5, 3.5});
  app::Tree tree{1, {{2, {}}, {3, {{4, {}}}}}};
  check(tree);
}

TEST_P(RoundTrip, DeepNesting) {
  using Inner = std::optional<std::variant<int, std::string, std::vector<std::int64_t>>>;
  std::map<std::string, std::vector<std::tuple<Inner, std::set<int>, std::unique_ptr<app::Particle>>>> value;
  auto& list = value["first"];
  list.emplace_back(Inner{}, std::set<int>{1, 2}, nullptr);
  list.emplace_back(Inner{std::vector<std::int64_t>(50, -1)}, std::set<int>{},
                    std::make_unique<app::Particle>(app::Particle{1, "p", {0.5}, app::Color::blue}));
  value["second"];
  const auto out = round_trip(value, GetParam());
  ASSERT_EQ(out.size(), 2u);
  const auto& got = out.at("first");
  ASSERT_EQ(got.size(), 2u);
  EXPECT_FALSE(std::get<0>(got[0]).has_value());
  EXPECT_EQ(std::get<1>(got[0]), (std::set<int>{1, 2}));
  EXPECT_EQ(std::get<2>(got[0]), nullptr);
  EXPECT_EQ(std::get<2>(*std::get<0>(got[1])), std::vector<std::int64_t>(50, -1));
  ASSERT_NE(std::get<2>(got[1]), nullptr);
  EXPECT_EQ(std::get<2>(got[1])->name, "p");
  EXPECT_TRUE(out.at("second").empty());
}

TEST_P(RoundTrip, SeveralValuesInOneArchive) {
  OutputArchive ar(testing::with_threshold(GetParam()));
  const std::vector<float> data(2000, 2.718f);
  ar('5', 3.1415, data, std::string("string"));
  const auto message = ar.flatten();
  const auto chunks = testing::chunks_of(ar);
  InputArchive in(message, chunks);
  char x = 0;
  double y = 0;
  std::vector<float> d;
  std::string s;
  in(x, y, d, s);
  in.finish();
  EXPECT_EQ(x, '5');
  EXPECT_EQ(y, 3.1415);
  EXPECT_EQ(d, data);
  EXPECT_EQ(s, "string");
}

// 0: zero copy off; 64: the smallest threshold, so bulk runs become chunks.
INSTANTIATE_TEST_SUITE_P(Thresholds, RoundTrip, ::testing::Values(std::size_t{0}, std::size_t{64}));

TEST(Codec, EncodeDecodeChecksTheSignature) {
  const std::vector<std::int64_t> ids{1, 2, 3};
  OutputArchive ar = encode(std::string("name"), ids, 2.5);
  EXPECT_EQ(ar.signature(), (signature_of<std::string, std::vector<std::int64_t>, double>()));
  const auto message = ar.flatten();
  auto [name, got, d] = decode<std::string, std::vector<std::int64_t>, double>(message);
  EXPECT_EQ(name, "name");
  EXPECT_EQ(got, ids);
  EXPECT_EQ(d, 2.5);
  EXPECT_EQ(decode<int>(encode(7).flatten()), 7);
}

TEST(Codec, SignaturesDifferByTypeAndOrder) {
  EXPECT_NE(signature_of<int>(), signature_of<long>());
  EXPECT_NE((signature_of<int, std::string>()), (signature_of<std::string, int>()));
  EXPECT_EQ((signature_of<int, std::string>()), (signature_of<int, std::string>()));
  EXPECT_NE(signature_of<>(), 0u);
}

TEST(OutputArchive, ClearReusesTheArchive) {
  OutputArchive ar(testing::with_threshold(64));
  ar(std::vector<int>(100, 1));
  ASSERT_EQ(ar.out_of_line_chunks().size(), 1u);
  ar.flatten();
  ar.clear();
  EXPECT_FALSE(ar.flattened());
  EXPECT_TRUE(ar.inline_bytes().empty());
  EXPECT_TRUE(ar.out_of_line_chunks().empty());
  ar(std::string("again"));
  const auto message = ar.flatten();
  EXPECT_EQ(decode<std::string>(message), "again");
}

TEST(OutputArchive, FlattenTwiceGivesTheSameMessage) {
  OutputArchive ar;
  ar(1, 2, 3);
  const auto first = ar.flatten();
  const auto second = ar.flatten();
  EXPECT_EQ(first.data(), second.data());
  EXPECT_EQ(first.size(), second.size());
  EXPECT_EQ(ar.inline_bytes().size(), 3 * sizeof(int));
}

}  // namespace
}  // namespace rdmx::serial
