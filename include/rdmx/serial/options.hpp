// Archive configuration: the zero-copy threshold (HPX's serialization
// threshold, 4096 bytes by default). A contiguous run of bitwise data of at
// least `zero_copy_threshold` bytes becomes a pointer or RMA chunk instead of
// being copied into the archive; 0 turns zero copy off, so everything is
// copied in. A chunk costs a descriptor and, later, an RDMA get, so runs of
// under 64 bytes never become chunks and thresholds 1..63 are rejected
// rather than quietly raised.
#pragma once
#include <cstddef>
#include <string>

namespace rdmx::serial {

inline constexpr std::size_t default_zero_copy_threshold = 4096;
inline constexpr std::size_t min_zero_copy_threshold = 64;

// "4096", "16K", ... or "0" / "disabled" / "off" / "none" (zero copy off).
// Throws Errc::invalid_argument naming `what` for anything else or a value
// below min_zero_copy_threshold.
std::size_t parse_zero_copy_threshold(const std::string& text, const char* what);
// RDMX_ZERO_COPY_THRESHOLD, read now (tests); default_zero_copy_threshold if unset.
std::size_t zero_copy_threshold_from_env();
// The same, read once per process: archives are made per call, getenv is not free.
std::size_t env_zero_copy_threshold();

struct ArchiveOptions {
  std::size_t zero_copy_threshold = env_zero_copy_threshold();  // 0: off
  std::size_t initial_capacity = 1024;  // bytes of inline buffer allocated up front
};

}  // namespace rdmx::serial
