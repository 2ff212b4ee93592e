// far::Vector<T>: a growable vector in far memory (AIFM's DataFrameVector).
// Elements are grouped into chunk objects of about ChunkBytes each, all on
// one server (group), with a directory of the chunks' offsets kept there
// too. That is what lets whole-vector operations run on that server's CPU
// (AIFM's offload): a copy, a gather by an index vector (a shuffle), a
// filter and aggregations move only their results across the network.
//
//   far::Vector<double> fare;                        // on the next server in turn
//   fare.append(batch);                              // or push_back
//   fare.for_each([](std::size_t i, const double& x) { ... });   // next window in flight
//   far::Vector<double> cheap = fare.filter(Below{10.0});        // on the server
//   far::Vector<double> sorted = fare.gather(order);             // sorted[j] = fare[order[j]]
//   double total = fare.reduce(far::Sum<double>{});
//
// Every offloaded operation also runs here (Run::here): the same result,
// reading the chunks through the cache. It falls back to that by itself
// when the device cannot compute, when the vectors involved live on
// different servers, or when their directories do not fit one request
// (vectors beyond 131072 chunks). An offloaded operation first writes
// back the vectors' dirty chunks (they stay cached); no other thread may
// use them meanwhile, and a chunk a DerefScope pins is an error.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/pointer.hpp"
#include "rdmx/far/state.hpp"
#include "rdmx/far/vector_offload.hpp"

namespace rdmx::far {

// Where a Vector operation runs: on the vector's server (falling back to
// here when it cannot), or here, through the cache.
enum class Run { offloaded, here };

template <class T, std::size_t ChunkBytes = 4096>
class Vector {
  static_assert(std::is_trivially_copyable_v<T>, "rdmx::far: a far::Vector holds trivially copyable elements");
  static_assert(sizeof(T) <= ChunkBytes, "rdmx::far: a far::Vector element must fit its chunk (raise ChunkBytes)");
  static_assert(ChunkBytes <= max_object_bytes, "rdmx::far: a far::Vector chunk is one far object (16 KiB at most)");

 public:
  using value_type = T;
  static constexpr std::size_t per_chunk = ChunkBytes / sizeof(T);
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

 private:
  struct Chunk {
    T items[per_chunk]{};
  };

 public:

  // Empty, with its chunks on server (group) `server`; by default the
  // servers take turns, so that many vectors spread over them.
  Vector() : Vector(next_server()) {}
  explicit Vector(std::size_t server) : server_(server) {
    const std::size_t servers = detail::device(detail::runtime()).servers();
    if (server >= servers)
      throw Error(Errc::invalid_argument, "far::Vector: server " + std::to_string(server) + ", but there are " + std::to_string(servers));
  }
  Vector(Vector&&) noexcept = default;
  Vector& operator=(Vector&&) noexcept = default;

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::size_t server() const noexcept { return server_; }

  // Room for `n` elements without growing the chunk list; out_of_memory
  // when they could never fit the server's region.
  void reserve(std::size_t n) {
    const std::size_t chunks = n / per_chunk + 1;
    if (chunks > detail::device(detail::runtime()).region_bytes(server_) / sizeof(Chunk))
      throw Error(Errc::out_of_memory, "far::Vector: " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) +
                                           " bytes cannot fit server " + std::to_string(server_) + "'s region");
    chunks_.reserve(chunks);
  }
  void push_back(const T& value) { append(std::span<const T>(&value, 1)); }
  // Appends in place, a chunk at a time. On an error (far memory full) the
  // elements stored so far stay, and size() counts them.
  void append(std::span<const T> items) {
    while (!items.empty()) {
      if (size_ == chunks_.size() * per_chunk) add_chunk();
      DerefScope scope;
      Chunk* chunk = chunks_.back().deref_mut(scope);
      const std::size_t at = size_ % per_chunk;
      const std::size_t n = std::min(per_chunk - at, items.size());
      std::memcpy(chunk->items + at, items.data(), n * sizeof(T));
      size_ += n;
      items = items.subspan(n);
    }
  }

  // Element i, pinned until `scope` ends; Errc::invalid_argument out of range.
  const T& at(DerefScope& scope, std::size_t i) const { return chunk_of(i).deref(scope)->items[i % per_chunk]; }
  T& at_mut(DerefScope& scope, std::size_t i) { return chunk_of(i).deref_mut(scope)->items[i % per_chunk]; }

