// The fuzz target's input: [u16 message length][message][chunk bytes]. The
// chunk bytes stand in for what a receiver got by RDMA: each chunk the
// message describes takes its size from the front of them, so the fuzzer
// reaches the chunk paths too. Shared by the target and the seed writer.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "rdmx/serial/input_archive.hpp"
#include "rdmx/serial/output_archive.hpp"

namespace rdmx::serial::fuzzing {

// The decoded type: nesting, every length and tag kind, and chunkable runs.
using Fuzzed = std::tuple<std::string, std::vector<std::int64_t>, std::map<int, std::string>,
                          std::optional<std::variant<std::int32_t, std::string, std::vector<double>>>,
                          std::vector<bool>, std::set<std::uint16_t>, std::unique_ptr<std::vector<std::string>>>;

inline std::vector<std::uint8_t> make_input(OutputArchive& ar) {
  const std::span<const std::byte> message = ar.flatten();
  std::vector<std::uint8_t> input{static_cast<std::uint8_t>(message.size()), static_cast<std::uint8_t>(message.size() >> 8)};
  const auto* m = reinterpret_cast<const std::uint8_t*>(message.data());
  input.insert(input.end(), m, m + message.size());
  for (const OutOfLineChunk& c : ar.out_of_line_chunks()) {
    const auto* d = reinterpret_cast<const std::uint8_t*>(c.data);
    input.insert(input.end(), d, d + c.size);
  }
  return input;
}

}  // namespace rdmx::serial::fuzzing
