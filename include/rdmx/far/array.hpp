// far::Array<T>: a fixed-size array in far memory. Elements are grouped into
// chunk objects of about ChunkBytes each, so a small element does not cost
// a whole far object and a miss moves a useful amount of data. Scans go a
// window of chunks at a time through deref_all: the next chunks' misses are
// in flight together instead of one after the other (AIFM's array with its
// prefetcher, done as batches). Element access through at / at_mut /
// at_nt has a prefetcher of its own: once a thread's accesses to the
// array's chunks keep one stride (sequential, strided, backwards), the next
// chunks along it are fetched ahead (far/prefetcher.hpp).
//
//   far::Array<double> a(1 << 20);              // 8 MiB in far memory
//   a.for_each_mut([](std::size_t i, double& x) { x = i; });
//   double sum = 0;
//   a.for_each([&](std::size_t, const double& x) { sum += x; });
//   far::DerefScope scope;
//   a.at_mut(scope, 7) += 1;
//   double total = a.reduce_remote(Sum{});      // computed on the servers
#pragma once
#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/offload.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/prefetcher.hpp"
#include "rdmx/far/state.hpp"

namespace rdmx::far {

template <class T, std::size_t ChunkBytes = 4096>
class Array {
  static_assert(sizeof(T) <= ChunkBytes && ChunkBytes <= max_object_bytes, "rdmx::far: an Array chunk holds at least one element and fits a far object");

 public:
  static constexpr std::size_t per_chunk = ChunkBytes / sizeof(T);

  // `size` value-initialized elements, allocated now (in this process's far::Manager).
  explicit Array(std::size_t size) : size_(size) {
    chunks_.reserve((size + per_chunk - 1) / per_chunk);
    for (std::size_t i = 0; i < size; i += per_chunk) chunks_.push_back(make_unique<Chunk>());
  }

  std::size_t size() const noexcept { return size_; }

  // Element i, pinned until `scope` ends; throws Errc::invalid_argument out of range.
  // Each of these feeds the calling thread's prefetcher for this array:
  // once its chunk indices keep one stride, the next chunks along it are
  // fetched ahead, into `scope` (pinned until it ends, and landed by then).
  const T& at(DerefScope& scope, std::size_t i) const { return reach(scope, i, Access::read)->items[i % per_chunk]; }
  // The same without marking the chunk hot: read once, it is evicted first.
  const T& at_nt(DerefScope& scope, std::size_t i) const { return reach(scope, i, Access::non_temporal)->items[i % per_chunk]; }
  T& at_mut(DerefScope& scope, std::size_t i) { return reach(scope, i, Access::write)->items[i % per_chunk]; }

  // How many chunks the prefetcher keeps ahead of a strided pattern: by
  // default the Manager's Config::prefetch_depth (RDMX_FAR_PREFETCH); 0 turns
  // it off for this array. Never more than a sixteenth of the cache's worth
  // of chunks, nor AccessPattern::max_depth. Not to be changed while other
  // threads use the array.
  void set_prefetch_depth(std::size_t chunks) noexcept { prefetch_depth_ = chunks; }

  // fn(index, element) over [first, last), `window` chunks in flight at a time.
  template <class F>
  void for_each(F&& fn, std::size_t first = 0, std::size_t last = npos, std::size_t window = 16) const {
    scan(Access::read, first, last, window, [&](std::size_t i, Chunk* c, std::size_t k) { fn(i, static_cast<const T&>(c->items[k])); });
  }
  // The same with the elements writable (their chunks become dirty).
  template <class F>
  void for_each_mut(F&& fn, std::size_t first = 0, std::size_t last = npos, std::size_t window = 16) {
    scan(Access::write, first, last, window, [&](std::size_t i, Chunk* c, std::size_t k) { fn(i, c->items[k]); });
  }

  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  // Compute offload: `op` runs on the servers, over the chunks each one
  // holds, and only results cross the network. `Op` travels by value
  // (trivially copyable, a few KiB at most) and provides
  //   using Result = ...;                          // trivially copyable
  //   Result identity() const;
  //   void fold(Result&, const T* items, std::size_t n) const;   // on a server
  //   void combine(Result&, const Result&) const;                // here
  // Every chunk is first made current on its server (dirty ones written
  // back) and dropped from the cache; no other thread may use the array
  // meanwhile, and a chunk a DerefScope pins is an error.
  template <class Op>
  typename Op::Result reduce_remote(const Op& op) {
    static_assert(std::is_trivially_copyable_v<typename Op::Result>, "rdmx::far: an offloaded result must be trivially copyable");
    typename Op::Result result = op.identity();
    offload<Reduce<Op>>(op, false, [&](const typename Op::Result& part) { op.combine(result, part); });
    return result;
  }
  // `op.apply(T* items, std::size_t n)` changes the elements in place, on
  // the servers (every copy, when replicated); returns how many it saw.
  template <class Op>
  std::size_t update_remote(const Op& op) {
    std::size_t items = 0;
    offload<Update<Op>>(op, true, [&](const std::uint64_t& n) { items += n; });
    return items;
  }

 private:
  struct Chunk {
    T items[per_chunk]{};
  };

  // What a chunk takes in the cache: its size class.
  static constexpr std::size_t chunk_class_bytes = std::max(min_object_bytes, std::bit_ceil(sizeof(Chunk)));

