// Value handles default-construct implicitly: `Handle h = {};`, `return {};`,
// aggregate members left to `{}`, and std::vector<Handle>(n) all compile. An
// explicit default constructor (or one hidden behind a defaulted parameter)
// rejects copy-list-initialization from {}; the concept below checks exactly that.
#include <gtest/gtest.h>

#include <vector>

#include "rdmx/core/future.hpp"
#include "rdmx/fabric/identity.hpp"
#include "rdmx/invoke/remote_object.hpp"
#include "rdmx/memory/block.hpp"
#include "rdmx/serial/rma_value.hpp"
#include "rdmx/serial/rma_vector.hpp"
#include "rdmx/serial/serialize_buffer.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "rdmx/transfer/remote_locator.hpp"

namespace {

template <class T>
void take(T);
template <class T>
concept implicitly_default_constructible = requires { take<T>({}); };

template <class... T>
constexpr bool all_implicit = (implicitly_default_constructible<T> && ...);
static_assert(all_implicit<rdmx::Future<int>, rdmx::Future<void>, rdmx::SharedFuture<int>, rdmx::Promise<int>,
                           rdmx::ThreadId, rdmx::RemoteLocator, rdmx::transfer::RemoteAddress, rdmx::transfer::RemoteKey,
                           rdmx::memory::Block, rdmx::serial::SerializeBuffer<char>, rdmx::serial::RmaVector<int>,
                           rdmx::serial::RmaValue<int>, rdmx::RemoteObject<int>>,
              "a value handle's default constructor must not be explicit");
// The concept can fail: an explicit default constructor is caught.
struct Explicit {
  explicit Explicit() = default;
};
static_assert(!implicitly_default_constructible<Explicit>);

struct Holder {  // members left to {} in aggregate initialization
  rdmx::serial::RmaVector<int> values;
  rdmx::Future<int> result;
  int tag;
};

template <class T>
std::vector<T> some(std::size_t n) {
  return std::vector<T>(n);
}

}  // namespace

TEST(Handles, DefaultConstructInContainersAndAggregates) {
  std::vector<rdmx::Future<int>> futures(3);
  for (const auto& f : futures) EXPECT_FALSE(f.valid());
  rdmx::SharedFuture<int> shared = {};
  EXPECT_FALSE(shared.valid());
  EXPECT_EQ(some<rdmx::RemoteLocator>(4).size(), 4u);
  EXPECT_EQ(some<rdmx::ThreadId>(2).size(), 2u);
  std::vector<rdmx::serial::RmaVector<int>> vectors(2);
  EXPECT_TRUE(vectors[1].empty());
  Holder h = {.tag = 3};
  EXPECT_TRUE(h.values.empty());
  EXPECT_FALSE(h.result.valid());
  rdmx::serial::RmaValue<int> none = {};
  EXPECT_FALSE(none);
}
