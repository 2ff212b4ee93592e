#include "rdmx/serial/chunk.hpp"

namespace rdmx::serial {

const char* to_string(ChunkKind kind) noexcept {
  switch (kind) {
    case ChunkKind::index: return "index";
    case ChunkKind::pointer: return "pointer";
    case ChunkKind::rma: return "rma";
  }
  return "unknown";
}

}  // namespace rdmx::serial