  // Sequential reads (writes): the window of chunks after the one being
  // read is already in flight (far::Prefetch), two windows pinned at most.
  class Reader {
   public:
    explicit Reader(const Vector& v, Access access = Access::non_temporal)
        : vector_(&v), access_(access), window_(window_chunks()) {}
    // Element i; moving forward is what the prefetch expects, any i works.
    const T& operator[](std::size_t i) { return chunk(i / per_chunk, i)->items[i % per_chunk]; }
    // Chunk c's elements (its first `count(c)` are the vector's).
    T* items(std::size_t c) { return chunk(c, c * per_chunk)->items; }
    std::size_t count(std::size_t c) const { return std::min(per_chunk, vector_->size_ - c * per_chunk); }

   private:
    struct Window {
      Window(const Vector& v, std::size_t f, std::size_t n, Access a)
          : first(f), count(n), fetch(scope, std::span<const UniquePtr<Chunk>>(v.chunks_.data() + f, n), a) {}
      std::size_t first, count;
      DerefScope scope;  // before fetch: the objects are pinned in it
      Prefetch<UniquePtr<Chunk>> fetch;
      std::vector<Chunk*> chunks;
    };
    Chunk* chunk(std::size_t c, std::size_t i) {
      if (i >= vector_->size_)
        throw Error(Errc::invalid_argument, "far::Vector: index " + std::to_string(i) + " out of range (size " + std::to_string(vector_->size_) + ")");
      if (current_ && c >= current_->first && c < current_->first + current_->count) return current_->chunks[c - current_->first];
      current_.reset();
      if (next_ && c >= next_->first && c < next_->first + next_->count)
        current_ = std::move(next_);
      else
        next_.reset(), current_ = start(c);
      current_->chunks = current_->fetch.get();
      const std::size_t after = current_->first + current_->count;
      if (after < vector_->chunks_.size()) next_ = start(after);
      return current_->chunks[c - current_->first];
    }
    std::unique_ptr<Window> start(std::size_t c) const {
      return std::make_unique<Window>(*vector_, c, std::min(window_, vector_->chunks_.size() - c), access_);
    }
    // A sixteenth of the cache per window, 16 chunks at most: two windows
    // pinned leave most of the budget to everything else.
    static std::size_t window_chunks() {
      return std::clamp<std::size_t>(detail::config(detail::runtime()).cache_bytes / sizeof(Chunk) / 16, 1, 16);
    }

    const Vector* vector_;
    Access access_;
    std::size_t window_;
    std::unique_ptr<Window> current_, next_;
  };

  // fn(index, element) over [first, last).
  template <class F>
  void for_each(F&& fn, std::size_t first = 0, std::size_t last = npos) const {
    Reader reader(*this);
    visit(reader, first, last, [&](std::size_t i, T& x) { fn(i, static_cast<const T&>(x)); });
  }
  // The same with the elements writable (their chunks become dirty).
  template <class F>
  void for_each_mut(F&& fn, std::size_t first = 0, std::size_t last = npos) {
    Reader reader(*this, Access::write);
    visit(reader, first, last, fn);
  }
  // Every element, in a std::vector.
  std::vector<T> to_vector() const {
    std::vector<T> out(size_);
    Reader reader(*this);
    for (std::size_t c = 0; c < chunks_.size(); ++c) std::memcpy(out.data() + c * per_chunk, reader.items(c), reader.count(c) * sizeof(T));
    return out;
  }

  // A copy of the vector, on its server.
  Vector copy(Run run = Run::offloaded) const {
    Vector out(server_);
    if (offloads(run, size_)) {
      out.add_remote_chunks(size_);
      requests<detail::CopyKind<T>>(detail::NoOp{}, size_, {view_of(*this), view_of(out)}, true, expect_all);
      return out;
    }
    out.reserve(size_);
    Reader reader(*this);
    for (std::size_t c = 0; c < chunks_.size(); ++c) out.append(std::span<const T>(reader.items(c), reader.count(c)));
    return out;
  }

  // The shuffle: result[j] = (*this)[index[j]], for every j of `index`; an
  // index out of range is Errc::invalid_argument.
  template <std::size_t IndexChunk>
  Vector gather(const Vector<std::uint64_t, IndexChunk>& index, Run run = Run::offloaded) const {
    Vector out(server_);
    if (offloads(run, index.size(), index)) {
      out.add_remote_chunks(index.size());
      requests<detail::GatherKind<T>>(detail::NoOp{}, index.size(), {view_of(out), view_of(index), view_of(*this)}, true, expect_all);
      return out;
    }
    out.reserve(index.size());
    typename Vector<std::uint64_t, IndexChunk>::Reader at(index);
    std::vector<T> batch;
    batch.reserve(per_chunk);
    for (std::size_t j = 0; j < index.size(); ++j) {
      {
        DerefScope scope;
        batch.push_back(this->at(scope, at[j]));
      }
      if (batch.size() == per_chunk || j + 1 == index.size()) {
        out.append(batch);
        batch.clear();
      }
    }
    return out;
  }

