// The server's side of far::Vector's offloaded operations (vector.hpp) and
// the ready-made aggregations they take.
//
// A vector keeps all its chunks on one server (group) and a directory of
// their offsets there, in far objects of its own. A request names up to
// three vectors by their directory blocks, so the server can reach any
// element of them without the client listing every chunk: a gather by an
// index vector needs exactly that. Each request covers a bounded range of
// elements, so no request keeps the server's service thread for long.
#pragma once
#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/fabric/call.hpp"
#include "rdmx/far/config.hpp"
#include "rdmx/far/offload.hpp"

namespace rdmx::far {

// Ready-made aggregations for Vector::reduce (Sum is in offload.hpp): each
// folds a chunk's elements into its Result here or on a server.
template <class T>
struct Min {
  using Result = T;
  T identity() const { return std::numeric_limits<T>::max(); }
  void fold(T& r, const T* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) r = std::min(r, items[i]);
  }
  void combine(T& r, const T& part) const { r = std::min(r, part); }
};
template <class T>
struct Max {
  using Result = T;
  T identity() const { return std::numeric_limits<T>::lowest(); }
  void fold(T& r, const T* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) r = std::max(r, items[i]);
  }
  void combine(T& r, const T& part) const { r = std::max(r, part); }
};
// How many elements `pred` (trivially copyable, `bool operator()(const T&) const`) accepts.
template <class T, class Pred>
struct Count {
  using Result = std::uint64_t;
  Pred pred;
  std::uint64_t identity() const { return 0; }
  void fold(std::uint64_t& r, const T* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) r += pred(items[i]) ? 1 : 0;
  }
  void combine(std::uint64_t& r, const std::uint64_t& part) const { r += part; }
};

// Per group: how many values, their sum, least and greatest.
template <class V>
struct GroupStats {
  std::uint64_t count = 0;
  V sum{};
  V min = std::numeric_limits<V>::max();
  V max = std::numeric_limits<V>::lowest();
  friend bool operator==(const GroupStats&, const GroupStats&) = default;
};
// Count, sum, least and greatest in one pass (one request per range, not three).
template <class T>
struct Summary {
  using Result = GroupStats<T>;
  Result identity() const { return Result{}; }
  void fold(Result& r, const T* items, std::size_t n) const {
    for (std::size_t i = 0; i < n; ++i) {
      r.sum += items[i];
      r.min = std::min(r.min, items[i]);
      r.max = std::max(r.max, items[i]);
    }
    r.count += n;
  }
  void combine(Result& r, const Result& part) const {
    r.count += part.count;
    r.sum += part.sum;
    r.min = std::min(r.min, part.min);
    r.max = std::max(r.max, part.max);
  }
};

// Vector::group_by's aggregation for small keys: GroupStats of the values
// per key 0 .. Groups - 1; a key outside them is an error.
template <class K, class V, std::size_t Groups>
struct GroupBy {
  static_assert(Groups >= 1 && Groups <= 128, "rdmx::far: GroupBy is for small keys (a reply holds every group)");
  using Result = std::array<GroupStats<V>, Groups>;
  Result identity() const { return Result{}; }
  void fold(Result& r, const K& key, const V& value) const {
    bool negative = false;
    if constexpr (std::is_signed_v<K>) negative = key < K{};
    const auto k = static_cast<std::uint64_t>(key);
    if (negative || k >= Groups)
      throw Error(Errc::invalid_argument, "far::GroupBy: key " + std::to_string(k) + " outside the " + std::to_string(Groups) + " groups");
    GroupStats<V>& g = r[k];
    ++g.count;
    g.sum += value;
    g.min = std::min(g.min, value);
    g.max = std::max(g.max, value);
  }
  void combine(Result& r, const Result& part) const {
    for (std::size_t k = 0; k < Groups; ++k) Summary<V>{}.combine(r[k], part[k]);
  }
};

