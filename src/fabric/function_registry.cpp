#include "rdmx/fabric/function_registry.hpp"

#include <mutex>
#include <string>
#include <unordered_map>

namespace rdmx::fabric {

struct FunctionRegistry::Table {
  mutable std::mutex mutex;  // registration happens before main; lookups after it
  struct Entry {
    std::string name;
    Invoker invoker;
  };
  std::unordered_map<std::uint64_t, Entry> entries;
};

FunctionRegistry& FunctionRegistry::instance() {
  static FunctionRegistry registry;
  return registry;
}

FunctionRegistry::Table& FunctionRegistry::table() const {
  static Table t;
  return t;
}

std::uint64_t FunctionRegistry::add(std::string_view name, Invoker invoker) {
  std::uint64_t hash = 1469598103934665603ull;  // FNV-1a
  for (char c : name) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto [it, inserted] = t.entries.try_emplace(hash, Table::Entry{std::string(name), invoker});
  if (!inserted && it->second.name != name)
    conflict_ = "function ids collide: '" + it->second.name + "' and '" + std::string(name) + "'";
  return hash;
}

Invoker FunctionRegistry::find(std::uint64_t id) const noexcept {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  auto it = t.entries.find(id);
  return it == t.entries.end() ? nullptr : it->second.invoker;
}

std::size_t FunctionRegistry::size() const noexcept {
  Table& t = table();
  std::lock_guard lock(t.mutex);
  return t.entries.size();
}

}  // namespace rdmx::fabric
