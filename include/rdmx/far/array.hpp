// far::Array<T>: a fixed-size array in far memory. Elements are grouped into
// chunk objects of about ChunkBytes each, so a small element does not cost
// a whole far object and a miss moves a useful amount of data. Scans go a
// window of chunks at a time through deref_all: the next chunks' misses are
// in flight together instead of one after the other (AIFM's array with its
// prefetcher, done as batches).
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
#include "rdmx/far/state.hpp"

namespace rdmx::far {

template <class T, std::size_t ChunkBytes = 4096>
class Array {
  static_assert(sizeof(T) <= ChunkBytes && ChunkBytes <= max_object_bytes, "rdmx::far: an Array chunk holds at least one element and fits a far object");

 public:
  static constexpr std::size_t per_chunk = ChunkBytes / sizeof(T);

  // `size` value-initialized elements, allocated now (Manager::current()).
  explicit Array(std::size_t size) : size_(size) {
    chunks_.reserve((size + per_chunk - 1) / per_chunk);
    for (std::size_t i = 0; i < size; i += per_chunk) chunks_.push_back(make_unique<Chunk>());
  }

  std::size_t size() const noexcept { return size_; }

  // Element i, pinned until `scope` ends; throws Errc::invalid_argument out of range.
  const T& at(DerefScope& scope, std::size_t i) const { return chunk_of(i).deref(scope)->items[i % per_chunk]; }
  // The same without marking the chunk hot: read once, it is evicted first.
  const T& at_nt(DerefScope& scope, std::size_t i) const { return chunk_of(i).deref_nt(scope)->items[i % per_chunk]; }
  T& at_mut(DerefScope& scope, std::size_t i) { return chunk_of(i).deref_mut(scope)->items[i % per_chunk]; }

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

  const UniquePtr<Chunk>& chunk_of(std::size_t i) const {
    if (i >= size_)
      throw Error(Errc::invalid_argument, "far::Array: index " + std::to_string(i) + " out of range (size " + std::to_string(size_) + ")");
    return chunks_[i / per_chunk];
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
    Manager& manager = Manager::current();
    std::vector<std::vector<detail::OffloadObject>> per_server(manager.device().servers());
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
        manager.device().compute(server, Device::Offload{fabric::FunctionId<Handler>::value, args, &part, sizeof part, writes});
        on_result(part);
      }
    }
  }

  std::size_t size_;
  std::vector<UniquePtr<Chunk>> chunks_;
};

}  // namespace rdmx::far
