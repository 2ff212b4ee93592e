#include "rdmx/serial/wire.hpp"

#include <cstdio>
#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::serial {

namespace {
[[noreturn]] void bad(const std::string& what) { throw Error(Errc::bad_archive, "rdmx::serial: " + what); }

template <class T>
T get(const std::byte* p) noexcept {
  T value;
  std::memcpy(&value, p, sizeof value);
  return value;
}

// The header's fields, read with bounds checks.
class HeaderReader {
 public:
  explicit HeaderReader(std::span<const std::byte> bytes) : bytes_(bytes) {}
  std::uint64_t varint(const char* field) {
    std::uint64_t value = 0;
    for (unsigned i = 0; i < 10; ++i) {
      if (at_ == bytes_.size()) bad(std::string("message truncated inside the header's ") + field);
      const auto byte = static_cast<std::uint8_t>(bytes_[at_++]);
      if (i == 9 && byte > 1) break;
      value |= std::uint64_t{byte & 0x7fu} << (7 * i);
      if ((byte & 0x80) == 0) return value;
    }
    bad(std::string("the header's ") + field + " overflows 64 bits");
  }
  std::uint64_t u64(const char* field) {
    if (bytes_.size() - at_ < 8) bad(std::string("message truncated inside the header's ") + field);
    at_ += 8;
    return get<std::uint64_t>(bytes_.data() + at_ - 8);
  }
  std::size_t used() const noexcept { return at_; }

 private:
  std::span<const std::byte> bytes_;
  std::size_t at_ = 2;  // after magic and version
};

std::string hex(unsigned value) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", value);
  return text;
}
}  // namespace

MessageView::MessageView(std::span<const std::byte> message) {
  if (message.size() < 3)
    bad("a message of " + std::to_string(message.size()) + " bytes is shorter than any archive header");
  if (message[0] != wire::magic)
    bad("not an rdmx archive (first byte " + hex(static_cast<unsigned>(message[0])) + ", expected " +
        hex(static_cast<unsigned>(wire::magic)) + ")");
  const auto version_flags = static_cast<unsigned>(message[1]);
  if ((version_flags >> 4) != wire::version)
    bad("archive format version " + std::to_string(version_flags >> 4) + "; this build reads version " +
        std::to_string(wire::version));
  const unsigned flags = version_flags & 0xf;
  if ((flags & ~(wire::flag_signature | wire::flag_chunks)) != 0) bad("unknown header flags " + hex(flags));

  HeaderReader header(message);
  const std::uint64_t inline_size = header.varint("inline size");
  std::uint64_t count = 0, rkey_bytes = 0;
  if ((flags & wire::flag_chunks) != 0) {
    count = header.varint("chunk count");
    rkey_bytes = header.varint("rkey size");
    if (count == 0) bad("the header announces chunks but counts none");
  }
  if ((flags & wire::flag_signature) != 0) {
    signature_ = header.u64("type signature");
    if (signature_ == 0) bad("a zero type signature");
  }

  // Every part must be there, and nothing after the last.
  std::uint64_t rest = message.size() - header.used();
  if (inline_size > rest)
    bad("message truncated: " + std::to_string(inline_size) + " inline bytes announced, " + std::to_string(rest) + " present");
  rest -= inline_size;
  if (count > rest / wire::descriptor_size)
    bad("message truncated: " + std::to_string(count) + " chunks announced, room for " +
        std::to_string(rest / wire::descriptor_size));
  rest -= count * wire::descriptor_size;
  if (rkey_bytes != rest)
    bad("message size mismatch: " + std::to_string(rkey_bytes) + " bytes of rkeys announced, " + std::to_string(rest) +
        " bytes follow the chunk table");

  const std::byte* inline_begin = message.data() + header.used();
  inline_ = {inline_begin, static_cast<std::size_t>(inline_size)};
  table_ = inline_begin + inline_size;
  rkeys_ = table_ + count * wire::descriptor_size;
  chunk_count_ = static_cast<std::size_t>(count);

  std::uint64_t previous = 0, rkeys_used = 0;
  for (std::size_t i = 0; i < chunk_count_; ++i) {
    const std::byte* d = table_ + i * wire::descriptor_size;
    const auto kind = get<std::uint8_t>(d);
    const auto reserved = get<std::uint8_t>(d + 1);
    const auto rkey_length = get<std::uint16_t>(d + 2);
    const auto region_or_offset = get<std::uint32_t>(d + 4);
    const auto position = get<std::uint64_t>(d + 8);
    const auto size = get<std::uint64_t>(d + 16);
    auto which = [i] { return "chunk " + std::to_string(i) + ": "; };  // only built on failure
    if (kind != static_cast<std::uint8_t>(ChunkKind::pointer) && kind != static_cast<std::uint8_t>(ChunkKind::rma))
      bad(which() + "unknown kind " + std::to_string(kind));
    if (reserved != 0) bad(which() + "reserved byte is not zero");
    if (size == 0) bad(which() + "empty");
    if (position > inline_size || position < previous)
      bad(which() + "position " + std::to_string(position) + " is outside the inline bytes or before the previous chunk's");
    if (kind == static_cast<std::uint8_t>(ChunkKind::rma) && (region_or_offset == 0 || rkey_length != 0))
      bad(which() + "an RMA chunk needs a region and no rkey");
    if (kind == static_cast<std::uint8_t>(ChunkKind::pointer) && region_or_offset != rkeys_used)
      bad(which() + "its rkey does not follow the previous chunk's");
    previous = position;
    rkeys_used += rkey_length;
  }
  if (rkeys_used != rkey_bytes)
    bad("the chunks' rkeys add up to " + std::to_string(rkeys_used) + " bytes, the header says " +
        std::to_string(rkey_bytes));
}

ChunkDescriptor MessageView::chunk(std::size_t i) const noexcept {
  const std::byte* d = table_ + i * wire::descriptor_size;
  ChunkDescriptor c;
  c.kind = static_cast<ChunkKind>(get<std::uint8_t>(d));
  c.position = get<std::uint64_t>(d + 8);
  c.size = get<std::uint64_t>(d + 16);
  c.address = get<std::uint64_t>(d + 24);
  if (c.kind == ChunkKind::rma)
    c.key = {get<std::uint32_t>(d + 4), c.address};
  else
    c.packed_rkey = {rkeys_ + get<std::uint32_t>(d + 4), get<std::uint16_t>(d + 2)};
  return c;
}

}  // namespace rdmx::serial
