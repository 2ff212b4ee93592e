// Stale far pointers: byte-wise copies of a far pointer used after the
// original freed its object, and pointers kept from a destroyed Manager, are
// refused with Errc::invalid_argument, never given another object's bytes.
// Across processes, both paths: 1 compute + 1 server, and 2 computes that
// share 1 server (each its own share of the region, its own checks).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <string>

#include "rdmx/fabric/call.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/far/pointer.hpp"
#include "shadow.hpp"

using namespace rdmx;
using namespace rdmx::far;

namespace {

using Small = shadow::Pattern<64>;
using Large = shadow::Pattern<512>;

Config small(Path path, bool check = false) {
  Config c;
  c.cache_bytes = 64 * 1024;
  c.region_bytes = 8 << 20;
  c.path = path;
  c.check = check;
  return c;
}

// A byte-wise copy of a far pointer: what a memcpy of it, or a raw struct
// holding it, keeps. The tests keep it in an atomic word whose address stays
// put while a cache frame names it.
template <class T>
std::uint64_t bytes_of(const UniquePtr<T>& p) {
  std::uint64_t word = 0;
  std::memcpy(&word, static_cast<const void*>(&p), sizeof word);
  return word;
}

// The outcome of dereferencing a copy: its object's bytes, or a refusal.
enum class Got { right, refused, other };

template <class T>
Got deref_copy(std::atomic<std::uint64_t>& copy, std::uint64_t seed, std::string* message = nullptr, Access access = Access::read) {
  DerefScope scope;
  try {
    const auto* v = static_cast<const T*>(far::detail::deref(copy, sizeof(T), scope, access));
    return v->is(seed) ? Got::right : Got::other;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
    if (message != nullptr) *message = e.what();
    return Got::refused;
  }
}

// A copy dereferenced successfully owns a cache frame of its own: drop it
// before the copy's storage goes (nothing is written back for a stale one).
// A copy naming its original's frame owns nothing, and its evict is refused.
void drop_copy(std::atomic<std::uint64_t>& copy) {
  if ((copy.load() & state::present) == 0) return;
  try {
    EXPECT_TRUE(far::detail::evict(far::detail::runtime(), copy));
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
}

// (a) A byte copy used after the original freed its object, once the block
// holds another: refused, on dereference and free, and the other object is
// untouched.
void byte_copy_after_free(Path path) {
  Job& job = Job::current();
  Manager manager(job, small(path));
  if (manager.serving()) return;
  std::size_t reused = 0;
  for (std::uint64_t i = 0; i < 40; ++i) {
    auto p = make_unique<Small>(Small::of(i));
    ASSERT_TRUE(p.evict());
    std::atomic<std::uint64_t> copy{bytes_of(p)};
    {  // while the original lives, the copy reads the object
      ASSERT_EQ(deref_copy<Small>(copy, i), Got::right);
      drop_copy(copy);
    }
    const std::uint64_t where = p.state_word();
    p.reset();
    auto q = make_unique<Small>(Small::of(1000 + i));  // takes the freed block
    ASSERT_TRUE(q.evict());
    if (state::server_of(q.state_word()) == state::server_of(where) && state::offset_of(q.state_word()) == state::offset_of(where))
      ++reused;
    std::string message;
    EXPECT_EQ(deref_copy<Small>(copy, i, &message), Got::refused) << "a stale copy read data";
    EXPECT_NE(message.find("stale far pointer"), std::string::npos) << message;
    EXPECT_NE(message.find("freed"), std::string::npos) << message;
    const Error e = [&] {
      try {
        far::detail::free(far::detail::runtime(), copy);
      } catch (const Error& e) {
        return e;
      }
      return Error(Errc::transport, "none");
    }();
    EXPECT_EQ(e.code(), Errc::invalid_argument) << "a stale copy freed another object";
    DerefScope scope;
    EXPECT_TRUE(q.deref(scope)->is(1000 + i));
  }
  EXPECT_GT(reused, 20u);  // the blocks were reused: the copies named other objects
  EXPECT_EQ(manager.stats().objects, 0u);
}

// (a) A copy fetched while its original lived (a cache frame of its own),
// written and evicted after the original freed the object: its bytes do not
// reach the block's new object. With RDMX_FAR_CHECK the hit is refused.
void local_copy_after_free(Path path, bool check) {
  Job& job = Job::current();
  Manager manager(job, small(path, check));
  if (manager.serving()) return;
  for (std::uint64_t i = 0; i < 20; ++i) {
    auto p = make_unique<Small>(Small::of(i));
    ASSERT_TRUE(p.evict());
    std::atomic<std::uint64_t> copy{bytes_of(p)};
    ASSERT_EQ(deref_copy<Small>(copy, i), Got::right);  // now local, in a frame of its own
    p.reset();
    auto q = make_unique<Small>(Small::of(1000 + i));
    ASSERT_TRUE(q.evict());
    std::string message;
    const Got got = deref_copy<Small>(copy, i, &message, Access::write);
    if (check) {
      EXPECT_EQ(got, Got::refused);
      EXPECT_NE(message.find("stale far pointer"), std::string::npos) << message;
    } else {
      EXPECT_EQ(got, Got::right);  // the freed object's own bytes, never another's
    }
    {
      DerefScope scope;
      if (got == Got::right) static_cast<Small*>(far::detail::deref(copy, sizeof(Small), scope, Access::write))->words[0] = 7;
    }
    drop_copy(copy);  // dirty, stale: not written back
    DerefScope scope;
    EXPECT_TRUE(q.deref(scope)->is(1000 + i)) << "a stale copy's write-back reached another object";
  }
}

// (b) Pointers kept from a destroyed Manager, dereferenced under the next:
// refused every time, local or remote when kept, over more Managers than
// there are epochs.
void destroyed_manager(Path path) {
  Job& job = Job::current();
  std::vector<std::uint64_t> kept;
  std::size_t tried = 0, refused = 0;
  bool computes = false;
  for (std::uint64_t round = 0; round < 9; ++round) {
    Manager manager(job, small(path));
    if (manager.serving()) continue;
    computes = true;
    std::vector<UniquePtr<Small>> live;
    for (std::uint64_t i = 0; i < 10; ++i) live.push_back(make_unique<Small>(Small::of(100 * round + i)));
    for (std::size_t i = 0; i < live.size(); i += 2) ASSERT_TRUE(live[i].evict());
    for (std::size_t i = 0; i < kept.size(); ++i) {
      std::atomic<std::uint64_t> copy{kept[i]};
      std::string message;
      const Got got = deref_copy<Small>(copy, 100 * (round - 1) + i, &message);
      ++tried;
      if (got == Got::refused) {
        ++refused;
        EXPECT_NE(message.find("earlier far::Manager"), std::string::npos) << message;
      }
      EXPECT_NE(got, Got::other) << "a pointer from the previous Manager read another object's data";
      drop_copy(copy);
    }
    if (!kept.empty()) {
      std::atomic<std::uint64_t> copy{kept[0]};
      EXPECT_THROW(far::detail::free(far::detail::runtime(), copy), Error);
    }
    for (std::size_t i = 0; i < live.size(); ++i) {
      DerefScope scope;
      EXPECT_TRUE(live[i].deref(scope)->is(100 * round + i));
    }
    kept.clear();
    for (const auto& p : live) kept.push_back(bytes_of(p));
  }
  if (computes) {
    EXPECT_EQ(tried, 80u);
    EXPECT_EQ(refused, tried);
  }
}

// (c) Threads make, free, move, evict and byte-copy far objects of two sizes
// while dereferencing copies, against a shadow of which object each names:
// every dereference gives that object's bytes or is refused. Copies are
// kept across Managers too, where every one is refused.
struct Slot {
  std::mutex lock;
  UniquePtr<Small> small;
  UniquePtr<Large> large;
  std::uint64_t small_seed = 0, large_seed = 0;
};

struct Copy {
  std::atomic<std::uint64_t> word{0};
  std::uint64_t seed = 0;
  bool large = false;
};

struct Counts {
  std::atomic<std::size_t> right{0}, refused{0}, other{0}, previous_refused{0}, previous{0};
};

Got deref_kept(Copy& c) { return c.large ? deref_copy<Large>(c.word, c.seed) : deref_copy<Small>(c.word, c.seed); }

void misuse_round(Job& job, Counts& counts, std::array<std::deque<Copy>, 16>& previous, std::uint64_t round) {
  constexpr std::size_t slots_count = 160, copies_per_thread = 12;
  std::vector<Slot> slots(slots_count);
  std::atomic<std::uint64_t> next_seed{1 + (round << 32)};
  job.run([&](ThreadId me) {
    std::mt19937_64 rng(round * 7919 + me.thread);
    std::deque<Copy>& mine = previous.at(me.thread);
    // Copies from the previous Manager: every one refused.
    for (Copy& c : mine) {
      const Got got = deref_kept(c);
      counts.previous += 1;
      if (got == Got::refused) counts.previous_refused += 1;
      if (got == Got::other) counts.other += 1;
      drop_copy(c.word);
    }
    mine.clear();
    std::deque<Copy> copies(copies_per_thread);
    for (int op = 0; op < 1500; ++op) {
      Slot& s = slots[rng() % slots_count];
      const bool large = rng() % 3 == 0;
      switch (rng() % 8) {
        case 0:
        case 1: {  // make (or replace) an object
          std::lock_guard lock(s.lock);
          const std::uint64_t seed = next_seed.fetch_add(1);
          if (large) {
            s.large = make_unique<Large>(Large::of(seed));
            s.large_seed = seed;
          } else {
            s.small = make_unique<Small>(Small::of(seed));
            s.small_seed = seed;
          }
          break;
        }
        case 2: {  // free
          std::lock_guard lock(s.lock);
          if (large) s.large.reset();
          else s.small.reset();
          break;
        }
        case 3: {  // evict, so that copies name a far block
          std::lock_guard lock(s.lock);
          if (large && s.large) s.large.evict();
          if (!large && s.small) s.small.evict();
          break;
        }
        case 4: {  // move to another slot: the object and its copies stay valid
          Slot& t = slots[rng() % slots_count];
          if (&t == &s) break;
          std::scoped_lock lock(s.lock, t.lock);
          if (large && s.large) {
            t.large = std::move(s.large);
            t.large_seed = s.large_seed;
          }
          if (!large && s.small) {
            t.small = std::move(s.small);
            t.small_seed = s.small_seed;
          }
          break;
        }
        case 5: {  // byte-copy
          Copy& c = copies[rng() % copies_per_thread];
          drop_copy(c.word);
          std::lock_guard lock(s.lock);
          if (rng() % 4 != 0) {  // mostly of a remote object: a copy that names its far block
            if (large && s.large) s.large.evict();
            if (!large && s.small) s.small.evict();
          }
          if (large && s.large) {
            c.word = bytes_of(s.large);
            c.seed = s.large_seed;
            c.large = true;
          } else if (!large && s.small) {
            c.word = bytes_of(s.small);
            c.seed = s.small_seed;
            c.large = false;
          }
          break;
        }
        case 6: {  // dereference the original
          std::lock_guard lock(s.lock);
          DerefScope scope;
          if (large && s.large) EXPECT_TRUE(s.large.deref(scope)->is(s.large_seed));
          if (!large && s.small) EXPECT_TRUE(s.small.deref(scope)->is(s.small_seed));
          break;
        }
        default: {  // dereference a copy, whatever became of its object
          Copy& c = copies[rng() % copies_per_thread];
          if (c.word.load() == 0) break;
          const Got got = deref_kept(c);
          (got == Got::right ? counts.right : got == Got::refused ? counts.refused : counts.other) += 1;
          EXPECT_NE(got, Got::other) << "thread " << me.thread << " read another object's bytes through a stale copy";
          break;
        }
      }
    }
    // Keep this thread's copies, remote, for the next Manager.
    for (Copy& c : copies) {
      drop_copy(c.word);
      if (c.word.load() == 0) continue;
      mine.emplace_back();
      mine.back().word = c.word.load();
      mine.back().seed = c.seed;
      mine.back().large = c.large;
    }
  });
  // Objects die before their Manager.
  for (Slot& s : slots) {
    s.small.reset();
    s.large.reset();
  }
}

void randomized_misuse(Path path) {
  Job& job = Job::current();
  Counts counts;
  std::array<std::deque<Copy>, 16> previous;
  bool computes = false;
  for (std::uint64_t round = 0; round < 3; ++round) {
    Manager manager(job, small(path, round == 2));
    if (manager.serving()) continue;
    computes = true;
    misuse_round(job, counts, previous, round);
    EXPECT_EQ(manager.stats().objects, 0u);
  }
  if (computes) {
    std::printf("far stale misuse (process %u): %zu right, %zu refused, %zu other; previous Manager's copies: %zu of %zu refused\n",
                job.rank(), counts.right.load(), counts.refused.load(), counts.other.load(), counts.previous_refused.load(),
                counts.previous.load());
    EXPECT_EQ(counts.other.load(), 0u);
    EXPECT_GT(counts.right.load(), 0u);
    EXPECT_GT(counts.refused.load(), 0u);
    EXPECT_GT(counts.previous.load(), 0u);
    EXPECT_EQ(counts.previous_refused.load(), counts.previous.load());
  }
}

// (d) With two computing processes: the first's far pointers, byte-copied
// to the second (live, freed, or naming a block that now holds another
// object), are foreign there: dereference and free refused, never the
// first's bytes; both processes' own objects stay intact. The words travel
// by calls, between the computing processes' first threads, and the
// receiver's answer ends the maker's wait.
constexpr std::size_t foreign_count = 24;
std::array<std::atomic<std::uint64_t>, foreign_count> foreign_words{};
std::array<std::atomic<std::uint64_t>, foreign_count> foreign_seeds{};
std::atomic<std::size_t> foreign_arrived{0};
std::atomic<bool> foreign_checked{false};

void foreign_copies(Path path) {
  Job& job = Job::current();
  Manager manager(job, small(path));
  if (manager.serving()) return;
  std::vector<std::uint32_t> computing;
  for (std::uint32_t p = 0; p < job.size(); ++p)
    if (std::find(manager.config().servers.begin(), manager.config().servers.end(), p) == manager.config().servers.end())
      computing.push_back(p);
  if (computing.size() < 2) GTEST_SKIP() << "needs two computing processes (3 processes: 2 compute, 1 serves)";
  const std::uint32_t maker = computing[0], receiver = computing[1];
  if (job.rank() != maker && job.rank() != receiver) return;
  job.run([&](ThreadId me) {
    if (me.thread != 0) return;
    // Objects of this process, made before and checked after the other's words.
    std::vector<UniquePtr<Small>> own;
    std::vector<std::uint64_t> own_seeds;
    for (std::uint64_t i = 0; i < 3 * foreign_count; ++i) {
      own_seeds.push_back(1000000 * (job.rank() + 1) + i);
      own.push_back(make_unique<Small>(Small::of(own_seeds.back())));
      ASSERT_TRUE(own.back().evict());
    }
    if (job.rank() == maker) {
      // A third live, a third freed and their blocks taken again, a third freed.
      for (std::size_t i = 0; i < foreign_count; ++i) {
        const std::uint64_t word = bytes_of(own[i]);
        if (i >= foreign_count / 3) {
          own[i].reset();
          if (i < 2 * foreign_count / 3) {
            own[i] = make_unique<Small>(Small::of(own_seeds[i] += 500000));
            ASSERT_TRUE(own[i].evict());
          }
        }
        call(ThreadId{receiver, 0}, [i, word, seed = own_seeds[i]] {
          foreign_words[i] = word;
          foreign_seeds[i] = seed;
          foreign_arrived += 1;
        });
      }
      while (!foreign_checked.load()) progress();
      foreign_checked = false;  // for the next path's test
    } else {
      while (foreign_arrived.load() < foreign_count) progress();
      std::size_t refused = 0;
      for (std::size_t i = 0; i < foreign_count; ++i) {
        std::atomic<std::uint64_t> copy{foreign_words[i].load()};
        std::string message;
        const Got got = deref_copy<Small>(copy, foreign_seeds[i], &message);
        EXPECT_EQ(got, Got::refused) << "process " << job.rank() << " dereferenced process " << maker << "'s far pointer "
                                     << i << (got == Got::right ? ": it read that process's object" : ": it read other bytes");
        if (got == Got::refused) {
          ++refused;
          EXPECT_NE(message.find("foreign pointer"), std::string::npos) << message;
        }
        drop_copy(copy);
        EXPECT_THROW(far::detail::free(far::detail::runtime(), copy), Error) << "far pointer " << i;
      }
      EXPECT_EQ(refused, foreign_count);
      foreign_arrived = 0;  // for the next path's test, whose words come after this call
      call(ThreadId{maker, 0}, [] { foreign_checked = true; });
    }
    for (std::size_t i = 0; i < own.size(); ++i) {
      if (!own[i]) continue;
      DerefScope scope;
      EXPECT_TRUE(own[i].deref(scope)->is(own_seeds[i])) << "process " << job.rank() << "'s object " << i << " changed";
    }
  });
  EXPECT_EQ(manager.stats().objects, 0u);
}

}  // namespace

TEST(FarStale, ByteCopyAfterFreeOneSided) { byte_copy_after_free(Path::one_sided); }
TEST(FarStale, ByteCopyAfterFreeTwoSided) { byte_copy_after_free(Path::two_sided); }
TEST(FarStale, LocalCopyAfterFreeOneSided) { local_copy_after_free(Path::one_sided, false); }
TEST(FarStale, LocalCopyAfterFreeChecked) { local_copy_after_free(Path::one_sided, true); }
TEST(FarStale, DestroyedManagerOneSided) { destroyed_manager(Path::one_sided); }
TEST(FarStale, DestroyedManagerTwoSided) { destroyed_manager(Path::two_sided); }
TEST(FarStale, ForeignCopiesOneSided) { foreign_copies(Path::one_sided); }
TEST(FarStale, ForeignCopiesTwoSided) { foreign_copies(Path::two_sided); }
TEST(FarStale, RandomizedMisuseOneSided) { randomized_misuse(Path::one_sided); }
TEST(FarStale, RandomizedMisuseTwoSided) { randomized_misuse(Path::two_sided); }