namespace detail {

// A directory block: the offsets of 2048 chunks of one vector.
inline constexpr std::size_t directory_entries = max_object_bytes / sizeof(std::uint64_t);
struct DirectoryBlock {
  std::uint64_t offsets[directory_entries];
};
// Directory blocks one request may name, over all its vectors: the
// request stays within a call's captures (4 KiB), and three vectors of
// 64 blocks each reach 131072 chunks (512 MiB of 4 KiB chunks) apiece.
inline constexpr std::size_t max_directory_blocks = 192;

// A vector as a request names it.
struct VectorView {
  std::uint64_t size = 0;  // elements
  std::uint32_t per_chunk = 0;
  std::uint32_t chunk_bytes = 0;
  std::uint32_t first_block = 0;  // its directory blocks' offsets in the request's table
  std::uint32_t blocks = 0;
};

// A vector made current on its server: its view and where its directory
// blocks are (a request's table gathers those of all its vectors).
struct PublishedVector {
  VectorView view;
  std::vector<std::uint64_t> blocks;
};

struct NoOp {};

template <class Op>
struct VectorRequest {
  Op op;
  std::uint64_t first = 0, last = 0;  // the elements this request covers
  std::uint64_t out_first = 0;        // filter: where its first accepted element goes
  VectorView views[3];
  std::uint32_t table_entries = 0;
  std::uint32_t unused = 0;
};

// A vector inside the served region, as a server reaches it.
template <class T>
class ServedVector {
 public:
  ServedVector(const VectorView& v, std::span<const std::uint64_t> table) : view_(v), table_(table) {
    const std::uint64_t chunks = v.per_chunk == 0 ? 0 : (v.size + v.per_chunk - 1) / v.per_chunk;
    if (v.per_chunk == 0 || v.per_chunk * sizeof(T) > v.chunk_bytes || v.chunk_bytes > max_object_bytes ||
        std::uint64_t{v.first_block} + v.blocks > table.size() || chunks > std::uint64_t{v.blocks} * directory_entries)
      throw Error(Errc::protocol, "far: malformed vector in an offloaded request (" + std::to_string(v.size) + " elements, " +
                                      std::to_string(v.per_chunk) + " per chunk, " + std::to_string(v.blocks) + " directory blocks)");
    if ((v.per_chunk & (v.per_chunk - 1)) == 0) shift_ = std::countr_zero(v.per_chunk);
  }
  std::uint64_t size() const noexcept { return view_.size; }
  // Element i (a gather's random access: no division where a chunk holds a
  // power of two elements, as 4 KiB chunks of 1, 2, 4 or 8 bytes do).
  T& operator[](std::uint64_t i) {
    if (i >= view_.size) throw out_of_range(i);
    const std::uint64_t c = chunk_of(i);
    if (c != cached_) load(c);
    return chunk_[i - c * view_.per_chunk];
  }
  // Elements from i on that lie side by side: to the end of i's chunk or `last`.
  std::span<T> run(std::uint64_t i, std::uint64_t last) {
    if (i >= view_.size || last > view_.size || i >= last) throw out_of_range(i);
    const std::uint64_t c = chunk_of(i);
    if (c != cached_) load(c);
    const std::uint64_t k = i - c * view_.per_chunk;
    return {chunk_ + k, static_cast<std::size_t>(std::min<std::uint64_t>(view_.per_chunk - k, last - i))};
  }

 private:
  std::uint64_t chunk_of(std::uint64_t i) const noexcept { return shift_ >= 0 ? i >> shift_ : i / view_.per_chunk; }
  void load(std::uint64_t c) {
    const std::uint64_t block = table_[view_.first_block + c / directory_entries];
    std::uint64_t offset = 0;
    std::memcpy(&offset, served_bytes(block + (c % directory_entries) * sizeof offset, sizeof offset).data(), sizeof offset);
    chunk_ = reinterpret_cast<T*>(served_bytes(offset, view_.chunk_bytes).data());
    cached_ = c;
  }
  Error out_of_range(std::uint64_t i) const {
    return Error(Errc::invalid_argument, "far::Vector: index " + std::to_string(i) + " out of range (size " + std::to_string(view_.size) + ")");
  }

