// The path chosen per call (rdmx::parcel::Path): a request takes the path
// its caller chose and its reply comes back the same way, whatever
// RDMX_PARCEL_CALLS and the transport would choose; posts on any path are
// covered by quiet(); a path the job cannot take is refused.
//
// TEST_AUTOMATIC_FUSED (set by tests/action/CMakeLists.txt): whether a
// small parcel on the automatic path goes as a fused one-sided record here
// (1 over shared memory, 0 over TCP, where automatic means send-based);
// TEST_HELPERS=1: the job has helper threads, so one_sided is refused.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "rdmx/action/action.hpp"
#include "rdmx/fabric/job.hpp"
#include "rdmx/fabric/quiet.hpp"

using namespace rdmx;

namespace {

Job& job() { return Job::current(); }

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == "1";
}

std::vector<char> echo(std::vector<char> v) { return v; }
std::uint64_t fused_here() { return parcel::stats().fused; }

std::atomic<std::uint64_t> posted_ran{0};
void count_post(std::uint64_t) { posted_ran.fetch_add(1, std::memory_order_relaxed); }

const char* name(parcel::Path p) {
  switch (p) {
    case parcel::Path::automatic: return "automatic";
    case parcel::Path::one_sided: return "one_sided";
    case parcel::Path::send: return "send";
  }
  return "?";
}

std::vector<char> pattern(std::size_t n, int seed) {
  std::vector<char> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<char>(seed + 13 * i);
  return v;
}

// Takes turns: the body runs on one process at a time while the others
// serve (a thread's fused count then moves only with its own parcels).
template <class F>
void in_turn(F body) {
  for (std::uint32_t turn = 0; turn < job().rank(); ++turn) job().barrier();
  body();
  for (std::uint32_t turn = job().rank(); turn < job().size(); ++turn) job().barrier();
}

}  // namespace

TEST(Path, RequestAndReplyTakeThePathTheCallerChose) {
  if (env_flag("TEST_HELPERS")) GTEST_SKIP() << "with helper threads only send-based parcels run";
  const bool automatic_fused = env_flag("TEST_AUTOMATIC_FUSED");
  const ThreadId to{(job().rank() + 1) % job().size(), 0};
  in_turn([&] {
    for (parcel::Path path : {parcel::Path::automatic, parcel::Path::one_sided, parcel::Path::send}) {
      const bool fused = path == parcel::Path::one_sided || (path == parcel::Path::automatic && automatic_fused);
      // The destination's count, asked for send-based (which never fuses).
      const std::uint64_t there_before = async(parcel::Path::send, [] { return fused_here(); }, to).get();
      const std::uint64_t here_before = parcel::stats().fused;
      const std::vector<char> v = pattern(100, 3);
      EXPECT_EQ(async(path, action<&echo>, to, v).get(), v) << name(path);
      const std::uint64_t here = parcel::stats().fused - here_before;
      const std::uint64_t there = async(parcel::Path::send, [] { return fused_here(); }, to).get() - there_before;
      EXPECT_EQ(here, fused ? 1u : 0u) << "the request on path " << name(path);
      EXPECT_EQ(there, fused ? 1u : 0u) << "the reply on path " << name(path);
    }
  });
}

TEST(Path, EverySizeArrivesIntactOnEveryPath) {
  const bool helpers = env_flag("TEST_HELPERS");
  const ThreadId to{(job().rank() + 1) % job().size(), 0};
  // Fused, a call_buffer on the one-sided ring, a send-based message, and a
  // rendezvous parcel whose chunk the destination pulls.
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{1500}, std::size_t{3000}, std::size_t{9000},
                        std::size_t{1} << 20}) {
    for (parcel::Path path : {parcel::Path::automatic, parcel::Path::one_sided, parcel::Path::send}) {
      if (helpers && path == parcel::Path::one_sided) continue;
      const std::vector<char> v = pattern(n, static_cast<int>(n));
      EXPECT_EQ(async(path, action<&echo>, to, v).get(), v) << n << " bytes on path " << name(path);
    }
  }
  job().barrier();
}

TEST(Path, PostsOnEveryPathHaveRunAfterQuiet) {
  const bool helpers = env_flag("TEST_HELPERS");
  constexpr std::uint64_t per_path = 3000;
  posted_ran = 0;
  job().barrier();
  const ThreadId to{(job().rank() + 1) % job().size(), 0};
  std::uint64_t sent = 0;
  for (parcel::Path path : {parcel::Path::automatic, parcel::Path::one_sided, parcel::Path::send}) {
    if (helpers && path == parcel::Path::one_sided) continue;
    for (std::uint64_t i = 0; i < per_path; ++i) post(path, action<&count_post>, to, i);
    sent += per_path;
  }
  // Posted one-sided parcels may wait, unpublished, in this thread's
  // messenger (also where the automatic path is send-based): quiet() must
  // wait until they too have run.
  quiet();
  job().barrier();
  EXPECT_EQ(posted_ran.load(), sent) << "posts from process " << (job().rank() + job().size() - 1) % job().size();
  job().barrier();
}

TEST(Path, APathTheJobCannotTakeIsRefused) {
  const ThreadId to{(job().rank() + 1) % job().size(), 0};
  const auto bad = static_cast<parcel::Path>(7);
  try {
    async(bad, action<&echo>, to, pattern(8, 1)).get();
    ADD_FAILURE() << "an unknown path was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
  }
  if (env_flag("TEST_HELPERS")) {
    try {
      async(parcel::Path::one_sided, action<&echo>, to, pattern(8, 1)).get();
      ADD_FAILURE() << "Path::one_sided was accepted with helper threads";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), Errc::invalid_argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("RDMX_HELPERS"), std::string::npos) << e.what();
    }
    EXPECT_THROW(post(parcel::Path::one_sided, action<&count_post>, to, 1), Error);
    // The other paths still work after a refusal.
    EXPECT_EQ(async(parcel::Path::send, action<&echo>, to, pattern(8, 2)).get(), pattern(8, 2));
  }
  job().barrier();
}
