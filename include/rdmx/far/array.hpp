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
#pragma once
#include <algorithm>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/far/pointer.hpp"

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

  std::size_t size_;
  std::vector<UniquePtr<Chunk>> chunks_;
};

}  // namespace rdmx::far
