#include "rdmx/serial/output_archive.hpp"

#include <cstring>
#include <limits>
#include <string>

#include "rdmx/core/error.hpp"
#include "rdmx/serial/wire.hpp"

namespace rdmx::serial {

namespace {
std::size_t put_varint(std::byte* out, std::uint64_t value) {
  std::size_t n = 0;
  while (value >= 0x80) {
    out[n++] = static_cast<std::byte>(value | 0x80);
    value >>= 7;
  }
  out[n++] = static_cast<std::byte>(value);
  return n;
}

std::size_t varint_size(std::uint64_t value) {
  std::size_t n = 1;
  for (; value >= 0x80; value >>= 7) ++n;
  return n;
}

template <class T>
std::byte* put(std::byte* out, T value) {
  std::memcpy(out, &value, sizeof value);
  return out + sizeof value;
}
}  // namespace

OutputArchive::OutputArchive(ArchiveOptions options)
    : buffer_(options.initial_capacity),
      threshold_(options.zero_copy_threshold == 0 ? zero_copy_off : options.zero_copy_threshold) {
  if (options.zero_copy_threshold != 0 && options.zero_copy_threshold < min_zero_copy_threshold)
    throw Error(Errc::invalid_argument, "rdmx::serial: zero-copy threshold " + std::to_string(options.zero_copy_threshold) +
                                            " is below the smallest one (" + std::to_string(min_zero_copy_threshold) +
                                            " bytes); use 0 to turn zero copy off");
}

void OutputArchive::write_varint_long(std::uint64_t value) {
  std::byte bytes[10];
  write_bytes(bytes, put_varint(bytes, value));
}

void OutputArchive::write_rma(const void* data, std::size_t n, RmaKey key, std::shared_ptr<const void> owner) {
  if (n < threshold_) {
    if (n != 0) write_bytes(data, n);
    return;
  }
  if (key.region == 0)
    throw Error(Errc::invalid_argument, "rdmx::serial: an RMA chunk needs the key of registered memory (region 0 names none)");
  add_chunk(ChunkKind::rma, data, n, key);
  if (owner) keep_alive_.push_back(std::move(owner));
}

void OutputArchive::add_chunk(ChunkKind kind, const void* data, std::size_t n, RmaKey key) {
  OutOfLineChunk chunk;
  chunk.kind = kind;
  chunk.data = static_cast<const std::byte*>(data);
  chunk.size = n;
  chunk.position = buffer_.size();
  chunk.key = key;
  chunks_.push_back(chunk);
}

std::size_t OutputArchive::out_of_line_bytes() const noexcept {
  std::size_t total = 0;
  for (const OutOfLineChunk& c : chunks_) total += c.size;
  return total;
}

std::vector<Chunk> OutputArchive::chunks() const {
  std::vector<Chunk> list;
  const std::span<const std::byte> bytes = inline_bytes();
  std::size_t at = 0;
  for (const OutOfLineChunk& c : chunks_) {
    if (c.position > at) list.push_back({ChunkKind::index, bytes.subspan(at, c.position - at), {}});
    list.push_back({c.kind, {c.data, c.size}, c.key});
    at = c.position;
  }
  if (bytes.size() > at) list.push_back({ChunkKind::index, bytes.subspan(at), {}});
  return list;
}

void OutputArchive::attach_rkey(std::size_t index, std::span<const std::byte> packed_rkey,
                                std::shared_ptr<const void> registration) {
  auto refuse = [&](const std::string& why) {
    throw Error(Errc::invalid_argument, "rdmx::serial: cannot attach an rkey to chunk " + std::to_string(index) + ": " + why);
  };
  if (flattened()) refuse("the archive is flattened already");
  if (index >= chunks_.size()) refuse("the archive has " + std::to_string(chunks_.size()) + " chunks");
  OutOfLineChunk& chunk = chunks_[index];
  if (chunk.kind != ChunkKind::pointer) refuse("it is an RMA chunk, whose key is its region");
  if (chunk.rkey_length != 0) refuse("it has one");
  if (packed_rkey.empty() || packed_rkey.size() > std::numeric_limits<std::uint16_t>::max())
    refuse("a packed rkey of " + std::to_string(packed_rkey.size()) + " bytes");
  chunk.rkey_offset = static_cast<std::uint32_t>(rkeys_.size());
  chunk.rkey_length = static_cast<std::uint32_t>(packed_rkey.size());
  rkeys_.insert(rkeys_.end(), packed_rkey.begin(), packed_rkey.end());
  if (registration) keep_alive_.push_back(std::move(registration));
}

std::span<const std::byte> OutputArchive::flatten() {
  if (flattened()) return {buffer_.front() + flat_offset_, flat_size_};
  if (chunks_.size() > std::numeric_limits<std::uint32_t>::max())
    throw Error(Errc::message_too_large, "rdmx::serial: an archive holds at most 2^32-1 chunks");
  inline_size_ = buffer_.size();

  static_assert(wire::max_header_size <= detail::ByteBuffer::front_room);

  // The chunk table and the rkeys go after the inline bytes (extend may move the buffer).
  std::byte* out = buffer_.extend(chunks_.size() * wire::descriptor_size + rkeys_.size());
  for (const OutOfLineChunk& c : chunks_) {
    out = put(out, static_cast<std::uint8_t>(c.kind));
    out = put(out, std::uint8_t{0});
    out = put(out, static_cast<std::uint16_t>(c.rkey_length));
    out = put(out, c.kind == ChunkKind::rma ? c.key.region : c.rkey_offset);
    out = put(out, static_cast<std::uint64_t>(c.position));
    out = put(out, static_cast<std::uint64_t>(c.size));
    out = put(out, c.kind == ChunkKind::rma ? c.key.offset : std::uint64_t{reinterpret_cast<std::uintptr_t>(c.data)});
  }
  if (!rkeys_.empty()) std::memcpy(out, rkeys_.data(), rkeys_.size());

  // The header is written in place, in front of the inline bytes: its size
  // is known first (copying it there from the stack, a variable-length
  // memcpy, was 7 % of a server answering small actions).
  const unsigned flags = (signature_ != 0 ? wire::flag_signature : 0u) | (chunks_.empty() ? 0u : wire::flag_chunks);
  std::size_t h = 2 + varint_size(inline_size_);
  if (!chunks_.empty()) h += varint_size(chunks_.size()) + varint_size(rkeys_.size());
  if (signature_ != 0) h += sizeof signature_;
  flat_offset_ = detail::ByteBuffer::front_room - h;
  std::byte* header = buffer_.front() + flat_offset_;
  std::size_t at = 0;
  header[at++] = wire::magic;
  header[at++] = static_cast<std::byte>(wire::version << 4 | flags);
  at += put_varint(header + at, inline_size_);
  if (!chunks_.empty()) {
    at += put_varint(header + at, chunks_.size());
    at += put_varint(header + at, rkeys_.size());
  }
  if (signature_ != 0) put(header + at, signature_);
  flat_size_ = h + buffer_.size();
  return {buffer_.front() + flat_offset_, flat_size_};
}

void OutputArchive::clear() noexcept {
  buffer_.clear();
  chunks_.clear();
  keep_alive_.clear();
  rkeys_.clear();
  signature_ = 0;
  inline_size_ = flat_offset_ = flat_size_ = 0;
}

}  // namespace rdmx::serial
