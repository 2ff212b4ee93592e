// Archive configuration: the zero-copy threshold (HPX's serialization
// threshold; 64 KiB by default, measured: see below). A contiguous run of bitwise data of at
// least `zero_copy_threshold` bytes becomes a pointer or RMA chunk instead of
// being copied into the archive; 0 turns zero copy off, so everything is
// copied in. A chunk costs a descriptor and, later, an RDMA get, so runs of
// under 64 bytes never become chunks and thresholds 1..63 are rejected
// rather than quietly raised.
#pragma once
#include <cstddef>
#include <string>

namespace rdmx::serial {

// 64 KiB, not HPX's 4 KiB: an async ping-pong over shared memory was faster
// eager up to 48 KiB (4 KiB: 1.5-1.7 us eager against 3.3-4.0 us pulled) and
// pulled from 64 KiB on (10.5-13 us against 19.5-21 us), and so was the
// bidirectional bandwidth (docs/results/serialization.md, "The zero-copy
// threshold").
inline constexpr std::size_t default_zero_copy_threshold = 65536;
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
