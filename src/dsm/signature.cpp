#include "signature.hpp"

#include <cstring>
#include <string>

#include "rdmx/core/error.hpp"

namespace rdmx::dsm {

Signature::Signature(std::uint32_t capacity, std::size_t blocks) : capacity_(capacity), position_(blocks, 0) {
  notices_.reserve(capacity);
}

void Signature::add(const WriteNotice& notice) {
  std::uint32_t& at = position_[notice.block];
  if (at != 0) {
    WriteNotice& known = notices_[at - 1];
    if (notice.version > known.version) known = notice;
    return;
  }
  if (notices_.size() == capacity_) {
    overflowed_ = true;
    return;
  }
  notices_.push_back(notice);
  at = static_cast<std::uint32_t>(notices_.size());
}

void Signature::merge(const SignatureHeader& header, std::span<const WriteNotice> notices) {
  if (header.overflowed != 0) overflowed_ = true;
  for (const WriteNotice& n : notices) add(n);
}

void Signature::clear() {
  for (const WriteNotice& n : notices_) position_[n.block] = 0;
  notices_.clear();
  overflowed_ = false;
}

std::vector<std::byte> Signature::encode(std::uint64_t epoch, std::uint64_t time) const {
  std::vector<std::byte> out(encoded_size(static_cast<std::uint32_t>(notices_.size())));
  const SignatureHeader header{epoch, time, static_cast<std::uint32_t>(notices_.size()), overflowed_ ? 1u : 0u};
  std::memcpy(out.data(), &header, sizeof header);
  if (!notices_.empty()) std::memcpy(out.data() + sizeof header, notices_.data(), notices_.size() * sizeof(WriteNotice));
  return out;
}

DecodedSignature decode(std::span<const std::byte> bytes, std::size_t blocks, std::uint32_t processes) {
  DecodedSignature out{};
  if (bytes.size() < sizeof(SignatureHeader))
    throw Error(Errc::protocol, "dsm: a signature of " + std::to_string(bytes.size()) + " bytes has no header");
  std::memcpy(&out.header, bytes.data(), sizeof out.header);
  if (bytes.size() < Signature::encoded_size(out.header.count))
    throw Error(Errc::protocol, "dsm: a signature says " + std::to_string(out.header.count) + " notices but holds " +
                                    std::to_string(bytes.size()) + " bytes");
  // The notices sit 8-byte aligned after the 24-byte header in every buffer we decode.
  out.notices = {reinterpret_cast<const WriteNotice*>(bytes.data() + sizeof(SignatureHeader)), out.header.count};
  for (const WriteNotice& n : out.notices)
    if (n.block >= blocks || n.source >= processes)
      throw Error(Errc::protocol, "dsm: a write notice names block " + std::to_string(n.block) + " of process " +
                                      std::to_string(n.source) + ", outside the space");
  return out;
}

}  // namespace rdmx::dsm
