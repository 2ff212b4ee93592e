// Private to invoke: lookups in the process's table of remote actions
// (filled by parcel::register_action during static initialization).
#pragma once
#include <cstdint>
#include <string>

#include "rdmx/action/parcel.hpp"

namespace rdmx::parcel {

// nullptr when this process has no action with that id, or several (a hash collision).
Handler find_action(std::uint64_t id);
// "" or a note that two actions share the id.
std::string action_conflict(std::uint64_t id);

}  // namespace rdmx::parcel
