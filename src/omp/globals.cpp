// The program's globals in the DSM. rdmx_omp_object renamed the sections of
// the program's own objects: initialized data (.data) to rdmx_shared_data,
// zeroed data (.bss) to rdmx_shared; the linker script places the two one
// after the other at a fixed address, block-aligned. The kernel loads them
// like any data, and constructors of globals run before main as usual, in
// every process; then the DSM heap takes the range, and process 0 writes what
// start-up left there (its image) into it. The system libraries' and the
// runtime's data stay where they were, private.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"
#include "runtime.hpp"

// Defined by the linker script (cmake/rdmx_omp.cmake).
extern "C" char __rdmx_shared_begin[] __attribute__((weak));
extern "C" char __rdmx_shared_data_end[] __attribute__((weak));
extern "C" char __rdmx_shared_end[] __attribute__((weak));

namespace rdmx::omp {
namespace {

std::size_t page_bytes() { return static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)); }

std::string hex(std::uintptr_t v) {
  char text[32];
  std::snprintf(text, sizeof text, "%#llx", static_cast<unsigned long long>(v));
  return text;
}

// Refuses a word of the image that points into a block allocated before main.
void check_pointers(const Globals& globals, const Image& image, const PremainBlocks& premain) {
  if (premain.blocks.empty()) return;
  auto blocks = premain.blocks;
  std::sort(blocks.begin(), blocks.end());
  for (const auto& [offset, bytes] : image.pages)
    for (std::size_t i = 0; i + sizeof(std::uintptr_t) <= bytes.size(); i += sizeof(std::uintptr_t)) {
      std::uintptr_t word;
      std::memcpy(&word, bytes.data() + i, sizeof word);
      auto it = std::upper_bound(blocks.begin(), blocks.end(), std::pair{word, ~std::size_t{0}});
      if (it == blocks.begin()) continue;
      --it;
      if (word >= it->first + std::max<std::size_t>(it->second, 1)) continue;
      throw Error(Errc::invalid_argument,
                  "omp: the program's global at " + hex(reinterpret_cast<std::uintptr_t>(globals.begin) + offset + i) +
                      " points into a block of " + std::to_string(it->second) +
                      " bytes that it allocated before main (a constructor of a global): that block is private to "
                      "each process, where the global is shared. Allocate it in main instead");
    }
  if (premain.overflow)
    throw Error(Errc::invalid_argument,
                "omp: the program allocated more than 4096 blocks before main (constructors of its globals) and kept "
                "them: rdmx_omp cannot tell whether its shared globals point into them. Allocate them in main "
                "instead");
}

}  // namespace

Globals program_globals() {
  Globals g;
  if (__rdmx_shared_begin == nullptr) return g;  // linked without rdmx's linker script: nothing shared
  g.begin = reinterpret_cast<std::byte*>(__rdmx_shared_begin);
  g.data_end = reinterpret_cast<std::byte*>(__rdmx_shared_data_end);
  g.end = reinterpret_cast<std::byte*>(__rdmx_shared_end);
  return g;
}

Image save_globals(const Globals& globals, const PremainBlocks& premain) {
  Image image;
  if (globals.bytes() == 0) return image;
  const std::size_t page = page_bytes();
  const std::size_t pages = (globals.bytes() + page - 1) / page;
  // Zeroed data never touched is not resident: nothing to read there. The
  // initialized data is read whole (a file page need not be resident).
  std::vector<unsigned char> resident(pages, 1);
  if (::mincore(globals.begin, pages * page, resident.data()) != 0) std::fill(resident.begin(), resident.end(), 1);
  const std::size_t data_pages = static_cast<std::size_t>(globals.data_end - globals.begin + page - 1) / page;
  for (std::size_t p = 0; p < pages; ++p) {
    if (p >= data_pages && (resident[p] & 1) == 0) continue;
    const std::byte* at = globals.begin + p * page;
    const std::size_t bytes = std::min(page, globals.bytes() - p * page);
    if (std::all_of(at, at + bytes, [](std::byte b) { return b == std::byte{0}; })) continue;
    image.pages.emplace_back(p * page, std::vector<std::byte>(at, at + bytes));
  }
  check_pointers(globals, image, premain);
  return image;
}

void release_globals(const Globals& globals) {
  if (globals.bytes() == 0) return;
  if (::munmap(globals.begin, globals.bytes()) != 0)
    throw Error(Errc::invalid_argument, std::string("omp: unmapping the program's globals: ") + std::strerror(errno));
}

void publish_globals(const Globals& globals, const Image& image) {
  for (const auto& [offset, bytes] : image.pages) std::memcpy(globals.begin + offset, bytes.data(), bytes.size());
}

void restore_globals(const Globals& globals) {
  if (globals.bytes() == 0) return;
  // The DSM heap is gone; anything mapped there since stays.
  ::mmap(globals.begin, globals.bytes(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1,
         0);
}

}  // namespace rdmx::omp
