// UCX objects left to the process's exit after a peer failure (worker.cpp
// says why): kept in a list that is never freed, so that leak checkers see
// them reachable.
#pragma once

namespace rdmx::transfer::detail {
void abandon_until_exit(void* handle);
}
