// Shared by the in-process and the job tests: an offloaded function whose
// reply has another size than the caller expects is refused the same way
// (Errc::protocol) on every device, an expected empty reply included.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "../error_from.hpp"
#include "rdmx/fabric/function_registry.hpp"
#include "rdmx/far/device.hpp"
#include "rdmx/far/offload.hpp"

namespace far_test {

// A request over no objects: the handler replies its result, 8 bytes.
struct EmptySumKind {
  static std::uint64_t start(const rdmx::far::Sum<std::uint64_t>&) { return 0; }
  static void run(const rdmx::far::Sum<std::uint64_t>&, std::uint64_t&, std::uint64_t*, std::size_t) {}
};

inline void expect_reply_sizes_checked(rdmx::far::Device& device) {
  using Handler = rdmx::far::detail::OffloadHandler<rdmx::far::Sum<std::uint64_t>, std::uint64_t, EmptySumKind>;
  const rdmx::far::detail::OffloadHeader<rdmx::far::Sum<std::uint64_t>> header{{}, 0, 64};
  std::vector<std::byte> args(sizeof header);
  std::memcpy(args.data(), &header, sizeof header);
  const auto send = [&](void* result, std::size_t bytes) {
    device.compute(0, rdmx::far::Device::Offload{rdmx::fabric::FunctionId<Handler>::value, args, result, bytes, false});
  };
  const rdmx::Error none = rdmx::testing::error_from([&] { send(nullptr, 0); });  // 8 bytes where 0 are expected
  EXPECT_EQ(none.code(), rdmx::Errc::protocol) << none.what();
  EXPECT_NE(std::string(none.what()).find("8 bytes"), std::string::npos) << none.what();
  std::uint32_t shorter = 0;
  const rdmx::Error narrow = rdmx::testing::error_from([&] { send(&shorter, sizeof shorter); });
  EXPECT_EQ(narrow.code(), rdmx::Errc::protocol) << narrow.what();
  std::uint64_t right = 1;
  send(&right, sizeof right);
  EXPECT_EQ(right, 0u);
}

}  // namespace far_test
