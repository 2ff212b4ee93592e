// The fabric's table of remotely invoked callables: a call carries its
// wrapper's id (core/registry.hpp), the destination looks the wrapper up.
#pragma once
#include <cstdint>
#include <typeinfo>

#include "rdmx/core/registry.hpp"

namespace rdmx::fabric {

struct Incoming;  // a received call, see fabric/call.hpp
using Invoker = void (*)(Incoming&);
using FunctionRegistry = Registry<Invoker>;

// The id of wrapper type W (instantiated once per callable and call kind).
template <class W>
struct FunctionId {
  static inline const std::uint64_t value = FunctionRegistry::instance().add(typeid(W).name(), &W::invoke);
};

}  // namespace rdmx::fabric