  // The elements `pred` accepts, in order. `Pred` travels to the server by
  // value: trivially copyable, with `bool operator()(const T&) const`.
  template <class Pred>
  Vector filter(const Pred& pred, Run run = Run::offloaded) const {
    return select<false, Vector>(pred, run);
  }
  // The indices of the elements `pred` accepts, in order (a selection to
  // gather other columns by).
  template <class Pred>
  Vector<std::uint64_t> where(const Pred& pred, Run run = Run::offloaded) const {
    return select<true, Vector<std::uint64_t>>(pred, run);
  }

  // An aggregation (Sum, Min, Max, Count or one of the same shape, see
  // Array::reduce_remote). The parts fold over the same ranges wherever it
  // runs, so both ways give the same result, bit for bit.
  template <class Op>
  typename Op::Result reduce(const Op& op, Run run = Run::offloaded) const {
    typename Op::Result result = op.identity();
    if (offloads(run, 0)) {
      requests<detail::ReduceKind<T, Op>>(op, size_, {view_of(*this)}, false, [&](std::uint64_t, std::uint64_t, const auto& part) {
        op.combine(result, part);
      });
      return result;
    }
    Reader reader(*this);
    for (std::uint64_t first = 0; first < size_; first += request_items) {
      typename Op::Result part = op.identity();
      const std::uint64_t last = std::min<std::uint64_t>(size_, first + request_items);
      for (std::size_t c = first / per_chunk; c * per_chunk < last; ++c) op.fold(part, reader.items(c), reader.count(c));
      op.combine(result, part);
    }
    return result;
  }

  // Group-by over a small key: this vector holds the keys, `values` the
  // values, element for element; `op` (GroupBy, or the same shape with
  // fold(Result&, const K&, const V&)) aggregates them per key.
  template <class Op, class V, std::size_t ValueChunk>
  typename Op::Result group_by(const Vector<V, ValueChunk>& values, const Op& op, Run run = Run::offloaded) const {
    if (values.size() != size_)
      throw Error(Errc::invalid_argument, "far::Vector::group_by: " + std::to_string(size_) + " keys but " + std::to_string(values.size()) + " values");
    typename Op::Result result = op.identity();
    if (offloads(run, 0, values)) {
      requests<detail::GroupKind<T, V, Op>>(op, size_, {view_of(*this), view_of(values)}, false,
                                             [&](std::uint64_t, std::uint64_t, const auto& part) { op.combine(result, part); });
      return result;
    }
    Reader keys(*this);
    typename Vector<V, ValueChunk>::Reader at(values);
    for (std::uint64_t first = 0; first < size_; first += request_items) {
      typename Op::Result part = op.identity();
      const std::uint64_t last = std::min<std::uint64_t>(size_, first + request_items);
      for (std::uint64_t i = first; i < last; ++i) op.fold(part, keys[i], at[i]);
      op.combine(result, part);
    }
    return result;
  }

 private:
  template <class, std::size_t>
  friend class Vector;

  // Elements one offloaded request covers: 256 chunks' worth of the vector
  // it walks (1 MiB of 4 KiB chunks), so one request keeps the server busy
  // for a fraction of a millisecond and a pass needs few round trips.
  static constexpr std::uint64_t request_items = 256 * per_chunk;

  static std::size_t next_server() {
    static std::atomic<std::size_t> turn{0};
    return turn.fetch_add(1, std::memory_order_relaxed) % detail::device(detail::runtime()).servers();
  }

  const UniquePtr<Chunk>& chunk_of(std::size_t i) const {
    if (i >= size_) throw Error(Errc::invalid_argument, "far::Vector: index " + std::to_string(i) + " out of range (size " + std::to_string(size_) + ")");
    return chunks_[i / per_chunk];
  }

  template <class F>
  void visit(Reader& reader, std::size_t first, std::size_t last, F&& fn) const {
    last = std::min(last, size_);
    for (std::size_t i = first; i < last;) {
      const std::size_t c = i / per_chunk;
      T* items = reader.items(c);
      const std::size_t end = std::min(last, c * per_chunk + reader.count(c));
      for (; i < end; ++i) fn(i, items[i % per_chunk]);
    }
  }

