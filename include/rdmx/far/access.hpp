// far::Access: how a dereference uses the object, which is what eviction
// learns from it.
#pragma once

namespace rdmx::far {

enum class Access {
  read,          // deref: the object may be dropped on eviction if it is clean
  write,         // deref_mut: marks it dirty, so eviction writes it back
  non_temporal,  // read without marking it hot: it is the first to go on eviction
};

}  // namespace rdmx::far
