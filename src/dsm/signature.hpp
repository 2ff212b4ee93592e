// Signatures (MENPS Fig. 6): what a releaser hands an acquirer. A bounded
// list of write notices (block, version, the process whose home copy holds
// that version); when more blocks were written than the list holds, it
// overflows, and the acquirer falls back to logical leases: it drops every
// cached block whose lease ends before the signature's logical time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace rdmx::dsm {

struct WriteNotice {
  std::uint32_t block;
  std::uint32_t source;   // process whose home copy holds at least `version`
  std::uint64_t version;  // the block's version after the release
};

struct SignatureHeader {
  std::uint64_t epoch;  // barriers the releaser had passed
  // The releaser's logical time: at least the write timestamp of every
  // write it released or acquired, so of every notice an overflow dropped.
  std::uint64_t time;
  std::uint32_t count;
  std::uint32_t overflowed;
};

class Signature {
 public:
  Signature(std::uint32_t capacity, std::size_t blocks);

  // Keeps the newest notice per block; past capacity, marks the signature overflowed.
  void add(const WriteNotice& notice);
  void merge(const SignatureHeader& header, std::span<const WriteNotice> notices);
  void clear();

  bool overflowed() const noexcept { return overflowed_; }
  std::span<const WriteNotice> notices() const noexcept { return notices_; }
  std::uint32_t capacity() const noexcept { return capacity_; }

  // Header followed by the notices, as stored beside a mutex's word and sent at barriers.
  std::vector<std::byte> encode(std::uint64_t epoch, std::uint64_t time) const;
  static std::size_t encoded_size(std::uint32_t notices) {
    return sizeof(SignatureHeader) + notices * sizeof(WriteNotice);
  }

 private:
  std::uint32_t capacity_;
  bool overflowed_ = false;
  std::vector<WriteNotice> notices_;       // reserved to capacity: add never allocates
  std::vector<std::uint32_t> position_;    // block -> index in notices_ + 1, or 0
};

// A received signature's parts, checked against the space's geometry.
struct DecodedSignature {
  SignatureHeader header;
  std::span<const WriteNotice> notices;
};
DecodedSignature decode(std::span<const std::byte> bytes, std::size_t blocks, std::uint32_t processes);

}  // namespace rdmx::dsm
