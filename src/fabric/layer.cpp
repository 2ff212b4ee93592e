// The layer registry behind fabric::layer, the per-worker words behind
// fabric::acting_word, and layers' waits (fabric::serve_while_waiting).
#include "rdmx/fabric/layer.hpp"

#include <mutex>
#include <vector>

#include "rdmx/core/error.hpp"
#include "runtime.hpp"

namespace rdmx::fabric {
namespace detail {

thread_local constinit void** acting_words = nullptr;

std::size_t word_index(const void* key) {
  // Process-wide and stable across jobs, so an index can be cached in a
  // static: one per word type, handed out once.
  static std::mutex mutex;
  static std::vector<const void*> keys;
  std::lock_guard lock(mutex);
  for (std::size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key) return i;
  if (keys.size() == ThreadContext::max_layer_words)
    throw Error(Errc::invalid_argument, "rdmx: more than " + std::to_string(ThreadContext::max_layer_words) +
                                            " per-worker layer words (fabric::acting_word)");
  keys.push_back(key);
  return keys.size() - 1;
}

Layer& layer(Job& job, const void* key, std::unique_ptr<Layer> (*make)(Job&)) {
  return fabric::runtime_of(job).layer(key, [&] { return make(job); });
}

}  // namespace detail

std::size_t serve_while_waiting(Job& job) { return progress() + runtime_of(job).serve_idle_workers(); }

Layer& Runtime::layer(const void* key, const std::function<std::unique_ptr<Layer>()>& make) {
  const std::size_t published = layer_count_.load(std::memory_order_acquire);
  for (std::size_t i = 0; i < published; ++i)
    if (layer_keys_[i].load(std::memory_order_relaxed) == key) return *layer_list_[i].load(std::memory_order_relaxed);
  std::lock_guard lock(layers_mutex_);
  const std::size_t n = layer_count_.load(std::memory_order_relaxed);
  for (std::size_t i = published; i < n; ++i)
    if (layer_keys_[i].load(std::memory_order_relaxed) == key) return *layer_list_[i].load(std::memory_order_relaxed);
  if (n == max_layers)
    throw Error(Errc::invalid_argument, "rdmx: more than " + std::to_string(max_layers) + " fabric layers");
  layers_.push_back(make());
  layer_keys_[n].store(key, std::memory_order_relaxed);
  layer_list_[n].store(layers_.back().get(), std::memory_order_relaxed);
  layer_count_.store(n + 1, std::memory_order_release);
  return *layers_.back();
}

}  // namespace rdmx::fabric
