#include "rdmx/memory/arena.hpp"

#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "free_list.hpp"
#include "rdmx/core/checked_size.hpp"
#include "settings.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/memory/region_table.hpp"
#include "rdmx/transfer/memory_region.hpp"
#include "size_text.hpp"

namespace rdmx::memory {

using detail::size_text;

namespace {

constexpr std::size_t KiB = std::size_t{1} << 10;
constexpr std::size_t MiB = std::size_t{1} << 20;
constexpr std::size_t GiB = std::size_t{1} << 30;

std::size_t base_page_size() {
  static const std::size_t size = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// Only ever given segment sizes (configuration) and sizes already checked
// to be at most one segment, so an overflow is a bad setting.
std::size_t round_up(std::size_t n, std::size_t to) {
  return checked_round_up(n, to, "arena: segment size (RDMX_ARENA_SEGMENT)", Errc::invalid_argument);
}

// Our own anonymous mapping (hugetlb or THP), unmapped when dropped.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* address, std::size_t length) : address_(address), length_(length) {}
  Mapping(Mapping&& other) noexcept : address_(other.address_), length_(other.length_) { other.address_ = nullptr; }
  Mapping& operator=(Mapping&& other) noexcept {
    std::swap(address_, other.address_);
    std::swap(length_, other.length_);
    return *this;
  }
  ~Mapping() {
    if (address_ != nullptr) ::munmap(address_, length_);
  }
  void* address() const noexcept { return address_; }

 private:
  void* address_ = nullptr;
  std::size_t length_ = 0;
};

std::optional<long long> read_number(const std::string& path) {
  std::ifstream in(path);
  long long value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

// Huge pages of `page_size` the kernel could give us now (on `node` if >= 0).
long long hugetlb_available(std::size_t page_size, int node) {
  const std::string dir = "hugepages-" + std::to_string(page_size / KiB) + "kB";
  const std::string global = "/sys/kernel/mm/hugepages/" + dir + "/";
  long long available = read_number(global + "free_hugepages").value_or(0) - read_number(global + "resv_hugepages").value_or(0);
  if (node >= 0) {
    // The reservation made at mmap time is global but the fault happens on
    // the bound node: without free pages there the fault would SIGBUS.
    auto on_node = read_number("/sys/devices/system/node/node" + std::to_string(node) + "/hugepages/" + dir + "/free_hugepages");
    if (on_node) available = std::min(available, *on_node);
  }
  return std::max(available, 0LL);
}

std::string hugetlb_pool_path(std::size_t page_size) {
  return "/sys/kernel/mm/hugepages/hugepages-" + std::to_string(page_size / KiB) + "kB/nr_hugepages";
}

bool node_exists(int node) {
  if (numa_available() < 0) return node == 0;  // no NUMA support: the machine is one node
  if (node > numa_max_node()) return false;
  return numa_bitmask_isbitset(numa_all_nodes_ptr, static_cast<unsigned>(node)) != 0;
}

// Bind [address, address + length) to `node`, moving any page already there.
// Returns why it failed, or an empty string.
std::string bind_to_node(void* address, std::size_t length, int node) {
  if (numa_available() < 0) return {};  // single node: nothing to bind
  std::vector<unsigned long> mask(static_cast<std::size_t>(node) / (8 * sizeof(unsigned long)) + 1, 0);
  mask[static_cast<std::size_t>(node) / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
  if (::mbind(address, length, MPOL_BIND, mask.data(), mask.size() * 8 * sizeof(unsigned long) + 1, MPOL_MF_MOVE) != 0)
    return std::string("mbind: ") + std::strerror(errno);
  return {};
}

// Touch every page so the kernel places it now (on the bound node, in huge
// pages where it can) rather than on the first transfer.
void prefault(std::byte* data, std::size_t length, std::size_t stride) {
  for (std::size_t i = 0; i < length; i += stride) static_cast<volatile std::byte*>(data)[i] = std::byte{0};
}

struct PageProbe {
  PageKind kind = PageKind::regular;
  std::size_t page_size = 0;   // smallest KernelPageSize over the range
  std::size_t thp_bytes = 0;   // bytes in transparent huge pages
};

// What the mapping really is, from /proc/self/smaps: KernelPageSize says
// hugetlb; AnonHugePages / ShmemPmdMapped / FilePmdMapped say THP.
PageProbe probe_pages(const void* address, std::size_t length) {
  PageProbe probe;
  const auto lo = reinterpret_cast<std::uintptr_t>(address);
  const auto hi = lo + length;
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  std::size_t min_page = 0;
  while (std::getline(smaps, line)) {
    std::istringstream fields(line);
    std::string first;
    fields >> first;
    if (first.empty()) continue;
    if (first.back() != ':') {  // a mapping header: "start-end perms ..."
      unsigned long start = 0, end = 0;
      inside = std::sscanf(first.c_str(), "%lx-%lx", &start, &end) == 2 && start < hi && end > lo;
      continue;
    }
    if (!inside) continue;
    std::size_t kb = 0;
    fields >> kb;
    if (first == "KernelPageSize:") {
      min_page = min_page == 0 ? kb * KiB : std::min(min_page, kb * KiB);
    } else if (first == "AnonHugePages:" || first == "ShmemPmdMapped:" || first == "FilePmdMapped:") {
      probe.thp_bytes += kb * KiB;
    }
  }
  probe.page_size = min_page == 0 ? base_page_size() : min_page;
  if (probe.page_size >= GiB) {
    probe.kind = PageKind::huge_1g;
  } else if (probe.page_size >= 2 * MiB) {
    probe.kind = PageKind::huge_2m;
  } else if (probe.thp_bytes > 0) {
    probe.kind = PageKind::transparent;
  }
  return probe;
}

const char* backing_label(Backing backing) {
  switch (backing) {
    case Backing::ucx: return "ucx-allocated";
    case Backing::hugetlb: return "hugetlb";
    case Backing::thp: return "mmap+madvise(MADV_HUGEPAGE)";
    case Backing::automatic: return "auto";
  }
  return "?";
}

}  // namespace

const char* to_string(Backing backing) noexcept {
  switch (backing) {
    case Backing::automatic: return "auto";
    case Backing::ucx: return "ucx";
    case Backing::hugetlb: return "hugetlb";
    case Backing::thp: return "thp";
  }
  return "?";
}

Backing parse_backing(const std::string& text, const char* what) {
  if (text == "auto") return Backing::automatic;
  if (text == "ucx") return Backing::ucx;
  if (text == "hugetlb") return Backing::hugetlb;
  if (text == "thp") return Backing::thp;
  throw Error(Errc::invalid_argument, std::string(what) + "='" + text + "' is not a backing (use auto, ucx, hugetlb or thp)");
}

const char* to_string(PageKind kind) noexcept {
  switch (kind) {
    case PageKind::unknown: return "unknown";
    case PageKind::regular: return "regular";
    case PageKind::transparent: return "transparent";
    case PageKind::huge_2m: return "huge_2m";
    case PageKind::huge_1g: return "huge_1g";
  }
  return "?";
}

std::size_t ArenaOptions::env_segment_size() { return rdmx_memory_settings.number("RDMX_ARENA_SEGMENT"); }
std::size_t ArenaOptions::env_max_size() { return rdmx_memory_settings.number("RDMX_ARENA_MAX"); }
Backing ArenaOptions::env_backing() {
  return parse_backing(rdmx_memory_settings.word("RDMX_ARENA_BACKING"), "RDMX_ARENA_BACKING");
}

struct Arena::Segment {
  Segment(Mapping m, std::unique_ptr<transfer::MemoryRegion> r, Backing b, PageProbe p)
      : mapping(std::move(m)),
        region(std::move(r)),
        backing(b),
        pages(p),
        free(reinterpret_cast<std::uintptr_t>(region->data()), region->size()) {
    index = RegionTable::process().add(*region);
  }
  ~Segment() { RegionTable::process().remove(index); }  // before the region is unregistered

  Mapping mapping;  // empty when UCX allocated the memory
  std::unique_ptr<transfer::MemoryRegion> region;
  Backing backing;
  PageProbe pages;
  detail::FreeList free;
  std::uint32_t index = RegionTable::no_region;
};

Arena::Arena(transfer::Context& context, Options options) : context_(context), options_(options) {
  if (options_.numa_node < -1 || (options_.numa_node >= 0 && !node_exists(options_.numa_node))) {
    const int highest = numa_available() < 0 ? 0 : numa_max_node();
    throw Error(Errc::invalid_argument, "arena: NUMA node " + std::to_string(options_.numa_node) +
                                            " does not exist or has no memory on this machine (nodes 0.." +
                                            std::to_string(highest) + "; -1 for no binding)");
  }
  if (options_.segment_size == 0) throw Error(Errc::invalid_argument, "arena: segment size 0 (RDMX_ARENA_SEGMENT)");
  if (options_.max_size < options_.segment_size)
    throw Error(Errc::invalid_argument, "arena: maximum size " + size_text(options_.max_size) +
                                            " (RDMX_ARENA_MAX) is smaller than one segment of " +
                                            size_text(options_.segment_size) + " (RDMX_ARENA_SEGMENT)");
  plan_ = plan_segment();
  if (plan_.segment_size > options_.max_size)
    throw Error(Errc::invalid_argument, "arena: a " + std::string(to_string(plan_.backing)) + " segment rounds up to " +
                                            size_text(plan_.segment_size) + ", more than RDMX_ARENA_MAX=" +
                                            size_text(options_.max_size));
}

Arena::~Arena() = default;

// Decide once, at construction, how large segments are and where they come
// from, so every segment of an arena has the same size.
Arena::Plan Arena::plan_segment() const {
  const std::size_t want = options_.segment_size;
  const int node = options_.numa_node;
  auto hugetlb_fits = [&](std::size_t page) {
    const std::size_t size = round_up(want, page);
    return size <= options_.max_size && hugetlb_available(page, node) >= static_cast<long long>(size / page);
  };
  switch (options_.backing) {
    case Backing::automatic:
      if (hugetlb_fits(GiB)) return {Backing::hugetlb, GiB, round_up(want, GiB)};
      if (hugetlb_fits(2 * MiB)) return {Backing::hugetlb, 2 * MiB, round_up(want, 2 * MiB)};
      return {Backing::ucx, 0, round_up(want, base_page_size())};
    case Backing::hugetlb:
      if (hugetlb_fits(GiB)) return {Backing::hugetlb, GiB, round_up(want, GiB)};
      return {Backing::hugetlb, 2 * MiB, round_up(want, 2 * MiB)};  // fails at mapping time if the pool is short
    case Backing::thp:
      return {Backing::thp, 0, round_up(want, 2 * MiB)};
    case Backing::ucx:
      break;
  }
  return {Backing::ucx, 0, round_up(want, base_page_size())};
}

std::unique_ptr<Arena::Segment> Arena::map_segment(std::size_t length) {
  const int node = options_.numa_node;
  auto note_binding = [&](void* address) {
    if (node < 0) return;
    std::string why = bind_to_node(address, length, node);
    if (!why.empty() && bound_ok_) {
      bound_ok_ = false;
      bind_failure_ = why;
    }
  };
  auto finish = [&](Mapping mapping, std::unique_ptr<transfer::MemoryRegion> region, Backing backing,
                    std::size_t stride) {
    prefault(region->data(), region->size(), stride);
    PageProbe pages = probe_pages(region->data(), region->size());
    return std::make_unique<Segment>(std::move(mapping), std::move(region), backing, pages);
  };

  std::string failures;
  if (plan_.backing == Backing::hugetlb) {
    // Fall back from 1 GiB to 2 MiB pages (the segment size is a multiple of
    // both), then, only when the user asked for `auto`, to UCX memory.
    std::vector<std::size_t> pages{plan_.page_size};
    if (plan_.page_size != 2 * MiB) pages.push_back(2 * MiB);
    for (std::size_t page : pages) {
      const long long need = static_cast<long long>(length / page);
      const long long have = hugetlb_available(page, node);
      if (have < need) {
        failures += "need " + std::to_string(need) + " free " + size_text(page) + " huge pages, the pool has " +
                    std::to_string(have) + " (" + hugetlb_pool_path(page) + "); ";
        continue;
      }
      const int size_flag = (page == GiB ? 30 : 21) << MAP_HUGE_SHIFT;  // log2(page size), as mmap(2) encodes it
      void* p = ::mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | size_flag, -1, 0);
      if (p == MAP_FAILED) {
        failures += "mmap(MAP_HUGETLB, " + size_text(page) + " pages): " + std::strerror(errno) + "; ";
        continue;
      }
      Mapping mapping(p, length);
      note_binding(p);
      auto region = std::make_unique<transfer::MemoryRegion>(context_, p, length);
      return finish(std::move(mapping), std::move(region), Backing::hugetlb, page);
    }
    if (options_.backing != Backing::automatic)
      throw Error(Errc::out_of_memory, "arena: cannot map a " + size_text(length) + " hugetlb segment: " + failures +
                                           "raise the pool (sysctl vm.nr_hugepages) or set RDMX_ARENA_BACKING=auto");
  }
  if (plan_.backing == Backing::thp) {
    // Over-map by 2 MiB and trim so the segment starts on a huge-page boundary;
    // otherwise its first and last pieces could never be huge pages.
    const std::size_t huge = 2 * MiB;
    void* raw = ::mmap(nullptr, length + huge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED)
      throw Error(Errc::out_of_memory, "arena: mmap of a " + size_text(length) + " segment failed: " + std::strerror(errno));
    const auto start = reinterpret_cast<std::uintptr_t>(raw);
    const auto aligned = round_up(start, huge);
    if (aligned > start) ::munmap(raw, aligned - start);
    if (const std::uintptr_t tail = start + length + huge - (aligned + length); tail > 0)
      ::munmap(reinterpret_cast<void*>(aligned + length), tail);
    void* p = reinterpret_cast<void*>(aligned);
    Mapping mapping(p, length);
    ::madvise(p, length, MADV_HUGEPAGE);  // advisory: the kernel may have THP off
    note_binding(p);
    auto region = std::make_unique<transfer::MemoryRegion>(context_, p, length);
    return finish(std::move(mapping), std::move(region), Backing::thp, base_page_size());
  }
  // UCX memory: on a node, UCX allocates it as shared memory that peers map
  // and write with plain stores; registering our own memory instead would
  // make them go through CMA system calls (measured 5x fewer messages/s).
  auto region = std::make_unique<transfer::MemoryRegion>(context_, length);
  note_binding(region->data());
  return finish(Mapping{}, std::move(region), Backing::ucx, base_page_size());
}

// The page size a segment of the plan's backing is rounded up to.
std::size_t Arena::granule() const noexcept {
  if (plan_.page_size != 0) return plan_.page_size;
  return plan_.backing == Backing::thp ? 2 * MiB : base_page_size();
}

std::size_t Arena::mapped_locked() const noexcept {
  std::size_t mapped = 0;
  for (auto& s : segments_) mapped += s->region->size();
  return mapped;
}

Block Arena::allocate_chunk(std::size_t bytes, std::size_t align) {
  if (bytes == 0) throw Error(Errc::invalid_argument, "arena: chunk of 0 bytes");
  if (align == 0 || (align & (align - 1)) != 0)
    throw Error(Errc::invalid_argument, "arena: alignment " + std::to_string(align) + " is not a power of two");
  const std::string who = options_.numa_node >= 0 ? "arena node " + std::to_string(options_.numa_node) : "arena";
  if (align > plan_.segment_size)
    throw Error(Errc::out_of_memory, who + ": alignment " + size_text(align) + " exceeds a segment of " +
                                         size_text(plan_.segment_size));
  // Checked first: a size near SIZE_MAX (a hostile allocate_remote) must
  // neither wrap to a tiny chunk nor reach mmap.
  if (bytes > options_.max_size || bytes > SIZE_MAX / 2)
    throw Error(Errc::out_of_memory, who + ": a chunk of " + std::to_string(bytes) + " bytes (" + size_text(bytes) +
                                         ") exceeds the arena's maximum of " + size_text(options_.max_size) +
                                         " (RDMX_ARENA_MAX)");

  const std::size_t rounded = round_up(bytes, 64);
  std::lock_guard lock(mutex_);
  auto take = [&](Segment& s) -> std::optional<Block> {
    auto offset = s.free.allocate(rounded, align, detail::Fit::first);
    if (!offset) return std::nullopt;
    return Block{s.region->data() + *offset, rounded, s.index, *offset};
  };
  for (auto& s : segments_) {
    if (auto block = take(*s)) return *block;
  }
  // A chunk larger than a segment gets a segment of its own, rounded up to
  // the page size: segments are registered whole and chunks never span them.
  // It stays with the arena like any other, its room reused once released.
  const std::size_t length = bytes > plan_.segment_size ? round_up(rounded, granule()) : plan_.segment_size;
  const std::size_t mapped = mapped_locked();
  if (length > options_.max_size - std::min(mapped, options_.max_size)) {
    std::size_t used = 0;
    for (auto& s : segments_) used += s->free.used_bytes();
    throw Error(Errc::out_of_memory,
                who + " exhausted: no segment has room for " + size_text(bytes) + " (" + size_text(used) + " in use of " +
                    size_text(mapped) + " mapped in " + std::to_string(segments_.size()) + " segments), and another " +
                    size_text(length) + " would exceed RDMX_ARENA_MAX=" + size_text(options_.max_size) +
                    ": raise RDMX_ARENA_MAX or release chunks");
  }
  segments_.push_back(map_segment(length));
  if (auto block = take(*segments_.back())) return *block;
  throw Error(Errc::out_of_memory, who + ": " + size_text(bytes) + " aligned to " + size_text(align) +
                                       " does not fit in a fresh segment of " + size_text(length));
}

void Arena::release_chunk(const Block& chunk) {
  std::lock_guard lock(mutex_);
  for (auto& s : segments_) {
    if (chunk.region != s->index) continue;
    if (!s->region->contains(chunk.data, chunk.size) || chunk.data != s->region->data() + chunk.offset) break;
    auto size = s->free.allocated_size(chunk.offset);
    if (!size || *size != chunk.size) break;
    s->free.release(chunk.offset);
    return;
  }
  throw Error(Errc::invalid_argument, "arena: release_chunk of a block this arena does not hold (region " +
                                          std::to_string(chunk.region) + ", offset " + std::to_string(chunk.offset) +
                                          ", " + std::to_string(chunk.size) + " bytes): double release or foreign block");
}

std::size_t Arena::segment_size() const noexcept { return plan_.segment_size; }

std::size_t Arena::segment_count() const {
  std::lock_guard lock(mutex_);
  return segments_.size();
}

std::size_t Arena::mapped_bytes() const {
  std::lock_guard lock(mutex_);
  return mapped_locked();
}

std::size_t Arena::used_bytes() const {
  std::lock_guard lock(mutex_);
  std::size_t used = 0;
  for (auto& s : segments_) used += s->free.used_bytes();
  return used;
}

Backing Arena::backing() const {
  std::lock_guard lock(mutex_);
  return segments_.empty() ? plan_.backing : segments_.back()->backing;
}

PageKind Arena::page_kind() const {
  std::lock_guard lock(mutex_);
  if (segments_.empty()) return PageKind::unknown;
  PageKind kind = PageKind::huge_1g;
  for (auto& s : segments_) kind = std::min(kind, s->pages.kind);
  return kind;
}

std::string Arena::describe() const {
  std::lock_guard lock(mutex_);
  std::string text = options_.numa_node >= 0 ? "arena node " + std::to_string(options_.numa_node) : "arena (no NUMA binding)";
  std::size_t large = 0;  // segments mapped for one chunk larger than the rest
  for (auto& s : segments_) large += s->region->size() != plan_.segment_size ? 1 : 0;
  text += ": " + std::to_string(segments_.size() - large) + (segments_.size() - large == 1 ? " segment x " : " segments x ") +
          size_text(plan_.segment_size) +
          (large != 0 ? " + " + std::to_string(large) + " large (" + size_text(mapped_locked()) + " mapped)" : "") +
          " (max " + size_text(options_.max_size) + "), ";
  if (segments_.empty()) {
    text += std::string(backing_label(plan_.backing)) + (plan_.page_size ? " " + size_text(plan_.page_size) + " pages" : "") +
            " planned, nothing mapped yet";
  } else {
    std::string backings;
    for (auto& s : segments_) {
      const std::string label = backing_label(s->backing);
      if (backings.find(label) == std::string::npos) backings += (backings.empty() ? "" : "+") + label;
    }
    PageKind kind = PageKind::huge_1g;
    std::size_t page = 0, thp = 0, used = 0;
    for (auto& s : segments_) {
      kind = std::min(kind, s->pages.kind);
      page = page == 0 ? s->pages.page_size : std::min(page, s->pages.page_size);
      thp += s->pages.thp_bytes;
      used += s->free.used_bytes();
    }
    text += backings + ", ";
    switch (kind) {
      case PageKind::transparent:
        text += "transparent huge pages (" + size_text(thp) + " of " + size_text(mapped_locked()) + ")";
        break;
      case PageKind::huge_1g:
      case PageKind::huge_2m:
        text += size_text(page) + " hugetlb pages";
        break;
      default:
        text += size_text(page) + " pages";
    }
    text += ", " + size_text(used) + " in use";
  }
  if (!bound_ok_) text += "; NUMA binding failed (" + bind_failure_ + "), pages follow first touch";
  return text;
}

}  // namespace rdmx::memory