  Chunk* reach(DerefScope& scope, std::size_t i, Access access) const {
    if (i >= size_)
      throw Error(Errc::invalid_argument, "far::Array: index " + std::to_string(i) + " out of range (size " + std::to_string(size_) + ")");
    const std::size_t c = i / per_chunk;
    const UniquePtr<Chunk>& chunk = chunks_[c];
    Chunk* reached = access == Access::write ? chunk.deref_mut(scope)
                                             : const_cast<Chunk*>(access == Access::read ? chunk.deref(scope) : chunk.deref_nt(scope));
    if (prefetch_depth_ != 0) look_ahead(scope, c);
    return reached;
  }

  // The prefetcher: after chunk c is reached, the chunks the pattern names
  // are started, as far as the cache has room for them without waiting.
  // After, not before: a prefetch must never take the frame the access
  // itself needs.
  void look_ahead(DerefScope& scope, std::size_t c) const {
    detail::Runtime& runtime = scope.runtime();
    const Config& config = detail::config(runtime);
    const std::size_t depth =
        std::min(prefetch_depth_ == npos ? config.prefetch_depth : prefetch_depth_, config.cache_bytes / 16 / chunk_class_bytes);
    detail::AccessPattern& pattern = detail::access_pattern(number_);
    std::size_t ahead[detail::AccessPattern::max_depth];
    bool hit = false;
    const std::size_t n = pattern.access(c, chunks_.size(), depth, ahead, hit);
    if (hit) detail::count_prefetch_hits(runtime, 1);
    if (n == 0) return;
    std::atomic<std::uint64_t>* words[detail::AccessPattern::max_depth];
    bool started[detail::AccessPattern::max_depth];
    for (std::size_t j = 0; j < n; ++j) words[j] = &chunks_[ahead[j]].word();
    detail::prefetch(std::span(words, n), sizeof(Chunk), scope, std::span(started, n));
    for (std::size_t j = 0; j < n; ++j)
      if (started[j]) pattern.fetched(ahead[j]);
  }

  template <class Visit>
  void scan(Access access, std::size_t first, std::size_t last, std::size_t window, Visit&& visit) const {
    last = std::min(last, size_);
    if (first >= last) return;
    window = std::max<std::size_t>(window, 1);
    const std::size_t last_chunk = (last - 1) / per_chunk;
    for (std::size_t c = first / per_chunk; c <= last_chunk; c += window) {
      const std::size_t n = std::min(window, last_chunk + 1 - c);
      DerefScope scope;
      const auto chunks = deref_all(scope, std::span<const UniquePtr<Chunk>>(chunks_.data() + c, n), access);
      for (std::size_t j = 0; j < n; ++j) {
        const std::size_t base = (c + j) * per_chunk;
        for (std::size_t k = base < first ? first - base : 0; k < per_chunk && base + k < last; ++k) visit(base + k, chunks[j], k);
      }
    }
  }

  template <class Op>
  struct Reduce {
    static typename Op::Result start(const Op& op) { return op.identity(); }
    static void run(const Op& op, typename Op::Result& r, T* items, std::size_t n) { op.fold(r, static_cast<const T*>(items), n); }
  };
  template <class Op>
  struct Update {
    static std::uint64_t start(const Op&) { return 0; }
    static void run(const Op& op, std::uint64_t& seen, T* items, std::size_t n) {
      op.apply(items, n);
      seen += n;
    }
  };

  // Sends `op` to every server for the chunks it holds, a bounded number
  // of chunks per request; on_result(part) takes each request's reply.
  template <class Kind, class Op, class OnResult>
  void offload(const Op& op, bool writes, OnResult&& on_result) {
    static_assert(std::is_trivially_copyable_v<Op>, "rdmx::far: an offloaded operation travels by value: it must be trivially copyable");
    using Handler = detail::OffloadHandler<Op, T, Kind>;
    Device& device = detail::device(detail::runtime());
    std::vector<std::vector<detail::OffloadObject>> per_server(device.servers());
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      if (!chunks_[c].evict())
        throw Error(Errc::invalid_argument, "far::Array: chunk " + std::to_string(c) +
                                                " is in use (a DerefScope pins it): an offloaded operation needs the whole array unpinned");
      const std::uint64_t word = chunks_[c].state_word();
      const std::size_t items = std::min(per_chunk, size_ - c * per_chunk);
      per_server.at(state::server_of(word)).push_back({state::offset_of(word), static_cast<std::uint32_t>(items), 0});
    }
    std::vector<std::byte> args;
    for (std::size_t server = 0; server < per_server.size(); ++server) {
      const auto& objects = per_server[server];
      for (std::size_t first = 0; first < objects.size(); first += detail::offload_objects) {
        const std::size_t n = std::min(detail::offload_objects, objects.size() - first);
        const detail::OffloadHeader<Op> header{op, static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(sizeof(Chunk))};
        args.resize(sizeof header + n * sizeof(detail::OffloadObject));
        std::memcpy(args.data(), &header, sizeof header);
        std::memcpy(args.data() + sizeof header, objects.data() + first, n * sizeof(detail::OffloadObject));
        decltype(Kind::start(op)) part{};
        device.compute(server, Device::Offload{fabric::FunctionId<Handler>::value, args, &part, sizeof part, writes});
        on_result(part);
      }
    }
  }

  std::size_t size_;
  std::vector<UniquePtr<Chunk>> chunks_;
  std::uint64_t number_ = detail::next_array_number();  // names its prefetcher state in each thread
  std::size_t prefetch_depth_ = npos;                    // npos: the Manager's setting
};

}  // namespace rdmx::far