  VectorView view_;
  std::span<const std::uint64_t> table_;
  int shift_ = -1;  // log2(per_chunk) when it is a power of two
  std::uint64_t cached_ = static_cast<std::uint64_t>(-1);
  T* chunk_ = nullptr;
};

// The handler a request runs: Kind::run(request, table) returns the reply.
template <class Kind, class Op>
struct VectorHandler {
  static void invoke(fabric::Incoming& in) {
    VectorRequest<Op> r;
    if (in.closure_size < sizeof r) throw Error(Errc::protocol, "far: an offloaded vector request is too short for its header");
    std::memcpy(&r, in.closure, sizeof r);
    if (r.table_entries > max_directory_blocks || in.closure_size != sizeof r + r.table_entries * sizeof(std::uint64_t) || r.first > r.last)
      throw Error(Errc::protocol, "far: malformed offloaded vector request (" + std::to_string(r.table_entries) + " directory blocks in " +
                                      std::to_string(in.closure_size) + " bytes)");
    std::array<std::uint64_t, max_directory_blocks> table;
    std::memcpy(table.data(), in.closure + sizeof r, r.table_entries * sizeof(std::uint64_t));
    const auto result = Kind::run(r, std::span<const std::uint64_t>(table.data(), r.table_entries));
    in.reply(in, &result, sizeof result);
  }
};

// Server-side kinds. Each sees [first, last) of views[0] (the output for a gather).
template <class T>
struct CopyKind {  // views: source, destination
  static std::uint64_t run(const VectorRequest<NoOp>& r, std::span<const std::uint64_t> table) {
    ServedVector<T> src(r.views[0], table), dst(r.views[1], table);
    for (std::uint64_t i = r.first; i < r.last;) {
      const std::span<T> from = src.run(i, r.last);
      const std::span<T> to = dst.run(i, i + from.size());
      std::memcpy(to.data(), from.data(), to.size() * sizeof(T));
      i += to.size();
    }
    return r.last - r.first;
  }
};
template <class T>
struct GatherKind {  // views: destination, index, source
  static std::uint64_t run(const VectorRequest<NoOp>& r, std::span<const std::uint64_t> table) {
    ServedVector<T> dst(r.views[0], table), src(r.views[2], table);
    ServedVector<std::uint64_t> index(r.views[1], table);
    for (std::uint64_t j = r.first; j < r.last;) {
      const std::span<std::uint64_t> at = index.run(j, r.last);
      const std::span<T> to = dst.run(j, j + at.size());
      for (std::size_t k = 0; k < to.size(); ++k) to[k] = src[at[k]];
      j += to.size();
    }
    return r.last - r.first;
  }
};
// Filter: views source, destination; the destination receives the accepted
// elements (Positions false) or their indices (true) from out_first on.
template <class T, class Pred, bool Positions>
struct FilterKind {
  using Out = std::conditional_t<Positions, std::uint64_t, T>;
  static std::uint64_t run(const VectorRequest<Pred>& r, std::span<const std::uint64_t> table) {
    ServedVector<T> src(r.views[0], table);
    ServedVector<Out> dst(r.views[1], table);
    std::uint64_t out = r.out_first;
    std::span<Out> to;  // the destination from `out` to the end of its chunk
    for (std::uint64_t i = r.first; i < r.last;) {
      const std::span<T> from = src.run(i, r.last);
      for (std::size_t k = 0; k < from.size(); ++k)
        if (r.op(from[k])) {
          if (to.empty()) to = dst.run(out, dst.size());
          if constexpr (Positions)
            to.front() = i + k;
          else
            to.front() = from[k];
          to = to.subspan(1);
          ++out;
        }
      i += from.size();
    }
    return out - r.out_first;
  }
};
template <class T, class Op>
struct ReduceKind {  // views: source
  static typename Op::Result run(const VectorRequest<Op>& r, std::span<const std::uint64_t> table) {
    ServedVector<T> src(r.views[0], table);
    typename Op::Result result = r.op.identity();
    for (std::uint64_t i = r.first; i < r.last;) {
      const std::span<T> from = src.run(i, r.last);
      r.op.fold(result, from.data(), from.size());
      i += from.size();
    }
    return result;
  }
};
template <class K, class V, class Op>
struct GroupKind {  // views: keys, values
  static typename Op::Result run(const VectorRequest<Op>& r, std::span<const std::uint64_t> table) {
    ServedVector<K> keys(r.views[0], table);
    ServedVector<V> values(r.views[1], table);
    typename Op::Result result = r.op.identity();
    for (std::uint64_t i = r.first; i < r.last;) {
      const std::span<K> k = keys.run(i, r.last);
      const std::span<V> v = values.run(i, i + k.size());
      for (std::size_t j = 0; j < v.size(); ++j) r.op.fold(result, k[j], v[j]);
      i += v.size();
    }
    return result;
  }
};

}  // namespace detail
}  // namespace rdmx::far
