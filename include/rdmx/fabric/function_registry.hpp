// Function identity across processes. Raw code addresses differ between
// processes under ASLR (Seriema needed -no-pie), so every remotely invoked
// callable gets an id: a 64-bit hash of its wrapper type's mangled name,
// identical in every process running the same program. Wrappers register
// themselves during static initialization, before main.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

namespace rdmx::fabric {

struct Incoming;  // a received call, see fabric/call.hpp
using Invoker = void (*)(Incoming&);

class FunctionRegistry {
 public:
  static FunctionRegistry& instance();
  // Returns the id; two different types with one hash is reported at Job start.
  std::uint64_t add(std::string_view name, Invoker invoker);
  // nullptr when the id is unknown in this process.
  Invoker find(std::uint64_t id) const noexcept;
  // Empty, or a description of a registration conflict.
  const std::string& conflict() const noexcept { return conflict_; }
  std::size_t size() const noexcept;

 private:
  FunctionRegistry() = default;
  struct Table;
  Table& table() const;
  std::string conflict_;
};

// The id of wrapper type W (instantiated once per callable and call kind).
template <class W>
struct FunctionId {
  static inline const std::uint64_t value = FunctionRegistry::instance().add(typeid(W).name(), &W::invoke);
};

}  // namespace rdmx::fabric
