// always_false<T>: a false that depends on T, for a static_assert in the
// branch of an `if constexpr` that must not be instantiated (a plain
// static_assert(false) fails even in a discarded branch before C++23).
#pragma once

namespace rdmx {

template <class>
inline constexpr bool always_false = false;

}  // namespace rdmx
