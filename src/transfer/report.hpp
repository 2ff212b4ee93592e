// UCX's printed reports (ucp_*_print_info) as text: UCX has no query for
// some of what they show (the transports of a context, an endpoint's lanes).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <string>

namespace rdmx::transfer::detail {

// What print(handle, stream) writes; empty when no stream can be opened.
template <class Handle>
std::string report(void (*print)(Handle, FILE*), Handle handle) {
  char* text = nullptr;
  std::size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return {};
  print(handle, stream);
  std::fclose(stream);
  std::string out(text, length);
  std::free(text);
  return out;
}

}  // namespace rdmx::transfer::detail
