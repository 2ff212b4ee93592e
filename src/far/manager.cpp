// Dereference, allocation and freeing: the word-level operations far
// pointers are built on (far/detail/runtime.hpp), and the Manager's view of
// the runtime.
#include "rdmx/far/manager.hpp"

#include <algorithm>
#include <string>
#include <thread>

#include "batch.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/far/scope.hpp"
#include "runtime.hpp"

namespace rdmx::far {
namespace detail {

Runtime::Runtime(Config config, Job* job, std::unique_ptr<Device> device, std::vector<RemoteLocator> regions, std::size_t share,
                 std::size_t shares, std::byte* cache_memory, bool serving)
    : config_(std::move(config)),
      job_(job),
      device_(make_replicated(std::move(device), config_.replication)),
      regions_(std::move(regions)),
      serving_(serving),
      remote_(*device_, share, shares),
      lost_(std::make_unique<std::atomic<bool>[]>(config_.servers.size())),
      cache_(config_, *device_, cache_memory, job_, regions_) {}

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
    remote_.free(block, size_class);
    throw;
  }
  cache_.occupy(frame, word, state::remote(block.server, block.offset, size_class), bytes);
  cache_.set_hot(frame, true);
  // Busy until commit(): eviction leaves it alone while it is being built.
  word.store(state::valid | state::present | state::busy | state::dirty | frame, std::memory_order_release);
  return cache_.address(frame);
}

void Runtime::allocate_remote(std::size_t server, StateWord& word, std::size_t bytes) {
  const std::uint32_t size_class = size_class_of(std::max<std::size_t>(bytes, 1));
  if ((word.load(std::memory_order_relaxed) & state::valid) != 0)
    throw Error(Errc::invalid_argument, "far: allocation into a far pointer that still owns an object");
  std::lock_guard lock(cache_.mutex());
  const auto block = remote_.allocate_on(static_cast<std::uint32_t>(server), size_class);
  word.store(state::remote(block.server, block.offset, size_class), std::memory_order_release);
}

void Runtime::free(StateWord& word) {
  std::unique_lock lock(cache_.mutex());
  const std::uint64_t remote = cache_.drop(lock, word);
  if (remote == 0) return;
  word.store(0, std::memory_order_release);
  remote_.free({state::server_of(remote), state::offset_of(remote)}, state::class_of(remote));
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
    if ((s & state::valid) == 0) throw Error(Errc::invalid_argument, "far: dereference of a null or moved-from far pointer");
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
      cache_.pin(frame);
      const std::uint64_t again = word.load(std::memory_order_seq_cst);
      if ((again & identity) != (s & identity)) {
        cache_.unpin(frame);
        continue;
      }
      if (cache_.frame(frame).owner.load(std::memory_order_acquire) != &word) {
        cache_.unpin(frame);
        throw Error(Errc::invalid_argument, "far: dangling far pointer: its cache frame belongs to another object (was it copied byte-wise?)");
      }
      scope.pin(frame);
      if (access != Access::non_temporal) cache_.mark_hot(frame);
      if (access == Access::write && (again & state::dirty) == 0) word.fetch_or(state::dirty, std::memory_order_relaxed);
      return cache_.address(frame);
    }
    if (bytes > class_bytes(state::class_of(s)))
      throw Error(Errc::invalid_argument, "far: dereference as a " + std::to_string(bytes) + "-byte object of a " +
                                              std::to_string(class_bytes(state::class_of(s))) + "-byte far block");
    if (!word.compare_exchange_weak(s, s | state::busy, std::memory_order_acq_rel)) continue;
    claimed = s;
    return nullptr;
  }
}

void Runtime::publish(std::span<const Claim> claims, DerefScope& scope, Access access) {
  std::uint64_t flags = state::valid | state::present;
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
      if ((s & (state::valid | state::present | state::busy)) != state::valid || bytes > class_bytes(state::class_of(s))) continue;
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
