// Private to invoke: lookups in the process's table of remote actions
// (filled by ActionWrapper::id during static initialization).
#pragma once
#include <cstdint>
#include <string>

#include "rdmx/action/parcel.hpp"

namespace rdmx::parcel {

// nullptr when this process has no action with that id (or a refused collision).
Handler find_action(std::uint64_t id);

}  // namespace rdmx::parcel
