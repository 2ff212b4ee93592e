// Bad input: every kind of damage throws rdmx::Error with Errc::bad_archive
// and a message saying what is wrong, before anything is allocated for it.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "rdmx/serial/serial.hpp"
#include "support.hpp"

namespace rdmx::serial {
namespace {

using testing::bytes_of;
using testing::error_of;
using testing::with_threshold;
using Bytes = std::vector<std::byte>;

struct Tree {
  int value = 0;
  std::vector<Tree> children;
  template <class Archive>
  void serialize(Archive& ar) {
    ar(value, children);
  }
};

void varint(std::vector<std::uint8_t>& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<std::uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<std::uint8_t>(v));
}

// A well-formed message whose inline bytes are `raw`.
Bytes message_with_inline(const std::vector<std::uint8_t>& raw) {
  OutputArchive ar(with_threshold(0));
  if (!raw.empty()) ar.write_bytes(raw.data(), raw.size());
  return bytes_of(ar.flatten());
}

// The Errc and message of decoding `message` as T.
template <class... T>
Errc decode_error(const Bytes& message, std::string* what = nullptr, std::span<const ReceivedChunk> chunks = {}) {
  return error_of([&] { decode<T...>(message, chunks); }, what);
}

using Record = std::tuple<std::string, std::vector<std::int64_t>, std::map<int, std::string>,
                          std::optional<std::variant<int, std::string>>, bool>;

Record sample() {
  return {"name", {1, -2, 3}, {{1, "a"}, {2, "bb"}}, std::variant<int, std::string>(std::string("v")), true};
}

TEST(BadInput, EveryTruncationIsRejected) {
  const Bytes message = bytes_of(encode(sample()).flatten());
  for (std::size_t n = 0; n < message.size(); ++n) {
    const Bytes cut(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_EQ(decode_error<Record>(cut), Errc::bad_archive) << "cut at " << n;
  }
  Bytes longer = message;
  longer.push_back(std::byte{0});
  std::string what;
  EXPECT_EQ(decode_error<Record>(longer, &what), Errc::bad_archive);
  EXPECT_NE(what.find("size mismatch"), std::string::npos) << what;
}

TEST(BadInput, CorruptedBytesNeverEscapeAsAnythingElse) {
  const Bytes message = bytes_of(encode(sample()).flatten());
  for (std::size_t i = 0; i < message.size(); ++i) {
    for (std::uint8_t flip : {0x01, 0x80, 0xff}) {
      Bytes damaged = message;
      damaged[i] ^= std::byte{flip};
      try {
        decode<Record>(damaged);  // flipping a character of a string still decodes
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::bad_archive) << "byte " << i << ": " << e.what();
      }
    }
  }
}

TEST(BadInput, Header) {
  const Bytes good = message_with_inline({1, 2, 3, 4});
  std::string what;
  Bytes bad = good;
  bad[0] = std::byte{0x42};
  EXPECT_EQ(decode_error<int>(bad, &what), Errc::bad_archive);
  EXPECT_NE(what.find("not an rdmx archive"), std::string::npos) << what;
  bad = good;
  bad[1] = std::byte{0x20};
  EXPECT_EQ(decode_error<int>(bad, &what), Errc::bad_archive);
  EXPECT_NE(what.find("version 2"), std::string::npos) << what;
  bad = good;
  bad[1] |= std::byte{0x08};
  EXPECT_EQ(decode_error<int>(bad, &what), Errc::bad_archive);
  EXPECT_NE(what.find("flags"), std::string::npos) << what;
  bad = good;
  bad[1] |= std::byte{wire::flag_chunks};  // announces chunks: the inline size is read as a count
  EXPECT_EQ(decode_error<int>(bad), Errc::bad_archive);
  EXPECT_EQ(decode_error<int>(Bytes{std::byte{0xd7}}), Errc::bad_archive);
  EXPECT_EQ(decode_error<int>(Bytes{}), Errc::bad_archive);
}

// A message with one pointer chunk (100 bytes at inline position 1) and the
// receiver's copy of the chunk.
struct OneChunk {
  std::vector<std::uint8_t> data = std::vector<std::uint8_t>(100, 7);
  Bytes message;
  ReceivedChunk received;
  OneChunk() {
    OutputArchive ar(with_threshold(64));
    ar(data, std::int32_t{5});
    message = bytes_of(ar.flatten());
    received = {{reinterpret_cast<const std::byte*>(data.data()), data.size()}, nullptr, {}};
  }
  std::byte* descriptor() { return message.data() + message.size() - wire::descriptor_size; }
  template <class T>
  void set(std::size_t offset, T value) {
    std::memcpy(descriptor() + offset, &value, sizeof value);
  }
  Errc decode_error(std::string* what = nullptr) {
    return error_of([&] { decode<std::vector<std::uint8_t>, std::int32_t>(message, {&received, 1}); }, what);
  }
};

TEST(BadInput, ChunkTableOutsideItsBuffer) {
  OneChunk good;
  ASSERT_NO_THROW((decode<std::vector<std::uint8_t>, std::int32_t>(good.message, {&good.received, 1})));
  std::string what;
  OneChunk position;
  position.set<std::uint64_t>(8, 1000);  // past the 5 inline bytes
  EXPECT_EQ(position.decode_error(&what), Errc::bad_archive);
  EXPECT_NE(what.find("outside the inline bytes"), std::string::npos) << what;
  OneChunk kind;
  kind.set<std::uint8_t>(0, 9);
  EXPECT_EQ(kind.decode_error(&what), Errc::bad_archive);
  EXPECT_NE(what.find("unknown kind"), std::string::npos) << what;
  OneChunk reserved;
  reserved.set<std::uint8_t>(1, 1);
  EXPECT_EQ(reserved.decode_error(), Errc::bad_archive);
  OneChunk empty;
  empty.set<std::uint64_t>(16, 0);
  EXPECT_EQ(empty.decode_error(), Errc::bad_archive);
  OneChunk rma;
  rma.set<std::uint8_t>(0, 2);  // an RMA chunk without a region
  EXPECT_EQ(rma.decode_error(), Errc::bad_archive);
  OneChunk rkey;
  rkey.set<std::uint16_t>(2, 16);  // an rkey the message does not carry
  EXPECT_EQ(rkey.decode_error(&what), Errc::bad_archive);
  OneChunk offset;
  offset.set<std::uint32_t>(4, 3);  // a pointer chunk's rkey offset off the end
  EXPECT_EQ(offset.decode_error(), Errc::bad_archive);
}

TEST(BadInput, ChunksOutOfOrder) {
  OutputArchive ar(with_threshold(64));
  const std::string a(100, 'a'), b(100, 'b');
  ar(a, b);
  Bytes message = bytes_of(ar.flatten());
  // Swap the two positions: the second chunk now comes before the first.
  std::byte* first = message.data() + message.size() - 2 * wire::descriptor_size;
  std::byte* second = first + wire::descriptor_size;
  std::uint64_t p1, p2;
  std::memcpy(&p1, first + 8, 8);
  std::memcpy(&p2, second + 8, 8);
  std::memcpy(first + 8, &p2, 8);
  std::memcpy(second + 8, &p1, 8);
  const auto chunks = testing::chunks_of(ar);
  std::string what;
  EXPECT_EQ((decode_error<std::string, std::string>(message, &what, chunks)), Errc::bad_archive);
  EXPECT_NE(what.find("before the previous chunk"), std::string::npos) << what;
}

TEST(BadInput, ChunkOfTheWrongSize) {
  OneChunk one;
  one.set<std::uint64_t>(16, 99);
  one.received.bytes = one.received.bytes.first(99);
  std::string what;
  EXPECT_EQ(one.decode_error(&what), Errc::bad_archive);
  EXPECT_NE(what.find("holds 99 bytes where the reader expects 100"), std::string::npos) << what;
}

TEST(BadInput, ReceivedChunksMustMatchTheMessage) {
  OneChunk one;
  EXPECT_EQ(error_of([&] { decode<std::vector<std::uint8_t>, std::int32_t>(one.message); }), Errc::invalid_argument);
  one.received.bytes = one.received.bytes.first(50);
  EXPECT_EQ(one.decode_error(), Errc::invalid_argument);
}

TEST(BadInput, ReaderPassingOverAChunk) {
  // The writer sent a vector (count inline, elements in a chunk) and 5; a
  // reader of other types reads the count as a byte and meets 5 as a count.
  OneChunk one;
  std::string what;
  EXPECT_EQ(error_of([&] { decode<std::uint8_t, std::vector<std::uint8_t>>(one.message, {&one.received, 1}); }, &what),
            Errc::bad_archive);
  EXPECT_NE(what.find("passed over"), std::string::npos) << what;
}

TEST(BadInput, TypeSignatureMismatch) {
  const Bytes message = bytes_of(encode(std::string("x"), 5).flatten());
  std::string what;
  EXPECT_EQ((decode_error<int, std::string>(message, &what)), Errc::bad_archive);
  EXPECT_NE(what.find("signature mismatch"), std::string::npos) << what;
  EXPECT_NO_THROW((decode<std::string, int>(message)));
}

TEST(BadInput, UnsignedTypeMismatchLeavesBytesOver) {
  OutputArchive ar;
  ar(std::vector<std::int64_t>{1, 2, 3});
  std::string what;
  EXPECT_EQ(decode_error<std::string>(bytes_of(ar.flatten()), &what), Errc::bad_archive);
  EXPECT_NE(what.find("left unread"), std::string::npos) << what;
}

TEST(BadInput, OversizedLengths) {
  std::string what;
  std::vector<std::uint8_t> raw;
  varint(raw, std::uint64_t{1} << 40);  // 8 TiB of int64s promised, 8 bytes present
  raw.resize(raw.size() + 8);
  EXPECT_EQ(decode_error<std::vector<std::int64_t>>(message_with_inline(raw), &what), Errc::bad_archive);
  EXPECT_NE(what.find("truncated"), std::string::npos) << what;

  raw.clear();
  varint(raw, std::uint64_t{1} << 62);  // times 8 overflows
  EXPECT_EQ(decode_error<std::vector<std::int64_t>>(message_with_inline(raw), &what), Errc::bad_archive);
  EXPECT_NE(what.find("overflows"), std::string::npos) << what;

  raw.clear();
  varint(raw, 1'000'000'000'000);
  EXPECT_EQ(decode_error<std::vector<std::string>>(message_with_inline(raw), &what), Errc::bad_archive);
  EXPECT_NE(what.find("exceeds"), std::string::npos) << what;
  EXPECT_EQ((decode_error<std::map<int, int>>(message_with_inline(raw))), Errc::bad_archive);
  EXPECT_EQ(decode_error<std::set<std::string>>(message_with_inline(raw)), Errc::bad_archive);
  EXPECT_EQ(decode_error<std::string>(message_with_inline(raw)), Errc::bad_archive);
  EXPECT_EQ(decode_error<std::vector<bool>>(message_with_inline(raw)), Errc::bad_archive);

  raw.assign(11, 0xff);  // a varint longer than 64 bits
  EXPECT_EQ(decode_error<std::string>(message_with_inline(raw), &what), Errc::bad_archive);
  EXPECT_NE(what.find("overflows 64 bits"), std::string::npos) << what;
}

TEST(BadInput, InvalidTags) {
  std::string what;
  EXPECT_EQ(decode_error<bool>(message_with_inline({2}), &what), Errc::bad_archive);
  EXPECT_NE(what.find("invalid bool tag 2"), std::string::npos) << what;
  EXPECT_EQ(decode_error<std::optional<int>>(message_with_inline({7, 0, 0, 0, 0})), Errc::bad_archive);
  EXPECT_EQ(decode_error<std::unique_ptr<int>>(message_with_inline({3, 0, 0, 0, 0})), Errc::bad_archive);
  EXPECT_EQ((decode_error<std::variant<int, std::string>>(message_with_inline({2, 0, 0, 0, 0}), &what)),
            Errc::bad_archive);
  EXPECT_NE(what.find("variant index 2 out of range"), std::string::npos) << what;
  EXPECT_EQ(decode_error<std::vector<bool>>(message_with_inline({2, 1, 5})), Errc::bad_archive);
}

TEST(BadInput, DuplicateKeys) {
  std::string what;
  // {1: 2, 1: 3} as std::map<uint8_t, uint8_t>.
  EXPECT_EQ((decode_error<std::map<std::uint8_t, std::uint8_t>>(message_with_inline({2, 1, 2, 1, 3}), &what)),
            Errc::bad_archive);
  EXPECT_NE(what.find("same key twice"), std::string::npos) << what;
  EXPECT_EQ(decode_error<std::set<std::uint8_t>>(message_with_inline({2, 4, 4})), Errc::bad_archive);
}

TEST(BadInput, NestingDepthIsBounded) {
  auto nested = [](unsigned depth) {
    std::vector<std::uint8_t> raw;
    for (unsigned i = 0; i < depth; ++i) raw.insert(raw.end(), {0, 0, 0, 0, 1});  // value 0, one child
    raw.insert(raw.end(), {0, 0, 0, 0, 0});                                       // a leaf
    return message_with_inline(raw);
  };
  EXPECT_NO_THROW(decode<Tree>(nested(InputArchive::max_depth - 1)));
  std::string what;
  EXPECT_EQ(decode_error<Tree>(nested(InputArchive::max_depth + 10), &what), Errc::bad_archive);
  EXPECT_NE(what.find("nested deeper"), std::string::npos) << what;
}

TEST(BadInput, FailedDecodeLeavesTheTargetAlone) {
  std::vector<std::string> target{"kept"};
  Bytes message = bytes_of(encode(std::vector<std::string>{"new", "values"}).flatten());
  message.pop_back();
  EXPECT_THROW(target = decode<std::vector<std::string>>(message), Error);
  EXPECT_EQ(target, std::vector<std::string>{"kept"});
}

struct Base {
  virtual ~Base() = default;
  int x = 0;
  template <class A>
  void serialize(A& ar) {
    ar(x);
  }
};
struct Derived : Base {};

TEST(BadInput, SavingWhatCannotBeSent) {
  std::unique_ptr<Base> sliced = std::make_unique<Derived>();
  OutputArchive ar;
  EXPECT_EQ(error_of([&] { ar(sliced); }), Errc::invalid_argument);
  std::variant<int, std::string> fine = 3;
  EXPECT_NO_THROW(ar(fine));
}

}  // namespace
}  // namespace rdmx::serial
