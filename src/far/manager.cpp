// Dereference, allocation and freeing: the word-level operations far
// pointers are built on (far/detail/runtime.hpp), and the Manager's view of
// the runtime.
#include "rdmx/far/manager.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <thread>

#include "batch.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/far/scope.hpp"
#include "runtime.hpp"

namespace rdmx::far {
namespace detail {
namespace {

// The epoch of this process's next Manager: 1 to state::epochs, in turn.
std::uint32_t next_epoch() noexcept {
  static std::atomic<std::uint32_t> managers{0};
  return managers.fetch_add(1, std::memory_order_relaxed) % state::epochs + 1;
}

}  // namespace

Runtime::Runtime(Config config, Job* job, std::unique_ptr<Device> device, std::vector<RemoteLocator> regions, std::size_t share,
                 std::size_t shares, std::byte* cache_memory, bool serving)
    : config_(std::move(config)),
      job_(job),
      device_(make_replicated(std::move(device), config_.replication)),
      regions_(std::move(regions)),
      serving_(serving),
      epoch_(state::epoch_bits(next_epoch())),
      remote_(*device_, share, shares),
      lost_(std::make_unique<std::atomic<bool>[]>(config_.servers.size())),
      cache_(config_, *device_, cache_memory, job_, regions_, remote_) {}

void Runtime::refuse_tag(std::uint64_t s, const char* what) const {
  if ((s & state::valid) == 0) throw Error(Errc::invalid_argument, std::string("far: ") + what + " of a null or moved-from far pointer");
  char text[256];
  std::snprintf(text, sizeof text,
                "far: %s of a stale far pointer %#llx: it was made by an earlier far::Manager of this process (epoch %u; "
                "this one's is %u), whose objects are gone",
                what, static_cast<unsigned long long>(s), state::epoch_of(s), state::epoch_of(epoch_));
  throw Error(Errc::invalid_argument, text);
}

void Runtime::refuse_remote(std::uint64_t remote, RemoteAllocator::Standing standing, const char* what) const {
  throw Error(Errc::invalid_argument, RemoteAllocator::stale_message(what, remote, standing, remote_.generation_now(remote)));
}

void Runtime::refuse_frame(std::uint64_t s, std::uint32_t frame, const char* why) const {
  char text[256];
  std::snprintf(text, sizeof text, "far: dereference of a stale far pointer %#llx (cache frame %u): %s", static_cast<unsigned long long>(s),
                frame, why);
  throw Error(Errc::invalid_argument, text);
}

void Runtime::check_current(std::span<const Claim> claims) const {
  for (const Claim& c : claims)
    if (const auto standing = remote_.standing(c.remote); standing != RemoteAllocator::Standing::live)
      refuse_remote(c.remote, standing, "dereference");
}

Stats Runtime::stats() const {
  std::lock_guard lock(cache_.mutex());
  Stats s;
  cache_.fill(s);
  s.objects = remote_.live();
  s.prefetched = prefetched_.load(std::memory_order_relaxed);
  s.prefetch_hits = prefetch_hits_.load(std::memory_order_relaxed);
  s.lost_servers = static_cast<std::size_t>(std::count_if(lost_.get(), lost_.get() + config_.servers.size(),
                                                          [](const std::atomic<bool>& lost) { return lost.load(std::memory_order_acquire); }));
  return s;
}

void* Runtime::place(StateWord& word, std::size_t bytes, const std::size_t* server) {
  const std::uint32_t size_class = size_class_of(std::max<std::size_t>(bytes, 1));
  std::unique_lock lock(cache_.mutex());
  const auto block = server == nullptr ? remote_.allocate(size_class) : remote_.allocate_on(static_cast<std::uint32_t>(*server), size_class);
  std::uint32_t frame = 0;
  try {
    frame = cache_.take_frame(lock, size_class);
  } catch (...) {
    remote_.free(state::remote(block.server, block.offset, size_class, block.generation, 0));
    throw;
  }
  cache_.occupy(frame, word, state::remote(block.server, block.offset, size_class, block.generation, 0) | epoch_, bytes);
  cache_.set_hot(frame, true);
  // Busy until commit(): eviction leaves it alone while it is being built.
  word.store(epoch_ | state::present | state::busy | state::dirty | frame, std::memory_order_release);
  return cache_.address(frame);
}

void Runtime::allocate_remote(std::size_t server, StateWord& word, std::size_t bytes) {
  const std::uint32_t size_class = size_class_of(std::max<std::size_t>(bytes, 1));
  if ((word.load(std::memory_order_relaxed) & state::valid) != 0)
    throw Error(Errc::invalid_argument, "far: allocation into a far pointer that still owns an object");
  std::lock_guard lock(cache_.mutex());
  const auto block = remote_.allocate_on(static_cast<std::uint32_t>(server), size_class);
  word.store(state::remote(block.server, block.offset, size_class, block.generation, 0) | epoch_, std::memory_order_release);
}

void Runtime::free(StateWord& word) {
  const std::uint64_t s = word.load(std::memory_order_acquire);
  if (s == 0) return;
  if ((s & state::valid) != epoch_) refuse_tag(s, "free");
  std::unique_lock lock(cache_.mutex());
  const std::uint64_t remote = cache_.drop(lock, word);
  if (remote == 0) return;
  word.store(0, std::memory_order_release);
  remote_.free(remote & ~state::valid);
}

void Runtime::move(StateWord& from, StateWord& to) noexcept {
  std::lock_guard lock(cache_.mutex());  // eviction rewrites the owner's word under it
  const std::uint64_t s = from.load(std::memory_order_acquire);
  to.store(s, std::memory_order_release);
  from.store(0, std::memory_order_release);
  if ((s & state::present) != 0) {
    StateWord* expected = &from;
    cache_.frame(state::frame_of(s)).owner.compare_exchange_strong(expected, &to, std::memory_order_acq_rel);
  }
}

void* Runtime::pin_or_claim(StateWord& word, std::size_t bytes, DerefScope& scope, Access access, std::uint64_t& claimed) {
  constexpr std::uint64_t identity = state::present | state::busy | state::frame_mask;
  for (;;) {
    std::uint64_t s = word.load(std::memory_order_acquire);
    // Null, or made by an earlier Manager: one compare, as the null test was.
    if ((s & state::valid) != epoch_) [[unlikely]]
      refuse_tag(s, "dereference");
    if ((s & state::busy) != 0) {
      if (Batch* b = Batch::fetching(word)) {
        b->finish();  // this thread's own batch is fetching it
        continue;
      }
      if (cache_.cancel_own_eviction(word, s)) continue;
      // Another thread fetches or evicts it. Waiting for an eviction rather
      // than calling it off: its write-back is already on the network, and
      // the object must not change while the transfer reads it.
      std::this_thread::yield();
      continue;
    }
    if ((s & state::present) != 0) {
      const std::uint32_t frame = state::frame_of(s);
      if (frame >= cache_.units()) [[unlikely]]
        refuse_frame(s, frame, "no such frame in this Manager's cache");
      cache_.pin(frame);
      const std::uint64_t again = word.load(std::memory_order_seq_cst);
      if ((again & identity) != (s & identity)) {
        cache_.unpin(frame);
        continue;
      }
      if (cache_.frame(frame).owner.load(std::memory_order_acquire) != &word) {
        cache_.unpin(frame);
        refuse_frame(s, frame, "dangling: its cache frame belongs to another object (was it copied byte-wise?)");
      }
      if (check_) [[unlikely]] {
        // RDMX_FAR_CHECK: a local copy of an object freed since (a
        // byte-wise copy fetched while its original lived) is refused too.
        if (const auto standing = remote_.standing(cache_.frame(frame).remote); standing != RemoteAllocator::Standing::live) {
          cache_.unpin(frame);
          refuse_remote(cache_.frame(frame).remote, standing, "dereference");
        }
      }
      scope.pin(frame);
      if (access != Access::non_temporal) cache_.mark_hot(frame);
      if (access == Access::write && (again & state::dirty) == 0) word.fetch_or(state::dirty, std::memory_order_relaxed);
      return cache_.address(frame);
    }
    if (bytes > class_bytes(state::class_of(s)))
      throw Error(Errc::invalid_argument, "far: dereference as a " + std::to_string(bytes) + "-byte object of a " +
                                              std::to_string(class_bytes(state::class_of(s))) + "-byte far block");
    // The miss path: its block must still hold the object the word names,
    // checked once the read has landed (check_current), which also catches
    // a free racing the read; the read hides the table's load.
    remote_.prefetch(s);
    if (!word.compare_exchange_weak(s, s | state::busy, std::memory_order_acq_rel)) continue;
    claimed = s;
    return nullptr;
  }
}

void Runtime::publish(std::span<const Claim> claims, DerefScope& scope, Access access) {
  std::uint64_t flags = epoch_ | state::present;
  if (access == Access::write) flags |= state::dirty;
  for (const Claim& c : claims) {
    scope.pin(c.frame);
    cache_.set_hot(c.frame, access != Access::non_temporal);
    c.word->store(flags | c.frame, std::memory_order_release);
  }
}

void* Runtime::deref(StateWord& word, std::size_t bytes, DerefScope& scope, Access access) {
  std::uint64_t remote = 0;
  if (void* local = pin_or_claim(word, bytes, scope, access, remote)) return local;
  Claim claim{&word, remote, 0, 0};
  cache_.take_frames(std::span(&claim, 1), bytes);
  try {
    // Swap-in without a copy: straight into the frame in the registered arena.
    device_->read(state::server_of(remote), state::offset_of(remote), cache_.address(claim.frame), bytes);
    // Freed and reused meanwhile (another thread freed the original of a
    // byte-wise copy): what landed may be another object's.
    check_current(std::span(&claim, 1));
  } catch (...) {
    cache_.give_back(std::span(&claim, 1));
    throw;
  }
  publish(std::span(&claim, 1), scope, access);
  return cache_.address(claim.frame);
}

InFlight Runtime::deref_start(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, Access access,
                              std::span<void*> out) {
  if (out.size() < words.size()) throw Error(Errc::invalid_argument, "far: a batch needs an output entry per pointer");
  auto b = std::make_unique<Batch>(*this, scope, access, bytes);
  b->words = words;
  b->out = out;
  b->claims.reserve(words.size());
  try {
    for (std::size_t i = 0; i < words.size(); ++i) {
      out[i] = nullptr;
      if (std::any_of(b->claims.begin(), b->claims.end(), [&](const Claim& c) { return c.word == words[i]; })) {
        b->repeated.push_back(i);
        continue;
      }
      std::uint64_t remote = 0;
      out[i] = pin_or_claim(*words[i], bytes, scope, access, remote);
      if (out[i] == nullptr) b->claims.push_back({words[i], remote, 0, i});
    }
  } catch (...) {
    for (const Claim& c : b->claims) c.word->store(c.remote, std::memory_order_release);
    throw;
  }
  cache_.take_frames(b->claims, bytes);
  b->start();
  return InFlight(std::move(b));
}

Future<void*> Runtime::deref_async(StateWord& word, std::size_t bytes, DerefScope& scope, Access access) {
  auto future = rdmx::detail::make_state<void*>();
  future->progress = ProgressHook{&Batch::land_detached, nullptr};
  try {
    std::uint64_t remote = 0;
    if (void* local = pin_or_claim(word, bytes, scope, access, remote)) {
      future->set_value(local);
      return Future<void*>(std::move(future));
    }
    auto b = std::make_unique<Batch>(*this, scope, access, bytes);
    b->own_words = {&word};
    b->own_out = {nullptr};
    b->words = b->own_words;
    b->out = b->own_out;
    b->claims.push_back({&word, remote, 0, 0});
    Batch::reserve_detached();             // no failure once started
    cache_.take_frames(b->claims, bytes);  // on failure the word is remote again
    b->start();
    b->promise = future;
    Batch::detach(std::move(b));
  } catch (...) {
    future->set_exception(std::current_exception());
  }
  return Future<void*>(std::move(future));
}

std::size_t Runtime::prefetch(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope,
                              std::span<bool> started) noexcept {
  std::fill(started.begin(), started.end(), false);
  if (started.size() < words.size()) return 0;
  std::unique_ptr<Batch> b;
  try {
    b = std::make_unique<Batch>(*this, scope, Access::read, bytes);  // hot: it is about to be used
    b->own_words.assign(words.begin(), words.end());
    b->own_out.assign(words.size(), nullptr);
    b->claims.reserve(words.size());
    // Only objects that are remote and nobody else is moving: a prefetch
    // never waits for another thread.
    for (std::size_t i = 0; i < words.size(); ++i) {
      std::uint64_t s = words[i]->load(std::memory_order_acquire);
      if ((s & (state::valid | state::present | state::busy)) != epoch_ || bytes > class_bytes(state::class_of(s))) continue;
      if (remote_.standing(s) != RemoteAllocator::Standing::live) continue;  // the dereference refuses it
      if (std::any_of(b->claims.begin(), b->claims.end(), [&](const Claim& c) { return c.word == words[i]; })) continue;
      if (!words[i]->compare_exchange_strong(s, s | state::busy, std::memory_order_acq_rel)) continue;
      b->claims.push_back({words[i], s, 0, i});
    }
  } catch (...) {
    if (b != nullptr)
      for (const Claim& c : b->claims) c.word->store(c.remote, std::memory_order_release);
    return 0;
  }
  if (b->claims.empty()) return 0;
  const std::size_t placed = cache_.take_frames_now(b->claims, bytes);
  // Those without room are left as they were.
  for (const Claim& c : std::span(b->claims).subspan(placed)) c.word->store(c.remote, std::memory_order_release);
  b->claims.resize(placed);
  if (placed == 0) return 0;
  b->words = b->own_words;
  b->out = b->own_out;
  try {
    Batch::reserve_detached();  // no failure once started
  } catch (...) {
    cache_.give_back(b->claims);
    return 0;
  }
  try {
    b->start();
  } catch (...) {
    return 0;  // every claim given back
  }
  for (const Claim& c : b->claims) started[c.index] = true;
  const std::size_t count = b->claims.size();
  prefetched_.fetch_add(count, std::memory_order_relaxed);
  Batch::detach(std::move(b));
  return count;
}

const Config& config(const Runtime& runtime) noexcept { return runtime.config(); }
Device& device(Runtime& runtime) noexcept { return runtime.device(); }
void* allocate(Runtime& runtime, StateWord& word, std::size_t bytes) { return runtime.place(word, bytes, nullptr); }
void* allocate_on(Runtime& runtime, std::size_t server, StateWord& word, std::size_t bytes) {
  return runtime.place(word, bytes, &server);
}
void allocate_remote(Runtime& runtime, std::size_t server, StateWord& word, std::size_t bytes) {
  runtime.allocate_remote(server, word, bytes);
}
void free(Runtime& runtime, StateWord& word) { runtime.free(word); }
void move(Runtime& runtime, StateWord& from, StateWord& to) noexcept { runtime.move(from, to); }
bool evict(Runtime& runtime, StateWord& word) { return runtime.cache().make_current(word, false); }
bool write_back(Runtime& runtime, StateWord& word) { return runtime.cache().make_current(word, true); }
void* deref(StateWord& word, std::size_t bytes, DerefScope& scope, Access access) {
  return scope.runtime().deref(word, bytes, scope, access);
}
InFlight deref_start(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, Access access, std::span<void*> out) {
  return scope.runtime().deref_start(words, bytes, scope, access, out);
}
Future<void*> deref_async(StateWord& word, std::size_t bytes, DerefScope& scope, Access access) {
  return scope.runtime().deref_async(word, bytes, scope, access);
}
std::size_t prefetch(std::span<StateWord* const> words, std::size_t bytes, DerefScope& scope, std::span<bool> started) noexcept {
  return scope.runtime().prefetch(words, bytes, scope, started);
}
void count_prefetch_hits(Runtime& runtime, std::size_t n) noexcept { runtime.count_prefetch_hits(n); }

}  // namespace detail

const Config& Manager::config() const noexcept { return runtime_->config(); }
Device& Manager::device() noexcept { return runtime_->device(); }
Stats Manager::stats() const { return runtime_->stats(); }
bool Manager::serving() const noexcept { return runtime_->serving(); }

RemoteLocator Manager::server_region(std::size_t server) const {
  if (server >= runtime_->regions().size())
    throw Error(Errc::invalid_argument, "far: no published region for server " + std::to_string(server));
  return runtime_->regions()[server];
}

bool Manager::in_cache(const void* p) const noexcept { return runtime_->cache().contains(p); }

}  // namespace rdmx::far