  // A new chunk here, zeroed and dirty, its far block on the vector's server.
  void add_chunk() {
    UniquePtr<Chunk> p;
    void* frame = detail::allocate_on(detail::runtime(), server_, p.word(), sizeof(Chunk));
    ::new (frame) Chunk{};
    detail::commit(p.word());
    chunks_.push_back(std::move(p));
  }
  // Chunks for `n` elements only on the server, for offloaded work to fill.
  void add_remote_chunks(std::size_t n) {
    reserve(n);
    detail::Runtime& runtime = detail::runtime();
    while (chunks_.size() * per_chunk < n) {
      UniquePtr<Chunk> p;
      detail::allocate_remote(runtime, server_, p.word(), sizeof(Chunk));
      chunks_.push_back(std::move(p));
    }
    size_ = n;
  }
  // Keeps the first `n` elements, freeing the chunks past them.
  void truncate(std::size_t n) {
    if (n > size_) throw Error(Errc::invalid_argument, "far::Vector: truncate to " + std::to_string(n) + " of " + std::to_string(size_));
    chunks_.resize((n + per_chunk - 1) / per_chunk);
    listed_ = std::min(listed_, chunks_.size());
    size_ = n;
  }

  // Whether an operation over this vector and `others`, writing `out`
  // elements of T, runs on the server: the device computes, every vector
  // lives on this one's server, and each directory fits a request.
  template <class... Others>
  bool offloads(Run run, std::size_t out, const Others&... others) const {
    constexpr std::size_t most = detail::max_directory_blocks / 3 * detail::directory_entries;  // chunks per vector
    return run == Run::offloaded && detail::device(detail::runtime()).computes() && ((others.server_ == server_) && ...) &&
           chunks_.size() <= most && out / per_chunk < most && ((others.chunks_.size() <= most) && ...);
  }

  // The vector made current on its server, with its directory up to date:
  // its view and its directory blocks' offsets.
  using Published = detail::PublishedVector;
  template <class U, std::size_t C>
  static Published view_of(const Vector<U, C>& v) {
    return v.publish();
  }
  // Servers only read a vector they are given (results are new vectors),
  // so its chunks are written back but stay cached; those not yet in the
  // directory are evicted, which is how their offsets become known.
  Published publish() const {
    for (std::size_t c = 0; c < chunks_.size(); ++c)
      if (!(c < listed_ ? chunks_[c].write_back() : chunks_[c].evict()))
        throw Error(Errc::invalid_argument, "far::Vector: chunk " + std::to_string(c) +
                                                " is in use (a DerefScope pins it): an offloaded operation needs the vector unpinned");
    detail::Runtime& runtime = detail::runtime();
    while (listed_ < chunks_.size()) {
      const std::size_t b = listed_ / detail::directory_entries;
      if (b == directory_.size()) {
        UniquePtr<detail::DirectoryBlock> block;
        void* frame = detail::allocate_on(runtime, server_, block.word(), sizeof(detail::DirectoryBlock));
        ::new (frame) detail::DirectoryBlock{};
        detail::commit(block.word());
        directory_.push_back(std::move(block));
      }
      DerefScope scope;
      detail::DirectoryBlock* block = directory_[b].deref_mut(scope);
      for (; listed_ < chunks_.size() && listed_ / detail::directory_entries == b; ++listed_)
        block->offsets[listed_ % detail::directory_entries] = state::offset_of(chunks_[listed_].state_word());
    }
    Published p;
    p.view = {size_, static_cast<std::uint32_t>(per_chunk), static_cast<std::uint32_t>(sizeof(Chunk)), 0,
              static_cast<std::uint32_t>(directory_.size())};
    for (auto& block : directory_) {
      if (!block.evict()) throw Error(Errc::invalid_argument, "far::Vector: its directory is pinned");
      p.blocks.push_back(state::offset_of(block.state_word()));
    }
    return p;
  }

  static constexpr auto expect_all = [](std::uint64_t first, std::uint64_t last, std::uint64_t done) {
    if (done != last - first)
      throw Error(Errc::protocol, "far::Vector: the server handled " + std::to_string(done) + " of " + std::to_string(last - first) + " elements");
  };

