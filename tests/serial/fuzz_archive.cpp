// libFuzzer target: decode arbitrary bytes as an archive of fuzzing::Fuzzed.
// Bad input may only ever throw rdmx::Error; anything else (a crash, a
// sanitizer report, another exception) is a finding. When the bytes do
// decode, the value is encoded and decoded again, and encoding that must
// reproduce the same bytes: saving and loading agree.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "fuzz_input.hpp"
#include "rdmx/core/error.hpp"
#include "rdmx/serial/serial.hpp"

namespace {

using namespace rdmx::serial;

// `value` encoded with zero copy at `threshold`: the message, and what a
// receiver would get for its chunks.
struct Encoded {
  std::vector<std::byte> message;
  std::vector<std::vector<std::byte>> chunk_bytes;
  std::vector<ReceivedChunk> chunks;
};

Encoded encode_at(const fuzzing::Fuzzed& value, std::size_t threshold) {
  ArchiveOptions options;
  options.zero_copy_threshold = threshold;
  OutputArchive ar(options);
  ar(value);
  Encoded e;
  const auto flat = ar.flatten();
  e.message.assign(flat.begin(), flat.end());
  for (const OutOfLineChunk& c : ar.out_of_line_chunks()) e.chunk_bytes.emplace_back(c.data, c.data + c.size);
  for (const auto& bytes : e.chunk_bytes) e.chunks.push_back({bytes, nullptr, {}});
  return e;
}

std::vector<std::byte> canonical(const fuzzing::Fuzzed& value) { return encode_at(value, 0).message; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t length = std::min<std::size_t>(data[0] | std::size_t{data[1]} << 8, size - 2);
  const std::span<const std::byte> message(reinterpret_cast<const std::byte*>(data + 2), length);
  std::span<const std::byte> pool(reinterpret_cast<const std::byte*>(data + 2 + length), size - 2 - length);
  try {
    const MessageView view(message);
    std::vector<ReceivedChunk> chunks;
    for (std::size_t i = 0; i < view.chunk_count(); ++i) {
      const std::uint64_t n = view.chunk(i).size;
      if (n > pool.size()) return 0;  // a receiver would not have got it
      chunks.push_back({pool.first(n), nullptr, {}});
      pool = pool.subspan(n);
    }
    const auto value = decode<fuzzing::Fuzzed>(message, chunks);
    // Saving and loading agree, inline and with every bulk run as a chunk.
    const std::vector<std::byte> reference = canonical(value);
    if (canonical(decode<fuzzing::Fuzzed>(reference)) != reference) std::abort();
    const Encoded chunked = encode_at(value, min_zero_copy_threshold);
    if (canonical(decode<fuzzing::Fuzzed>(chunked.message, chunked.chunks)) != reference) std::abort();
  } catch (const rdmx::Error& e) {
    if (e.code() != rdmx::Errc::bad_archive) std::abort();  // input can only ever be a bad archive
  }
  return 0;
}
