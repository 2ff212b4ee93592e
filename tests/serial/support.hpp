// Shared by the serial tests: round trips through a flattened message, with
// the receiver's chunks taken straight from the sender's memory (what an
// RDMA get would deliver), and helpers for error expectations.
#pragma once
#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "rdmx/core/error.hpp"
#include "rdmx/serial/serial.hpp"

namespace rdmx::serial::testing {

// What a receiver would have after getting every chunk of `ar`.
inline std::vector<ReceivedChunk> chunks_of(const OutputArchive& ar) {
  std::vector<ReceivedChunk> chunks;
  for (const OutOfLineChunk& c : ar.out_of_line_chunks()) chunks.push_back({{c.data, c.size}, nullptr, {}});
  return chunks;
}

// The tests of chunk mechanics use HPX's threshold, whatever the default:
// their buffers of a few KiB must become chunks.
inline constexpr std::size_t chunk_threshold = 4096;

inline ArchiveOptions with_threshold(std::size_t threshold) {
  ArchiveOptions options;
  options.zero_copy_threshold = threshold;
  return options;
}

// Serialize `value` with `threshold`, flatten, decode it again and check the
// archive was consumed exactly.
template <class T>
T round_trip(const T& value, std::size_t threshold = 0) {
  OutputArchive ar(with_threshold(threshold));
  ar(value);
  const std::span<const std::byte> message = ar.flatten();
  const std::vector<ReceivedChunk> chunks = chunks_of(ar);
  InputArchive in(message, chunks);
  T out{};
  in(out);
  in.finish();
  return out;
}

// The Errc of the rdmx::Error `f` throws (fails the test if it throws none).
template <class F>
Errc error_of(F&& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const Error& e) {
    if (message != nullptr) *message = e.what();
    return e.code();
  }
  ADD_FAILURE() << "no rdmx::Error thrown";
  return Errc::transport;
}

inline std::vector<std::byte> bytes_of(std::span<const std::byte> s) { return {s.begin(), s.end()}; }

}  // namespace rdmx::serial::testing