  // An offloaded request's bytes: its header, then the directory blocks of
  // the vectors it names (views[0], views[1], ...).
  template <class Op>
  struct Request {
    Request(const Op& op, std::initializer_list<Published> views) : header{op} {
      static_assert(std::is_trivially_copyable_v<Op>, "rdmx::far: an offloaded operation travels by value: it must be trivially copyable");
      static_assert(sizeof(detail::VectorRequest<Op>) + detail::max_directory_blocks * 8 <= 3584,
                    "rdmx::far: an offloaded operation travels in a call's captures (4 KiB with the directory table): keep it small");
      std::size_t v = 0;
      for (const Published& p : views) {
        header.views[v] = p.view;
        header.views[v++].first_block = static_cast<std::uint32_t>(table.size());
        table.insert(table.end(), p.blocks.begin(), p.blocks.end());
      }
      header.table_entries = static_cast<std::uint32_t>(table.size());
      bytes.resize(sizeof header + table.size() * sizeof(std::uint64_t));
      if (!table.empty())  // an empty vector has no directory yet (and memcpy no null source)
        std::memcpy(bytes.data() + sizeof header, table.data(), table.size() * sizeof(std::uint64_t));
    }
    detail::VectorRequest<Op> header;
    std::vector<std::uint64_t> table;
    std::vector<std::byte> bytes;
  };

  // Runs Kind over elements [first, last) on the vector's server; its reply.
  template <class Kind, class Op>
  auto send(Request<Op>& r, std::uint64_t first, std::uint64_t last, std::uint64_t out_first, bool writes) const {
    using Reply = decltype(Kind::run(std::declval<const detail::VectorRequest<Op>&>(), std::span<const std::uint64_t>()));
    static_assert(std::is_trivially_copyable_v<Reply>, "rdmx::far: an offloaded result must be trivially copyable");
    r.header.first = first;
    r.header.last = last;
    r.header.out_first = out_first;
    std::memcpy(r.bytes.data(), &r.header, sizeof r.header);
    Reply reply{};
    detail::device(detail::runtime()).compute(
        server_, Device::Offload{fabric::FunctionId<detail::VectorHandler<Kind, Op>>::value, r.bytes, &reply, sizeof reply, writes});
    return reply;
  }

  // Sends Kind's requests for elements [0, items), request_items at a time,
  // to the vector's server; on_reply(first, last, reply) takes each reply.
  template <class Kind, class Op, class OnReply>
  void requests(const Op& op, std::uint64_t items, std::initializer_list<Published> views, bool writes, OnReply&& on_reply) const {
    Request<Op> r(op, views);
    for (std::uint64_t first = 0; first < items; first += request_items) {
      const std::uint64_t last = std::min(items, first + request_items);
      on_reply(first, last, send<Kind>(r, first, last, 0, writes));
    }
  }

  template <bool Positions, class Out, class Pred>
  Out select(const Pred& pred, Run run) const {
    static_assert(std::is_trivially_copyable_v<Pred>, "rdmx::far: a filter's predicate travels by value: it must be trivially copyable");
    Out out(server_);
    if (offloads(run, size_)) {
      // One pass: before each request the destination has room for all that
      // its range could keep; the room the last ones leave unused is freed.
      const Published source = view_of(*this);
      std::uint64_t kept = 0;
      for (std::uint64_t first = 0; first < size_; first += request_items) {
        const std::uint64_t last = std::min<std::uint64_t>(size_, first + request_items);
        out.add_remote_chunks(kept + (last - first));
        Request<Pred> r(pred, {source, view_of(out)});
        const std::uint64_t n = send<detail::FilterKind<T, Pred, Positions>>(r, first, last, kept, true);
        if (n > last - first)
          throw Error(Errc::protocol, "far::Vector: a filter kept " + std::to_string(n) + " of " + std::to_string(last - first) + " elements");
        kept += n;
      }
      out.truncate(kept);
      return out;
    }
    Reader reader(*this);
    std::vector<typename Out::value_type> batch;
    for (std::size_t c = 0; c < chunks_.size(); ++c) {
      const T* items = reader.items(c);
      for (std::size_t k = 0; k < reader.count(c); ++k)
        if (pred(items[k])) {
          if constexpr (Positions)
            batch.push_back(c * per_chunk + k);
          else
            batch.push_back(items[k]);
        }
      if (batch.size() >= per_chunk) {
        out.append(batch);
        batch.clear();
      }
    }
    out.append(batch);
    return out;
  }

  std::size_t server_;
  std::size_t size_ = 0;
  std::vector<UniquePtr<Chunk>> chunks_;
  // The directory on the server: chunk offsets, the first `listed_` chunks'.
  mutable std::vector<UniquePtr<detail::DirectoryBlock>> directory_;
  mutable std::size_t listed_ = 0;
};

}  // namespace rdmx::far
