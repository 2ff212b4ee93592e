#include "rdmx/far/scope.hpp"

#include <algorithm>

#include "batch.hpp"
#include "runtime.hpp"

namespace rdmx::far {
namespace {
// The scopes open on this thread, innermost first.
thread_local DerefScope* scopes_here = nullptr;
}  // namespace

DerefScope::DerefScope() : runtime_(&detail::runtime()), outer_(scopes_here) { scopes_here = this; }

bool DerefScope::pins(std::uint32_t frame) const noexcept {
  for (std::size_t i = 0; i < std::min(pinned_, inline_pins); ++i)
    if (first_[i] == frame) return true;
  return std::find(more_.begin(), more_.end(), frame) != more_.end();
}

bool DerefScope::pinned_here(std::uint32_t frame) noexcept {
  for (const DerefScope* scope = scopes_here; scope != nullptr; scope = scope->outer_)
    if (scope->pins(frame)) return true;
  return false;
}

DerefScope::~DerefScope() {
  // Scopes usually end innermost first; one kept in a container may not.
  if (scopes_here == this) {
    scopes_here = outer_;
  } else {
    for (DerefScope* s = scopes_here; s != nullptr; s = s->outer_)
      if (s->outer_ == this) {
        s->outer_ = outer_;
        break;
      }
  }
  // Batches still in flight into this scope land first: their objects are
  // pinned in it.
  detail::Batch::land_into(*this);
  detail::Cache& cache = runtime_->cache();
  for (std::size_t i = 0; i < std::min(pinned_, inline_pins); ++i) cache.unpin(first_[i]);
  for (std::uint32_t frame : more_) cache.unpin(frame);
}

}  // namespace rdmx::far
