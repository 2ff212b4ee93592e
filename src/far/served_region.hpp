// The far-memory region this process serves, for the two-sided path: the
// server's service thread answers requests from it. Set by the Manager
// before the region is published and cleared after the last client left.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>

namespace rdmx::far::detail {

void serve(std::byte* base, std::size_t bytes) noexcept;
void stop_serving() noexcept;
// [offset, offset + bytes) of the served region; throws Errc::invalid_argument
// when this process serves none or the range leaves it.
std::span<std::byte> served(std::uint64_t offset, std::uint64_t bytes);
// While it lives, served() on this thread means [base, base + bytes): the
// in-process device runs offloaded functions on its own regions.
class ServingHere {
 public:
  ServingHere(std::byte* base, std::size_t bytes) noexcept;
  ~ServingHere();
  ServingHere(const ServingHere&) = delete;
  ServingHere& operator=(const ServingHere&) = delete;

 private:
  std::span<std::byte> saved_;
};

}  // namespace rdmx::far::detail
