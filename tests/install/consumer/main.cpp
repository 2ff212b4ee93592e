// Smallest useful rdmx program: open the process's UCX context and close it.
#include <rdmx/transfer/context.hpp>

#include <cstdio>
#include <exception>

int main() {
  try {
    rdmx::transfer::Context context;
    if (context.get() == nullptr) {
      std::fprintf(stderr, "consumer: Context has no UCX handle\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
  std::puts("consumer ok");
  return 0;
}
