#include "rdmx/serial/input_archive.hpp"

#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::serial {

InputArchive::InputArchive(std::span<const std::byte> message, std::span<const ReceivedChunk> chunks, InputOptions options)
    : InputArchive(MessageView(message), chunks, options) {}

InputArchive::InputArchive(const MessageView& message, std::span<const ReceivedChunk> chunks, InputOptions options)
    : view_(message),
      received_(chunks),
      options_(options),
      begin_(message.inline_bytes().data()),
      cur_(begin_),
      end_(begin_ + message.inline_bytes().size()) {
  if (chunks.size() != view_.chunk_count())
    throw Error(Errc::invalid_argument, "rdmx::serial: the message has " + std::to_string(view_.chunk_count()) +
                                            " chunks but " + std::to_string(chunks.size()) + " received chunks were given");
  for (std::size_t i = 0; i < chunks.size(); ++i) {
    const std::uint64_t size = view_.chunk(i).size;
    if (chunks[i].bytes.size() != size)
      throw Error(Errc::invalid_argument, "rdmx::serial: chunk " + std::to_string(i) + " holds " + std::to_string(size) +
                                              " bytes but " + std::to_string(chunks[i].bytes.size()) +
                                              " were received for it");
  }
  load_next_chunk();
}

void InputArchive::load_next_chunk() noexcept {
  if (next_chunk_ == view_.chunk_count()) {
    next_chunk_position_ = no_chunk;
    return;
  }
  const ChunkDescriptor d = view_.chunk(next_chunk_);
  next_chunk_position_ = static_cast<std::size_t>(d.position);
  next_chunk_size_ = d.size;
}

Bulk InputArchive::take_chunk(std::size_t n) {
  if (n != next_chunk_size_)
    fail("chunk " + std::to_string(next_chunk_) + " holds " + std::to_string(next_chunk_size_) +
         " bytes where the reader expects " + std::to_string(n));
  const ReceivedChunk& chunk = received_[next_chunk_];
  ++next_chunk_;
  load_next_chunk();
  return {chunk.bytes, &chunk};
}

std::size_t InputArchive::read_count() {
  const std::uint64_t n = read_varint();
  const std::uint64_t left = inline_remaining() + (view_.chunk_count() - next_chunk_);
  if (n > left)
    fail("a count of " + std::to_string(n) + " elements exceeds the " + std::to_string(left) +
         " bytes and chunks left in the archive");
  return static_cast<std::size_t>(n);
}

std::uint64_t InputArchive::read_varint_long() {
  std::uint64_t value = 0;
  for (unsigned i = 0; i < 10; ++i) {
    if (cur_ == end_) throw_truncated(1);
    const auto byte = static_cast<std::uint8_t>(*cur_++);
    if (i == 9 && byte > 1) break;
    value |= std::uint64_t{byte & 0x7fu} << (7 * i);
    if ((byte & 0x80) == 0) return value;
  }
  fail("a length or tag overflows 64 bits");
}

void InputArchive::finish() const {
  if (cur_ != end_)
    fail(std::to_string(end_ - cur_) + " inline bytes were left unread: the archive holds more or other values than were read");
  if (next_chunk_ != view_.chunk_count())
    fail("chunk " + std::to_string(next_chunk_) + " of " + std::to_string(view_.chunk_count()) + " was never read");
}

void InputArchive::fail(const std::string& what) const {
  throw Error(Errc::bad_archive, "rdmx::serial: " + what + " (at inline offset " + std::to_string(cur_ - begin_) + " of " +
                                     std::to_string(end_ - begin_) + ")");
}

void InputArchive::throw_truncated(std::size_t needed) const {
  fail("archive truncated: " + std::to_string(needed) + " more bytes needed, " + std::to_string(end_ - cur_) + " left");
}

void InputArchive::throw_bad_tag(unsigned tag, const char* what) const {
  fail("invalid " + std::string(what) + " tag " + std::to_string(tag));
}

void InputArchive::throw_skipped_chunk() const {
  fail("chunk " + std::to_string(next_chunk_) + " at inline offset " + std::to_string(next_chunk_position_) +
       " was passed over: the reader's types do not match the writer's");
}

void InputArchive::throw_oversized(std::size_t count, std::size_t size) const {
  fail("a length of " + std::to_string(count) + " elements of " + std::to_string(size) + " bytes overflows");
}

void InputArchive::throw_too_deep() const {
  fail("values nested deeper than " + std::to_string(max_depth) + " levels");
}

}  // namespace rdmx::serial
